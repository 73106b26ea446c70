"""The daemon's async shell (``daemon.agent.Agent.reconcile``) with the API and the host
replaced by recorders: the order of writes and commands, no-op writes, when bootc
status is (not) re-read, the reboot permit, applying a download-only deployment, soft
reboots (``lastRebootKind``, the fallback to a full reboot, the reboot counted after
it), API failures (one log line each, capped backoff, nothing done on the host), and an
image staged out of band (logged, named in the status, replaced; our own switch never
counts as one).
The real thing runs end to end in ``e2e/test_daemon.py`` and ``e2e/test_soft_reboot.py``."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY

from bootc_operator.api import constants as c
from bootc_operator.daemon import agent as agent_mod
from bootc_operator.daemon.agent import Agent, Config
from bootc_operator.daemon.assessment import BootProbe
from bootc_operator.daemon.bootc_status import HostStatus, parse_document
from bootc_operator.daemon.decide import RetryPolicy
from bootc_operator.daemon.hostcmd import HostCommandError, HostCommands
from bootc_operator.kube import ApiError
from bootc_operator.sealing import NodeKey, seal

NODE = "node-1"
REPO = "quay.io/example/os"
A, B = (f"{REPO}@sha256:{x * 64}" for x in "ab")


DRAINED = {c.IN_REBOOT_SLOT_ANNOTATION: "t", c.REBOOT_REQUESTED_ANNOTATION: "t"}


def entry(ref: str, **flags: Any) -> dict[str, Any]:
    return {"image": {"image": {"image": ref}, "imageDigest": ref.partition("@")[2]}, **flags}


def host_doc(
    booted: str,
    staged: str | None = None,
    *,
    download_only: bool = False,
    rollback: str | None = None,
    queued: bool = False,
    soft: bool = False,
) -> HostStatus:
    """``soft``: the staged deployment is ``softRebootCapable``."""
    flags = {"downloadOnly": download_only, "softRebootCapable": soft}
    return parse_document(
        {
            "apiVersion": "org.containers.bootc/v1",
            "kind": "BootcHost",
            "status": {
                "booted": entry(booted),
                "staged": entry(staged, **flags) if staged else None,
                "rollback": entry(rollback) if rollback else None,
                "rollbackQueued": queued,
            },
        }
    )


class FakeHost:
    """Stands in for ``HostCommands``; records into the shared journal."""

    prefix: tuple[str, ...] = ()

    def __init__(self, journal: list[Any], status: HostStatus) -> None:
        self.journal = journal
        self.doc = status
        self.shutting_down = False
        self.switch_error: str | None = None
        self.rollback_error: str | None = None
        self.soft_reboot_error: str | None = None
        #: what the next boot probes return, in order (then: a completed boot); not
        #: journaled, so the journals of the other tests stay about bootc
        self.probes: list[BootProbe] = []
        self.probe_reads = 0

    async def boot_probe(self) -> BootProbe:
        self.probe_reads += 1
        return self.probes.pop(0) if self.probes else BootProbe(target="active")

    async def status(self) -> HostStatus:
        self.journal.append("status")
        return self.doc

    async def switch(self, image: str) -> None:
        self.journal.append(("switch", image))
        if self.switch_error:
            raise HostCommandError(self.switch_error)
        self.doc = host_doc(A, image)

    async def reboot(self) -> None:
        self.journal.append("reboot")

    async def soft_reboot(self) -> None:
        self.journal.append("soft-reboot")
        if self.soft_reboot_error:
            raise HostCommandError(self.soft_reboot_error)

    async def rollback(self) -> None:
        """``bootc rollback``: toggles the queued rollback (a staged deployment is dropped)."""
        self.journal.append("rollback")
        if self.rollback_error:
            raise HostCommandError(self.rollback_error)
        body = self.doc.status
        booted, rollback = body.booted, body.rollback
        assert booted is not None and booted.image is not None
        assert rollback is not None and rollback.image is not None
        self.doc = host_doc(
            booted.image.image.image,
            rollback=rollback.image.image.image,
            queued=not body.rollback_queued,
        )

    async def apply_downloaded(self) -> None:
        self.journal.append("apply")
        staged = self.doc.staged
        if staged is not None and staged.image is not None:
            self.doc = host_doc(A, staged.image.image.image)

    async def stop_switch(self, *, block: bool = True) -> None:
        self.journal.append("stop")


class Api:
    """The BootcNode on the "server": merge patches to its status are recorded."""

    def __init__(self, journal: list[Any], obj: dict[str, Any]) -> None:
        self.journal = journal
        self.obj = obj
        #: raised by the next patches instead of writing
        self.error: Exception | None = None
        #: status fields the "CRD" does not have (pruned, as by a structural schema)
        self.unknown_fields: set[str] = set()

    async def patch(self, _api: Any, _res: Any, name: str, patch: Any, *_: Any, **kw: Any) -> Any:
        assert name == NODE and kw.get("subresource") == "status"
        if self.error is not None:
            self.journal.append("patch denied")
            raise self.error
        status = {
            k: v
            for k, v in patch["status"].items()
            if v is not None and k not in self.unknown_fields
        }
        idle: dict[str, Any] = next(
            (x for x in status["conditions"] if x["type"] == c.COND_IDLE), {}
        )
        self.journal.append(("patch", idle.get("reason")))
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.obj["status"] = status
        return copy.deepcopy(self.obj)


def bootc_node(
    desired: str,
    state: str = "Staged",
    generation: int = 1,
    annotations: dict[str, str] | None = None,
    policy: str | None = None,
) -> dict[str, Any]:
    spec = {"desiredImage": desired, "desiredImageState": state}
    if policy is not None:
        spec["rebootPolicy"] = policy
    return {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {
            "name": NODE,
            "uid": "u1",
            "generation": generation,
            "resourceVersion": "10",
            "annotations": annotations or {},
        },
        "spec": spec,
    }


@pytest.fixture
def journal() -> list[Any]:
    return []


def make_agent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    journal: list[Any],
    obj: dict[str, Any],
    host: FakeHost,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Agent, Api]:
    api = Api(journal, obj)
    monkeypatch.setattr(agent_mod, "patch_object", api.patch)
    config = Config(NODE, tmp_path, 3600.0, RetryPolicy(10.0, 300.0))
    agent = Agent(cast(Any, None), config, cast(HostCommands, host), clock=clock)
    agent.informer.replace([copy.deepcopy(obj)])  # as if listed from the API server
    key = agent.queue.get_nowait()  # the add event's key: the tests call reconcile directly
    assert key == NODE
    agent.queue.done(key)
    return agent, api


async def test_rebooting_is_written_before_the_reboot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B))
    node = bootc_node(B, "Booted", annotations=DRAINED)
    agent, _ = make_agent(tmp_path, monkeypatch, journal, node, host)
    assert await agent.reconcile(NODE) is None
    assert journal == ["status", ("patch", c.REASON_REBOOTING), "reboot"]
    # once requested, never again from this process
    agent.host_changed()
    await agent.reconcile(NODE)
    assert journal[3:] == ["status"]


async def test_no_write_without_a_change_and_no_status_read_on_a_status_echo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE)]
    # the informer delivers our own write back: nothing to read, nothing to write
    agent.informer.apply("MODIFIED", copy.deepcopy(api.obj))
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE)]
    # the host changed (inotify or poll): read again; same content, still no write
    agent.host_changed()
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE), "status"]
    # a new spec generation re-reads status before deciding
    changed = bootc_node(A, generation=2)
    changed["metadata"]["resourceVersion"] = "20"
    changed["status"] = api.obj["status"]
    agent.informer.apply("MODIFIED", changed)
    await agent.reconcile(NODE)
    assert journal[3:] == ["status", ("patch", c.REASON_IDLE)]  # observedGeneration moved


async def test_a_failed_switch_is_reported_and_retried_after_the_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    host.switch_error = "bootc switch X failed (exit code 1): error: nope"
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(B), host)
    assert await agent.reconcile(NODE) is None
    await asyncio.wait_for(next_trigger(agent), 10)
    assert journal == ["status", ("patch", c.REASON_STAGING), ("switch", B)]
    requeue = await agent.reconcile(NODE)
    assert requeue is not None and 0 < requeue <= 10.0
    assert journal[3:] == ["status", ("patch", c.REASON_IDLE)]
    degraded = next(x for x in api.obj["status"]["conditions"] if x["type"] == c.COND_DEGRADED)
    assert (degraded["status"], degraded["message"]) == ("True", host.switch_error)


async def test_a_switch_is_staged_then_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(B), host)
    await agent.reconcile(NODE)
    await asyncio.wait_for(next_trigger(agent), 10)
    await agent.reconcile(NODE)
    assert journal == [
        "status",
        ("patch", c.REASON_STAGING),
        ("switch", B),
        "status",
        ("patch", c.REASON_STAGED),
    ]
    assert api.obj["status"]["staged"]["image"] == B


async def next_trigger(agent: Agent) -> None:
    """Wait until something enqueues the node (here: the end of the switch task)."""
    key = await agent.queue.get()
    agent.queue.done(key)


# ------------------------------------------------------------------ issue 13


def degraded_cond(api: Api) -> dict[str, Any]:
    conditions = api.obj["status"]["conditions"]
    return next(x for x in conditions if x["type"] == c.COND_DEGRADED)


async def test_booted_without_the_slot_annotations_is_refused_until_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(B, "Booted"), host)
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_STAGED)]
    deg = degraded_cond(api)
    assert (deg["status"], deg["reason"]) == ("True", c.REASON_REBOOT_NOT_ALLOWED)
    assert "bootc.dev/in-reboot-slot and bootc.dev/reboot-requested" in deg["message"]
    # the rollout's annotations arrive (metadata only: the generation does not move)
    granted = copy.deepcopy(api.obj)
    granted["metadata"]["annotations"] = dict(DRAINED)
    granted["metadata"]["resourceVersion"] = "30"
    agent.informer.apply("MODIFIED", granted)
    await agent.reconcile(NODE)
    assert journal[2:] == [("patch", c.REASON_REBOOTING), "reboot"]
    deg = degraded_cond(api)
    assert (deg["status"], deg["reason"]) == ("False", c.REASON_HEALTHY)


async def test_a_download_only_deployment_is_applied_then_rebooted_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B, download_only=True))
    node = bootc_node(B, "Booted", annotations=DRAINED)
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_STAGED), "apply"]
    await asyncio.wait_for(next_trigger(agent), 10)  # applying marks the host status stale
    await agent.reconcile(NODE)
    assert journal[3:] == ["status", ("patch", c.REASON_REBOOTING), "reboot"]
    assert degraded_cond(api)["status"] == "False"


async def test_a_denied_status_write_is_one_line_with_capped_backoff(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    journal: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = FakeHost(journal, host_doc(A, B))
    node = bootc_node(B, "Booted", annotations=DRAINED)
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    reason = (
        f'bootcnodes.node.bootc.dev "{NODE}" is forbidden: ValidatingAdmissionPolicy '
        "'bootc-operator-daemon-node-scope' denied request: bootc-operator daemon on node "
        f"other may only change BootcNode other, not {NODE}"
    )
    api.error = ApiError(403, "Forbidden", reason)
    caplog.set_level(logging.DEBUG, logger="daemon")
    delays = []
    for _ in range(8):
        delays.append(await agent.reconcile(NODE))
    # capped exponential backoff (10 s .. 300 s), and never a reboot without the status
    assert delays == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]
    assert "reboot" not in journal
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 8
    for record in warnings:
        assert record.exc_info is None and record.stack_info is None
        assert "\n" not in record.getMessage()
    assert warnings[0].getMessage() == (
        f"not allowed to write BootcNode {NODE}: {reason}; retrying in 10s"
    )
    # allowed again: written, acted on, and the backoff starts over
    api.error = None
    assert await agent.reconcile(NODE) is None
    assert journal[-2:] == [("patch", c.REASON_REBOOTING), "reboot"]
    api.error = ApiError(500, "InternalError", "etcdserver: request timed out")
    agent.host_changed()
    agent.queue.get_nowait()
    assert await agent.reconcile(NODE) is None  # nothing to write after the reboot request
    other = bootc_node(B, "Booted", generation=2, annotations=DRAINED)
    other["metadata"]["resourceVersion"] = "40"
    agent.informer.apply("MODIFIED", other)
    assert await agent.reconcile(NODE) == 10.0
    assert caplog.records[-1].getMessage() == (
        f"cannot write BootcNode {NODE}: the API server answered 500: "
        "etcdserver: request timed out; retrying in 10s"
    )


async def test_a_status_field_the_server_drops_is_not_rewritten_forever(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    journal: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    api.unknown_fields = {"bootedShort"}  # an older CRD: the schema prunes it
    await agent.reconcile(NODE)
    assert "bootedShort" not in api.obj["status"]
    agent.informer.apply("MODIFIED", copy.deepcopy(api.obj))
    agent.host_changed()
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE), "status"], "no second write"
    assert any("status.bootedShort" in r.getMessage() for r in caplog.records)


async def test_booted_short_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    await agent.reconcile(NODE)
    assert api.obj["status"]["bootedShort"] == "a" * 12


def with_pull_secret(node: dict[str, Any], secret_hash: str = "h") -> dict[str, Any]:
    node["spec"].update(
        pullSecretRef={"name": "pull", "namespace": "ns"}, pullSecretHash=secret_hash
    )
    return node


def seal_to_published_key(agent: Agent, api: Api, content: bytes) -> None:
    """What the controller does once the daemon published its key: seal the pull
    secret to it (a spec change: a new generation), seen by the daemon's informer."""
    status, spec = api.obj["status"], api.obj["spec"]
    spec["sealedPullSecret"] = seal(
        content, status["sealingKey"], node=NODE, secret_hash=spec["pullSecretHash"]
    ).to_wire()
    api.obj["metadata"]["generation"] += 1
    agent.informer.apply("MODIFIED", copy.deepcopy(api.obj))


