"""The pure parts of the real-bootc host kit (``hack.realbootc``): no namespace, no bootc."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from hack.realbootc import hostinit
from hack.realbootc.host import _write_stubs, parse_entry, registries_conf, unescape_ref
from hack.realbootc.images import KERNEL, bootc_image
from hack.testenv.push import Image


def test_unescape_ref_inverts_ostree_ext_refescape() -> None:
    # ostree-ext's refescape: "_" quotes itself "__", other non-alphanumerics are "_XX_"
    escaped = "docker_3A__2F__2F_127_2E_0_2E_0_2E_1_3A_5000/os_40_sha256_3A_ab__cd"
    assert unescape_ref(escaped) == "docker://127.0.0.1:5000/os@sha256:ab_cd"


def test_parse_entry_reads_a_bls_entry() -> None:
    text = (
        "title Debian (ostree:default:0)\nversion 2\nlinux /ostree/default-x/vmlinuz\n"
        "options root=UUID=realbootc rw ostree=/ostree/boot.1/default/x/0\n"
    )
    entry = parse_entry(text)
    assert entry["version"] == "2"
    assert entry["options"] == "root=UUID=realbootc rw ostree=/ostree/boot.1/default/x/0"


def test_registries_conf_marks_blocks_and_mirrors() -> None:
    plain = registries_conf(["127.0.0.1:5000"])
    assert '[[registry]]\nlocation = "127.0.0.1:5000"\ninsecure = true\n' in plain
    assert "blocked" not in plain and "mirror" not in plain
    blocked = registries_conf(["127.0.0.1:5000"], blocked=True, mirror="127.0.0.1:9")
    assert "blocked = true" in blocked
    assert '[[registry.mirror]]\nlocation = "127.0.0.1:9"\ninsecure = true' in blocked


def _tree(image: Image) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(image.layers[0].data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def test_a_bootc_image_is_deployable_and_deterministic() -> None:
    image = bootc_image("one", version="1.0")
    assert image.digest == bootc_image("one", version="1.0").digest
    assert image.digest != bootc_image("two", version="1.0").digest
    config = json.loads(image.config.data)
    assert config["architecture"] == "amd64"
    assert config["config"]["Labels"]["containers.bootc"] == "1"
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == "1.0"
    tree = _tree(image)
    assert tree[f"usr/lib/modules/{KERNEL}/vmlinuz"].isfile()
    assert tree["etc/containers/policy.json"].isfile()
    assert tree["ostree"].issym() and tree["ostree"].linkname == "sysroot/ostree"
    assert tree["lib64"].linkname == "usr/lib64"  # the ELF interpreter's path
    for mount_point in ("sysroot", "boot", "var", "proc", "dev", "sys", "run", "tmp"):
        assert tree[mount_point].isdir(), mount_point


def test_images_with_one_kernel_share_its_bytes() -> None:
    a, b = _tree(bootc_image("a")), _tree(bootc_image("b"))
    path = f"usr/lib/modules/{KERNEL}/vmlinuz"
    assert a[path].size == b[path].size
    other = _tree(bootc_image("c", kernel="6.13.0-other"))
    assert "usr/lib/modules/6.13.0-other/vmlinuz" in other


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--wait", "--collect", "--pipe", "--quiet", "--unit", "u.service", "bootc", "-x"],
            (
                {"wait": True, "collect": True, "pipe": True, "quiet": True, "unit": "u.service"},
                ["bootc", "-x"],
            ),
        ),
        (["--unit=u", "-p", "X=1", "--", "true"], ({"unit": "u"}, ["true"])),
        (["-E", "A=b", "env"], ({}, ["env"])),
    ],
)
def test_systemd_run_options(
    argv: list[str], expected: tuple[dict[str, object], list[str]]
) -> None:
    parsed = hostinit._split_systemd_run(argv)
    assert not isinstance(parsed, str)
    opts, command = parsed
    assert command == expected[1]
    for key, value in expected[0].items():
        assert opts[key] == value


def test_systemd_run_refuses_unknown_options() -> None:
    assert (
        hostinit._split_systemd_run(["--frobnicate", "x"]) == "unrecognized option '--frobnicate'"
    )
    assert hostinit._split_systemd_run(["--unit"]) == "option --unit requires an argument"


def test_ended_maps_wait_statuses_as_systemd_run_does() -> None:
    assert hostinit.ended(0) == ("success", "code=exited, status=0/SUCCESS", 0)
    assert hostinit.ended(3 << 8) == ("exit-code", "code=exited, status=3/FAILURE", 3)
    assert hostinit.ended(9) == ("signal", "code=killed, status=9/KILL", 255)


def test_stubs_name_their_tool(tmp_path: Path) -> None:
    _write_stubs(tmp_path, Path("/cache/bin/policygate-v5-abc/policygate"))
    text = (tmp_path / "bin" / "systemctl").read_text()
    assert text.startswith("#!/usr/bin/python3 -IS\n")
    assert "main('systemctl', sys.argv[1:])" in text
    assert (tmp_path / "lib" / "realbootc").is_dir()
    # the host's skopeo is the policy gate, as the host sees its bound directory
    assert (tmp_path / "bin" / "skopeo").readlink() == hostinit.GATE / "policygate"
    assert (tmp_path / "lib" / "realbootc-policygate").is_dir()
