"""Faults for a running simulation (``hack/sim fault ...``): one per gate, to try it out.

=============  ======  ==================================================  ==================
kind           target  effect                                              picked up by
=============  ======  ==================================================  ==================
not-ready      NODE    from its next reboot on, the Node stays NotReady:   the node simulator
                       the host boots and its daemon runs, but the
                       "kubelet" never reports Ready (as when the new
                       image broke the CNI) until cleared
boot-fail      NODE    from its next boot on, the host's boot assessment   the simulated host
                       fails (``greenboot-healthcheck.service`` or
                       ``--unit``): ``boot-complete.target`` is never
                       reached (``hack.fakebootc.boot``)
drain-block    NODE    a Pod bound to the node (``default/sim-drain-       the apiserver
                       block-NODE``) under a PodDisruptionBudget with
                       ``minAvailable: 1``: its eviction is refused, so
                       the node's drain waits
autoscaler     NODE    the Node gets Cluster Autoscaler's                  the apiserver
                       ``ToBeDeletedByClusterAutoscaler`` taint (value:
                       the time, ``NoSchedule``), as when it is about to
                       remove the node: the pool shows it leaving and
                       gives it no slot; cleared, the taint goes
registry-down  -       the simulation's OCI registry is stopped (same      the supervisor
                       port, images kept): tag resolution and pulls fail
alert          NAME    an alert NAME (default ``SimulatedIncident``,       the sim's Prometheus
                       ``severity="critical"``) fires in the simulation's
                       Prometheus (``hack/sim up --prometheus``)
=============  ======  ==================================================  ==================

Every active fault is recorded in ``DIR/control/faults.json`` (``fault list``
shows it; ``fault clear [KIND] [TARGET]`` undoes and forgets them). Nothing is
restarted: the node simulator and the supervisor re-read that file
(``FaultWatch``, only when it changed), the simulated host reads its own state at
every boot, the Pod and budget are objects in the apiserver, and Prometheus
reloads its rule files. The commands return once the fault is in place
(``registry-down``: the registry no longer answers; ``alert``: Prometheus
reports it firing), or fail with one line saying why it cannot apply.

The pure parts (the records, the ``clear`` arguments, the objects and rules a
fault adds) are unit-tested; ``apply`` and ``clear`` are the I/O.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import yaml

from bootc_operator.policy.autoscaler import CLUSTER_AUTOSCALER_TAINT
from hack.fakebootc.boot import DEFAULT_CHECK_UNIT
from hack.simlib.common import CONTROL_DIR, SimInfo, read_json, write_json
from hack.testenv.procs import pid_alive
from hack.testenv.prometheus import PrometheusClient, PrometheusError, alert_rule

if TYPE_CHECKING:
    import subprocess

    from hack.simlib.hosts import SimHost

NOT_READY: Final = "not-ready"
BOOT_FAIL: Final = "boot-fail"
DRAIN_BLOCK: Final = "drain-block"
AUTOSCALER: Final = "autoscaler"
REGISTRY_DOWN: Final = "registry-down"
ALERT: Final = "alert"
#: kind -> what its target is ("" for none)
KINDS: Final[Mapping[str, str]] = {
    NOT_READY: "NODE",
    BOOT_FAIL: "NODE",
    DRAIN_BLOCK: "NODE",
    AUTOSCALER: "NODE",
    REGISTRY_DOWN: "",
    ALERT: "NAME",
}
FAULTS_FILE: Final = "faults.json"
DEFAULT_ALERT: Final = "SimulatedIncident"
DEFAULT_ALERT_LABELS: Final[Mapping[str, str]] = {"severity": "critical"}
#: the rules file (and group) of the fired alerts in the sim's Prometheus
ALERT_RULES: Final = "sim-faults"
DRAIN_BLOCK_NAMESPACE: Final = "default"
DRAIN_BLOCK_LABEL: Final = "sim.bootc.dev/drain-block"
#: how long a command waits for its fault to take effect (or to be undone)
EFFECT_TIMEOUT: Final = 60.0


class FaultError(RuntimeError):
    """A fault that cannot be applied or cleared (the message is one line)."""


@dataclass(frozen=True)
class Fault:
    """One active fault, as ``faults.json`` records it."""

    kind: str
    #: the node (not-ready, boot-fail, drain-block, autoscaler), the alert's name, or ""
    target: str = ""
    #: kind-specific details: boot-fail's ``unit``, an alert's ``labels``
    details: Mapping[str, Any] = field(default_factory=dict)
    #: when it was applied (UTC, RFC 3339)
    since: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.target)

    @property
    def name(self) -> str:
        """``not-ready worker-2``, ``registry-down``."""
        return f"{self.kind} {self.target}" if self.target else self.kind

    def describe(self) -> str:
        """One line for ``fault list``."""
        what = {
            NOT_READY: "the Node stays NotReady from its next reboot on",
            BOOT_FAIL: "boots fail their assessment ({unit}) from the next boot on",
            DRAIN_BLOCK: (
                f"{DRAIN_BLOCK_NAMESPACE}/{drain_block_name(self.target)} cannot be evicted "
                "(PodDisruptionBudget minAvailable 1)"
            ),
            AUTOSCALER: (
                f"the Node carries the {CLUSTER_AUTOSCALER_TAINT} taint: an autoscaler "
                "is removing it (shown as leaving, no reboot slot)"
            ),
            REGISTRY_DOWN: "the registry is stopped: tag resolution and pulls fail",
            ALERT: "fires in Prometheus ({labels})",
        }[self.kind]
        labels = ", ".join(
            f'{k}="{v}"' for k, v in sorted((self.details.get("labels") or {}).items())
        )
        what = what.format(unit=self.details.get("unit") or DEFAULT_CHECK_UNIT, labels=labels)
        return f"{self.name}: {what} (since {self.since})"

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Fault:
        return cls(
            kind=str(doc.get("kind", "")),
            target=str(doc.get("target") or ""),
            details=dict(doc.get("details") or {}),
            since=str(doc.get("since") or ""),
        )


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ the record (pure)


def parse_faults(doc: Any) -> list[Fault]:
    """The faults of a ``faults.json`` document (anything else: none)."""
    items = doc.get("faults") if isinstance(doc, dict) else None
    return [Fault.from_dict(item) for item in items or () if isinstance(item, dict)]


def dump_faults(faults: Sequence[Fault]) -> dict[str, Any]:
    return {"faults": [asdict(f) | {"details": dict(f.details)} for f in faults]}


def with_fault(faults: Sequence[Fault], fault: Fault) -> list[Fault]:
    """``faults`` with ``fault`` added (replacing one of the same kind and target)."""
    return [f for f in faults if f.key != fault.key] + [fault]


def matching(faults: Sequence[Fault], kind: str | None, target: str | None) -> list[Fault]:
    """The faults ``fault clear KIND TARGET`` clears (None: any)."""
    return [
        f
        for f in faults
        if (kind is None or f.kind == kind) and (target is None or f.target == target)
    ]


def parse_clear(words: Sequence[str]) -> tuple[str | None, str | None]:
    """``fault clear [KIND] [TARGET]`` → (kind, target); a lone word that is not a kind
    is a target (``fault clear worker-2``: every fault of worker-2)."""
    if len(words) > 2:
        raise FaultError(f"fault clear takes at most KIND and TARGET, not {' '.join(words)}")
    if not words:
        return None, None
    first = words[0]
    if first in KINDS:
        target = words[1] if len(words) == 2 else None
        if target is not None and not KINDS[first]:
            raise FaultError(f"{first} has no target (got {target})")
        return first, target
    if len(words) == 2:
        raise FaultError(f"unknown fault kind {first!r}; known: {', '.join(KINDS)}")
    return None, first


def not_ready_nodes(faults: Sequence[Fault]) -> set[str]:
    return {f.target for f in faults if f.kind == NOT_READY}


def registry_down(faults: Sequence[Fault]) -> bool:
    return any(f.kind == REGISTRY_DOWN for f in faults)


def drain_block_name(node: str) -> str:
    return f"sim-drain-block-{node}"


def drain_block_manifests(node: str) -> list[dict[str, Any]]:
    """A Pod bound to ``node`` (kwok runs it) and a budget that forbids evicting it.

    ``minAvailable: 1`` (an integer) works for a Pod without a controller, where
    ``maxUnavailable`` or a percentage would leave the budget unable to count it."""
    name = drain_block_name(node)
    labels = {DRAIN_BLOCK_LABEL: node}
    meta = {"name": name, "namespace": DRAIN_BLOCK_NAMESPACE, "labels": labels}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "guard", "image": "registry.example.com/guard:1"}],
            "terminationGracePeriodSeconds": 0,
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta,
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }
    return [pod, budget]


def autoscaler_taint(node: str, now: float) -> list[str]:
    """The ``kubectl taint`` arguments that mark ``node`` as Cluster Autoscaler does
    before removing it (the taint's value: the time it decided, in Unix seconds)."""
    return [
        "taint",
        "node",
        node,
        f"{CLUSTER_AUTOSCALER_TAINT}={int(now)}:NoSchedule",
        "--overwrite",
    ]


def autoscaler_untaint(node: str) -> list[str]:
    """The ``kubectl taint`` arguments that take ``autoscaler_taint`` off again."""
    return ["taint", "node", node, f"{CLUSTER_AUTOSCALER_TAINT}:NoSchedule-"]


def alert_rules(faults: Sequence[Fault]) -> dict[str, Any] | None:
    """The rules file firing every ``alert`` fault (None when there is none)."""
    rules = [
        alert_rule(f.target, "vector(1)", f.details.get("labels") or None)
        for f in sorted(faults, key=lambda f: f.target)
        if f.kind == ALERT
    ]
    return {"groups": [{"name": ALERT_RULES, "rules": rules}]} if rules else None


# ------------------------------------------------------------------ the record (files)


def faults_path(state_dir: Path) -> Path:
    return state_dir / CONTROL_DIR / FAULTS_FILE


def load(state_dir: Path) -> list[Fault]:
    return parse_faults(read_json(faults_path(state_dir)))


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    control = state_dir / CONTROL_DIR
    control.mkdir(parents=True, exist_ok=True)
    with (control / f"{FAULTS_FILE}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def update(state_dir: Path, change: Callable[[list[Fault]], list[Fault]]) -> list[Fault]:
    """Read-modify-write ``faults.json`` under a lock; returns the new list."""
    with _locked(state_dir):
        faults = change(load(state_dir))
        write_json(faults_path(state_dir), dump_faults(faults))
        return faults


class FaultWatch:
    """The active faults of ``state_dir``, re-read only when ``faults.json`` changed
    (the node simulator asks five times a second)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = faults_path(state_dir)
        self._stamp: tuple[int, int] | None = None
        self._faults: list[Fault] = []

    def read(self) -> list[Fault]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._faults = None, []
            return []
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            self._faults = parse_faults(read_json(self.path))
            self._stamp = stamp
        return list(self._faults)


# ------------------------------------------------------------------ applying (I/O)


class SimOps(Protocol):
    """What applying a fault needs of a running simulation (``hack.simlib.sim.SimOps``
    is one; this module does not import it: ``sim`` imports ``faults``)."""

    @property
    def info(self) -> SimInfo: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def nodes(self) -> list[str]: ...

    def any_host(self, node: str) -> SimHost: ...

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]: ...


def check_running(sim: SimOps) -> None:
    if not sim.info.ready or not pid_alive(sim.info.owner):
        raise FaultError(
            f"the simulation in {sim.state_dir} is not running (start it with: hack/sim up)"
        )


def check_node(sim: SimOps, node: str) -> None:
    if node not in sim.nodes:
        raise FaultError(f"no node {node!r} in this simulation (nodes: {', '.join(sim.nodes)})")


def _registry_answers(registry: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{registry}/v2/", timeout=2.0) as resp:
            return int(resp.status) == 200
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (urllib.error.URLError, OSError):
        return False


def _wait(predicate: Callable[[], bool], what: str, timeout: float = EFFECT_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise FaultError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.2)


def _prometheus(sim: SimOps) -> PrometheusClient:
    if not sim.info.prometheus:
        raise FaultError(
            "this simulation runs no Prometheus, so there is nothing to fire an alert in: "
            "start it with hack/sim up --prometheus"
        )
    return PrometheusClient(sim.info.prometheus)


def _sync_alerts(sim: SimOps, faults: Sequence[Fault]) -> None:
    """Write the fired alerts' rules file and have Prometheus reload it."""
    prom = _prometheus(sim)
    path = sim.state_dir / "prometheus" / "rules" / f"{ALERT_RULES}.yml"
    rules = alert_rules(faults)
    if rules is None:
        path.unlink(missing_ok=True)
    else:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(yaml.safe_dump(rules, sort_keys=False))
        tmp.replace(path)
    try:
        prom.reload()
    except (PrometheusError, OSError) as exc:
        raise FaultError(f"Prometheus at {prom.url} did not reload its rules: {exc}") from None


def _alert_state(sim: SimOps, fault: Fault, firing: bool) -> Callable[[], bool]:
    prom = _prometheus(sim)
    want = {"alertname": fault.target, **(fault.details.get("labels") or {})}

    def check() -> bool:
        try:
            if firing:
                return prom.reported_firing(want) is not None
            return prom.reported_gone(fault.target)
        except (PrometheusError, OSError):
            return False

    return check


def apply(sim: SimOps, fault: Fault) -> Fault:
    """Put ``fault`` in place on the running simulation and record it; returns it
    (with ``since``)."""
    check_running(sim)
    if KINDS[fault.kind] == "NODE":
        check_node(sim, fault.target)
    fault = Fault(fault.kind, fault.target, fault.details, now_text())
    if fault.kind == REGISTRY_DOWN and not sim.info.registry:
        raise FaultError("this simulation has no registry (it was started with --no-registry)")
    if fault.kind == REGISTRY_DOWN and sim.info.config.registry:
        raise FaultError(
            f"this cluster pulls from another simulation's registry ({sim.info.registry}); "
            "stop it there (hack/sim --cluster 1 fault registry-down)"
        )
    if fault.kind == ALERT:
        _prometheus(sim)
    if fault.kind == BOOT_FAIL:
        sim.any_host(fault.target).set_fault(BOOT_FAIL, message=fault.details.get("unit") or None)
    elif fault.kind == AUTOSCALER:
        sim.kubectl(*autoscaler_taint(fault.target, time.time()))
    elif fault.kind == DRAIN_BLOCK:
        items = drain_block_manifests(fault.target)
        sim.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )
    faults = update(sim.state_dir, lambda fs: with_fault(fs, fault))
    if fault.kind == REGISTRY_DOWN:
        _wait(lambda: not _registry_answers(sim.info.registry), "the registry stopping")
    elif fault.kind == ALERT:
        _sync_alerts(sim, faults)
        _wait(_alert_state(sim, fault, True), f"Prometheus reporting {fault.target} firing")
    return fault


def clear(sim: SimOps, kind: str | None = None, target: str | None = None) -> list[Fault]:
    """Undo and forget the faults ``fault clear KIND TARGET`` names; returns them."""
    check_running(sim)
    chosen = matching(load(sim.state_dir), kind, target)
    for fault in chosen:
        if fault.kind == BOOT_FAIL:
            sim.any_host(fault.target).set_fault(BOOT_FAIL, False)
        elif fault.kind == AUTOSCALER:
            res = sim.kubectl(*autoscaler_untaint(fault.target), check=False)
            if res.returncode != 0 and "not found" not in res.stderr:  # gone already: fine
                raise FaultError(
                    f"could not take the {CLUSTER_AUTOSCALER_TAINT} taint off {fault.target}: "
                    f"{res.stderr.strip()}"
                )
        elif fault.kind == DRAIN_BLOCK:
            name = drain_block_name(fault.target)
            for resource in ("pod", "poddisruptionbudget"):
                sim.kubectl(
                    "delete",
                    resource,
                    name,
                    f"--namespace={DRAIN_BLOCK_NAMESPACE}",
                    "--ignore-not-found",
                    "--wait=false",
                )
    keys = {f.key for f in chosen}
    faults = update(sim.state_dir, lambda fs: [f for f in fs if f.key not in keys])
    if any(f.kind == REGISTRY_DOWN for f in chosen):
        _wait(lambda: _registry_answers(sim.info.registry), "the registry answering again")
    alerts = [f for f in chosen if f.kind == ALERT]
    if alerts:
        _sync_alerts(sim, faults)
        for fault in alerts:
            _wait(_alert_state(sim, fault, False), f"Prometheus reporting {fault.target} gone")
    return chosen