CONFIG = b'{"auths": {"quay.io": {"auth": "dTpw"}}}'


async def test_a_switch_waits_for_the_pull_secret_sealed_to_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    """The daemon reads no Secret: it publishes a key, and stages once the controller
    sealed the pull secret to it; meanwhile it waits, saying so, not Degraded."""
    host = FakeHost(journal, host_doc(A))
    # sealed to the key of the daemon before a restart: no use to this one
    node = with_pull_secret(bootc_node(B))
    node["spec"]["sealedPullSecret"] = seal(
        CONFIG, NodeKey.generate().public, node=NODE, secret_hash="h"
    ).to_wire()
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    await agent.reconcile(NODE)
    key = api.obj["status"]["sealingKey"]
    assert len(base64.b64decode(key)) == 32
    idle = idle_cond(api)
    assert (idle["status"], idle["reason"]) == ("False", c.REASON_STAGING)
    assert idle["message"].startswith(f"waiting to stage {B}: pull secret ns/pull is not sealed")
    assert degraded_cond(api)["status"] == "False"
    assert not any(isinstance(e, tuple) and e[0] == "switch" for e in journal)
    assert not (tmp_path / "run/ostree/auth.json").exists()

    seal_to_published_key(agent, api, CONFIG)
    await agent.reconcile(NODE)
    await asyncio.wait_for(next_trigger(agent), 10)  # the switch task ends
    assert ("switch", B) in journal
    assert json.loads((tmp_path / "run/ostree/auth.json").read_bytes()) == json.loads(CONFIG)
    assert api.obj["status"]["sealingKey"] == key, "one key per process"


