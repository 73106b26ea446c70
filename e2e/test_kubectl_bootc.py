"""``kubectl bootc`` through the real ``kubectl`` against the real apiserver.

kubectl finds the plugin as ``kubectl-bootc`` on ``PATH`` (the venv's bin, where the
package installs it), exactly as on an admin's machine. The real controller drives
rollouts on simulated daemons; each test stops one at a gate and reads what the
plugin says it waits for (``status -o json``'s ``waitsFor``, the text of
``status`` and ``why``): the unavailability budget used by a drain a
PodDisruptionBudget holds, a closed maintenance window, a blocking alert (a
Prometheus that cannot be queried: the gate fails closed), a health check still
running, approval of the canaries' digest (then ``approve`` and the rollout's end,
``pause``/``resume``, ``events``); ``status -w -o json`` streaming one document
per change through a rollout. Errors: no such pool, no permission (a
ServiceAccount token without rights), no cluster. Cluster text (a daemon's
message, an Event's note) is printed with its control characters replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.gates.prometheus import PrometheusOptions
from bootc_operator.kube import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    NODES,
    PODS,
    ApiError,
    create_object,
    delete_object,
    patch_object,
    request_json,
)
from e2e.controllerenv import (
    add_nodes,
    create_blocking_pdb,
    create_pod,
    create_pool,
    delete_quietly,
    get_pool,
)
from e2e.helpers import condition, digest, image, unique_name, wait_for
from e2e.test_alert_gate import closed_port
from e2e.test_kube_lite import TokenKit, token_file_kubeconfig
from hack.testenv.controller import running_controller
from hack.testenv.fleet import Fleet
from hack.testenv.pools import pool_body
from hack.testenv.prometheus import Prometheus

TIMEOUT = 90.0
VENV_BIN = str(Path(sys.executable).parent)


def kubectl_bootc(
    control_plane: Any, *args: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl bootc ARGS`` with the real kubectl; KUBECONFIG names the cluster."""
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(kubeconfig or control_plane.kubeconfig),
    }
    return subprocess.run(
        [str(control_plane.bin_dir / "kubectl"), "bootc", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def run(control_plane: Any, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl_bootc, control_plane, *args, **kw)


async def status_json(control_plane: Any, pool: str) -> dict[str, Any]:
    res = await run(control_plane, "status", pool, "-o", "json")
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


async def waits(control_plane: Any, pool: str, kind: str) -> dict[str, Any] | None:
    """The pool's ``status -o json`` once it waits for ``kind``."""
    doc = await status_json(control_plane, pool)
    return doc if doc["waitsFor"]["kind"] == kind else None


async def staged(api: ApiClient, pool: str, n: int) -> bool:
    status = (await get_pool(api, pool)).get("status") or {}
    return bool(status.get("updatingCount", 0) >= n)


async def test_plugin_is_found_by_kubectl(control_plane: Any) -> None:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = await asyncio.to_thread(
        subprocess.run,
        [str(control_plane.bin_dir / "kubectl"), "plugin", "list"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert f"{VENV_BIN}/kubectl-bootc" in res.stdout, res.stdout + res.stderr
    helped = await run(control_plane, "--help")
    assert helped.returncode == 0 and "status" in helped.stdout and "approve" in helped.stdout


async def test_a_drain_held_by_a_pdb_uses_the_budget_and_status_and_why_say_so(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    """A rollout in progress: maxUnavailable 1, the first slot holder's drain held by a
    PodDisruptionBudget; the others are staged and wait for its slot."""
    group = unique_name("kb-budget")
    names = await add_nodes(fleet, group, 3, image(1))
    app = {"app": group}
    for name in names:
        await create_pod(api, f"{name}-web", name, app)
    await create_blocking_pdb(api, group, app)
    try:
        async with running_controller(api):
            await create_pool(api, pool_body(group, {"group": group}, image(2), 1))
            doc = await wait_for(
                lambda: waits(control_plane, group, "MaxUnavailable"),
                TIMEOUT,
                "the pool to wait for the budget",
            )
            holder = next(n["name"] for n in doc["nodes"] if n["slot"])
            waiting = [n for n in names if n != holder]
            message = doc["waitsFor"]["message"]
            assert f"maxUnavailable 1 is used by {holder} (draining, " in message, message
            assert doc["phase"] == c.PHASE_PROGRESSING
            assert (doc["updated"], doc["total"]) == (0, 3)
            rows = {n["name"]: n for n in doc["nodes"]}
            assert rows[holder]["cordoned"] and rows[holder]["state"] == "Staged"
            assert rows[holder]["desired"] == digest(2) and rows[holder]["booted"] == digest(1)

            text = await run(control_plane, "status", group)
            assert text.returncode == 0, text.stderr
            lines = text.stdout.splitlines()
            assert lines[0].startswith(f"Pool {group}: Progressing, 0/3 updated"), lines
            assert lines[1].startswith("  waits for: a reboot slot for "), lines
            assert f"maxUnavailable 1 is used by {holder} (draining, " in lines[1], lines
            header = next(line for line in lines if "NODE" in line)
            assert header.split() == [
                "NODE", "STATE", "BOOTED", "DESIRED", "READY", "CORDONED", "SLOT", "CHECK"
            ]  # fmt: skip
            holder_line = next(line for line in lines if line.split()[:1] == [holder])
            assert holder_line.split()[1:4] == ["Staged", digest(1)[7:19], digest(2)[7:19]]

            why = await run(control_plane, "why", waiting[0])
            assert why.returncode == 0, why.stderr
            assert why.stdout.startswith(f"{waiting[0]} is staged and waits for a reboot slot")
            assert f"is used by {holder} (draining, " in why.stdout, why.stdout
            why_holder = await run(control_plane, "why", holder)
            assert f"{holder} holds a reboot slot since " in why_holder.stdout, why_holder.stdout
            assert "and is draining" in why_holder.stdout
            why_pool = await run(control_plane, "why", group)
            assert why_pool.stdout.startswith(f"Pool {group} is Progressing: 0/3 nodes updated")

            # every pool, as YAML
            every = await run(control_plane, "status", "-o", "yaml")
            assert every.returncode == 0 and f"name: {group}" in every.stdout
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        for name in names:
            await delete_quietly_pod(api, f"{name}-web")
        await request_delete_pdb(api, group)


async def delete_quietly_pod(api: ApiClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        await delete_object(api, PODS, name, "default")


async def request_delete_pdb(api: ApiClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        path = f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{name}"
        await request_json(api, "DELETE", path)


async def test_a_closed_window_is_what_the_pool_waits_for(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("kb-window")
    await add_nodes(fleet, group, 2, image(1))
    opens = dt.datetime.now(dt.UTC) + dt.timedelta(hours=12)
    window = {"start": f"{opens:%H}:00", "duration": "1h", "timeZone": "UTC"}
    body = pool_body(group, {"group": group}, image(2), 1, maintenanceWindows=[window])
    async with running_controller(api):
        await create_pool(api, body)
        doc = await wait_for(
            lambda: waits(control_plane, group, "MaintenanceWindow"),
            TIMEOUT,
            "the pool to wait for its window",
        )
        assert "the next maintenance window opens" in doc["waitsFor"]["message"]
        assert f"{opens:%H}:00 UTC (in " in doc["waitsFor"]["message"], doc
        await wait_for(lambda: staged(api, group, 2), TIMEOUT, "both nodes staged")
        why = await run(control_plane, "why", f"{group}-n0")
        assert "waits for a maintenance window: the next maintenance window opens" in why.stdout
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_blocking_alert_is_what_the_pool_waits_for(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("kb-alert")
    await add_nodes(fleet, group, 2, image(1))
    url = f"http://127.0.0.1:{closed_port()}"
    body = pool_body(group, {"group": group}, image(2), 1, blockingAlerts=['severity="critical"'])
    options = PrometheusOptions(url=url, timeout=2.0)
    async with running_controller(api, prometheus=options, alert_check_interval=2.0):
        await create_pool(api, body)
        doc = await wait_for(
            lambda: waits(control_plane, group, "Alert"), TIMEOUT, "the pool to wait for alerts"
        )
        assert f"cannot query Prometheus at {url}" in doc["waitsFor"]["message"], doc
        assert doc["phase"] == c.PHASE_BLOCKED
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_firing_alert_is_named_and_resolving_it_lets_the_rollout_finish(
    api: ApiClient, fleet: Fleet, control_plane: Any, tmp_path: Path
) -> None:
    """A real Prometheus with a firing alert the pool's blockingAlerts match."""
    group = unique_name("kb-firing")
    await add_nodes(fleet, group, 2, image(1))
    body = pool_body(group, {"group": group}, image(2), 1, blockingAlerts=['severity="critical"'])
    prometheus = await asyncio.to_thread(Prometheus(tmp_path / "prometheus").start)
    try:
        await prometheus.fire("NodeDown", {"severity": "critical"})
        options = PrometheusOptions(url=prometheus.url)
        async with running_controller(api, prometheus=options, alert_check_interval=1.0):
            await create_pool(api, body)
            doc = await wait_for(
                lambda: waits(control_plane, group, "Alert"), TIMEOUT, "the pool to wait for alerts"
            )
            message = doc["waitsFor"]["message"]
            assert message.startswith(
                'alerts to resolve: NodeDown{severity="critical"} fires; no new reboots until '
                "resolved"
            ), message
            await prometheus.resolve("NodeDown")
            await wait_for(
                lambda: waits(control_plane, group, "Nothing"), TIMEOUT, "the rollout to finish"
            )
    finally:
        await asyncio.to_thread(prometheus.close)
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_a_running_health_check_and_its_time_left(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("kb-health")
    await add_nodes(fleet, group, 2, image(1))
    body = pool_body(group, {"group": group}, image(2), 1)
    body["spec"]["health"] = {"minReadySeconds": 3000, "timeoutSeconds": 3600}
    async with running_controller(api):
        await create_pool(api, body)
        doc = await wait_for(
            lambda: waits(control_plane, group, "HealthCheck"),
            TIMEOUT,
            "the pool to wait for a health check",
        )
        message = doc["waitsFor"]["message"]
        assert "(minReadySeconds: Ready for " in message and "of 3000s; " in message, message
        assert "left before it fails" in message
        checked = next(n["name"] for n in doc["nodes"] if n["state"] == "Checking")
        why = await run(control_plane, "why", checked)
        assert "keeps its reboot slot until its health check passes: minReadySeconds" in (
            why.stdout
        )
        assert "(timeoutSeconds 3600)" in why.stdout
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_approval_of_the_canarys_digest_then_pause_resume_and_events(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    group = unique_name("kb-approve")
    names = await add_nodes(fleet, group, 3, image(1))
    body = pool_body(
        group, {"group": group}, image(2), 1, canary={"nodes": 1, "requireApproval": True}
    )
    async with running_controller(api):
        await create_pool(api, body)
        doc = await wait_for(
            lambda: waits(control_plane, group, "Approval"), TIMEOUT, "awaiting approval"
        )
        assert (
            f"approval of {digest(2)}: 1 canary ({names[0]}) passed" in (doc["waitsFor"]["message"])
        )
        refused = await run(control_plane, "approve", group, "--digest", digest(3))
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines() == [
            f"error: no canary ran {digest(3)} and passed its health check; "
            "pass --force to approve it anyway"
        ]
        assert f"  {names[0]}: runs {digest(2)[7:19]}, UpToDate" in refused.stdout
        pool = await get_pool(api, group)
        assert "approvedDigest" not in pool["spec"]["rollout"]

        paused = await run(control_plane, "pause", group)
        assert paused.returncode == 0, paused.stderr
        await wait_for(lambda: waits(control_plane, group, "Paused"), TIMEOUT, "paused")
        resumed = await run(control_plane, "resume", group)
        assert resumed.returncode == 0, resumed.stderr
        assert (await get_pool(api, group))["spec"]["rollout"]["paused"] is False

        approved = await run(control_plane, "approve", group)
        assert approved.returncode == 0, approved.stderr
        assert f"spec.rollout.approvedDigest set to {digest(2)}" in approved.stdout

        async def finished() -> dict[str, Any] | None:
            doc = await waits(control_plane, group, "Nothing")
            return doc if doc is not None and doc["phase"] == c.PHASE_UP_TO_DATE else None

        done = await wait_for(finished, TIMEOUT, "the rollout to finish")
        assert done["updated"] == 3 and done["waitsFor"]["message"] == (
            f"nothing: all 3 nodes run {digest(2)[7:19]}"
        )
        assert condition(await get_pool(api, group), "UpToDate")["status"] == "True"

        async def events_listed() -> list[str]:
            res = await run(control_plane, "events", group)
            reasons = [line.split()[3] for line in res.stdout.splitlines()[1:]]
            return reasons if "RolloutComplete" in reasons else []

        reasons = await wait_for(events_listed, TIMEOUT, "the pool's Events")
        assert "SlotTaken" in reasons and "NodeUpdated" in reasons, reasons
        # time order: the first slot is taken before the rollout completes
        assert reasons.index("SlotTaken") < reasons.index("RolloutComplete"), reasons
        node_events = await run(control_plane, "events", names[1])
        assert "NodeUpdated" in node_events.stdout, node_events.stdout
        assert "RolloutComplete" not in node_events.stdout
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


async def test_errors_are_one_line_and_exit_non_zero(
    api: ApiClient, control_plane: Any, tmp_path: Path
) -> None:
    missing = await run(control_plane, "status", "no-such-pool")
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [
        'error: no such pool "no-such-pool" (kubectl get bootcnodepools lists them)'
    ]
    for verb in ("why", "events"):
        res = await run(control_plane, verb, "no-such-thing")
        assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
        assert 'no such pool or node "no-such-thing"' in res.stderr

    async with TokenKit(api, unique_name("kb-nobody")) as kit:
        token, _ = await kit.token()
        token_file = tmp_path / "token"
        token_file.write_text(token)
        kubeconfig = token_file_kubeconfig(
            control_plane.kubeconfig, token_file, tmp_path / "kubeconfig"
        )
        denied = await run(control_plane, "status", kubeconfig=kubeconfig)
        assert denied.returncode == 1
        assert len(denied.stderr.splitlines()) == 1, denied.stderr
        assert denied.stderr.startswith(
            "error: no permission to list bootcnodepools.node.bootc.dev: User "
            f'"system:serviceaccount:default:{kit.name}" cannot list resource "bootcnodepools"'
        ), denied.stderr
        paused = await run(control_plane, "pause", "some-pool", kubeconfig=kubeconfig)
        assert paused.stderr.startswith("error: no permission to get bootcnodepools"), paused.stderr

    nowhere = tmp_path / "nowhere.kubeconfig"
    doc = control_plane.kubeconfig.read_text().replace(
        _server(control_plane), f"https://127.0.0.1:{closed_port()}"
    )
    nowhere.write_text(doc)
    offline = await run(control_plane, "status", kubeconfig=nowhere)
    assert offline.returncode == 1
    assert len(offline.stderr.splitlines()) == 1, offline.stderr
    assert offline.stderr.startswith("error: no cluster: cannot connect to https://127.0.0.1:")
    # --kubeconfig wins over $KUBECONFIG, as in kubectl; --context picks a context
    flag = await run(
        control_plane,
        f"--kubeconfig={control_plane.kubeconfig}",
        "status",
        "no-such-pool",
        kubeconfig=nowhere,
    )
    assert flag.stderr.startswith('error: no such pool "no-such-pool"'), flag.stderr
    context = await run(control_plane, "--context", "elsewhere", "status")
    assert context.returncode == 1
    assert context.stderr.strip().endswith("no context named 'elsewhere'"), context.stderr
    absent = await run(control_plane, "status", kubeconfig=tmp_path / "absent")
    assert absent.returncode == 1 and absent.stderr.startswith(
        "error: no cluster: no kubeconfig at "
    ), absent.stderr


def _server(control_plane: Any) -> str:
    import yaml  # noqa: PLC0415

    doc = yaml.safe_load(control_plane.kubeconfig.read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


async def test_status_watch_prints_each_change_until_the_rollout_ends(
    api: ApiClient, fleet: Fleet, control_plane: Any
) -> None:
    """``status -w -o json``: one document per change, read as it streams: the pool
    awaiting approval, then (approved through the API) done."""
    group = unique_name("kb-watch")
    await add_nodes(fleet, group, 2, image(1))
    body = pool_body(
        group, {"group": group}, image(2), 1, canary={"nodes": 1, "requireApproval": True}
    )
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(control_plane.kubeconfig),
    }
    async with running_controller(api):
        await create_pool(api, body)
        proc = await asyncio.create_subprocess_exec(
            str(control_plane.bin_dir / "kubectl"),
            *("bootc", "status", group, "-w", "-o", "json"),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        seen: list[tuple[str, str]] = []
        lines: list[bytes] = []

        async def until(kind: str, phase: str) -> None:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    line = await proc.stdout.readline()  # type: ignore[union-attr]
                    assert line, f"the watch ended; saw {seen}"
                    lines.append(line)
                    doc = json.loads(line)
                    seen.append((doc["waitsFor"]["kind"], doc["phase"]))
                    if seen[-1] == (kind, phase):
                        return

        try:
            await until("Approval", c.PHASE_AWAITING_APPROVAL)
            await patch_object(
                api, BOOTC_NODE_POOLS, group, {"spec": {"rollout": {"approvedDigest": digest(2)}}}
            )
            await until("Nothing", c.PHASE_UP_TO_DATE)
        finally:
            proc.terminate()
            await proc.wait()
        # printed on change only: no document repeats the one before it
        assert all(a != b for a, b in itertools.pairwise(lines)), seen
    await delete_quietly(api, BOOTC_NODE_POOLS, group)


HOSTILE = "pull failed\x1b]0;owned\x07\x1b[2J\r\nforged row\x9b31m"
SHOWN = "pull failed^[]0;owned^G^[[2J  forged row<U+009B>31m"


def controls(text: str) -> list[str]:
    """The C0/C1 control characters of ``text`` but its line breaks."""
    return [hex(ord(ch)) for ch in text if ch != "\n" and (ch < " " or "\x7f" <= ch < "\xa0")]


async def test_cluster_text_reaches_the_terminal_without_its_control_characters(
    api: ApiClient, control_plane: Any
) -> None:
    """Issue 37 §8: a daemon's Degraded message and an Event's note carrying ESC, BEL,
    CR, a newline and the C1 CSI are shown by ``status``, ``why`` and ``events`` with
    every control replaced (caret notation, a space for whitespace)."""
    group = unique_name("kb-ctl")
    node = f"{group}-n0"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await create_object(
        api, NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    )
    await create_pool(api, pool_body(group, {"group": group}, image(1), 1))
    bootc_node = {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": node, "labels": {c.POOL_LABEL: group}},
        "spec": {"desiredImage": image(1), "desiredImageState": "Staged"},
    }
    await create_object(api, BOOTC_NODES, bootc_node)
    degraded = {
        "type": c.COND_DEGRADED,
        "status": "True",
        "reason": "Error",
        "message": HOSTILE,
        "lastTransitionTime": now,
    }
    await patch_object(
        api, BOOTC_NODES, node, {"status": {"conditions": [degraded]}}, subresource="status"
    )
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{group}.hostile", "namespace": "default"},
        "involvedObject": {"kind": c.POOL_KIND, "name": group, "apiVersion": c.API_VERSION},
        "reason": "Hostile",
        "message": HOSTILE,
        "type": "Warning",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "source": {"component": "anyone"},
    }
    await request_json(api, "POST", "/api/v1/namespaces/default/events", body=event)
    try:
        for args in (("status", group), ("why", node), ("events", group)):
            res = await run(control_plane, *args)
            assert res.returncode == 0, res.stderr
            assert SHOWN in res.stdout, (args, res.stdout)
            assert not controls(res.stdout), (args, controls(res.stdout), res.stdout)
    finally:
        await delete_quietly(api, BOOTC_NODE_POOLS, group)
        await delete_quietly(api, BOOTC_NODES, node)
        await delete_quietly(api, NODES, node)
