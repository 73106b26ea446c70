"""The quick start as a newcomer runs it: the documentation's commands, as written.

The commands come from the pages themselves (``hack.userdocs.quickstart_commands``:
the README's first pool and how to watch it, the guide's kubectl view with an
image change, the uninstall of the pools), so the text and this test cannot
drift: a command the pages add that this test does not know fails it. Each runs
in ``bash`` with the real ``kubectl`` and the ``kubectl-bootc`` the package
installs on ``PATH``, against the harness's real apiserver, with the README's
``pool.yaml`` in the working directory; the in-process controller rolls the pool
out on four simulated hosts named and labelled as in the README
(``worker-0``..``worker-3``, ``node-role.kubernetes.io/worker``), from tags
pushed to a real registry.

The one rewrite: ``quay.io/example/os`` becomes a repository of the test's
registry (this machine has no network). What is checked of each command's
answer: its exit code; where the page shows output, its first words and every
table header shown (``kubectl get bnp``'s columns, the node table of
``kubectl bootc status``); the columns ``-o wide`` says it adds; that
``kubectl wait`` returns only once the pool runs the new image on every node (it
waits for the new generation, as the page says); that uninstalling the pools
releases every node. docs/development.md's local control plane runs as written
too (``hack/controlplane up``, ``status``, ``kubectl get``, ``down``).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODE_POOLS, NODES, ApiError
from bootc_operator.kube.rest import get_object
from e2e.controllerenv import delete_quietly, get_pool
from e2e.helpers import condition, push, unique_name, wait_for
from e2e.test_kubectl_bootc import VENV_BIN
from hack import userdocs
from hack.testenv import ControlPlane, cli
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.registry import Registry

ROOT = userdocs.ROOT
DOC_REPO = "quay.io/example/os"
NODES_SHOWN = [f"worker-{i}" for i in range(4)]
TIMEOUT = 120.0


def readme_pool() -> str:
    """The README's pool file: the YAML block of "A first pool" that is a whole
    BootcNodePool (others there are fragments of a spec)."""
    section = userdocs.section((ROOT / "README.md").read_text(), "A first pool")
    yamls = [b.body for b in userdocs.blocks(section) if b.language == "yaml"]
    pools = [text for text in yamls if (yaml.safe_load(text) or {}).get("kind") == c.POOL_KIND]
    assert len(pools) == 1, f"one whole pool in the README's first pool section: {yamls}"
    return pools[0]


def shown_output() -> dict[str, list[str]]:
    """Each console command of the quick start with the output a page shows for it."""
    shown: dict[str, list[str]] = {}
    for page, heading in userdocs.QUICKSTART:
        text = userdocs.section((ROOT / page).read_text(), heading)
        for command, lines in userdocs.console(text):
            if lines:
                shown.setdefault(userdocs.bare(command), lines)
    return shown


def comment(command: str) -> str:
    match = re.search(r"\s#\s*(.*)$", command)
    return match.group(1) if match else ""


def assert_looks_as_shown(out: str, shown: list[str], command: str) -> None:
    """OUT begins with the words the page's output begins with, and has every table
    header the page shows (a line starting NAME or NODE), column for column."""
    lines = out.splitlines()
    assert lines and lines[0].split()[:2] == shown[0].split()[:2], (command, out)
    for header in (s.split() for s in shown if s.split()[:1] in (["NAME"], ["NODE"])):
        assert header in [line.split() for line in lines], (command, header, out)


def column(out: str, row: str, name: str) -> str:
    """The cell of column NAME in the row of ROW of kubectl's table OUT (by the
    header's offsets: a cell may be empty)."""
    header, *rows = out.splitlines()
    start = header.index(f" {name}") + 1
    (line,) = [r for r in rows if r.split()[:1] == [row]]
    return line[start:].split(" ", 1)[0]


