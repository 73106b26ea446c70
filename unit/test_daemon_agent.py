"""The daemon's async shell (``daemon.agent.Agent.reconcile``) with the API and the host
replaced by recorders: the order of writes and commands, no-op writes, and when bootc
status is (not) re-read. The real thing runs end to end in ``e2e/test_daemon.py``."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import pytest

from bootc_operator.api import constants as c
from bootc_operator.daemon import agent as agent_mod
from bootc_operator.daemon.agent import Agent, Config
from bootc_operator.daemon.bootc_status import HostStatus
from bootc_operator.daemon.decide import RetryPolicy
from bootc_operator.daemon.hostcmd import HostCommandError, HostCommands

NODE = "node-1"
REPO = "quay.io/example/os"
A, B = (f"{REPO}@sha256:{x * 64}" for x in "ab")


def entry(ref: str) -> dict[str, Any]:
    return {"image": {"image": {"image": ref}, "imageDigest": ref.partition("@")[2]}}


def host_doc(booted: str, staged: str | None = None) -> HostStatus:
    return HostStatus.model_validate(
        {
            "apiVersion": "org.containers.bootc/v1",
            "kind": "BootcHost",
            "status": {"booted": entry(booted), "staged": entry(staged) if staged else None},
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

    async def stop_switch(self, *, block: bool = True) -> None:
        self.journal.append("stop")


class Api:
    """The BootcNode on the "server": merge patches to its status are recorded."""

    def __init__(self, journal: list[Any], obj: dict[str, Any]) -> None:
        self.journal = journal
        self.obj = obj

    async def patch(self, _api: Any, _res: Any, name: str, patch: Any, *_: Any, **kw: Any) -> Any:
        assert name == NODE and kw.get("subresource") == "status"
        status = {k: v for k, v in patch["status"].items() if v is not None}
        idle: dict[str, Any] = next(
            (x for x in status["conditions"] if x["type"] == c.COND_IDLE), {}
        )
        self.journal.append(("patch", idle.get("reason")))
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.obj["status"] = status
        return copy.deepcopy(self.obj)


def bootc_node(desired: str, state: str = "Staged", generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": NODE, "uid": "u1", "generation": generation, "resourceVersion": "10"},
        "spec": {"desiredImage": desired, "desiredImageState": state},
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
) -> tuple[Agent, Api]:
    api = Api(journal, obj)
    monkeypatch.setattr(agent_mod, "patch_object", api.patch)
    config = Config(NODE, tmp_path, 3600.0, RetryPolicy(10.0, 300.0))
    agent = Agent(cast(Any, None), config, cast(HostCommands, host))
    agent.informer.replace([copy.deepcopy(obj)])  # as if listed from the API server
    key = agent.queue.get_nowait()  # the add event's key: the tests call reconcile directly
    assert key == NODE
    agent.queue.done(key)
    return agent, api


async def test_rebooting_is_written_before_the_reboot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list[Any]
) -> None:
    host = FakeHost(journal, host_doc(A, B))
    agent, _ = make_agent(tmp_path, monkeypatch, journal, bootc_node(B, "Booted"), host)
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