# ------------------------------------------------------------------ issue 16: boot assessment


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def assessment(api: Api) -> dict[str, Any] | None:
    found: dict[str, Any] | None = api.obj["status"].get("bootAssessment")
    return found


STARTING = BootProbe(target="inactive", system="starting")


async def test_the_boot_assessment_is_read_before_the_first_write_and_while_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    host.probes = [STARTING, STARTING]
    clock = Clock()
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host, clock)
    # the very first write already carries this boot's assessment
    assert await agent.reconcile(NODE) == 1.0
    assert journal == ["status", ("patch", c.REASON_IDLE)]
    assert assessment(api) == {
        "state": "Pending",
        "message": "boot-complete.target not reached yet (the system is starting)",
    }
    # a reconcile before the re-read is due reads nothing and keeps the schedule
    clock.now += 0.25
    assert await agent.reconcile(NODE) == 0.75
    assert host.probe_reads == 1
    # still Pending: read again, then after a longer delay (capped backoff)
    clock.now += 0.75
    assert await agent.reconcile(NODE) == 2.0
    assert host.probe_reads == 2
    assert len(journal) == 2, "the same assessment is not written again"
    # complete: written at once, never read again
    clock.now += 2.0
    assert await agent.reconcile(NODE) is None
    assert host.probe_reads == 3
    assert journal[2:] == [("patch", c.REASON_IDLE)]
    assert assessment(api) == {"state": "Complete", "message": "boot-complete.target reached"}
    clock.now += 1000.0
    agent.host_changed()
    assert await agent.reconcile(NODE) is None
    assert host.probe_reads == 3


