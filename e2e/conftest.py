"""Fixtures of the e2e tier, shared by every module (helpers are in ``e2e/helpers.py``).

``control_plane`` is a sync, session-scoped :class:`hack.testenv.ControlPlane`
(etcd + kube-apiserver + kube-controller-manager, CRDs installed); it is torn
down at the end of the session whatever happens. ``api`` is a
kubernetes_asyncio ``ApiClient`` for it, closed after each test. When a test
that used the control plane fails, the tails of the component logs are
attached to its report.

Registries (below): ``registry``, ``private_registry``, ``make_registry``. Nodes:
``fleet`` (simulated daemons in this process, ``hack.testenv.fleet``) and
``hosted`` (real daemon processes on simulated hosts, ``e2e.hostsenv``). Hosts of the
daemon tier: ``kit`` (``e2e.hostkit``), once per host kind of ``--host=fake|real|both``
(default both: a test taking ``kit`` runs on the fake bootc and on the real one).

Tests share the control plane: give objects unique names
(``e2e.helpers.unique_name``) and delete what you create. Synchronise with
``hack.testenv.wait_for``, never with sleeps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from types import FrameType

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import NODES, ApiError
from bootc_operator.kube.rest import delete_object
from e2e.daemonenv import Daemons, delete_bootc_node
from e2e.helpers import unique_name
from e2e.hostkit import HOST_KINDS, FakeKit, Kit, RealKit, real_build
from e2e.hostsenv import HostedNodes
from hack.realbootc.build import built, start_build
from hack.simlib import Sim
from hack.testenv import ControlPlane, api_client
from hack.testenv.controlplane import ADMISSION_DIR
from hack.testenv.fleet import Fleet
from hack.testenv.registry import Registry


def _interrupt_on_sigterm() -> None:
    """Turn SIGTERM (e.g. from `timeout`) into KeyboardInterrupt so fixtures tear down.

    Components die with the pytest process anyway (PR_SET_PDEATHSIG); this also
    gets the state directory removed.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills outright
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--host",
        choices=(*HOST_KINDS, "both"),
        default="both",
        help="the bootc hosts of the daemon tier: the fake, the real bootc, or both (default)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kit" in metafunc.fixturenames:
        choice = metafunc.config.getoption("--host")
        kinds = HOST_KINDS if choice == "both" else (choice,)
        # the real host's cases carry the realbootc marker: hack/test.sh runs them
        # once the bootc build is there (docs/development.md)
        params = [
            pytest.param(kind, marks=pytest.mark.realbootc) if kind == "real" else kind
            for kind in kinds
        ]
        metafunc.parametrize("kit", params, indirect=True)


#: how long the first real-bootc test may wait for a cold bootc build (minutes on 2 cores)
REAL_BUILD_TIMEOUT = 3600
_background_build: list[subprocess.Popen[bytes]] = []


def _needs_real_bootc(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    kit = callspec.params.get("kit") if callspec is not None else None
    return kit == "real" or "real" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """When real-bootc tests are selected and the bootc build is not cached, start it now
    in the background (``hack.realbootc.build``) and let those tests wait for it beyond
    the usual per-test timeout."""
    real = [item for item in items if _needs_real_bootc(item)]
    if not real or os.geteuid() != 0 or built() is not None:
        return
    _background_build.append(start_build(Path(tempfile.gettempdir()) / "build-bootc.log"))
    for item in real:
        item.add_marker(pytest.mark.timeout(REAL_BUILD_TIMEOUT))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc in _background_build:  # never leave a build running after the session
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()


@pytest.fixture
async def kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Kit]:
    """The host kind this test runs on (``e2e.hostkit``); its hosts end with the test."""
    made: Kit
    if request.param == "fake":
        made = FakeKit(tmp_path, lambda: request.getfixturevalue("registry"))
    else:
        made = RealKit(tmp_path, request.getfixturevalue("registry"), real_build())
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    _interrupt_on_sigterm()
    # with the daemons' node-scope policy, as installed: without it nothing is sealed
    with ControlPlane(admission_dir=ADMISSION_DIR) as cp:
        yield cp


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    client = await api_client(control_plane.kubeconfig)
    async with client:
        yield client


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    cp = getattr(item, "funcargs", {}).get("control_plane")
    if report.failed and isinstance(cp, ControlPlane):
        for name, proc in cp.processes.items():
            report.sections.append((f"{name} log (last 30 lines)", proc.tail(30)))
    sim = getattr(item, "funcargs", {}).get("sim")
    if report.failed and isinstance(sim, Sim):
        from e2e.simenv import sim_log_tails  # noqa: PLC0415

        for title, text in sim_log_tails(sim):
            report.sections.append((f"{title} (last 40 lines)", text))
    return report


# ------------------------------------------------------------------ registries
#
# A real registry (Debian's docker-registry, hack/testenv/registry.py) on loopback.
# ``registry``: open, plain HTTP (clients list it as insecure: ``registry.options()``).
# ``private_registry``: htpasswd auth (``registry.auth``) over TLS with a generated CA
# (``registry.ca_file``; ``registry.options()`` trusts it). Both live for the session:
# push under unique repository names and never stop them. ``make_registry(...)``
# gives a test its own registry (same arguments as ``Registry``), e.g. to stop it.

PRIVATE_REGISTRY_USER = ("bootc-puller", "pull-secret-password")


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry-open")) as reg:
        yield reg


@pytest.fixture(scope="session")
def private_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(
        tmp_path_factory.mktemp("registry-private"), auth=PRIVATE_REGISTRY_USER, tls=True
    ) as reg:
        yield reg


@pytest.fixture
def make_registry(tmp_path: Path) -> Iterator[Callable[..., Registry]]:
    made: list[Registry] = []

    def make(*, auth: tuple[str, str] | None = None, tls: bool = False) -> Registry:
        reg = Registry(tmp_path / f"registry-{len(made)}", auth=auth, tls=tls)
        made.append(reg)
        return reg.start()

    yield make
    for reg in made:
        reg.close()


@pytest.fixture
async def fleet(api: ApiClient) -> AsyncIterator[Fleet]:
    """Simulated daemons (fast stage and reboot); their Nodes are deleted afterwards."""
    f = Fleet(api, stage_delay=0.1, reboot_delay=0.3)
    await f.start()
    try:
        yield f
    finally:
        await f.stop()
        for name in list(f.hosts):
            with contextlib.suppress(ApiError):
                await delete_object(api, NODES, name)


@pytest.fixture
async def hosted(
    api: ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[HostedNodes]:
    """Real daemons on simulated hosts, their reboots simulated; Nodes deleted afterwards."""
    daemons = Daemons(control_plane.kubeconfig, tmp_path / "logs")
    async with HostedNodes(api, daemons, tmp_path / "hosts") as nodes:
        yield nodes


@pytest.fixture
async def daemons(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Daemons]:
    """Real daemon processes (``e2e.daemonenv``), all stopped at the end."""
    ds = Daemons(control_plane.kubeconfig, tmp_path / "logs")
    try:
        yield ds
    finally:
        await ds.stop_all()


@pytest.fixture
async def node(api: ApiClient) -> AsyncIterator[str]:
    """A unique node name; its BootcNode (if a test created one) is deleted at the end."""
    name = unique_name("node")
    try:
        yield name
    finally:
        await delete_bootc_node(api, name)
