"""Authenticated metrics through a real kube-apiserver, with the install's own RBAC.

A control plane of its own with ``manifests/install.yaml`` applied (its
ClusterRoles would otherwise leak into the other tests' cluster). The controller
and a daemon run as installed: ``/metrics`` over HTTPS with a self-signed
certificate, each process authenticating as its own ServiceAccount (a token of
it), so the install's RBAC is what lets them send the reviews. Then, for each:

- no token → 401 (and a token the API server does not know → 401);
- the token of a ServiceAccount without the metrics-reader role → 403;
- a token of one bound to ``bootc-operator-metrics-reader`` → 200 and the metrics;
- plain HTTP on the metrics port gets no metrics; the probes stay plain HTTP.

And a process whose own identity may not send reviews answers 503, with one log
line that says what is missing and never shows the token.

A flood of made-up bearer tokens on the leading controller's metrics port (issue 37
item 2: each cost a TokenReview on the client that renews the Lease, and the
leader lost it): the leader keeps its Lease (same holder, no transition, its
renewals go on and it never exits: a renewal late past the renew deadline makes it
give the Lease up), the flood is answered 503 beyond the review limits, and an
authorized scrape in the middle of it still gets the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import LEASES, get_object
from e2e.controllerenv import LEASE, ControllerProcess
from e2e.daemonenv import Daemon, Daemons
from e2e.helpers import image, unique_name, wait_for
from hack.fakebootc import make_host
from hack.installgen import INSTALL_YAML
from hack.testenv import ControlPlane
from hack.testenv.kube import api_client, token_kubeconfig
from hack.testenv.metricsreader import account_token, fetch, insecure_tls, reader_token

NS = "bootc-operator"
READERS = "metrics-test"


class Cluster:
    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.reader = reader_token(cp.kubectl, READERS, "prometheus")
        self.stranger = account_token(cp.kubectl, READERS, "stranger")

    def kubeconfig_of(self, namespace: str, account: str) -> Path:
        """A kubeconfig authenticating as ServiceAccount ``namespace/account`` (a token)."""
        token = account_token(self.cp.kubectl, namespace, account)
        path = self.cp.state_dir / f"{namespace}-{account}.kubeconfig"
        return token_kubeconfig(self.cp.kubeconfig, token, path, account)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with ControlPlane(crd_dir=None, controller_manager=False) as cp:
        docs = [d for d in yaml.safe_load_all(INSTALL_YAML.read_text()) if d]
        namespace = next(d for d in docs if d["kind"] == "Namespace")
        cp.kubectl("apply", "-f", "-", input=json.dumps(namespace))
        cp.kubectl("apply", "-f", str(INSTALL_YAML))
        yield Cluster(cp)


@pytest.fixture
def controller(cluster: Cluster, tmp_path: Path) -> Iterator[ControllerProcess]:
    kubeconfig = cluster.kubeconfig_of(NS, "bootc-operator-controller")
    proc = ControllerProcess("controller", kubeconfig, tmp_path, metrics_secure=True)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
async def daemons(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemons]:
    d = Daemons(cluster.cp.kubeconfig, tmp_path)
    try:
        yield d
    finally:
        await d.stop_all()


async def serving_daemon(
    cluster: Cluster, daemons: Daemons, tmp_path: Path, account: tuple[str, str]
) -> tuple[Daemon, str]:
    """A daemon as installed (HTTPS metrics) running as ServiceAccount ``account``, once
    its metrics port answers; and its metrics URL."""
    node = unique_name("node")
    host = make_host(tmp_path / node, booted=image(1))
    daemon = daemons.start(
        node, host, extra=("--metrics-secure",), kubeconfig=cluster.kubeconfig_of(*account)
    )
    url = f"https://127.0.0.1:{daemon.metrics_port}/metrics"
    await wait_for(lambda: serving(url), 60, f"the daemon serving {url}")
    return daemon, url


async def serving(url: str) -> bool:
    """The metrics port answers HTTPS (any status: the process is up)."""
    try:
        await fetch(url)
    except (OSError, ssl.SSLError):
        return False
    return True


async def plain_http(port: int) -> tuple[int, str] | None:
    """What plain HTTP on the metrics port gets: None when no HTTP answer came."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as resp,
        ):
            return resp.status, await resp.text()
    except aiohttp.ClientError:
        return None


async def check_guard(cluster: Cluster, url: str, metric: str) -> None:
    status, text = await fetch(url)
    assert status == 401, text
    assert "Bearer" in text
    status, text = await fetch(url, "not-a-token")
    assert status == 401, text
    status, text = await fetch(url, cluster.stranger)
    assert status == 403, text
    assert f"system:serviceaccount:{READERS}:stranger may not get /metrics" in text
    status, text = await fetch(url, cluster.reader)
    assert status == 200, text
    assert f"\n{metric}" in text, text[:2000]


async def test_controller_metrics_need_a_token_allowed_to_read_them(
    cluster: Cluster, controller: ControllerProcess
) -> None:
    url = controller.metrics_url
    assert url.startswith("https://")
    await wait_for(lambda: serving(url), 60, f"the controller serving {url}")
    await check_guard(cluster, url, "bootc_operator_leader ")
    answer = await plain_http(controller.metrics_port)
    assert answer is None or (answer[0] == 400 and "bootc_operator" not in answer[1]), answer
    # The probes stay plain HTTP, without a token (a kubelet's httpGet sends none).
    ok = await wait_for(
        lambda: _ready(controller), 60, "the controller's plain /readyz answering 200"
    )
    assert ok