class QuickStart:
    """Runs the quick start's commands and checks what each one did."""

    def __init__(self, api: ApiClient, cp: ControlPlane, cwd: Path, repo: str) -> None:
        self.api = api
        self.cwd = cwd
        self.repo = repo
        self.shown = shown_output()
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([VENV_BIN, str(cp.bin_dir), os.environ.get("PATH", "")]),
            "KUBECONFIG": str(cp.kubeconfig),
        }
        self.digests: dict[str, str] = {}  # by tag
        self.target = ""  # the digest the pool should run after a wait

    def here(self, command: str) -> str:
        return command.replace(DOC_REPO, self.repo)

    def _run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.here(command)],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    async def run(self, command: str) -> str:
        res = await asyncio.to_thread(self._run, command)
        assert res.returncode == 0, f"`{command}` failed:\n{res.stdout}{res.stderr}"
        shown = self.shown.get(userdocs.bare(command))
        if shown:
            assert_looks_as_shown(res.stdout, shown, command)
        return res.stdout

    async def watch(self, command: str) -> str:
        """A command that runs until stopped (``-w``): its first screen."""
        proc = await asyncio.create_subprocess_exec(
            *("bash", "-euo", "pipefail", "-c", f"exec {self.here(command)}"),
            cwd=self.cwd,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        try:
            async with asyncio.timeout(TIMEOUT):
                while not any(line.startswith("  NODE ") for line in lines):
                    line = await proc.stdout.readline()
                    assert line, f"`{command}` ended: {lines}"
                    lines.append(line.decode())
        finally:
            proc.terminate()
            await proc.wait()
        return "".join(lines)

    async def pool(self) -> dict[str, Any]:
        return await get_pool(self.api, "workers")

    async def step(self, command: str) -> None:
        """Run COMMAND (a line of the quick start) and check what it did."""
        line = userdocs.bare(command)
        if line.startswith("kubectl bootc status -w"):
            out = await self.watch(line)
            assert out.startswith("Pool workers: "), out
        elif line.startswith("kubectl apply -f pool.yaml && kubectl wait"):
            out = await self.run(command)
            assert "bootcnodepool.node.bootc.dev/workers condition met" in out, out
            await self.assert_rolled_out()
        elif line.startswith("kubectl wait --for=condition=UpToDate bnp/workers"):
            await self.run(command)
            await self.assert_rolled_out()  # the new generation's, not the old True
        elif line.startswith("kubectl patch bnp/workers"):
            await self.run(command)
            ref = (await self.pool())["spec"]["image"]["ref"]
            assert ref == self.here(f"{DOC_REPO}:v3"), ref
            self.target = self.digests["v3"]
        elif line in ("kubectl get bnp", "kubectl get bnp -o wide"):
            out = await self.run(command)
            added = re.findall(r"\b[A-Z]{4,}\b", comment(command))
            header = out.splitlines()[0].split()
            assert set(added) <= set(header), (command, header)
            assert column(out, "workers", "UPTODATE") == "True", out
        elif line in ("kubectl get bn", "kubectl get bn -o wide"):
            out = await self.run(command)
            added = re.findall(r"\b[A-Z]{4,}\b", comment(command))
            header = out.splitlines()[0].split()
            assert set(added) <= set(header), (command, header)
            for name in NODES_SHOWN:
                assert column(out, name, "POOL") == "workers", out
        elif line == "kubectl bootc status workers":
            out = await self.run(command)
            assert out.startswith("Pool workers: UpToDate, 4/4 updated, image "), out
        elif line == "kubectl bootc why worker-3":
            out = await self.run(command)
            assert out.startswith("worker-3 is up to date"), out
        elif line == "kubectl bootc events workers":

            async def listed() -> str:
                out = await self.run(command)
                return out if "RolloutComplete" in out else ""

            events = await wait_for(listed, TIMEOUT, "the rollout's Events")
            assert "NodeUpdated" in events, events
        elif line in ("kubectl bootc pause workers", "kubectl bootc resume workers"):
            await self.run(command)
            paused = (await self.pool())["spec"]["rollout"].get("paused")
            assert paused is line.endswith("pause workers"), paused
        elif line == userdocs.UNINSTALL_POOLS:
            await self.run(command)
            await wait_for(self.released, TIMEOUT, "every node released")
        else:
            raise AssertionError(f"the quick start shows `{command}`: check what it does here")

    async def assert_rolled_out(self) -> None:
        """The pool runs ``self.target`` on all four nodes, each uncordoned."""
        pool = await self.pool()
        status = pool["status"]
        assert condition(pool, c.COND_UP_TO_DATE)["status"] == "True"
        assert status["observedGeneration"] == pool["metadata"]["generation"], status
        assert (status["targetDigest"], status["deployedDigest"]) == (self.target,) * 2, status
        assert (status["nodeCount"], status["updatedCount"]) == (4, 4), status
        for name in NODES_SHOWN:
            node = await get_object(self.api, NODES, name)
            assert not node["spec"].get("unschedulable"), name

    async def released(self) -> bool:
        try:
            await self.pool()
            return False
        except ApiError as err:
            if not err.not_found:
                raise
        for name in NODES_SHOWN:
            node = await get_object(self.api, NODES, name)
            if c.MANAGED_LABEL in node["metadata"].get("labels", {}):
                return False
            if node["spec"].get("unschedulable"):
                return False
        return True


async def test_the_quick_start_runs_as_written(
    api: ApiClient,
    fleet: Fleet,
    control_plane: ControlPlane,
    registry: Registry,
    tmp_path: Path,
) -> None:
    commands = userdocs.quickstart_commands()
    repository = unique_name("example-os")
    run = QuickStart(api, control_plane, tmp_path, registry.ref(repository))
    first = await push(registry, registry.ref(repository, "v1"), "one")
    run.digests = {
        tag: await push(registry, registry.ref(repository, tag), tag) for tag in ("stable", "v3")
    }
    run.target = run.digests["stable"]
    pool_file = readme_pool()
    assert f"{DOC_REPO}:stable" in pool_file and "name: workers" in pool_file, pool_file
    (tmp_path / "pool.yaml").write_text(run.here(pool_file))
    selector = yaml.safe_load(pool_file)["spec"]["nodeSelector"]["matchLabels"]
    for name in NODES_SHOWN:
        await fleet.add_node(name, registry.ref(repository, digest=first), dict(selector))
    try:
        async with running_controller(api, registry=registry.options()):
            for command in commands:
                await run.step(command)
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, "workers")


