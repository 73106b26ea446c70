"""The PodDisruptionBudgets drains wait on: one PDB informer, started when needed.

Interface (owned by the drain manager)::

    budgets = BudgetWatch(api, on_change=lambda pdb: poke_the_drains_it_covers(pdb))
    await budgets.covering(namespace, labels)   # PDBs covering a pod; None: unknown
    await budgets.stop()

A drain whose eviction a PodDisruptionBudget refused (429) waits for that budget
rather than retrying on a timer: ``covering`` starts the informer on its first
call (a cluster whose drains never meet a budget never lists one), waits for its
first list (at most ``sync_timeout``: no RBAC for PDBs, an apiserver that cannot
answer), and names the PDBs that cover the pod (``drainplan.budget_covers``).
``on_change(pdb)`` is called whenever a PDB allows a disruption
(``drainplan.budget_allows``: ``status.disruptionsAllowed`` turned positive, as
the disruption controller writes once a replacement pod is Ready), changes its
selector, or goes away: each may let an eviction through now. Objects are kept
slim (``drainplan.slim_budget``), cluster-wide, on the watch client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from bootc_operator.informers import DeletedFinalStateUnknown, EventHandler, Informer, unwrap
from bootc_operator.kube import POD_DISRUPTION_BUDGETS, Api
from bootc_operator.policy.drainplan import budget_allows, budget_covers, slim_budget
from bootc_operator.reconcilers.context import Obj

log = logging.getLogger("drain")

SYNC_TIMEOUT = 10.0


class BudgetWatch:
    def __init__(
        self, api: Api, on_change: Callable[[Obj], None], sync_timeout: float = SYNC_TIMEOUT
    ) -> None:
        self._api = api
        self._on_change = on_change
        self.sync_timeout = sync_timeout
        self._informer: Informer | None = None
        self._gave_up = False  # the first list did not come in time

    @property
    def started(self) -> bool:
        return self._informer is not None

    def _start(self) -> Informer:
        informer = Informer(self._api, POD_DISRUPTION_BUDGETS, transform=slim_budget)
        informer.add_event_handler(
            EventHandler(on_add=self._added, on_update=self._updated, on_delete=self._deleted)
        )
        informer.start()
        log.info("watching PodDisruptionBudgets: a drain waits for one")
        return informer

    def _added(self, pdb: Obj) -> None:
        if budget_allows(pdb):
            self._on_change(pdb)

    def _updated(self, old: Obj, new: Obj) -> None:
        if budget_allows(new) or old.get("spec") != new.get("spec"):
            self._on_change(old)
            self._on_change(new)

    def _deleted(self, pdb: Obj | DeletedFinalStateUnknown) -> None:
        self._on_change(unwrap(pdb))

    async def covering(self, namespace: str, labels: Mapping[str, str] | None) -> list[Obj] | None:
        """The PDBs that cover a pod of ``namespace`` with ``labels``; None when the
        PDBs could not be listed within ``sync_timeout``."""
        informer = self._informer
        if informer is None:
            informer = self._informer = self._start()
        if not informer.has_synced:
            if self._gave_up:
                return None  # still cannot list them: no second wait
            try:
                async with asyncio.timeout(self.sync_timeout):
                    await informer.wait_for_sync()
            except TimeoutError:
                self._gave_up = True
                log.warning(
                    f"PodDisruptionBudgets not listed within {self.sync_timeout:g}s; drains "
                    "a budget refused retry with backoff until they are"
                )
                return None
        return [p for p in informer.list() if budget_covers(p, namespace, labels)]

    async def stop(self) -> None:
        informer, self._informer = self._informer, None
        if informer is not None:
            await informer.stop()