async def _ready(controller: ControllerProcess) -> bool:
    try:
        status, _ = await controller.get("/readyz", controller.probe_port)
    except aiohttp.ClientError:
        return False
    return status == 200


async def test_daemon_metrics_need_a_token_allowed_to_read_them(
    cluster: Cluster, daemons: Daemons, tmp_path: Path
) -> None:
    _, url = await serving_daemon(cluster, daemons, tmp_path, (NS, "bootc-operator-daemon"))
    await check_guard(cluster, url, "bootc_operator_daemon_")


def logged(daemon: Daemon, text: str) -> str:
    """The daemon's log once it has a line with ``text`` ("" until then)."""
    log = daemon.log(200)
    return log if text in log else ""


async def test_a_process_that_may_not_review_answers_503_and_logs_why_not_the_token(
    cluster: Cluster, daemons: Daemons, tmp_path: Path
) -> None:
    daemon, url = await serving_daemon(cluster, daemons, tmp_path, (READERS, "no-review-rights"))
    status, text = await fetch(url, cluster.reader)
    assert status == 503, text
    log = await wait_for(
        lambda: logged(daemon, "refused the TokenReview"),
        10,
        "the daemon's log line about the refused review",
    )
    assert "needs create on tokenreviews" in log, log
    assert cluster.reader not in log
    assert daemon.alive(), "a failed review never ends the process"


#: concurrent connections of the flood, each sending made-up tokens back to back
FLOOD_CONNECTIONS = 48
#: made-up tokens sent before the flood may end, and Lease renewals seen during it
FLOOD_REQUESTS = 3000
FLOOD_RENEWALS = 8


class Flood:
    """``FLOOD_CONNECTIONS`` HTTPS connections sending ``/metrics`` requests, each with
    a new made-up bearer token, until ``stop``; answers counted by status."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.statuses: dict[int, int] = {}
        self.errors = 0
        self.stop = asyncio.Event()

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + self.errors

    async def run(self) -> None:
        connector = aiohttp.TCPConnector(ssl=insecure_tls(), limit=FLOOD_CONNECTIONS)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await asyncio.gather(*(self._one(session) for _ in range(FLOOD_CONNECTIONS)))

    async def _one(self, session: aiohttp.ClientSession) -> None:
        while not self.stop.is_set():
            headers = {"Authorization": f"Bearer made-up.{secrets.token_urlsafe(24)}"}
            try:
                async with session.get(self.url, headers=headers) as resp:
                    await resp.read()
                    self.statuses[resp.status] = self.statuses.get(resp.status, 0) + 1
            except (aiohttp.ClientError, TimeoutError):
                self.errors += 1


async def lease_spec(api: ApiClient) -> dict[str, Any]:
    lease = await get_object(api, LEASES, LEASE, NS)
    spec: dict[str, Any] = lease["spec"]
    return spec


async def test_a_flood_of_made_up_tokens_does_not_cost_the_leader_its_lease(
    cluster: Cluster, controller: ControllerProcess
) -> None:
    async with await api_client(cluster.cp.kubeconfig) as api:
        await flood_the_leader(cluster, controller, api)


async def flood_the_leader(cluster: Cluster, controller: ControllerProcess, api: ApiClient) -> None:
    url = controller.metrics_url
    await wait_for(lambda: serving(url), 60, f"the controller serving {url}")

    async def leading() -> dict[str, Any] | None:
        try:
            spec = await lease_spec(api)
        except Exception:
            return None
        holder = str(spec.get("holderIdentity") or "")
        return spec if holder.startswith(f"{controller.name}_") else None

    before = await wait_for(leading, 60, "the controller leading")
    status, text = await fetch(url, cluster.reader)
    assert status == 200, text  # the scraper, known before the flood
    flood = Flood(url)
    flooding = asyncio.create_task(flood.run())
    renewals: set[str] = set()
    scraped: list[tuple[int, str]] = []
    try:

        async def flooded_long_enough() -> bool:
            assert controller.proc.poll() is None, controller.log_path.read_text()[-3000:]
            spec = await lease_spec(api)
            assert spec["holderIdentity"] == before["holderIdentity"], spec
            assert spec.get("leaseTransitions") == before.get("leaseTransitions"), spec
            renewals.add(str(spec.get("renewTime")))
            if flood.sent >= FLOOD_REQUESTS // 2 and not scraped:
                # an authorized scrape in the middle of the flood
                scraped.append(await fetch(url, cluster.reader))
            return flood.sent >= FLOOD_REQUESTS and len(renewals) > FLOOD_RENEWALS

        await wait_for(flooded_long_enough, 180, "the flood sent and the Lease renewed")
    finally:
        flood.stop.set()
        with contextlib.suppress(Exception):
            await flooding
    print(
        f"flood: {flood.sent} requests with made-up tokens over {FLOOD_CONNECTIONS} "
        f"connections, answers {dict(sorted(flood.statuses.items()))}, {flood.errors} "
        f"errors; {len(renewals)} Lease renewals seen meanwhile, same holder"
    )
    ((scrape_status, scrape_text),) = scraped
    assert scrape_status == 200, scrape_text
    assert "\nbootc_operator_leader 1" in scrape_text, scrape_text[:2000]
    # beyond the review limits the made-up tokens were refused at once, unreviewed
    assert flood.statuses.get(503, 0) > 0, flood.statuses
    assert set(flood.statuses) <= {401, 503}, flood.statuses
    assert controller.proc.poll() is None
    log = controller.log_path.read_text()
    assert "leadership lost" not in log
    assert "without a token review" in log  # the one line a minute counting them
    after = await lease_spec(api)
    assert after["holderIdentity"] == before["holderIdentity"]