async def test_a_failed_boot_is_final_and_an_unreadable_one_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    host.probes = [
        BootProbe(error="systemctl is-active boot-complete.target did not finish within 30s"),
        BootProbe(target="inactive", system="degraded", failed_units=("check.service",)),
    ]
    clock = Clock()
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host, clock)
    assert await agent.reconcile(NODE) == 1.0
    unknown = assessment(api)
    assert unknown is not None and unknown["state"] == "Unknown"
    assert "did not finish within 30s" in unknown["message"]
    assert degraded_cond(api)["status"] == "False", "reported, not a daemon problem"
    clock.now += 1.0
    assert await agent.reconcile(NODE) is None
    assert assessment(api) == {
        "state": "Failed",
        "message": "the boot finished without reaching boot-complete.target: "
        "failed units: check.service",
    }
    clock.now += 60.0
    assert await agent.reconcile(NODE) is None
    assert host.probe_reads == 2


async def test_a_pending_assessment_does_not_delay_a_failed_commands_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    # the sooner of the two wins: here the assessment (1 s) before the switch retry (10 s)
    host = FakeHost(journal, host_doc(A))
    host.probes = [STARTING] * 10
    host.switch_error = "bootc switch X failed (exit code 1): error: nope"
    clock = Clock()
    agent, _ = make_agent(tmp_path, monkeypatch, journal, bootc_node(B), host, clock)
    assert await agent.reconcile(NODE) == 1.0
    await asyncio.wait_for(next_trigger(agent), 10)
    clock.now += 0.5
    assert await agent.reconcile(NODE) == 0.5  # the switch's backoff is 10 s


