"""The Python API of a simulated host: create one, drive it, inspect it.

``make_host(root, booted="quay.io/org/os@sha256:...")`` lays out ROOT (``ostree/bootc``,
``run/ostree``, ``sysroot/ostree``, ``etc``; composefs hosts get
``sysroot/state/deploy`` instead of ``ostree/bootc``), writes the state and the
shim ``bin/`` directory, and returns a ``Host``. ``Host.env()`` is the environment
to give a daemon (or any subprocess) so that ``nsenter``/``bootc``/``systemd-run``/
``systemctl``/``journalctl`` resolve to this host's simulated tools;
``Host.daemon_command(...)`` is a real ``bootc-operator daemon``'s argv and
environment for the host.

``Host.reboot()`` performs a simulated reboot, *full* or *soft* as the request says
(``State.reboot_kind``: ``systemctl soft-reboot``, or ``systemctl reboot`` / ``bootc ...
--apply`` after ``--soft-reboot`` prepared one; a reboot nobody requested is full).
Either way running units are killed (every process ends), then, under the sysroot
lock, a queued rollback or the staged deployment becomes booted and the previous
booted one the rollback (the old rollback is pruned), and the reboot request and a
prepared soft reboot are cleared. A reboot with nothing staged or queued changes no
deployment. A *download-only* staged deployment (``bootc upgrade --download-only``,
not unlocked by ``--from-downloaded``) is not booted: like real bootc (ostree's
finalization lock), the reboot discards it and the host comes back on the same
booted deployment.

- A **full** reboot empties ``/run`` as a tmpfs is on a real boot (so
  ``/run/reboot-required`` and ``/run/ostree/auth.json`` disappear; the daemon must
  rewrite the pull secret after a reboot), gives the kernel a new boot ID
  (``ROOT/proc/sys/kernel/random/boot_id``, what a kubelet reports as the Node's
  ``bootID``) and resets ``SoftRebootsCount``.
- A **soft** reboot (systemd's ``systemd-soft-reboot.service``: userspace restarts,
  the kernel keeps running) keeps the boot ID, counts one more in
  ``SoftRebootsCount`` (``systemctl show -P SoftRebootsCount``) and leaves ``/run``
  mounted and populated, as systemd documents ("the /run/ file system remains
  mounted and populated"): only ``/run/nextroot`` is consumed. It boots the prepared
  deployment; a bare ``systemctl soft-reboot`` with nothing prepared restarts
  userspace on the booted deployment and keeps a staged one staged (real ostree would
  finalize it for the next full boot; the simulation does not model that).

``State.boot_kind`` says how the current boot started. Every boot (the first one
too, soft ones as well: a soft reboot starts a new boot transaction) decides its boot
assessment (``boot.py``: complete after ``config.boot_complete_delay``, or a failing /
never-finishing check from a ``boot-fail`` / ``boot-hang`` fault, optionally scoped to
one image digest, or from the booted image's ``fakebootc.boot-assessment`` label);
``Host.boot()`` shows it. Images carry a kernel (``fakebootc.kernel`` label, catalog
``kernel``; a default otherwise): a staged or rollback deployment with the booted
one's kernel is ``softRebootCapable``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hack.fakebootc import shims
from hack.fakebootc.boot import DEFAULT_CHECK_UNIT, BadSpec, Boot, parse_spec
from hack.fakebootc.bootc import new_deployment
from hack.fakebootc.imageref import BadReference, parse_ref
from hack.fakebootc.registry import ImageMeta, PullError
from hack.fakebootc.render import host_document
from hack.fakebootc.resolve import catalog_files, load_catalog, lookup_catalog
from hack.fakebootc.state import (
    Config,
    FakeHostError,
    Faults,
    Paths,
    State,
    atomic_write,
    flocked,
    load_state,
    read_calls,
    save_state,
    update_state,
)

FAULTS = (
    "switch-fail",
    "switch-hang",
    "status-garbage",
    "status-block",
    "incompatible",
    "not-bootc",
    "boot-fail",
    "boot-hang",
)
#: faults that take a unit name (``message``) and an optional image ``digest`` scope
BOOT_FAULTS = ("boot-fail", "boot-hang")


class BootcCommands:
    """bootc's commands as the daemon and the tests run them, on a host's ``run`` (the
    fake host here, the real one in ``hack.realbootc``)."""

    def run(self, tool: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def bootc(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return self.run("bootc", *args, timeout=timeout)

    def switch(
        self, image: str, *, apply: bool = False, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """``bootc switch [--apply] -- IMAGE`` (as the daemon calls it)."""
        return self.bootc("switch", *(["--apply"] if apply else []), "--", image, timeout=timeout)

    def rollback(self, *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return self.bootc("rollback", timeout=timeout)

    def upgrade(
        self,
        *,
        check: bool = False,
        download_only: bool = False,
        from_downloaded: bool = False,
        apply: bool = False,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """``bootc upgrade [--check | --download-only | --from-downloaded] [--apply]``."""
        flags = upgrade_flags(
            check=check, download_only=download_only, from_downloaded=from_downloaded, apply=apply
        )
        return self.bootc("upgrade", *flags, timeout=timeout)


@dataclass(frozen=True)
class Host(BootcCommands):
    """A simulated bootc host rooted at ``root``."""

    root: Path

    @property
    def paths(self) -> Paths:
        return Paths(self.root)

    @property
    def bin_dir(self) -> Path:
        return self.paths.bin

    @property
    def auth_file(self) -> Path:
        """``ROOT/run/ostree/auth.json``: where the daemon writes the pull secret."""
        return self.paths.auth_files[0]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default ``os.environ``) with this host's tools first on PATH."""
        return shims.host_env(self.paths, base)

    def daemon_command(
        self, node: str, kubeconfig: Path, metrics_port: int, probe_port: int
    ) -> tuple[list[str], dict[str, str]]:
        """argv and environment of a ``bootc-operator daemon`` for Node ``node`` on this host.

        The daemon is the running virtualenv's console script, talking to the cluster of
        ``kubeconfig`` (``KUBECONFIG`` is left out of the environment), serving metrics
        (plain HTTP, ``--metrics-secure=false``: append ``--metrics-secure`` for the
        HTTPS and token check of an install) and probes on loopback; its default
        ``--host-exec`` nsenter line resolves to this host's shim. Append further
        flags to the argv.
        """
        argv = daemon_argv(
            node, kubeconfig, metrics_port, probe_port, "--host-root", str(self.root)
        )
        env = self.env()
        env.pop("KUBECONFIG", None)
        return argv, env

    # -------------------------------------------------------------- inspection

    def state(self) -> State:
        return load_state(self.paths)

    def status(self) -> dict[str, Any]:
        """The document ``bootc status --format=json`` would print, without locks or
        the output faults (garbage, block)."""
        return host_document(self.state())

    @property
    def request_marker(self) -> Path:
        """A file whose mtime changes when a reboot is requested (the state file)."""
        return self.paths.state

    @property
    def reboot_request(self) -> dict[str, Any] | None:
        return self.state().reboot_request

    def next_reboot_kind(self) -> str:
        """How a reboot now would go: "soft" or "full" (``State.reboot_kind``)."""
        return self.state().reboot_kind()

    @property
    def boot_id(self) -> str:
        """The running kernel's boot ID (``/proc/sys/kernel/random/boot_id``)."""
        return self.paths.boot_id.read_text().strip()

    @property
    def soft_reboots(self) -> int:
        """systemd's ``SoftRebootsCount``: soft reboots since the last full boot."""
        return self.state().soft_reboots

    @property
    def reboot_required(self) -> str | None:
        """The content of ``/run/reboot-required``, None when absent."""
        try:
            return self.paths.reboot_required.read_text()
        except FileNotFoundError:
            return None

    def active_units(self) -> list[str]:
        return shims.active_units(self.paths)

    def unit_record(self, unit: str) -> dict[str, Any] | None:
        """The record of a *running* unit (``argv``, ``pid``, ``pgid``), or None."""
        return shims.unit_record(self.paths, unit)

    def has_staged(self) -> bool:
        """A deployment is staged (read without the sysroot lock, which a running switch
        holds)."""
        return self.state().staged is not None

    @contextlib.contextmanager
    def sysroot_locked(self) -> Iterator[None]:
        """Hold the sysroot lock as another bootc process would (``status`` then waits)."""
        with flocked(self.paths.sysroot_lock):
            yield

    def journal(self, unit: str) -> str:
        return shims.read_journal(self.paths, unit)

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Every tool invocation so far (``{"tool", "argv", "pid", "time"}``), oldest first."""
        return [c for c in read_calls(self.paths) if tool is None or c["tool"] == tool]

    def switch_calls(self) -> list[list[str]]:
        """The argv of every ``bootc switch`` run so far."""
        return [c["argv"] for c in self.calls("bootc") if c["argv"][:1] == ["switch"]]

    def bootc_calls(self, subcommand: str) -> list[list[str]]:
        """The argv of every ``bootc SUBCOMMAND`` run so far (e.g. ``"rollback"``)."""
        return [c["argv"] for c in self.calls("bootc") if c["argv"][:1] == [subcommand]]

    def pulls(self) -> list[str]:
        """Every image a switch or upgrade fetched so far (registry, catalog or digest)."""
        return [str(c["argv"][0]) for c in self.calls("pull")]

    def boot(self) -> Boot:
        """How the current boot is assessed (``boot.py``)."""
        return self.state().current_boot()

    # -------------------------------------------------------------- running tools

    def run(
        self,
        tool: str,
        *args: str,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run one of the host's tools (``bootc``, ``systemctl``, ...) as a subprocess."""
        return subprocess.run(
            [str(self.bin_dir / tool), *args],
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def reboot(self, *, lock_timeout: float = 30.0) -> State:
        """Perform a simulated reboot (see the module docstring)."""
        return simulate_reboot(self.paths, lock_timeout=lock_timeout)

    # -------------------------------------------------------------- configuration

    def set_fault(
        self,
        name: str,
        enabled: bool = True,
        *,
        message: str | None = None,
        digest: str | None = None,
    ) -> State:
        """Turn one fault of ``FAULTS`` on or off (``switch-fail`` takes the error text;
        ``boot-fail`` / ``boot-hang`` the check unit and optionally an image ``digest``:
        only boots of that image then, from the next boot on)."""
        return set_fault(self.paths, name, enabled, message=message, digest=digest)

    def clear_faults(self) -> State:
        return update_state(self.paths, lambda s: setattr(s, "faults", Faults()))

    def configure(self, **changes: Any) -> State:
        """Change ``state.Config`` fields, e.g. ``configure(stage_delay=2.0)``."""
        unknown = set(changes) - set(Config.__dataclass_fields__)
        if unknown:
            raise FakeHostError(f"unknown host config fields: {sorted(unknown)}")
        return update_state(
            self.paths, lambda s: setattr(s, "config", replace(s.config, **changes))
        )

    def add_image(
        self,
        ref: str,
        digest: str,
        *,
        version: str | None = None,
        timestamp: str | None = None,
        architecture: str | None = None,
        kernel: str | None = None,
        manifests: dict[str, dict[str, Any]] | None = None,
        error: str | None = None,
        boot_assessment: str | None = None,
    ) -> None:
        """Add (or replace) ``ref`` in this host's catalog (``resolve.py`` has the format)."""
        add_catalog_image(
            self.paths.catalog,
            ref,
            digest,
            version=version,
            timestamp=timestamp,
            architecture=architecture,
            kernel=kernel,
            manifests=manifests,
            error=error,
            boot_assessment=boot_assessment,
        )

    def set_policy(
        self,
        policy: dict[str, Any] | None,
        keys: dict[str, bytes] | None = None,
        attachments: Sequence[str] = (),
    ) -> Path:
        """Write the host's containers policy (``ROOT/etc/containers/policy.json``; None
        removes it), ``keys`` (host path, e.g. ``/etc/pki/containers/os.pub`` -> PEM),
        which its ``sigstoreSigned`` ``keyPath`` entries name, and for ``attachments``
        (registry or repository scopes) a registries.d file saying
        ``use-sigstore-attachments``, without which no signature is found (``policy.py``)."""
        from hack.fakebootc.policy import (  # noqa: PLC0415
            POLICY_FILES,
            REGISTRIES_D,
            REGISTRIES_D_FILE,
            registries_d,
        )

        target = self.root / POLICY_FILES[0]
        for host_path, pem in (keys or {}).items():
            atomic_write(self.root / host_path.lstrip("/"), pem)
        attached = self.root / REGISTRIES_D / REGISTRIES_D_FILE
        if attachments:
            atomic_write(attached, registries_d(attachments).encode())
        else:
            attached.unlink(missing_ok=True)
        if policy is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write(target, json.dumps(policy, indent=2).encode())
        return target

    def trust_registry_ca(self, registry: str, ca_file: Path) -> Path:
        """Trust ``ca_file`` for ``registry`` (``host:port``) as containers/image would:
        copy it to ``ROOT/etc/containers/certs.d/<registry>/ca.crt``; that registry is
        then spoken to over https, loopback or not."""
        target = self.paths.certs_dirs(registry)[0] / "ca.crt"
        atomic_write(target, Path(ca_file).read_bytes())
        return target


def daemon_argv(
    node: str, kubeconfig: Path, metrics_port: int, probe_port: int, *host: str
) -> list[str]:
    """A ``bootc-operator daemon`` command line for a test host (``host``: its
    ``--host-root`` / ``--host-exec`` flags): the running virtualenv's console script,
    metrics over plain HTTP and probes on loopback."""
    return [
        str(Path(sys.executable).with_name("bootc-operator")),
        "daemon",
        "--node-name",
        node,
        "--kubeconfig",
        str(kubeconfig),
        *host,
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--metrics-secure=false",
        "--health-probe-bind-address",
        f"127.0.0.1:{probe_port}",
    ]


def upgrade_flags(
    *,
    check: bool = False,
    download_only: bool = False,
    from_downloaded: bool = False,
    apply: bool = False,
) -> list[str]:
    """``bootc upgrade``'s flags in bootc's order."""
    named = (
        ("--check", check),
        ("--download-only", download_only),
        ("--from-downloaded", from_downloaded),
        ("--apply", apply),
    )
    return [flag for flag, on in named if on]


def add_catalog_image(
    catalog: Path,
    ref: str,
    digest: str,
    *,
    version: str | None = None,
    timestamp: str | None = None,
    architecture: str | None = None,
    kernel: str | None = None,
    manifests: dict[str, dict[str, Any]] | None = None,
    error: str | None = None,
    boot_assessment: str | None = None,
) -> None:
    """Add ``ref`` to the catalog file ``catalog`` (created if needed; safe across processes).

    ``boot_assessment`` (``complete``, ``fail[:UNIT]``, ``hang[:UNIT]``): how every boot
    of this image is assessed on the hosts reading this catalog (``boot.py``).
    ``kernel``: the kernel the image ships (default ``state.DEFAULT_KERNEL``).
    """
    if boot_assessment is not None:
        try:
            parse_spec(boot_assessment)
        except BadSpec as exc:
            raise FakeHostError(str(exc)) from None
    entry: dict[str, Any] = {"digest": digest}
    optional = {
        "version": version,
        "timestamp": timestamp,
        "architecture": architecture,
        "kernel": kernel,
        "manifests": manifests,
        "error": error,
        "bootAssessment": boot_assessment,
    }
    entry.update({k: v for k, v in optional.items() if v is not None})
    with flocked(catalog.with_name(catalog.name + ".lock")):
        try:
            doc = json.loads(catalog.read_text())
        except FileNotFoundError:
            doc = {"images": {}}
        doc.setdefault("images", {})[ref] = entry
        atomic_write(catalog, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())


def scope_boot_fault(
    scopes: dict[str, str], enabled: bool, unit: str | None, digest: str | None
) -> None:
    """A boot fault's scopes (image digest, or ``*``, to check unit): turned on for
    ``digest`` (or every boot), off for ``digest``, or off everywhere."""
    if enabled:
        scopes[digest or "*"] = unit or DEFAULT_CHECK_UNIT
    elif digest is not None:
        scopes.pop(digest, None)
    else:
        scopes.clear()


def set_fault(
    paths: Paths,
    name: str,
    enabled: bool = True,
    *,
    message: str | None = None,
    digest: str | None = None,
) -> State:
    """Turn fault ``name`` on or off. Boot faults: ``message`` is the check unit (default
    ``boot.DEFAULT_CHECK_UNIT``), ``digest`` limits them to boots of that image; off
    with a digest drops that scope, without one every scope."""
    if name not in FAULTS:
        raise FakeHostError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    if digest is not None and name not in BOOT_FAULTS:
        raise FakeHostError(f"fault {name!r} takes no digest (only {', '.join(BOOT_FAULTS)})")
    attr = name.replace("-", "_")

    def change(state: State) -> None:
        if name in BOOT_FAULTS:
            scope_boot_fault(getattr(state.faults, attr), enabled, message, digest)
        elif attr == "switch_fail":
            state.faults.switch_fail = (message or "") if enabled else None
        else:
            setattr(state.faults, attr, enabled)

    return update_state(paths, change)


def _booted_meta(
    paths: Paths, config: Config, booted: str, version: str | None, timestamp: str | None
) -> tuple[str, ImageMeta]:
    try:
        ref = parse_ref(booted)
    except BadReference as exc:
        raise FakeHostError(str(exc)) from exc
    image = ref.canonical
    try:
        found = lookup_catalog(load_catalog(catalog_files(paths, config)), ref, config.architecture)
    except PullError as exc:
        raise FakeHostError(f"booted image {booted}: {exc}") from exc
    if found is None:
        if not ref.digest:
            raise FakeHostError(
                f"booted image {booted} has no digest and is not in a catalog: "
                "give REF@sha256:<digest>"
            )
        found = ImageMeta(digest=ref.digest, architecture=config.architecture, source="digest")
    return image, replace(
        found,
        version=version if version is not None else found.version,
        timestamp=timestamp if timestamp is not None else found.timestamp,
    )


def make_host(
    root: Path | str,
    *,
    booted: str,
    version: str | None = None,
    timestamp: str | None = None,
    architecture: str = "amd64",
    backend: str = "ostree",
    stage_delay: float = 0.0,
    boot_complete_delay: float = 0.0,
    accept_any_digest: bool = True,
    soft_reboot: bool = True,
    kernel: str | None = None,
    catalogs: Sequence[Path | str] = (),
    registries: Sequence[str] = (),
    insecure_registries: Sequence[str] = (),
    python: str | None = None,
    force: bool = False,
) -> Host:
    """Create a simulated host at ``root`` booted into ``booted`` (``REF@sha256:...``, or a
    ref a catalog knows), with ``kernel`` (default: the image's, else the default one);
    ``soft_reboot=False``: a systemd without soft reboots. ``python`` is the interpreter
    of the shims (default: this one)."""
    if backend not in ("ostree", "composefs"):
        raise FakeHostError(f"backend must be ostree or composefs, not {backend!r}")
    paths = Paths(Path(root).resolve())
    if paths.state.exists() and not force:
        raise FakeHostError(f"{paths.root} is already a simulated host (use force to re-create)")
    config = Config(
        architecture=architecture,
        backend=backend,
        stage_delay=stage_delay,
        boot_complete_delay=boot_complete_delay,
        accept_any_digest=accept_any_digest,
        soft_reboot=soft_reboot,
        catalogs=[str(Path(c).resolve()) for c in catalogs],
        registries=list(registries),
        insecure_registries=list(insecure_registries),
    )
    paths.fake.mkdir(parents=True, exist_ok=True)
    for directory in (paths.run / "ostree", paths.sysroot_lock.parent, paths.root / "etc"):
        directory.mkdir(parents=True, exist_ok=True)
    if backend == "ostree":
        paths.ostree_bootc.mkdir(parents=True, exist_ok=True)
    else:
        paths.composefs_deploy.mkdir(parents=True, exist_ok=True)
    (paths.run / "ostree-booted").touch()
    image, meta = _booted_meta(paths, config, booted, version, timestamp)
    state = State(booted=None, config=config)
    state.booted = new_deployment(
        state,
        image,
        "registry",
        meta.digest,
        meta.architecture,
        meta.version,
        meta.timestamp,
        kernel=kernel or meta.kernel,
        boot_assessment=meta.boot_assessment,
    )
    state.boot = state.decide_boot(time.time())
    with flocked(paths.state_lock):
        save_state(paths, state)
    _new_boot_id(paths)
    shims.write_bin_dir(paths, python)
    return Host(paths.root)


def open_host(root: Path | str) -> Host:
    """The existing simulated host at ``root`` (its shims rewritten if missing)."""
    paths = Paths(Path(root).resolve())
    load_state(paths)
    if not all((paths.bin / tool).exists() for tool in shims.TOOLS):
        shims.write_bin_dir(paths)
    if not paths.boot_id.exists():  # a host made before boot IDs were simulated
        _new_boot_id(paths)
    return Host(paths.root)


def _kill_units(paths: Paths) -> None:
    for unit in shims.active_units(paths):
        record = shims.unit_record(paths, unit)
        if record is None or record.get("pgid") is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(record["pgid"]), signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while shims.unit_record(paths, unit) is not None and time.monotonic() < deadline:
            time.sleep(shims.POLL_SECONDS)


def _new_boot_id(paths: Paths) -> None:
    """A fresh kernel boot ID (the kernel's format: a UUID and a newline)."""
    atomic_write(paths.boot_id, f"{uuid.uuid4()}\n".encode())


def _empty_run(paths: Paths) -> None:
    if paths.run.is_dir():
        for child in paths.run.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    (paths.run / "ostree").mkdir(parents=True, exist_ok=True)
    (paths.run / "ostree-booted").touch()


def simulate_reboot(paths: Paths, *, lock_timeout: float = 30.0) -> State:
    """Reboot the host, full or soft (see the module docstring); returns the new state."""
    load_state(paths)
    _kill_units(paths)

    def change(state: State) -> None:
        kind = state.reboot_kind()
        nextroot = state.next_deployment()
        # a soft reboot switches into the prepared deployment, or restarts the booted one
        switch = kind == "full" or (
            nextroot is not None and nextroot.key == state.soft_reboot_target
        )
        if switch:
            if nextroot is not None:
                state.booted, state.rollback = nextroot, state.booted
            state.staged = None
            state.rollback_queued = False
        state.reboot_request = None
        state.soft_reboot_target = None
        state.boots += 1
        state.boot_kind = kind
        state.soft_reboots = state.soft_reboots + 1 if kind == "soft" else 0
        state.boot = state.decide_boot(time.time())

    try:
        with flocked(paths.sysroot_lock, timeout=lock_timeout):
            state = update_state(paths, change)
    except TimeoutError as exc:
        raise FakeHostError(
            f"reboot: the sysroot stayed locked for {lock_timeout}s (a bootc command still runs?)"
        ) from exc
    shims.forget_units(paths)
    if state.boot_kind == "full":
        _empty_run(paths)
        _new_boot_id(paths)
    return state
