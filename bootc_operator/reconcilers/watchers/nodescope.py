"""The daemons' node-scope admission policy, watched: may pull secrets be sealed?

``NodeScopeWatcher`` runs two informers restricted by name (field selector
``metadata.name``, so RBAC can name the two objects alone): the
ValidatingAdmissionPolicy and the ValidatingAdmissionPolicyBinding ``name``
(``bootc-operator-daemon-node-scope`` by default, ``--node-scope-policy``). From
what they hold it judges (``policy.nodescope.scope_problem``) whether each daemon
is confined to its own BootcNode, which is what makes a sealed pull secret
readable by its node alone. ``on_change`` fires on every event of either and once
both synced, so pools waiting to be sealed (or to be told why not) look again at
once when the policy is installed or removed.

``state()`` is ``pending`` until both informers listed once (nothing is sealed
meanwhile); an API group the server does not serve (404: Kubernetes < 1.30) is
a problem, not a wait; any other failure to read them (403: the controller's
ClusterRole lacks the rule) is a problem naming the error, so the pool says why
nothing is sealed. With ``allow_unscoped`` (``--seal-without-node-scope``) the
watcher starts no informer and sealing is always allowed.

``problems(pool)``: ``{SealingUnavailable: message}`` for a pool that names a pull
secret while sealing is refused (``sealing_refused``), for its Degraded condition.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube.resources import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from bootc_operator.policy.nodescope import DEFAULT_POLICY, scope_problem, sealing_refused


@dataclass(frozen=True, slots=True)
class ScopeState:
    pending: bool = False  # not read yet: seal nothing, but nothing to report yet
    problem: str = ""  # why sealing is refused ("" with pending False: allowed)

    @property
    def may_seal(self) -> bool:
        return not self.pending and not self.problem


class NodeScopeWatcher:
    def __init__(
        self,
        api: Any,
        *,
        on_change: Callable[[], None],
        name: str = DEFAULT_POLICY,
        allow_unscoped: bool = False,
    ) -> None:
        self.name = name
        self.allow_unscoped = allow_unscoped
        self._on_change = on_change
        self._informers: tuple[Informer, ...] = ()
        if not allow_unscoped:
            self._informers = tuple(
                Informer(api, resource, field_selector=f"metadata.name={name}")
                for resource in (
                    VALIDATING_ADMISSION_POLICIES,
                    VALIDATING_ADMISSION_POLICY_BINDINGS,
                )
            )
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        changed = EventHandler(
            on_add=lambda _o: self._on_change(),
            on_update=lambda _o, _n: self._on_change(),
            on_delete=lambda _o: self._on_change(),
        )
        for inf in self._informers:
            inf.add_event_handler(changed)
            inf.start()
            self._tasks.append(asyncio.create_task(self._synced(inf), name=f"synced-{inf}"))

    async def _synced(self, inf: Informer) -> None:
        # an absent object produces no event: say "read" once listed
        await inf.wait_for_sync()
        self._on_change()

    def state(self) -> ScopeState:
        if self.allow_unscoped:
            return ScopeState()
        objects: list[Mapping[str, Any] | None] = []
        for inf in self._informers:
            if inf.has_synced:
                objects.append(inf.get(self.name))
                continue
            error = inf.stats.last_error
            if error.startswith("ApiError: 404"):
                return ScopeState(problem=scope_problem(False, None, None, self.name))
            if error:
                return ScopeState(
                    problem=f"cannot read the admission policy {self.name} ({inf.resource}): "
                    f"{error[:300]}"
                )
            return ScopeState(pending=True)
        policy, binding = objects
        return ScopeState(problem=scope_problem(True, policy, binding, self.name))

    def problems(self, pool: Mapping[str, Any]) -> dict[str, str]:
        ref = (pool.get("spec") or {}).get("pullSecretRef")
        if not ref:
            return {}
        state = self.state()
        if not state.problem:
            return {}
        secret = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        return {c.REASON_SEALING_UNAVAILABLE: sealing_refused(secret, state.problem)}

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for inf in self._informers:
            await inf.stop()