# ------------------------------------------------------------------ issue 16: rollback


async def test_a_rollback_is_queued_then_rebooted_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    # B booted (it failed its health check), A the rollback deployment: desired A
    host = FakeHost(journal, host_doc(B, rollback=A))
    node = bootc_node(A, "Booted", annotations=DRAINED)
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    assert await agent.reconcile(NODE) == 0.0  # judged from a fresh status at once
    assert journal == ["status", ("patch", c.REASON_STAGING), "rollback"]
    idle = next(x for x in api.obj["status"]["conditions"] if x["type"] == c.COND_IDLE)
    assert idle["message"].startswith(f"rolling back to {A}")
    assert await agent.reconcile(NODE) is None
    assert journal[3:] == ["status", ("patch", c.REASON_REBOOTING), "reboot"]
    idle = next(x for x in api.obj["status"]["conditions"] if x["type"] == c.COND_IDLE)
    assert idle["message"] == f"rebooting into {A} (the rollback deployment)"
    assert ("switch", A) not in journal


async def test_a_failed_rollback_is_degraded_and_retried_after_the_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(B, rollback=A))
    host.rollback_error = "bootc rollback failed (exit code 1): error: Rollback: boom"
    clock = Clock()
    node = bootc_node(A, "Booted", annotations=DRAINED)
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host, clock)
    assert await agent.reconcile(NODE) == 0.0
    assert await agent.reconcile(NODE) == 10.0
    assert journal == [
        "status",
        ("patch", c.REASON_STAGING),
        "rollback",
        "status",
        ("patch", c.REASON_IDLE),
    ]
    assert (degraded_cond(api)["status"], degraded_cond(api)["message"]) == (
        "True",
        host.rollback_error,
    )
    # the backoff is over and the host behaves: queued, Degraded clears, reboot
    host.rollback_error = None
    clock.now += 10.0
    assert await agent.reconcile(NODE) == 0.0
    assert journal[5:] == [("patch", c.REASON_STAGING), "rollback"]
    assert await agent.reconcile(NODE) is None
    assert journal[7:] == ["status", ("patch", c.REASON_REBOOTING), "reboot"]
    assert degraded_cond(api)["status"] == "False"


