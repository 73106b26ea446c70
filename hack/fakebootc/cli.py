"""The ``fake-host`` command (``python -m hack.fakebootc``): manage simulated hosts.

    init ROOT --booted REF@sha256:... [--version V] [--timestamp T] [--arch amd64]
         [--kernel K] [--composefs] [--stage-delay S] [--boot-complete-delay S]
         [--strict-catalog] [--no-soft-reboot] [--catalog FILE]... [--registry HOST]...
         [--insecure-registry HOST]... [--force]
    reboot ROOT                         perform the requested reboot (full or soft)
    show ROOT                           status document, reboot request, faults, boot
                                        (kind, boot ID, soft reboots), units
    fault ROOT NAME [--message M] [--digest D] [--off]
                                        NAME: switch-fail, switch-hang, status-garbage,
                                        status-block, incompatible, not-bootc, boot-fail,
                                        boot-hang, or clear. boot-*: --message is the check
                                        unit, --digest limits them to that image's boots
    config ROOT [--stage-delay S] [--boot-complete-delay S] [--accept-any-digest |
                --strict-catalog] [--soft-reboot | --no-soft-reboot]
                [--registry HOST]... [--insecure-registry HOST]...
    image ROOT REF --digest D [--version V] [--timestamp T] [--arch A] [--kernel K]
          [--error MSG] [--boot-assessment complete|fail[:UNIT]|hang[:UNIT]]
                                        add REF to the host's catalog (or --catalog FILE)
    env ROOT                            shell `export` lines putting the host's tools on PATH
    bin ROOT                            (re)write the shims, print their directory

Errors print one line ``fake-host: error: ...`` and exit 1 (bad usage: 2).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from hack.fakebootc import shims
from hack.fakebootc.host import FAULTS, add_catalog_image, make_host, open_host
from hack.fakebootc.state import FakeHostError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake-host", description="Manage simulated bootc hosts.")
    sub = parser.add_subparsers(dest="command", required=True)

    init = sub.add_parser("init", help="create a simulated host")
    init.add_argument("root", type=Path)
    init.add_argument("--booted", required=True, help="REF@sha256:... (or a catalog ref)")
    init.add_argument("--version")
    init.add_argument("--timestamp")
    init.add_argument("--arch", default="amd64")
    init.add_argument("--composefs", action="store_true", help="composefs backend (ostree: null)")
    init.add_argument("--stage-delay", type=float, default=0.0)
    init.add_argument("--boot-complete-delay", type=float, default=0.0)
    init.add_argument(
        "--strict-catalog",
        action="store_true",
        help="unknown digest refs fail instead of being accepted",
    )
    init.add_argument("--kernel", help="the booted deployment's kernel (default: the image's)")
    init.add_argument(
        "--no-soft-reboot",
        dest="soft_reboot",
        action="store_false",
        help="systemd without soft reboots (nothing is softRebootCapable)",
    )
    init.add_argument("--catalog", action="append", default=[], type=Path)
    init.add_argument("--registry", action="append", default=[])
    init.add_argument("--insecure-registry", action="append", default=[])
    init.add_argument("--force", action="store_true", help="re-create an existing host")

    reboot = sub.add_parser("reboot", help="perform a simulated reboot")
    reboot.add_argument("root", type=Path)
    reboot.add_argument("--lock-timeout", type=float, default=30.0)

    show = sub.add_parser("show", help="print the host's state")
    show.add_argument("root", type=Path)

    fault = sub.add_parser("fault", help="inject (or clear) a fault")
    fault.add_argument("root", type=Path)
    fault.add_argument("name", choices=[*FAULTS, "clear"])
    fault.add_argument(
        "--message", help="switch-fail: the error text after 'error: '; boot-*: the check unit"
    )
    fault.add_argument("--digest", help="boot-*: only boots of the image with this digest")
    fault.add_argument("--off", action="store_true", help="turn this one fault off")

    config = sub.add_parser("config", help="change how the host behaves")
    config.add_argument("root", type=Path)
    config.add_argument("--stage-delay", type=float)
    config.add_argument("--boot-complete-delay", type=float)
    group = config.add_mutually_exclusive_group()
    group.add_argument(
        "--accept-any-digest", dest="accept_any_digest", action="store_true", default=None
    )
    group.add_argument("--strict-catalog", dest="accept_any_digest", action="store_false")
    srb = config.add_mutually_exclusive_group()
    srb.add_argument("--soft-reboot", dest="soft_reboot", action="store_true", default=None)
    srb.add_argument("--no-soft-reboot", dest="soft_reboot", action="store_false")
    config.add_argument("--registry", action="append")
    config.add_argument("--insecure-registry", action="append")

    image = sub.add_parser("image", help="add an image to a catalog")
    image.add_argument("root", type=Path)
    image.add_argument("ref")
    image.add_argument("--digest", required=True)
    image.add_argument("--version")
    image.add_argument("--timestamp")
    image.add_argument("--arch")
    image.add_argument("--kernel", help="the kernel the image ships (default: the default one)")
    image.add_argument("--error", help="pulling this ref fails with this text")
    image.add_argument(
        "--boot-assessment", help="every boot of this image: complete, fail[:UNIT], hang[:UNIT]"
    )
    image.add_argument("--catalog", type=Path, help="catalog file (default: the host's own)")

    policy = sub.add_parser(
        "policy", help="set the host's containers policy (/etc/containers/policy.json)"
    )
    policy.add_argument("root", type=Path)
    policy.add_argument("file", type=Path, nargs="?", help="a containers-policy.json(5) file")
    policy.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="HOSTPATH=FILE",
        help="install FILE (a cosign public key) at HOSTPATH on the host, for keyPath",
    )
    policy.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="SCOPE",
        help="look for cosign signatures (sigstore attachments) of images in SCOPE "
        "(a registry or repository; registries.d's use-sigstore-attachments)",
    )
    policy.add_argument("--clear", action="store_true", help="remove the policy file")

    env = sub.add_parser("env", help="print shell exports for the host's tools")
    env.add_argument("root", type=Path)

    bin_ = sub.add_parser("bin", help="(re)write the shims and print their directory")
    bin_.add_argument("root", type=Path)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.command == "init":
        host = make_host(
            args.root,
            booted=args.booted,
            version=args.version,
            timestamp=args.timestamp,
            architecture=args.arch,
            backend="composefs" if args.composefs else "ostree",
            stage_delay=args.stage_delay,
            boot_complete_delay=args.boot_complete_delay,
            accept_any_digest=not args.strict_catalog,
            soft_reboot=args.soft_reboot,
            kernel=args.kernel,
            catalogs=args.catalog,
            registries=args.registry,
            insecure_registries=args.insecure_registry,
            force=args.force,
        )
        print(host.root)
        return 0
    if args.command == "image" and args.catalog is not None:
        add_catalog_image(
            args.catalog,
            args.ref,
            args.digest,
            version=args.version,
            timestamp=args.timestamp,
            architecture=args.arch,
            kernel=args.kernel,
            error=args.error,
            boot_assessment=args.boot_assessment,
        )
        return 0
    host = open_host(args.root)
    if args.command == "reboot":
        state = host.reboot(lock_timeout=args.lock_timeout)
        booted = state.booted
        print(
            f"booted: {booted.image if booted else None} ({booted.digest if booted else '-'}; "
            f"{state.boot_kind} reboot)"
        )
    elif args.command == "show":
        state = host.state()
        print(
            json.dumps(
                {
                    "status": host.status(),
                    "rebootRequest": state.reboot_request,
                    "rebootRequired": host.reboot_required,
                    "boots": state.boots,
                    "bootKind": state.boot_kind,
                    "bootId": host.boot_id,
                    "softReboots": state.soft_reboots,
                    "softRebootPrepared": state.soft_reboot_target is not None,
                    "faults": state.faults.active(),
                    "boot": asdict(state.current_boot()),
                    "config": state.config.__dict__,
                    "activeUnits": host.active_units(),
                },
                indent=2,
                sort_keys=True,
            )
        )
    elif args.command == "fault":
        if args.name == "clear":
            host.clear_faults()
        else:
            host.set_fault(args.name, not args.off, message=args.message, digest=args.digest)
    elif args.command == "config":
        changes = {
            key: value
            for key, value in {
                "stage_delay": args.stage_delay,
                "boot_complete_delay": args.boot_complete_delay,
                "accept_any_digest": args.accept_any_digest,
                "soft_reboot": args.soft_reboot,
                "registries": args.registry,
                "insecure_registries": args.insecure_registry,
            }.items()
            if value is not None
        }
        print(json.dumps(host.configure(**changes).config.__dict__, indent=2, sort_keys=True))
    elif args.command == "image":
        host.add_image(
            args.ref,
            args.digest,
            version=args.version,
            timestamp=args.timestamp,
            architecture=args.arch,
            kernel=args.kernel,
            error=args.error,
            boot_assessment=args.boot_assessment,
        )
    elif args.command == "policy":
        if args.clear == (args.file is not None):
            raise FakeHostError("policy: give a policy FILE or --clear")
        keys = {}
        for spec in args.key:
            host_path, sep, source = spec.partition("=")
            if not sep or not host_path.startswith("/"):
                raise FakeHostError(f"policy: --key {spec!r} is not /HOST/PATH=FILE")
            keys[host_path] = Path(source).read_bytes()
        doc = None if args.clear else json.loads(args.file.read_text())
        print(host.set_policy(doc, keys, attachments=args.attach))
    elif args.command == "env":
        env = host.env({})
        path = shlex.quote(str(host.bin_dir))
        print(f'export PATH={path}:"$PATH"')
        print(f"export FAKEBOOTC_ROOT={shlex.quote(env['FAKEBOOTC_ROOT'])}")
    elif args.command == "bin":
        print(shims.write_bin_dir(host.paths))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except FakeHostError as exc:
        print(f"fake-host: error: {exc}", file=sys.stderr)
        return 1
