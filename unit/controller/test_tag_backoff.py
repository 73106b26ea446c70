"""A tag that never resolves is retried with capped backoff, not in a tight loop.

The real :class:`bootc_operator.controller.Controller` (its queues, event
handlers and tag reconciler) on a fake clock, without a server: pools reach its
informer through ``Informer.replace``/``apply`` as the reflector would feed
them, and a pool status write is echoed back as the watch event the API server
would send, so the controller's own reactions to its writes are part of the
loop under test. The registry is a resolver that always fails (or succeeds when
told to). Real API server and registry: e2e/test_tags_and_pull_secrets.py.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from bootc_operator.controller import Controller
from bootc_operator.reconcilers.loops.tags import retry_delay
from bootc_operator.registry import RegistryError
from bootc_operator.workqueue import FakeClock, RateLimitingQueue, instrumented
from bootc_operator.workqueue.worker import process_next
from hack.testenv.mergepatch import merge_patch

NO_API = cast(ApiClient, None)  # never reached: writes are echoed in memory
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
INTERVAL = 300.0
REF = "registry.example.com/os:nope"
DIGEST = "sha256:" + "a" * 64
# More passes than this at one instant is a loop that ignores the returned delay.
LOOP_LIMIT = 20


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock(start=0.0)
        self.ctl = Controller(
            NO_API, identity="unit", tag_resolution_interval=INTERVAL, clock=self.clock
        )
        self.ctl.ctx.now = lambda: EPOCH + dt.timedelta(seconds=self.clock.now())
        self.calls: list[float] = []
        self.fail = True
        self.status_writes = 0
        self.wakes: dict[str, int] = dict.fromkeys(self.ctl.queues, 0)
        self.ctl.tags._resolve = self._resolve
        self.ctl.ctx.patch_pool = self._patch_pool  # type: ignore[method-assign]
        self._rv = 1
        self.reconcile_tags = instrumented("tags", self.ctl.tags.reconcile)

    def pool(self, name: str = "p") -> dict[str, Any]:
        pool = self.ctl.pools.get(name)
        assert pool is not None
        return copy.deepcopy(pool)

    async def _resolve(self, ref: str, creds: bytes | None) -> str:
        self.calls.append(self.clock.now())
        if self.fail:
            raise RegistryError(f"{ref}: manifest unknown (HTTP 404)")
        return DIGEST

    async def _patch_pool(
        self, pool: Any, patch: dict[str, Any], *, status: bool = False
    ) -> dict[str, Any]:
        """What the API server does: merge, new resourceVersion, a MODIFIED watch event."""
        current: dict[str, Any] = merge_patch(self.pool(pool["metadata"]["name"]), patch)
        self._rv += 1
        current["metadata"]["resourceVersion"] = str(self._rv)
        self.status_writes += status
        self.ctl.pools.apply("MODIFIED", current)
        return current

    def create_pool(self, ref: str = REF) -> None:
        pool = {
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": "p", "uid": "u1", "generation": 1, "resourceVersion": "1"},
            "spec": {"nodeSelector": {"matchLabels": {"g": "p"}}, "image": {"ref": ref}},
        }
        self.ctl.bootc_nodes.replace([])
        self.ctl.nodes.replace([])
        self.ctl.pools.replace([pool])  # the ADDED event: the handlers enqueue it

    def edit_spec(self, change: Callable[[dict[str, Any]], None]) -> None:
        pool = self.pool()
        change(pool["spec"])
        pool["metadata"]["generation"] += 1
        self._rv += 1
        pool["metadata"]["resourceVersion"] = str(self._rv)
        self.ctl.pools.apply("MODIFIED", pool)

    async def run_due(self) -> None:
        """Process every tags key due now; count the other reconcilers' wake-ups."""
        tags = self.ctl.queues["tags"]
        passes = 0
        while len(tags):
            await process_next(tags, self.reconcile_tags)
            passes += 1
            assert passes <= LOOP_LIMIT, (
                f"tag resolution ran {passes} times at t={self.clock.now():g}s "
                f"({len(self.calls)} registry calls): it re-queues itself"
            )
        for name, queue in self.ctl.queues.items():
            if name != "tags":
                self._drain(name, queue)

    def _drain(self, name: str, queue: RateLimitingQueue[str]) -> None:
        while (key := queue.get_nowait()) is not None:
            self.wakes[name] += 1
            queue.done(key)

    async def run_for(self, seconds: int) -> None:
        for _ in range(seconds):
            await self.run_due()
            self.clock.advance(1.0)
        await self.run_due()