# ------------------------------------------------------------------ issue 17: soft reboots

SOFT_ERROR = (
    "bootc upgrade --from-downloaded --apply --soft-reboot=required failed (exit code 1): "
    "error: Upgrading: Handling staged soft reboot: Handling soft reboot: Soft reboot was "
    "required but staged deployment is not soft-reboot capable"
)


def idle_cond(api: Api) -> dict[str, Any]:
    return next(x for x in api.obj["status"]["conditions"] if x["type"] == c.COND_IDLE)


def reboots(kind: str) -> float:
    found = REGISTRY.get_sample_value("bootc_operator_daemon_reboots_total", {"kind": kind})
    assert found is not None, "exported from the start"
    return found


async def test_a_soft_reboot_is_written_then_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B, soft=True))
    node = bootc_node(B, "Booted", annotations=DRAINED, policy="AllowSoftReboot")
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    assert await agent.reconcile(NODE) is None
    assert journal == ["status", ("patch", c.REASON_REBOOTING), "soft-reboot"]
    assert api.obj["status"]["lastRebootKind"] == "Soft"
    assert "(soft reboot: userspace restarts" in idle_cond(api)["message"]
    agent.host_changed()
    await agent.reconcile(NODE)
    assert journal[3:] == ["status"], "requested once per process and image"


async def test_reboot_only_reboots_fully_even_when_capable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B, soft=True))
    node = bootc_node(B, "Booted", annotations=DRAINED)
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_REBOOTING), "reboot"]
    assert api.obj["status"]["lastRebootKind"] == "Full"
    assert idle_cond(api)["message"] == f"rebooting into {B}"


