"""The simulation's two kinds of host (``hack.simlib.hosts``): which nodes get a real-bootc
host, what refuses one before anything starts, and what the node simulator asks of a
fake host through the same functions (the real host is exercised by
``e2e/test_sim_realbootc.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hack.fakebootc import make_host
from hack.simlib import cli, hosts
from hack.simlib.common import SimConfig, SimInfo

DIGEST = "sha256:" + "a" * 64
IMAGE = f"127.0.0.1:5000/bootc/os@{DIGEST}"


def test_the_first_n_nodes_are_the_real_ones_and_the_choice_is_persisted(
    tmp_path: Path,
) -> None:
    info = SimInfo(state_dir=str(tmp_path), config=SimConfig(nodes=3, real_bootc=2), owner=1)
    info.nodes = ["worker-1", "worker-2", "worker-3"]
    assert info.real_bootc_nodes == ["worker-1", "worker-2"]
    info.save()
    again = SimInfo.load(tmp_path)
    assert again is not None and again.real_bootc_nodes == ["worker-1", "worker-2"]
    assert SimInfo(state_dir=str(tmp_path), config=SimConfig(), owner=1).real_bootc_nodes == []


@pytest.mark.parametrize(
    ("config", "registry", "refused"),
    [
        (SimConfig(nodes=3), False, None),
        (SimConfig(nodes=3, real_bootc=4), True, "--real-bootc 4: give at most --nodes (3)"),
        (SimConfig(nodes=3, real_bootc=-1), True, "--real-bootc -1"),
        (SimConfig(nodes=3, real_bootc=2), False, "not with --no-registry"),
    ],
)
def test_what_refuses_real_hosts(config: SimConfig, registry: bool, refused: str | None) -> None:
    said = hosts.refusal(config, registry=registry)
    assert said == refused if refused is None else refused in (said or "")


def test_up_refuses_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "sim"
    rc = cli.main(["--dir", str(state), "up", "--nodes=2", "--real-bootc=3"])
    assert rc == 1
    assert "--real-bootc 3: give at most --nodes (2)" in capsys.readouterr().err
    assert not state.exists()


def test_a_fake_host_through_the_same_functions(tmp_path: Path) -> None:
    made = make_host(tmp_path / "worker-3", booted=IMAGE, version="v1")
    assert not hosts.is_real(made.root)
    host = hosts.open_host(made.root)
    assert hosts.daemon_flags(host) == ["--host-root", str(made.root)]
    booted = hosts.booted(host)
    assert booted is not None and (booted.image, booted.version) == (IMAGE, "v1")
    hosts.power_on(host)  # nothing runs on a fake host: nothing to boot
    assert hosts.describe(host) == "fake bootc"


@pytest.mark.skipif(os.geteuid() != 0, reason="setting the immutable flag needs root")
def test_release_makes_real_hosts_deletable(tmp_path: Path) -> None:
    """ostree sets the immutable flag on deployment roots; a real host's node simulator
    clears it when it ends the host, ``release`` when that did not happen."""
    deployment = tmp_path / "hosts" / "worker-1" / "sysroot/ostree/deploy/default/deploy/abc.0"
    deployment.mkdir(parents=True)
    if subprocess.run(["chattr", "+i", str(deployment)], check=False).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    with pytest.raises(PermissionError):
        (deployment / "file").touch()
    hosts.release(tmp_path)
    shutil.rmtree(tmp_path / "hosts")
