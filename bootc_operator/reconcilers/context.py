"""What every reconciler shares: the ``Context``, cached reads and narrow writes.

``Context`` is one object per controller process, composed of its two halves:
``cache.CacheReads`` (reads from the shared informers' stores, read-your-writes) and
``writes.ApiWrites`` (JSON merge patches, recorded for read-your-writes; the rules
of who writes what are there). Here besides: the state they share, each pool's
policy (``check_pool`` with what the loops learned, ``knowledge``), read once per
revision, and the per-pool lock of membership and rollout.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bootc_operator.informers import Informer
from bootc_operator.informers.overlay import Overlay
from bootc_operator.kube import Api
from bootc_operator.policy.nodestate import ViewCache
from bootc_operator.policy.poolspec import PoolPolicy, check_pool
from bootc_operator.reconcilers.cache import Obj, bootc_node_ref, node_ref, pool_ref
from bootc_operator.reconcilers.knowledge import PoolKnowledge
from bootc_operator.reconcilers.writes import ApiWrites
from bootc_operator.runtime.events import EventRecorder

__all__ = ["Context", "Obj", "bootc_node_ref", "node_ref", "pool_ref"]


@dataclass
class Context(ApiWrites):
    """The state the reads and writes share, the pools' policies and locks."""

    api: Api
    pools: Informer
    bootc_nodes: Informer
    nodes: Informer
    recorder: EventRecorder
    # Long-lived streams (the drains' Pod watches) go through their own client so
    # they never hold the connections requests need; None: ``api``.
    watch_api: Api | None = None
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    pool_overlay: Overlay = field(default_factory=Overlay)
    bn_overlay: Overlay = field(default_factory=Overlay)
    node_overlay: Overlay = field(default_factory=Overlay)
    _bn_created: dict[str, str] = field(default_factory=dict)  # name -> pool, until cached
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    views: ViewCache = field(default_factory=ViewCache)
    # what the loops learned of each pool (tags, signatures, Prometheus gates), read here
    knowledge: PoolKnowledge = field(default_factory=PoolKnowledge)
    # pool name -> ((uid, resourceVersion, tag resolution, verification), its policy):
    # the spec is read once per revision, whichever reconciler asks first
    _policies: dict[str, tuple[tuple[Any, ...], PoolPolicy]] = field(default_factory=dict)

    @property
    def streams(self) -> Api:
        """The client for watches (``watch_api``, else ``api``)."""
        return self.watch_api if self.watch_api is not None else self.api

    def policy(self, pool: Obj) -> PoolPolicy:
        """The pool's policy (``check_pool`` with this process's tag resolutions),
        resolved once per revision of the pool and tag resolution."""
        meta = pool["metadata"]
        name, version = meta["name"], meta.get("resourceVersion")
        resolved = self.knowledge.resolved_tag(name)
        verified = self.knowledge.verified(pool)
        key = (meta.get("uid"), version, resolved, verified)
        memo = self._policies.get(name)
        if version is not None and memo is not None and memo[0] == key:
            return memo[1]
        policy = check_pool(pool, dict([resolved]) if resolved else None, verified)
        if version is not None:
            self._policies[name] = (key, policy)
        return policy

    def forget_policy(self, pool: str) -> None:
        """The pool is gone: drop its memoised policy."""
        self._policies.pop(pool, None)

    def pool_lock(self, pool: str) -> asyncio.Lock:
        """Serialises membership and rollout passes of one pool.

        Both write the same BootcNodes (different fields), and a leaving member passes
        from one to the other (``PoolKnowledge.departures``); run concurrently, a
        rollout pass could drain or re-cordon a node that membership is letting go.
        """
        lock = self._locks.get(pool)
        if lock is None:
            lock = self._locks[pool] = asyncio.Lock()
        return lock
