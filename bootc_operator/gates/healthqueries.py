"""Prometheus polls for the health gate's ``queries`` check: one per node being checked.

Interface (owned by the rollout reconciler; the status reconciler only reads)::

    queries = HealthQueries(prometheus, interval=30, on_change=lambda node, pool: ...)
    queries.states(node, pool, policy.queries)  # start polling; what is known so far
    queries.peek(node, policy.queries)           # read only (None if not polled)
    queries.retain(nodes, pool)                  # stop polling the pool's other nodes
    await queries.stop()

Like the pod watches of the ``pods`` check (``healthpods``), a poll lives as long
as its node's check: it starts when a node arrives after its reboot (so only
answers given after the reboot count toward a ``for``) and stops when the node
passes, leaves the pool or stops being checked. Every ``interval`` seconds (the
controller's ``--alert-check-interval``) it asks each query, ``$node`` replaced
by the node's name (``queries.for_node``), and folds the answer into the query's
state (``queries.observe``). A change of what a query says (it starts or stops
holding, or its error changes) wakes the pool's rollout and status; the passing
of a ``for`` by time alone is the gate's own ``wait``. A failed query breaks the
run like an empty result (fail closed). Without ``--prometheus-url`` nothing is
polled and every node is told why (``NodeQueries.unavailable``).

The states are in memory: a restarted controller counts each ``for`` again from
its first answer, which can only hold a node longer, never release it early.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from bootc_operator.gates import ask
from bootc_operator.gates.queries import (
    NO_PROMETHEUS,
    HealthQuery,
    NodeQueries,
    QueryState,
    for_node,
    observe,
)

if TYPE_CHECKING:
    from bootc_operator.gates.prometheus import Querier

log = logging.getLogger("health")


def _said(state: QueryState | None) -> tuple[bool, str] | None:
    """What a state says, without its time (a change of this wakes the rollout)."""
    return None if state is None else (state.holding_since is not None, state.error)


class HealthQueries:
    def __init__(
        self,
        prometheus: Querier | None,
        *,
        interval: float,
        on_change: Callable[[str, str], None],
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.prometheus = prometheus
        self.interval = interval
        self._on_change = on_change  # (node, pool) -> enqueue
        self._now = now
        self._pools: dict[str, str] = {}  # node -> pool
        self._queries: dict[str, tuple[HealthQuery, ...]] = {}  # node -> its queries now
        # node -> (name, expr) -> state: an edited expr starts a new run
        self._states: dict[str, dict[tuple[str, str], QueryState]] = {}
        self._polls: dict[str, asyncio.Task[None]] = {}

    def states(self, node: str, pool: str, queries: Sequence[HealthQuery]) -> NodeQueries:
        """What is known of ``node``'s ``queries``, polling them from now on."""
        if self.prometheus is None:
            return NodeQueries(unavailable=NO_PROMETHEUS)
        self._pools[node] = pool
        self._queries[node] = tuple(queries)
        if node not in self._polls:
            self._states[node] = {}
            self._polls[node] = asyncio.get_running_loop().create_task(
                self._poll(node), name=f"health-queries-{node}"
            )
        known = self.peek(node, queries)
        assert known is not None
        return known

    def peek(self, node: str, queries: Sequence[HealthQuery]) -> NodeQueries | None:
        """What is known of ``node``'s ``queries`` (None: not polled)."""
        if self.prometheus is None:
            return NodeQueries(unavailable=NO_PROMETHEUS)
        states = self._states.get(node)
        if states is None:
            return None
        return NodeQueries(
            {q.name: s for q in queries if (s := states.get((q.name, q.expr))) is not None}
        )

    def polling(self) -> set[str]:
        return set(self._polls)

    def retain(self, nodes: Collection[str], pool: str) -> None:
        """Stop polling ``pool``'s nodes not in ``nodes`` (no longer checked)."""
        for node in [n for n, p in self._pools.items() if p == pool and n not in nodes]:
            self._pools.pop(node, None)
            self._queries.pop(node, None)
            self._states.pop(node, None)
            task = self._polls.pop(node, None)
            if task is not None:
                task.cancel()

    async def stop(self) -> None:
        tasks = list(self._polls.values())
        self._polls.clear()
        self._pools.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _poll(self, node: str) -> None:
        try:
            await self._poll_loop(node)
        except Exception:
            log.exception("health query poll failed", extra={"node": node})
        finally:
            if self._polls.get(node) is asyncio.current_task():
                # Ended on its own (retain and stop forget the task first): nothing it
                # said holds any more, and the next pass starts a new poll.
                del self._polls[node]
                states = self._states.get(node) or {}
                self._states[node] = {k: QueryState(None, "the poll stopped") for k in states}
                if (pool := self._pools.get(node)) is not None:
                    self._on_change(node, pool)

    async def _poll_loop(self, node: str) -> None:
        assert self.prometheus is not None
        while node in self._queries:
            states = self._states.setdefault(node, {})
            changed = False
            for q in self._queries.get(node, ()):
                key = (q.name, q.expr)
                result, error = await ask(self.prometheus, for_node(q.expr, node))
                if self._states.get(node) is not states:
                    return  # retained away while asking
                previous = states.get(key)
                state = observe(previous, result, self._now(), error)
                states[key] = state
                if _said(state) != _said(previous):
                    changed = True
                    level = logging.INFO if state.holding_since is not None else logging.WARNING
                    what = "holds" if state.holding_since else (state.error or "empty result")
                    log.log(level, f"health query {q.name}: {what}", extra={"node": node})
            # forget states of queries no longer in the spec
            current = {(q.name, q.expr) for q in self._queries.get(node, ())}
            for key in [k for k in states if k not in current]:
                del states[key]
            if changed and (pool := self._pools.get(node)) is not None:
                self._on_change(node, pool)
            await asyncio.sleep(self.interval)