def expected_gaps(n: int) -> list[float]:
    return [retry_delay(i, INTERVAL) for i in range(1, n + 1)]


async def test_failing_tag_backs_off_over_simulated_minutes() -> None:
    h = Harness()
    h.create_pool()
    await h.run_for(20 * 60)
    gaps = [b - a for a, b in zip(h.calls, h.calls[1:], strict=False)]
    # 0, 5, 15, 35, 75, 155, 315, then every 300 s: 9 calls in 20 minutes.
    assert gaps == expected_gaps(len(gaps)), gaps
    assert len(h.calls) == 9
    assert max(gaps) == INTERVAL  # capped at the resolution interval
    # One status write per attempt (nextTagResolutionTime), nothing more.
    assert h.status_writes == len(h.calls)
    # The others were woken for the pool's creation and the error's appearance
    # (coalesced): a repeated failure is no news.
    assert h.wakes["membership"] == 1 and h.wakes["rollout"] == 1
    assert h.ctl.tags.problems(h.pool())["TagResolutionError"].startswith(f"cannot resolve {REF}")


async def test_backoff_holds_when_something_else_enqueues_the_pool() -> None:
    h = Harness()
    h.create_pool()
    await h.run_for(20)  # attempts at 0, 5, 15; the next is due at 35
    assert h.calls == [0.0, 5.0, 15.0]
    # A spec edit that leaves the ref alone enqueues every reconciler, tags too.
    h.edit_spec(lambda spec: spec.setdefault("rollout", {}).update(paused=True))
    await h.run_for(10)
    assert h.calls == [0.0, 5.0, 15.0]
    await h.run_for(10)
    assert h.calls == [0.0, 5.0, 15.0, 35.0]
    # A new ref is tried at once, with a fresh backoff.
    h.edit_spec(lambda spec: spec["image"].update(ref=REF + "2"))
    await h.run_due()
    assert h.calls[-1] == h.clock.now() == 40.0


async def test_resolution_after_failures_wakes_the_others_once_and_waits_the_interval() -> None:
    h = Harness()
    h.create_pool()
    await h.run_for(10)
    before = dict(h.wakes)
    h.fail = False
    await h.run_for(10)  # the attempt due at 15 succeeds
    assert h.calls == [0.0, 5.0, 15.0]
    assert h.ctl.tags.target("p") == (REF, DIGEST)
    assert h.ctl.tags.problems(h.pool()) == {}
    # membership is told once (it writes the new desiredImage), not tags itself
    assert h.wakes["membership"] == before["membership"] + 1
    await h.run_for(int(INTERVAL))
    assert h.calls == [0.0, 5.0, 15.0, 15.0 + INTERVAL]


@pytest.mark.parametrize("source", ["tags", "membership", "rollout", "status"])
def test_notify_never_requeues_the_source(source: str) -> None:
    ctl = Controller(NO_API, identity="unit", clock=FakeClock())
    ctl.notify("p", source=source)
    assert {name for name, q in ctl.queues.items() if len(q)} == set(ctl.queues) - {source}


async def test_the_status_loop_is_the_one_writer_of_the_resolved_target() -> None:
    """The tags loop writes only nextTagResolutionTime; the digest goes through
    PoolKnowledge, and the status loop's pass writes it as status.targetDigest."""
    h = Harness()
    h.fail = False
    h.create_pool()
    await h.run_due()
    assert h.ctl.tags.target("p") == (REF, DIGEST)
    status = h.pool().get("status") or {}
    assert "nextTagResolutionTime" in status
    assert "targetDigest" not in status  # not the tags loop's field
    # the others were told (membership writes the new desiredImage, status the target)
    assert h.wakes["status"] >= 1 and h.wakes["membership"] >= 1
    await h.ctl.status.reconcile("p")
    status = h.pool()["status"]
    assert status["targetDigest"] == DIGEST
    assert "nextTagResolutionTime" in status  # left as the tags loop wrote it
