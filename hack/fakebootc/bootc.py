"""The fake ``bootc``: ``status``, ``switch``, ``upgrade``, ``rollback`` on a simulated host.

Behaves like real bootc (bootc-dev/bootc ``cli.rs``/``deploy.rs``/``status.rs``) where the
daemon can tell the difference:

- ``status [--format=json|yaml|humanreadable] [--format-version=0|1] [--json] [--booted]``:
  JSON is one canonical line (sorted keys, explicit nulls, no trailing newline); with
  neither ``--format`` nor ``--json`` it is YAML unless stdout is a terminal. Versions
  other than 0 and 1 fail. Takes the sysroot lock, so it **blocks while a switch runs**
  (printing ``Waiting for sysroot lock...`` to stderr).
- ``switch [--apply] [--transport T] [--retain] [--quiet] IMAGE``: compares the new
  *spec* with the current one (the staged image, else the booted one) by reference,
  exactly as bootc does: an equal reference prints ``Image specification is
  unchanged.`` and exits 0. Anything else is pulled (``resolve.py``: registry, then
  catalog; a ``pull`` line in ``calls.jsonl``), held for the host's ``stage_delay``
  under the sysroot lock, and staged, replacing any staged deployment (a queued
  rollback stays queued in status, but the staged deployment boots first). So switching
  back to the *booted* image while another is staged stages the booted image again
  (as real bootc does), it is not a no-op. After staging it prints ``Queued for next
  boot: IMAGE`` / ``Version`` / ``Digest``, writes ``/run/reboot-required`` and
  touches ``/ostree/bootc`` (composefs hosts: a new ``/sysroot/state/deploy/<verity>``
  entry). ``--apply`` then requests a reboot. Failures print ``error: ...`` on stderr
  and exit 1.
- The host's containers policy (``policy.py``) decides every pull, as containers/image
  does for real bootc: a ``reject`` or an unmet ``sigstoreSigned`` fails the switch
  (``Switching: Pulling: Preparing import: Fetching manifest: failed to invoke method
  OpenImage: Running image docker://... is rejected by policy.``), nothing pulled.
  ``--enforce-container-sigpolicy`` also refuses no policy or a default of
  ``insecureAcceptAnything``, and is kept as ``spec.image.signature: containerPolicy``
  (part of the spec, so the same image without the flag is not "unchanged"); ``upgrade``
  (also ``--check``) enforces what the spec says.
- ``--soft-reboot=auto|required`` (``switch``, ``upgrade``, ``rollback``), as bootc's
  ``handle_soft_reboot``: when the deployment that boots next (staged; the rollback
  deployment for ``rollback``) is ``softRebootCapable`` (same kernel as the booted one,
  ``State.soft_reboot_capable``) a soft reboot into it is *prepared* (``Staged
  deployment is soft-reboot capable, preparing for soft-reboot...``; ostree's
  ``/run/nextroot``, ``State.soft_reboot_target``), with or without ``--apply``;
  ``auto`` does nothing more when it is not capable, ``required`` fails (``Soft reboot
  was required but staged deployment is not soft-reboot capable``, exit 1; ``upgrade
  --from-downloaded`` has unlocked the deployment by then, ``rollback`` has queued
  it). ``--apply`` then runs a plain reboot (a ``reboot`` request), which systemd
  (>= 256) turns into a soft reboot because ``/run/nextroot`` is set up
  (``State.reboot_kind``). Staging another deployment, locking it download-only or a
  rollback drops a prepared soft reboot.
- ``rollback``: queues the rollback deployment for the next boot (``rollbackQueued:
  true``, ``spec.bootOrder: rollback``) and drops a staged deployment; a second
  rollback reverts the queued one. The simulated reboot then boots the old rollback
  (and the old booted deployment becomes the rollback). No pull: the deployment is
  on disk. A later ``switch``/``upgrade`` that stages wins: status still says
  ``rollbackQueued: true`` (``bootOrder: rollback``) until the reboot, which boots the
  staged deployment (the real bootc 1.16 and ostree: finalization comes first). (Real
  bootc does not turn the rollback into ``staged``.)
- ``upgrade [--check] [--apply] [--download-only] [--from-downloaded]``: re-pulls the
  spec image; ``No update available.`` / ``Staged update present, not changed`` or
  stages the new digest. ``--download-only`` stages it *download-only*
  (``downloadOnly: true`` in status; ostree's finalization lock): a reboot discards
  it instead of booting it. Re-run on an unchanged staged digest, ``--download-only``
  locks the staged deployment and a plain ``upgrade`` unlocks it.
  ``--from-downloaded`` unlocks the staged deployment without pulling (``Staged
  deployment will now be applied on reboot``, or ``... is already set to apply on
  reboot``; ``error: No staged deployment found`` without one), then reboots with
  ``--apply``. Flag conflicts as bootc's clap rules: ``--download-only`` with
  ``--check``/``--apply``, ``--from-downloaded`` with ``--check``/``--download-only``
  (exit 2). A ``switch`` never stages download-only. An ``upgrade --apply`` that finds
  its digest already staged applies (reboots into) it, as bootc does.

A ``container`` environment variable makes bootc believe it runs in a container:
``status`` reports ``booted: null`` and changes fail. Faults (``state.Faults``):
``switch_fail`` (exit 1 with the message, after the pull delay), ``switch_hang``
(holds the sysroot lock until killed or the fault is cleared), ``status_garbage``
(non-JSON on stdout, exit 0), ``status_block`` (status waits until cleared),
``incompatible`` (booted entry reports rpm-ostree layering: ``image: null``,
``incompatible: true``), ``not_bootc`` (``booted: null``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hack.fakebootc.imageref import canonicalize
from hack.fakebootc.render import canonical_json, host_document, human_readable, to_yaml
from hack.fakebootc.state import (
    DEFAULT_KERNEL,
    Deployment,
    FakeHostError,
    Paths,
    State,
    atomic_write,
    flocked,
    load_state,
    record_call,
    update_state,
)

if TYPE_CHECKING:
    from hack.fakebootc.registry import ImageMeta

VERSION = "1.1.6 (fakebootc)"
LOCK_WAITING = "Waiting for sysroot lock..."
FAULT_POLL_SECONDS = 0.05
DEFAULT_SWITCH_FAILURE = (
    "Switching: Pulling: Importing: simulated failure (fakebootc fault switch-fail)"
)


class BootcError(Exception):
    """Printed as ``error: <message>``; exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"error: {message}\n\nFor more information, try '--help'.", file=sys.stderr)
        raise SystemExit(2)