def development_block() -> list[str]:
    """docs/development.md's local control plane, line by line."""
    text = (ROOT / "docs" / "development.md").read_text()
    return userdocs.shell_commands(userdocs.section(text, "A local control plane"))


async def test_the_local_control_plane_runs_as_written(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``hack/controlplane up``, ``status``, ``kubectl get bnp,bn``, ``down``: one
    shell, as a developer types them (``eval`` exports KUBECONFIG for the next
    lines). Its state goes to a temporary directory (``$BOOTC_OPERATOR_CONTROLPLANE_DIR``),
    not the checkout's, and kubectl is on PATH as the page's comment says."""
    commands = development_block()
    assert [userdocs.bare(c).split()[:2] for c in commands] == [
        ["eval", '"$(hack/controlplane'],
        ["hack/controlplane", "status"],
        ["kubectl", "get"],
        ["hack/controlplane", "down"],
    ], commands
    state = tmp_path / "controlplane"
    env = {
        **os.environ,
        cli.DIR_ENV: str(state),
        "PATH": os.pathsep.join([str(control_plane.bin_dir), os.environ.get("PATH", "")]),
    }
    env.pop("KUBECONFIG", None)

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    try:
        res = await asyncio.to_thread(run, "\n".join(commands))
        assert res.returncode == 0, res.stdout + res.stderr
        # status: every process running; kubectl: the CRDs are served, nothing in them
        for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
            assert re.search(rf"^{name} +pid \d+ +running$", res.stdout, flags=re.M), res.stdout
        assert f"export KUBECONFIG={state}" in res.stdout, res.stdout
        assert "No resources found" in res.stderr, res.stderr
        assert not state.exists(), "down removes the state directory"
    finally:
        if state.exists():
            await asyncio.to_thread(run, f"hack/controlplane down --dir {state}")
