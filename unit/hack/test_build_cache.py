"""The shared binary cache's build-once code (hack/lib/cache.sh), which
hack/build-binaries.sh and hack/build-promql-check.sh build through: concurrent
invocations build once and both end with complete files, a warm cache takes no
lock, a failed or killed build leaves nothing half written behind.

The build step is a small shell function standing in for ``go build``; the
locking, staging and renaming are the scripts' own (the same sourced file). Every
run uses a scratch cache directory, never the real one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hack.fakebootc.state import lock_is_held
from hack.testenv.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "etcd",
    "kwok",
)
LIB = REPO_ROOT / "hack" / "lib" / "cache.sh"

# What each build writes: two files, big enough that a reader of a half-written
# one would see it short.
FILES = {"tool-a": "a" * 200_000, "tool-b": "b" * 200_000}

# A build script as the real ones are made: HAVE is a stat per file, BUILD
# writes into its staging dir and installs each file with cache_install. It
# counts its builds in $CTL/builds and, when $CTL/hold exists, waits for
# $CTL/release before writing (so a test can hold it mid-build).
DRIVER = f"""
set -euo pipefail
source {LIB}
OUT="$(cache_root)/bin/tools"
have() {{ for f in {" ".join(FILES)}; do [[ -x "$OUT/$f" ]] || return 1; done; }}
build() {{
  echo built >> "$CTL/builds"
  if [[ -e "$CTL/hold" ]]; then
    touch "$CTL/started"
    while [[ ! -e "$CTL/release" ]]; do sleep 0.02; done
  fi
  [[ ! -e "$CTL/fail" ]] || {{ echo "go: build failed" >&2; exit 2; }}
  for f in {" ".join(FILES)}; do
    head -c 200000 < /dev/zero | tr '\\0' "${{f: -1}}" > "$1/$f"
    cache_install "$1/$f" "$OUT/$f"
  done
}}
cache_build_once test-build "$OUT" have build
echo "$OUT"
"""


def start(cache: Path, ctl: Path, name: str) -> subprocess.Popen[str]:
    env = {**os.environ, "BOOTC_OPERATOR_CACHE": str(cache), "CTL": str(ctl)}
    with (ctl / f"{name}.err").open("w") as stderr:
        return subprocess.Popen(
            ["bash", "-c", DRIVER], env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out.strip()


def builds(ctl: Path) -> int:
    path = ctl / "builds"
    return len(path.read_text().splitlines()) if path.exists() else 0


def assert_complete(out: Path) -> None:
    assert {p.name for p in out.iterdir()} == {*FILES, ".lock"}, "no staging dir left"
    for name, content in FILES.items():
        assert os.access(out / name, os.X_OK)
        assert (out / name).read_text() == content


async def test_two_concurrent_invocations_build_once_and_both_get_complete_files(
    tmp_path: Path,
) -> None:
    cache, ctl = tmp_path / "cache", tmp_path / "ctl"
    ctl.mkdir()
    (ctl / "hold").touch()
    first = start(cache, ctl, "first")
    await wait_for((ctl / "started").exists, 30, "the first build to start")
    out = cache / "bin" / "tools"
    assert lock_is_held(out / ".lock")
    second = start(cache, ctl, "second")
    await wait_for(
        lambda: "waiting for another build" in (ctl / "second.err").read_text(),
        30,
        "the second invocation to wait for the first one's lock",
    )
    # Mid-build, nothing half written is in place.
    assert not any((out / f).exists() for f in FILES)
    (ctl / "release").touch()
    assert finish(first) == (0, str(out))
    assert finish(second) == (0, str(out))
    assert builds(ctl) == 1
    assert "built by another invocation meanwhile" in (ctl / "second.err").read_text()
    assert_complete(out)
    assert not lock_is_held(out / ".lock")


async def test_a_warm_cache_is_a_stat_per_file_without_the_lock(tmp_path: Path) -> None:
    cache, ctl = tmp_path / "cache", tmp_path / "ctl"
    ctl.mkdir()
    assert finish(start(cache, ctl, "cold")) == (0, str(cache / "bin" / "tools"))
    (cache / "bin" / "tools" / ".lock").unlink()
    # A warm run neither builds nor opens (so never creates) the lock file.
    assert finish(start(cache, ctl, "warm"))[0] == 0
    assert builds(ctl) == 1
    assert not (cache / "bin" / "tools" / ".lock").exists()


async def test_a_failed_build_installs_nothing_and_cleans_its_staging_dir(
    tmp_path: Path,
) -> None:
    cache, ctl = tmp_path / "cache", tmp_path / "ctl"
    ctl.mkdir()
    (ctl / "fail").touch()
    code, _ = finish(start(cache, ctl, "failing"))
    assert code == 2
    assert "go: build failed" in (ctl / "failing.err").read_text()
    out = cache / "bin" / "tools"
    assert [p.name for p in out.iterdir()] == [".lock"]
    (ctl / "fail").unlink()
    assert finish(start(cache, ctl, "retry"))[0] == 0
    assert_complete(out)


async def test_a_killed_builds_staging_dir_is_removed_by_the_next_build(tmp_path: Path) -> None:
    cache, ctl = tmp_path / "cache", tmp_path / "ctl"
    out = cache / "bin" / "tools"
    leftover = out / ".staging.killed"
    leftover.mkdir(parents=True)
    (leftover / "tool-a").write_text("half")
    ctl.mkdir()
    assert finish(start(cache, ctl, "next"))[0] == 0
    assert not leftover.exists()
    assert_complete(out)


def test_build_binaries_on_a_warm_cache_needs_neither_go_nor_the_lock(tmp_path: Path) -> None:
    """The real script: a complete output dir is printed at once; Go is never run."""
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "go").write_text("#!/bin/sh\necho 'go must not run' >&2; exit 99\n")
    (trap / "go").chmod(0o755)
    versions = {"K8S_VERSION": "v1.0.0", "ETCD_VERSION": "v3.0.0", "KWOK_VERSION": "v0.1.0"}
    out = tmp_path / "bin" / "k8s-v1.0.0-etcd-v3.0.0-kwok-v0.1.0"
    out.mkdir(parents=True)
    for b in BINARIES:
        (out / b).touch(mode=0o755)
    res = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "build-binaries.sh")],
        env={
            "PATH": f"{trap}:{os.environ['PATH']}",
            "BOOTC_OPERATOR_CACHE": str(tmp_path),
            **versions,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert (res.returncode, res.stdout.strip(), res.stderr) == (0, str(out), "")
    assert not (out / ".lock").exists()
