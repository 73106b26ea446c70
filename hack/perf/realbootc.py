"""Figures of the real bootc beside the fake (issue 35 §5): a switch and a reboot, timed.

Not a test (no thresholds): ``hack/bench-realbootc [--rounds N]`` prints the figures.
Both hosts run the same commands as the daemon does, one after the other, on the same
machine in the same run (so the ratio is what counts, not the absolute times):

- *make*: a new host booted into image 1 (real: ``ostree admin init-fs``, a stateroot,
  ostree-ext's deploy from the loopback registry, the namespace's boot; fake: its
  state files);
- *switch*: ``bootc switch -- IMAGE`` to a new digest (real: the pull from Debian's
  docker-registry on loopback through skopeo, the import, the staging);
- *reboot*: the reboot into the staged deployment (real: shutdown, ``ostree admin
  finalize-staged``, a new namespace on the new default deployment);
- *status*: ``bootc status --format=json`` once booted.

It also prints the bootc build's cache directory, its size and the build time it
recorded (``BUILD-INFO``), and a warm ``hack/build-bootc.sh`` call's time.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.fakebootc import Host as FakeHost
from hack.fakebootc import make_host as make_fake_host
from hack.realbootc.build import BUILD_SCRIPT, resolve_build
from hack.realbootc.host import Host as RealHost
from hack.realbootc.host import make_host as make_real_host
from hack.realbootc.images import bootc_image, push_bootc_image
from hack.testenv.registry import Registry


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    result = fn()
    return time.monotonic() - t0, result


def _checked(done: Any) -> None:
    if getattr(done, "returncode", 0) != 0:
        raise SystemExit(f"bench-realbootc: a host command failed: {done.stderr}")


def _line(name: str, real: list[float], fake: list[float]) -> str:
    r, f = statistics.median(real), statistics.median(fake)
    return (
        f"  {name:<8} real median {r * 1000:8.1f} ms (max {max(real) * 1000:8.1f})   "
        f"fake median {f * 1000:7.1f} ms (max {max(fake) * 1000:7.1f})   real/fake {r / f:6.1f}x"
    )


def _du(path: Path) -> str:
    done = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True, check=False)
    return done.stdout.split()[0] if done.returncode == 0 else "?"


async def _measure(base: Path, rounds: int) -> None:
    t0 = time.monotonic()
    build = resolve_build()
    warm = time.monotonic() - t0
    info = (build.dir / "BUILD-INFO").read_text().strip().splitlines()
    print(f"bootc build: {build.dir} ({_du(build.dir)})")
    print(f"  {'; '.join(info)}")
    print(f"  {BUILD_SCRIPT.name} warm (or this run's wait): {warm:.2f} s")
    with Registry(base / "registry") as registry:
        refs = []
        for n in range(rounds + 1):
            image = bootc_image(f"bench-{n}", version=f"{n}.0")
            digest = await push_bootc_image(registry, registry.ref("bench-os", f"v{n}"), image)
            refs.append(registry.ref("bench-os", digest=digest))

        def _make(kind: str, root: Path) -> FakeHost | RealHost:
            if kind == "real":
                return make_real_host(
                    root, booted=refs[0], insecure_registries=[registry.host], build=build
                )
            return make_fake_host(root, booted=refs[0], insecure_registries=[registry.host])

        times: dict[str, dict[str, list[float]]] = {
            k: {"real": [], "fake": []} for k in ("make", "switch", "reboot", "status")
        }
        for n in range(rounds):
            for kind in ("real", "fake"):
                root = base / f"{kind}-{n}"
                spent, host = _timed(functools.partial(_make, kind, root))
                times["make"][kind].append(spent)
                try:
                    spent, done = _timed(functools.partial(host.switch, refs[n + 1]))
                    _checked(done)
                    times["switch"][kind].append(spent)
                    spent, _ = _timed(host.reboot)
                    times["reboot"][kind].append(spent)
                    spent, done = _timed(functools.partial(host.bootc, "status", "--format=json"))
                    _checked(done)
                    times["status"][kind].append(spent)
                finally:
                    if isinstance(host, RealHost):
                        host.close()
    print(f"hosts: {rounds} of each, switched to a new digest and rebooted once")
    for name, by_kind in times.items():
        print(_line(name, by_kind["real"], by_kind["fake"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hack/bench-realbootc", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="hosts of each kind (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-realbootc-") as tmp:
        asyncio.run(_measure(Path(tmp), args.rounds))


if __name__ == "__main__":
    main()
