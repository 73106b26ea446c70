"""The Prometheus gates: blocking alerts, preconditions and the health check's queries.

One room for everything that asks Prometheus whether a rollout may go on:

- ``prometheus``: the small Prometheus HTTP API client (instant queries);
- ``alerts`` (pure): ``spec.rollout.blockingAlerts`` as one ``ALERTS`` query, its
  answer as an ``AlertGate``, two gates combined;
- ``queries`` (pure): ``spec.rollout.preconditions`` and ``spec.health.queries``,
  parsed, asked per node, folded into states and verdicts;
- ``alertgate``: the loop that asks the alert and precondition queries of each pool
  (its own rate-limited queue, keyed by pool) and keeps each pool's ``AlertGate``;
- ``healthqueries``: the polls of the health queries of nodes under a health check.

The pure modules import only ``api``; :mod:`bootc_operator.policy` and
``kubectl bootc`` use them. Nothing here imports the reconcilers: they are handed
what they read (a pool lookup, the client) and called back. The query client is
imported only by a controller started with ``--prometheus-url`` (``ask`` below
imports it with the first query).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bootc_operator.gates.prometheus import Querier


async def ask(prometheus: Querier, promql: str) -> tuple[list[dict[str, Any]] | None, str]:
    """``prometheus.ask``: (the result, "") or (None, why not)."""
    from bootc_operator.gates import prometheus as client  # noqa: PLC0415

    return await client.ask(prometheus, promql)