async def test_a_failed_soft_reboot_is_followed_by_a_full_one_after_the_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B, soft=True))
    host.soft_reboot_error = SOFT_ERROR
    clock = Clock()
    node = bootc_node(B, "Booted", annotations=DRAINED, policy="AllowSoftReboot")
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host, clock)
    assert await agent.reconcile(NODE) == 0.0  # decide again at once (the backoff is in decide)
    assert journal == ["status", ("patch", c.REASON_REBOOTING), "soft-reboot"]
    assert await agent.reconcile(NODE) == 10.0
    assert journal[3:] == ["status", ("patch", c.REASON_STAGED)]
    assert (degraded_cond(api)["status"], degraded_cond(api)["message"]) == ("True", SOFT_ERROR)
    clock.now += 10.0
    assert await agent.reconcile(NODE) is None
    assert journal[5:] == [("patch", c.REASON_REBOOTING), "reboot"]
    assert api.obj["status"]["lastRebootKind"] == "Full"
    assert idle_cond(api)["message"] == f"rebooting into {B} (full reboot: the soft reboot failed)"


async def test_the_reboot_is_counted_by_the_daemon_that_starts_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    # what the daemon left on the server before the soft reboot into B
    node = bootc_node(B, "Booted", annotations=DRAINED, policy="AllowSoftReboot")
    host = FakeHost(journal, host_doc(A, B, soft=True))
    before, server = make_agent(tmp_path, monkeypatch, journal, copy.deepcopy(node), host)
    soft_before, full_before = reboots("soft"), reboots("full")
    await before.reconcile(NODE)
    assert journal[-1] == "soft-reboot"
    assert (reboots("soft"), reboots("full")) == (soft_before, full_before), "not yet"
    left = copy.deepcopy(server.obj)
    assert left["status"]["lastRebootKind"] == "Soft"
    # a daemon that restarts without a reboot (same booted image) counts nothing
    restarted, _ = make_agent(tmp_path, monkeypatch, journal, copy.deepcopy(left), host)
    await restarted.reconcile(NODE)
    assert (reboots("soft"), reboots("full")) == (soft_before, full_before)
    # the host came back on B: the new daemon counts one soft reboot, once
    host.doc = host_doc(B, rollback=A)
    after, api = make_agent(tmp_path, monkeypatch, journal, copy.deepcopy(left), host)
    await after.reconcile(NODE)
    assert (reboots("soft"), reboots("full")) == (soft_before + 1, full_before)
    assert idle_cond(api)["reason"] == c.REASON_IDLE
    assert api.obj["status"]["lastRebootKind"] == "Soft", "kept after the reboot"
    after.host_changed()
    await after.reconcile(NODE)
    assert reboots("soft") == soft_before + 1


async def test_the_start_up_read_serves_the_first_reconcile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, _api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    # what run() starts while the BootcNode cache syncs
    agent._first_read = asyncio.create_task(agent._read_host(status=True))
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE)], "one bootc status read, not two"
    assert host.probe_reads == 1, "the boot assessment was read at start-up too"


class ChangingHost(FakeHost):
    """A host that changes (inotify fires) while ``bootc status`` runs."""

    def __init__(self, journal: list[Any], status: HostStatus, agent_ref: list[Any]) -> None:
        super().__init__(journal, status)
        self.agent_ref = agent_ref
        self.change_once = True

    async def status(self) -> HostStatus:
        doc = await super().status()
        if self.change_once:
            self.change_once = False
            self.agent_ref[0].host_changed()
        return doc


async def test_a_host_change_during_a_status_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    agent_ref: list[Any] = []
    host = ChangingHost(journal, host_doc(A), agent_ref)
    agent, _api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    agent_ref.append(agent)
    await agent.reconcile(NODE)
    assert agent._host_stale, "the change came after bootc status started: still stale"
    await agent.reconcile(NODE)
    assert journal.count("status") == 2
    assert not agent._host_stale


def idle_message(api: Api) -> str:
    return str(idle_cond(api).get("message", ""))


