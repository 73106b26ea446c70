"""Helpers for controller e2e tests: an in-process controller, pools, pods and PDBs.

The in-process controller, ``running_controller(api)``, is the kit's
(:mod:`hack.testenv.controller`: ``hack/bench_queries.py`` runs it too);
``ControllerProcess`` runs ``bootc-operator controller --leader-elect`` as a process
(short lease timings) and ``holder(api)`` names who holds its Lease.
The evidence for "never more than maxUnavailable" is the kit's one safety
monitor, ``hack.testenv.monitor.SafetyMonitor``, as in the system tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import BOOTC_NODE_POOLS, LEASES, PODS, ApiError, create_object
from bootc_operator.kube.rest import delete_object, get_object, patch_object, request_json
from hack.testenv.controlplane import free_port
from hack.testenv.fleet import Fleet


class WallClock:
    """The in-process controller's ``Context.now``, set by the test: the passes that
    decide by time are the ones the test runs."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


async def add_nodes(fleet: Fleet, group: str, n: int, booted: str, **labels: str) -> list[str]:
    """``n`` Ready nodes ``<group>-n<i>`` labelled ``group=<group>`` running ``booted``."""
    names = [f"{group}-n{i}" for i in range(n)]
    for name in names:
        await fleet.add_node(name, booted, {"group": group, **labels})
    return names


async def create_pool(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    return await create_object(api, BOOTC_NODE_POOLS, body)


async def get_pool(api: ApiClient, name: str) -> dict[str, Any]:
    return await get_object(api, BOOTC_NODE_POOLS, name)


async def delete_quietly(api: ApiClient, resource: Any, name: str) -> None:
    with contextlib.suppress(ApiError):
        await delete_object(api, resource, name)


PODS_PATH = "/api/v1/namespaces/{ns}/pods"


async def create_pod(
    api: ApiClient,
    name: str,
    node: str,
    labels: dict[str, str],
    *,
    namespace: str = "default",
    owner: dict[str, Any] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    grace: int = 0,
) -> dict[str, Any]:
    """A pod bound straight to ``node`` (no scheduler), deleted at once when evicted;
    with a ``grace`` period, evicted it stays terminating (no kubelet confirms it)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner:
        meta["ownerReferences"] = [owner]
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "c", "image": "registry.example.com/app:1"}],
    }
    if volumes:
        spec["volumes"] = volumes
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    await create_object(api, PODS, body, namespace)
    # No kubelet runs: report the pod Running and Ready ourselves, or the eviction
    # API would skip PodDisruptionBudgets for a Pending pod.
    now = "2026-01-01T00:00:00Z"
    status = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            ],
        }
    }
    return await patch_object(
        api, PODS, name, status, namespace, patch_type="strategic", subresource="status"
    )


async def pod_exists(api: ApiClient, name: str, namespace: str = "default") -> bool:
    try:
        await get_object(api, PODS, name, namespace)
    except ApiError as err:
        if err.not_found:
            return False
        raise
    return True


async def create_blocking_pdb(
    api: ApiClient, name: str, labels: dict[str, str], namespace: str = "default"
) -> None:
    """A PDB no eviction of the selected pods can satisfy (minAvailable: 100%)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": "100%", "selector": {"matchLabels": labels}},
    }
    await request_json(
        api, "POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body=body
    )


NAMESPACE = "bootc-operator"
LEASE = "bootc-operator-controller"
#: --lease-duration, --renew-deadline, --retry-period: a standby takes over within
#: seconds (what the leader-election and flood tests are about)
SHORT_LEASE = ("3s", "2s", "0.5s")
#: for a test whose one controller must not lose its lease to a slow apiserver on a
#: loaded machine (it would exit, with no standby to take over): a 2 s renew deadline
#: once cost a lone controller its lease mid-test (issue 36)
PATIENT_LEASE = ("10s", "8s", "0.5s")


class ControllerProcess:
    def __init__(
        self,
        name: str,
        kubeconfig: Path,
        log_dir: Path,
        *,
        metrics_secure: bool = False,
        lease: tuple[str, str, str] = SHORT_LEASE,
    ) -> None:
        """``metrics_secure``: /metrics over HTTPS behind the token check, as installed
        (else plain HTTP, the local-development mode); ``lease``: the leader election's
        timings (:data:`SHORT_LEASE`, :data:`PATIENT_LEASE`)."""
        duration, deadline, retry = lease
        self.name = name
        self.metrics_secure = metrics_secure
        self.metrics_port = free_port()
        self.probe_port = free_port()
        self.log_path = log_dir / f"{name}.log"
        argv = [
            str(Path(sys.executable).with_name("bootc-operator")),
            "controller",
            f"--kubeconfig={kubeconfig}",
            "--leader-elect",
            f"--lease-duration={duration}",
            f"--renew-deadline={deadline}",
            f"--retry-period={retry}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--metrics-secure={str(metrics_secure).lower()}",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
        ]
        env = {**os.environ, "POD_NAME": name}
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    @property
    def metrics_url(self) -> str:
        scheme = "https" if self.metrics_secure else "http"
        return f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"

    async def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port or self.metrics_port}{path}"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            return r.status, await r.text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        return self.proc.returncode


async def holder(api: ApiClient) -> str:
    try:
        lease = await get_object(api, LEASES, LEASE, NAMESPACE)
    except ApiError:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")