def _in_container() -> bool:
    # bootc reads systemd's lower-case `container` variable
    return bool(os.environ.get("container"))  # noqa: SIM112


def _require_host(context: str) -> None:
    if _in_container():
        raise BootcError(
            f"{context}: Detected container; this command requires a booted host system."
        )


def _require_booted(state: State, context: str) -> None:
    if state.faults.not_bootc or state.booted is None:
        # the real bootc 1.16's words (a host without /run/ostree-booted)
        raise BootcError(f"{context}: Initializing storage: System not booted via bootc")


def _touch_changed(paths: Paths, state: State, staged: Deployment | None) -> None:
    """What bootc leaves behind after changing deployments: reboot-required and an mtime bump."""
    if staged is not None:
        message = f"bootc: Reboot required for image: {staged.digest}"
        atomic_write(paths.reboot_required, message.encode())
    if state.config.backend == "composefs" and staged is not None:
        verity = hashlib.sha512(f"{staged.checksum}.{staged.deploy_serial}".encode()).hexdigest()
        (paths.composefs_deploy / verity).mkdir(parents=True, exist_ok=True)
    if paths.ostree_bootc.exists():
        os.utime(paths.ostree_bootc)


def request_reboot(paths: Paths, kind: str, by: str) -> State:
    """Record that the host was asked to reboot (``kind``: "reboot" or "soft-reboot")."""

    def change(state: State) -> None:
        state.reboot_request = {"kind": kind, "by": by, "at": time.time()}

    return update_state(paths, change)


def new_deployment(
    state: State,
    image: str,
    transport: str,
    digest: str,
    architecture: str,
    version: str | None,
    timestamp: str | None,
    *,
    kernel: str | None = None,
    boot_assessment: str | None = None,
    signature: str | None = None,
) -> Deployment:
    """A deployment record; same content → same (simulated) ostree commit, next deploy serial."""
    checksum = hashlib.sha256(f"fakebootc-commit:{digest}".encode()).hexdigest()
    others = [d for d in (state.booted, state.rollback) if d is not None and d.checksum == checksum]
    serial = max((d.deploy_serial + 1 for d in others), default=0)
    return Deployment(
        image=image,
        transport=transport,
        digest=digest,
        architecture=architecture,
        version=version,
        timestamp=timestamp,
        checksum=checksum,
        deploy_serial=serial,
        kernel=kernel or DEFAULT_KERNEL,
        boot_assessment=boot_assessment,
        signature=signature,
    )


def _wait_while(paths: Paths, fault: str) -> None:
    while getattr(load_state(paths).faults, fault):
        time.sleep(FAULT_POLL_SECONDS)