async def test_an_out_of_band_switch_is_logged_named_and_undone(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    journal: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = FakeHost(journal, host_doc(A))
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    caplog.set_level(logging.INFO, logger="daemon")
    await agent.reconcile(NODE)
    assert journal == ["status", ("patch", c.REASON_IDLE)]
    # someone runs `bootc switch B` on the host; inotify fires
    host.doc = host_doc(A, B)
    agent.host_changed()
    await asyncio.wait_for(next_trigger(agent), 10)  # the key inotify queued
    await agent.reconcile(NODE)
    await asyncio.wait_for(next_trigger(agent), 10)  # the switch task's end
    assert journal[2:] == ["status", ("patch", c.REASON_STAGING), ("switch", A)]
    assert api.obj["status"]["staged"]["image"] == B
    assert idle_message(api) == (
        f"{B} was staged out of band (not by the bootc-operator daemon): staging the booted "
        f"image {A} again to replace it"
    )
    logged = [r.getMessage() for r in caplog.records if "out of band" in r.getMessage()]
    assert logged == [
        f"{B} was staged out of band (bootc status changed without a command of this "
        "daemon); the BootcNode's spec decides what happens to it"
    ]
    # our own switch replaced it: Idle again, and not blamed on anyone else
    await agent.reconcile(NODE)
    assert journal[5:] == ["status", ("patch", c.REASON_IDLE)]
    assert api.obj["status"]["staged"]["image"] == A
    assert idle_message(api) == ""
    assert len([r for r in caplog.records if "out of band" in r.getMessage()]) == 1


# ------------------------------------------------------------------ issue 27: hostile bootc status


class PrintingHost(FakeHost):
    """``status()`` is the real ``HostCommands.status`` of a "bootc" that prints ``output``."""

    def __init__(self, journal: list[Any], output: Path) -> None:
        super().__init__(journal, host_doc(A))
        self.commands = HostCommands(
            ["sh", "-c", 'cat "$0"', str(output)], command_timeout=30.0, stage_timeout=30.0
        )

    async def status(self) -> HostStatus:
        self.journal.append("status")
        return await self.commands.status()


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
        ('{"serial": ' + "7" * 5000 + "}", "a number has too many digits"),
    ],
    ids=["deep-nesting", "huge-integer"],
)
async def test_hostile_bootc_status_is_reported_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any], output: str, reason: str
) -> None:
    printed = tmp_path / "status.json"
    printed.write_text(output)
    host = PrintingHost(journal, printed)
    agent, api = make_agent(tmp_path, monkeypatch, journal, bootc_node(A), host)
    assert await agent.reconcile(NODE) == 10.0  # retried after the backoff, no traceback
    degraded = degraded_cond(api)
    assert (degraded["status"], degraded["reason"]) == ("True", c.REASON_UNREADABLE_STATUS)
    assert degraded["message"].startswith(f"bootc status output is not JSON ({reason})")


HOSTILE_SECRETS = {
    "nesting": (
        b'{"auths": {"quay.io": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        "pull secret ns/pull: .dockerconfigjson is not valid JSON (nested more than 64 levels "
        "deep) (no credentials written)",
    ),
    "credHelpers": (
        b'{"auths": {}, "credHelpers": {"quay.io": "evil"}}',
        'pull secret ns/pull: .dockerconfigjson has a top-level "credHelpers" key; only '
        '"auths" is accepted (a credential helper would run as root on every node) '
        "(no credentials written)",
    ),
}


@pytest.mark.parametrize("kind", HOSTILE_SECRETS)
async def test_a_hostile_pull_secret_is_reported_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any], kind: str
) -> None:
    content, message = HOSTILE_SECRETS[kind]

    host = FakeHost(journal, host_doc(A))
    node = with_pull_secret(bootc_node(B))  # a node that has to pull: Degraded
    agent, api = make_agent(tmp_path, monkeypatch, journal, node, host)
    await agent.reconcile(NODE)  # publishes the key
    seal_to_published_key(agent, api, content)
    await agent.reconcile(NODE)
    await asyncio.wait_for(next_trigger(agent), 10)  # the switch task ends
    degraded = degraded_cond(api)
    assert (degraded["status"], degraded["reason"]) == ("True", c.REASON_PULL_SECRET_ERROR)
    assert degraded["message"] == message
