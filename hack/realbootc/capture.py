"""Capture the real bootc's ``status --format=json --format-version=1`` in every state.

``python -m hack.realbootc.capture DIR`` (root; the bootc build from
``hack/build-bootc.sh``) makes a real-bootc host beside a throw-away loopback
registry, drives it through the states the daemon must read, and writes one file per
state into DIR (``unit/fixtures/bootc-real/`` holds the last capture; run it again
when the pinned bootc changes). Each file is bootc's output exactly (one canonical
JSON line, no trailing newline); ``commands.txt`` lists what bootc printed on the way.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.realbootc.host import make_host
from hack.realbootc.images import bootc_image, push_bootc_image
from hack.testenv.push import Image
from hack.testenv.registry import Registry

OTHER_KERNEL = "6.13.0-realbootc-other"


def capture(out: Path, base: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    with Registry(base / "registry") as registry:

        def push(ref: str, image: Image) -> str:
            return asyncio.run(push_bootc_image(registry, ref, image))

        refs: dict[int, str] = {}
        for n in (1, 2, 3):
            image = bootc_image(f"v{n}", version=f"{n}.0")
            digest = push(registry.ref("os", f"v{n}"), image)
            refs[n] = registry.ref("os", digest=digest)
        other = bootc_image("v4", version="4.0", kernel=OTHER_KERNEL)
        digest = push(registry.ref("os", "v4"), other)
        refs[4] = registry.ref("os", digest=digest)
        tag = registry.ref("os", "stable")
        host = make_host(
            base / "host", booted=refs[1], insecure_registries=[registry.host], soft_reboot=True
        )

        def save(name: str) -> None:
            done = host.bootc("status", "--format=json", "--format-version=1")
            if done.returncode != 0:
                raise SystemExit(f"capture: bootc status failed in {name}: {done.stderr}")
            (out / f"{name}.json").write_text(done.stdout)

        def run(what: str, step: Callable[[], Any]) -> None:
            done = step()
            log.append(f"$ {what}\n# exit {done.returncode}\n{done.stdout}{done.stderr}".rstrip())

        try:
            save("booted-only")
            run("bootc switch -- IMAGE2", lambda: host.switch(refs[2]))
            save("staged-soft-reboot-capable")
            host.reboot()
            save("rollback-present")
            run("bootc switch -- IMAGE4 (another kernel)", lambda: host.switch(refs[4]))
            save("staged-another-kernel")
            run("bootc rollback (discards the staged one)", host.rollback)
            save("rollback-queued")
            run("bootc switch -- IMAGE3 (after the rollback)", lambda: host.switch(refs[3]))
            save("rollback-queued-then-staged")
            host.reboot()
            push(tag, bootc_image("v1", version="1.0"))
            run("bootc switch -- TAG", lambda: host.switch(tag))
            host.reboot()
            push(tag, bootc_image("v3", version="3.0"))
            run("bootc upgrade --check (the tag moved)", lambda: host.upgrade(check=True))
            save("cached-update")
            run("bootc upgrade --download-only", lambda: host.upgrade(download_only=True))
            save("download-only")
            host.reboot()
            policy = {
                "default": [{"type": "reject"}],
                "transports": {
                    "docker": {registry.ref("os"): [{"type": "insecureAcceptAnything"}]}
                },
            }
            host.set_policy(policy)
            run(
                "bootc switch --enforce-container-sigpolicy -- IMAGE2",
                lambda: host.bootc("switch", "--enforce-container-sigpolicy", "--", refs[2]),
            )
            save("staged-container-policy")
            host.set_fault("not-bootc")
            save("not-booted-by-ostree")
        finally:
            host.close()
    (out / "commands.txt").write_text("\n\n".join(log) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hack.realbootc.capture", description=__doc__)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="realbootc-capture-") as tmp:
        capture(args.out.resolve(), Path(tmp))
    print(f"captured into {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