# ------------------------------------------------------------------ status


def cmd_status(paths: Paths, args: argparse.Namespace) -> int:
    version = args.format_version if args.format_version is not None else 0
    if version not in (0, 1):
        raise BootcError(f"Status: Unsupported format version: {version}")
    in_container = _in_container()
    if load_state(paths).faults.status_block:
        print(LOCK_WAITING, file=sys.stderr, flush=True)
        _wait_while(paths, "status_block")
    with flocked(paths.sysroot_lock, waiting_message=LOCK_WAITING):
        state = load_state(paths)
    doc = host_document(state, in_container=in_container)
    if args.booted:
        doc["status"]["staged"] = None
        doc["status"]["rollback"] = None
    fmt = args.format or ("json" if args.json else None)
    if fmt is None:
        fmt = "humanreadable" if sys.stdout.isatty() else "yaml"
    if state.faults.status_garbage:
        text = canonical_json(doc)
        sys.stdout.write(text[: len(text) // 2] + "\x00\x1b[0m<<garbage>>")
        return 0
    if fmt == "json":
        sys.stdout.write(canonical_json(doc))
    elif fmt == "yaml":
        sys.stdout.write(to_yaml(doc) + "\n")
    else:
        sys.stdout.write(human_readable(doc) + "\n")
    return 0


# ------------------------------------------------------------------ switch / upgrade


def _stage(
    paths: Paths,
    image: str,
    transport: str,
    *,
    quiet: bool,
    from_upgrade: bool = False,
    download_only: bool = False,
    signature: str | None = None,
) -> Deployment | None:
    """Pull and stage ``image`` (sysroot lock held by the caller), as the host's containers
    policy allows (``signature``: ``policy.CONTAINER_POLICY`` enforces it). Returns the
    staged deployment (for an upgrade: also one that was staged already); None: nothing
    staged."""
    from hack.fakebootc.registry import PullError  # noqa: PLC0415 - keep `status` imports light

    context = "Upgrading" if from_upgrade else "Switching"
    if load_state(paths).faults.switch_hang:
        _wait_while(paths, "switch_hang")
    state = load_state(paths)
    try:
        meta = _resolve_allowed(paths, state, image, signature) if transport == "registry" else None
    except PullError as exc:
        raise BootcError(f"{context}: Pulling: {exc}") from exc
    if meta is not None:
        record_call(paths, "pull", [image, meta.digest, meta.source])
    if state.config.stage_delay > 0:
        time.sleep(state.config.stage_delay)
    state = load_state(paths)
    if state.faults.switch_fail is not None:
        raise BootcError(state.faults.switch_fail or DEFAULT_SWITCH_FAILURE)
    if meta is None:
        raise BootcError(f"{context}: Pulling: transport {transport!r} is not simulated")
    if from_upgrade:
        if state.staged is not None and state.staged.digest == meta.digest:
            if state.staged.download_only != download_only:
                _set_download_only(paths, download_only)
            else:
                print("Staged update present, not changed")
            return load_state(paths).staged
        if state.booted is not None and state.booted.digest == meta.digest:
            print("No update available.")
            return None
    holder: list[Deployment] = []

    def change(s: State) -> None:
        dep = new_deployment(
            s,
            image,
            transport,
            meta.digest,
            meta.architecture,
            meta.version,
            meta.timestamp,
            kernel=meta.kernel,
            boot_assessment=meta.boot_assessment,
            signature=signature,
        )
        dep.download_only = download_only
        s.staged = dep
        # a queued rollback stays queued (rollbackQueued, bootOrder) but the staged
        # deployment boots first, as with the real bootc 1.16 (State.next_deployment)
        s.soft_reboot_target = None
        holder.append(dep)

    state = update_state(paths, change)
    staged = holder[0]
    if not quiet:
        print(f"Queued for next boot: {image}")
        if staged.version:
            print(f"  Version: {staged.version}")
        print(f"  Digest: {staged.digest}")
    _touch_changed(paths, state, staged)
    return staged


def _resolve_allowed(paths: Paths, state: State, image: str, signature: str | None) -> ImageMeta:
    """``resolve_image``, refused as bootc's pull would be by the host's containers policy
    (``policy.py``); policy refusals raise ``PullError`` with bootc's context."""
    from hack.fakebootc import policy  # noqa: PLC0415
    from hack.fakebootc.imageref import parse_ref  # noqa: PLC0415
    from hack.fakebootc.registry import PullError  # noqa: PLC0415
    from hack.fakebootc.resolve import image_signatures, resolve_image  # noqa: PLC0415

    fetching = "Preparing import: Fetching manifest"
    try:
        doc = policy.load_policy(paths.root)
        if signature == policy.CONTAINER_POLICY:
            policy.require_enforceable(doc)
    except (policy.PolicyInsecure, policy.PolicyRejected) as exc:
        raise PullError(f"{fetching}: {exc}") from exc
    meta = resolve_image(paths, state.config, image)
    ref = parse_ref(image)
    try:
        policy.check(
            doc, ref, lambda: image_signatures(paths, state.config, ref, meta), root=paths.root
        )
    except policy.PolicyRejected as exc:
        raise PullError(f"{fetching}: failed to invoke method OpenImage: {exc}") from exc
    return meta


def _set_download_only(paths: Paths, locked: bool) -> None:
    """Lock or unlock the staged deployment's finalization (bootc's download-only mode)."""

    def change(s: State) -> None:
        if s.staged is not None:
            s.staged.download_only = locked
        if locked:
            s.soft_reboot_target = None

    update_state(paths, change)
    print(
        "Image downloaded, but will not be applied on reboot"
        if locked
        else "Staged deployment will now be applied on reboot"
    )


def _conflict(first: str, second: str) -> NoReturn:
    print(
        f"error: the argument '{first}' cannot be used with '{second}'\n\n"
        "For more information, try '--help'.",
        file=sys.stderr,
    )
    raise SystemExit(2)


def _soft_reboot(paths: Paths, mode: str | None, slot: str, context: str) -> None:
    """bootc's ``handle_soft_reboot`` for the ``slot`` ("staged" or "rollback") deployment:
    prepare a soft reboot into it when capable; ``required`` fails when it is not."""
    if mode is None:
        return
    state = load_state(paths)
    target = state.staged if slot == "staged" else state.rollback
    if target is not None and state.soft_reboot_capable(target):
        what = slot.capitalize()
        print(f"{what} deployment is soft-reboot capable, preparing for soft-reboot...")
        key = target.key
        update_state(paths, lambda s: setattr(s, "soft_reboot_target", key))
        return
    if mode == "required":
        raise BootcError(
            f"{context}Handling soft reboot: Soft reboot was required but {slot} deployment "
            "is not soft-reboot capable"
        )


def _apply(paths: Paths, soft_reboot: str | None, context: str, apply: bool, by: str) -> None:
    """``--soft-reboot`` for the staged deployment, then ``--apply``'s reboot (soft when
    prepared: ``State.reboot_kind``)."""
    _soft_reboot(paths, soft_reboot, "staged", f"{context}: Handling staged soft reboot: ")
    if apply:
        request_reboot(paths, "reboot", by)


def cmd_switch(paths: Paths, args: argparse.Namespace) -> int:
    _require_host("Switching")
    image = canonicalize(args.target) if args.transport == "registry" else args.target
    # bootc's ImageReference.signature: ContainerPolicy with the flag, else none
    signature = "containerPolicy" if args.enforce_container_sigpolicy else None
    with flocked(paths.sysroot_lock, waiting_message=LOCK_WAITING):
        state = load_state(paths)
        _require_booted(state, "Switching")
        doc = host_document(state)
        spec = doc["spec"]["image"]
        if (
            spec is not None
            and spec.get("image") == image
            and spec.get("transport") == args.transport
            and spec.get("signature") == signature
        ):
            print("Image specification is unchanged.")
            return 0
        staged = _stage(paths, image, args.transport, quiet=args.quiet, signature=signature)
        if staged is not None:
            _apply(paths, args.soft_reboot, "Switching", args.apply, "bootc switch --apply")
    return 0


def cmd_upgrade(paths: Paths, args: argparse.Namespace) -> int:
    if args.download_only and (args.check or args.apply):
        _conflict("--download-only", "--check" if args.check else "--apply")
    if args.from_downloaded and (args.check or args.download_only):
        _conflict("--from-downloaded", "--check" if args.check else "--download-only")
    _require_host("Upgrading")
    with flocked(paths.sysroot_lock, waiting_message=LOCK_WAITING):
        state = load_state(paths)
        _require_booted(state, "Upgrading")
        spec = host_document(state)["spec"]["image"]
        if spec is None:
            if state.faults.incompatible or (state.booted and state.booted.incompatible):
                raise BootcError(
                    "Upgrading: Deployment contains local rpm-ostree modifications; cannot upgrade "
                    "via bootc. You can run `rpm-ostree reset` to undo the modifications."
                )
            raise BootcError("Upgrading: No image source specified")
        if args.from_downloaded:
            if state.staged is None:
                raise BootcError("Upgrading: No staged deployment found")
            if state.staged.download_only:
                _set_download_only(paths, False)
            else:
                print("Staged deployment is already set to apply on reboot")
            _apply(
                paths,
                args.soft_reboot,
                "Upgrading",
                args.apply,
                "bootc upgrade --from-downloaded --apply",
            )
            return 0
        if args.check:
            from hack.fakebootc.registry import PullError  # noqa: PLC0415

            try:
                meta = _resolve_allowed(paths, state, spec["image"], spec.get("signature"))
            except PullError as exc:
                raise BootcError(f"Upgrading: {exc}") from exc
            current = state.staged or state.booted
            if current is not None and current.digest == meta.digest:
                print(f"No changes in: {spec['image']}")
            else:
                print(f"Update available for: {spec['image']}")
                if meta.version:
                    print(f"  Version: {meta.version}")
                print(f"  Digest: {meta.digest}")
            return 0
        staged = _stage(
            paths,
            spec["image"],
            spec["transport"],
            quiet=args.quiet,
            from_upgrade=True,
            download_only=args.download_only,
            signature=spec.get("signature"),
        )
        if staged is not None:
            _apply(paths, args.soft_reboot, "Upgrading", args.apply, "bootc upgrade --apply")
    return 0


# ------------------------------------------------------------------ rollback


def cmd_rollback(paths: Paths, args: argparse.Namespace) -> int:
    _require_host("Rollback")
    with flocked(paths.sysroot_lock, waiting_message=LOCK_WAITING):
        state = load_state(paths)
        _require_booted(state, "Rollback")
        if state.rollback is None:
            raise BootcError("Rollback: No rollback available")
        reverting = state.rollback_queued
        if reverting:
            print("notice: Reverting queued rollback state")

        def change(s: State) -> None:
            s.rollback_queued = not reverting
            s.staged = None
            s.soft_reboot_target = None

        state = update_state(paths, change)
        print("Next boot: current deployment" if reverting else "Next boot: rollback deployment")
        target = state.booted if reverting else state.rollback
        _touch_changed(paths, state, target)
        if not reverting:
            _soft_reboot(paths, args.soft_reboot, "rollback", "Rollback: ")
        elif args.soft_reboot == "required":
            raise BootcError(
                "Rollback: Handling soft reboot: Soft reboot was required but rollback "
                "deployment is not soft-reboot capable"
            )
        if args.apply and not reverting:
            request_reboot(paths, "reboot", "bootc rollback --apply")
    return 0


# ------------------------------------------------------------------ entry


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bootc", description="Deploy and transactionally update images (simulated)"
    )
    parser.add_argument("-V", "--version", action="version", version=f"bootc {VERSION}")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    status = sub.add_parser("status", help="Display status")
    status.add_argument("--format", choices=("humanreadable", "yaml", "json"))
    status.add_argument("--format-version", type=int)
    status.add_argument("--json", action="store_true", help="(deprecated) same as --format=json")
    status.add_argument("--booted", action="store_true")
    status.add_argument("-v", "--verbose", action="store_true")
    status.set_defaults(func=cmd_status)

    switch = sub.add_parser("switch", help="Target a new container image reference to boot")
    switch.add_argument("--apply", action="store_true")
    switch.add_argument("--soft-reboot", choices=("required", "auto"))
    switch.add_argument("--transport", default="registry")
    switch.add_argument("--retain", action="store_true")
    switch.add_argument("--quiet", action="store_true")
    switch.add_argument("--enforce-container-sigpolicy", action="store_true")
    switch.add_argument("target")
    switch.set_defaults(func=cmd_switch)

    upgrade = sub.add_parser("upgrade", help="Download and queue an updated container image")
    upgrade.add_argument("--apply", action="store_true")
    upgrade.add_argument("--check", action="store_true")
    upgrade.add_argument("--soft-reboot", choices=("required", "auto"))
    upgrade.add_argument("--quiet", action="store_true")
    upgrade.add_argument("--download-only", action="store_true")
    upgrade.add_argument("--from-downloaded", action="store_true")
    upgrade.set_defaults(func=cmd_upgrade)

    rollback = sub.add_parser("rollback", help="Change the bootloader entry ordering")
    rollback.add_argument("--apply", action="store_true")
    rollback.add_argument("--soft-reboot", choices=("required", "auto"))
    rollback.set_defaults(func=cmd_rollback)
    return parser


def main(root: Path, argv: list[str]) -> int:
    """Run ``bootc argv...`` against the simulated host at ``root``."""
    paths = Paths(root)
    record_call(paths, "bootc", argv)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(paths, args))
    except BootcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (FakeHostError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
