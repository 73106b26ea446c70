"""A release's krew plugin (``hack/krew-archive``), installed as krew does.

The release is built from this tree into a temporary directory: the archive and
the manifest template ``plugins/krew/bootc.yaml`` rendered for it. The rendered
manifest must pass krew's rules (apiVersion, kind, platforms with selectors …)
and name that archive: its ``sha256``, its ``uri`` (the release's), its ``bin``
and ``files`` members of it. Then it is unpacked into a store directory and its
``bin`` linked from a bin directory (what ``kubectl krew install`` does), and
run with nothing of the project's venv: ``PATH`` is that bin directory and the
directory of the Python the venv was made from (a plain ``python3``), no
``PYTHONPATH``. The real kubectl finds it (``kubectl plugin list``), runs
``kubectl bootc --help`` and ``kubectl bootc status POOL`` against the harness's
apiserver; ``python3 -I -S`` (no site-packages at all) runs it too, so it needs
nothing installed beside it. Its first run unpacks it into ``$XDG_CACHE_HOME``.
A copy at that path that another user owns, or that others could write, is not
run (the plugin says why and runs from the archive); private, the same copy is.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS
from e2e.controllerenv import create_pool, delete_quietly
from e2e.helpers import image, unique_name
from hack import krewpkg
from hack.testenv import ControlPlane
from hack.testenv.pools import pool_body

PLAIN_PYTHON_BIN = Path(sys.base_prefix) / "bin"


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


async def test_the_krew_archive_installs_and_runs_through_kubectl(
    api: ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    tag = krewpkg.version()
    dist = tmp_path / "dist"
    assert await asyncio.to_thread(krewpkg.main, ["--version", tag, "--out", str(dist)]) == 0
    archive, rendered = dist / f"kubectl-bootc-{tag}.tar.gz", dist / "bootc.yaml"
    assert sorted(dist.iterdir()) == sorted([archive, rendered])
    manifest = yaml.safe_load(rendered.read_text())
    assert krewpkg.problems(manifest) == []
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["spec"]["version"] == tag
    (platform,) = manifest["spec"]["platforms"]
    assert platform["selector"]["matchExpressions"], platform
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"].startswith("https://github.com/")
    assert platform["uri"].endswith(f"/releases/download/{tag}/{archive.name}")
    assert platform["bin"] == krewpkg.BIN

    # kubectl krew install: unpack, move each `files` entry, link `bin`
    store = tmp_path / "store" / "bootc" / manifest["spec"]["version"]
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == sorted(f["from"] for f in platform["files"]), members
        assert members[platform["bin"]].mode & 0o111, "bin is executable"
        tar.extractall(tmp_path / "unpacked", filter="data")
    store.mkdir(parents=True)
    for entry in platform["files"]:
        target = store / entry["to"] / Path(entry["from"]).name
        (tmp_path / "unpacked" / entry["from"]).rename(target)
    bin_dir = tmp_path / "krew-bin"
    bin_dir.mkdir()
    plugin = store / platform["bin"]
    (bin_dir / platform["bin"]).symlink_to(plugin)
    with zipfile.ZipFile(plugin) as bundle:
        names = bundle.namelist()
    assert "__main__.py" in names and "bootc_operator/kubectl/main.py" in names
    compiled = [n for n in names if n.endswith(krewpkg.COMPILED)]
    assert compiled == [], "pure Python only"

    env: dict[str, Any] = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env |= {
        "PATH": os.pathsep.join([str(bin_dir), str(PLAIN_PYTHON_BIN), "/usr/bin", "/bin"]),
        "KUBECONFIG": str(control_plane.kubeconfig),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    kubectl = str(control_plane.bin_dir / "kubectl")
    listed = await asyncio.to_thread(run, [kubectl, "plugin", "list"], env)
    assert f"{bin_dir}/kubectl-bootc" in listed.stdout, listed.stdout + listed.stderr
    helped = await asyncio.to_thread(run, [kubectl, "bootc", "--help"], env)
    assert helped.returncode == 0, helped.stderr
    assert "status" in helped.stdout and "approve" in helped.stdout
    # the first run unpacked the archive into the user's cache (bytecode cached there)
    (unpacked,) = (tmp_path / "cache" / "kubectl-bootc").iterdir()
    assert (unpacked / "bootc_operator" / "kubectl" / "main.py").is_file()

    name = unique_name("krew")
    await create_pool(api, pool_body(name, {"group": name}, image(1), 1))
    try:
        status = await asyncio.to_thread(run, [kubectl, "bootc", "status", name], env)
        assert status.returncode == 0, status.stderr
        assert status.stdout.startswith(f"Pool {name}: "), status.stdout
        python = str(PLAIN_PYTHON_BIN / "python3")
        isolated = await asyncio.to_thread(
            run, [python, "-I", "-S", str(plugin), "status", name, "-o", "json"], env
        )
        assert isolated.returncode == 0, isolated.stderr
        assert json.loads(isolated.stdout)["name"] == name
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, name)

    # Issue 37 §9: a copy at the cache's path that someone else could have written is
    # not run. Planted: the real copy with its main module replaced.
    planted_cache = tmp_path / "planted-cache"
    planted = planted_cache / "kubectl-bootc" / unpacked.name
    shutil.copytree(unpacked, planted)
    (planted / "bootc_operator" / "kubectl" / "main.py").write_text(
        "def main():\n    print('PLANTED')\n    return 0\n"
    )
    env["XDG_CACHE_HOME"] = str(planted_cache)

    async def help_text() -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(run, [kubectl, "bootc", "--help"], env)

    def refused(res: subprocess.CompletedProcess[str], why: str) -> None:
        assert res.returncode == 0, res.stderr
        assert "PLANTED" not in res.stdout and "approve" in res.stdout, res.stdout
        assert f"kubectl-bootc: not running the copy in {planted}: " in res.stderr, res.stderr
        assert why in res.stderr, res.stderr

    for path in (planted_cache, planted.parent, planted):
        path.chmod(0o700)
    os.chown(planted, 12345, 12345)  # another user's directory
    refused(await help_text(), f"{planted} is owned by uid 12345, not {os.geteuid()}")
    os.chown(planted, os.geteuid(), os.getegid())
    planted.parent.chmod(0o777)  # anyone could have put it there
    refused(await help_text(), f"{planted.parent} is writable by its group or others")
    # the control: the same copy, private, is what runs
    planted.parent.chmod(0o700)
    trusted = await help_text()
    assert trusted.stdout.strip() == "PLANTED", trusted.stdout + trusted.stderr
