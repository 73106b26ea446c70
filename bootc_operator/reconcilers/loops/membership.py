"""Membership: which Nodes belong to a pool, and their BootcNodes and labels.

``reconcile(pool_name)``:

- pool gone → nothing (its finalizer already cleaned up);
- pool being deleted → release every member (below), then drop the finalizer
  (and the Go bootc-operator's ``bootc.dev/pool-cleanup`` of a pool taken over
  from it);
- otherwise ensure the finalizer, then for every Node assigned to the pool
  (``membership_plan.assign_nodes``: selector match, conflicts resolved) ensure
  a BootcNode (name = Node name, controller ownerReference to the pool,
  ``desiredImage = repo@target``, ``desiredImageState: Staged``, pull secret
  copied with its version hash while the Secret is usable, and its content sealed
  to the key the node's daemon publishes in ``status.sealingKey``, re-sealed when
  the hash or the key changes: ``sealing_plan.seal_action``) and the Node labels
  ``MANAGED_LABEL`` and ``bootc.dev/managed`` (and the ``bootc.dev/pool`` label
  on a BootcNode that has only the ownerReference, as the Go operator writes
  them). Membership writes desiredImage and ``desiredImageState`` only when it
  creates a BootcNode; every later change of them (a new target, stageAhead, a
  health-gate rollback, Booted) is the rollout loop's, so a holder's slot can go
  back in the write that moves it (``slots.retargets_due``);
- every BootcNode of the pool whose Node left (label change, deletion,
  conflict lost) is released: its drain cancelled, the managed label removed
  (unless another pool owns the Node), the BootcNode deleted. One whose Node a
  slot changed (cordon, autoscaler annotations: ``slots.gives_node_back``) is
  handed to the rollout loop first (``PoolKnowledge.departures``, and rollout's
  queue): rollout restores the cordon per ``bootc.dev/was-cordoned`` and the
  autoscaler annotations per ``bootc.dev/autoscaler-prior`` and clears the slot,
  then wakes membership, which deletes the BootcNode. Rollout is the one writer of
  the slot's fields on both objects.

Departures are handled before arrivals; within each, nodes are handled
concurrently (at most ``fanout.WRITE_CONCURRENCY`` at once), each node's own
writes in order.

An invalid selector changes nothing (status reports InvalidSpec). An unknown
target (invalid image, tag not resolved yet) creates no BootcNode and changes
no desiredImage, but departures are still handled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.kube import ApiError
from bootc_operator.policy.membership_plan import assign_nodes
from bootc_operator.policy.ownership import member_body, pool_of
from bootc_operator.policy.poolspec import PoolPolicy
from bootc_operator.policy.sealing_plan import SealAction, seal_action
from bootc_operator.policy.slots import STAGED, gives_node_back
from bootc_operator.reconcilers.context import Context, Obj, pool_ref
from bootc_operator.reconcilers.fanout import each
from bootc_operator.reconcilers.watchers.pullsecrets import SecretState

log = logging.getLogger("membership")

SECRET_RETRY = 5.0  # seconds between looks at a pull secret that could not be read yet


REJECTED_RETRY = 5.0  # first retry after the API server refused a write as invalid
REJECTED_RETRY_MAX = 300.0


@dataclass(frozen=True, slots=True)
class MembershipProgress:
    """``generation``: the pool generation membership last finished a pass for (until
    then UpToDate cannot be True); ``problem``: why the API server refused its last
    write as invalid ("" when none)."""

    generation: int | None = None
    problem: str = ""


@dataclass(frozen=True, slots=True)
class WantedSecret:
    """The pull secret members should have: ``ref`` None when the pool names none;
    ``content`` the ``.dockerconfigjson`` to seal to each member's key."""

    ref: dict[str, Any] | None
    hash: str | None
    content: bytes | None = None


class WriteRejected(Exception):
    """The API server refused a member write as invalid (400/422): retrying as is won't help."""

    def __init__(self, node: str, err: ApiError) -> None:
        super().__init__(f"the API server rejected the BootcNode of {node}: {err.message}")
        self.node = node


class MembershipReconciler:
    name = "membership"

    def __init__(
        self,
        ctx: Context,
        cancel_drain: Callable[[str], None],
        secret_state: Callable[[Obj], SecretState | None] = lambda pool: None,
        may_seal: Callable[[], bool] = lambda: True,
        on_processed: Callable[[str], None] = lambda pool: None,
        on_departures: Callable[[str], None] = lambda pool: None,
    ) -> None:
        """``on_processed(pool)``: membership caught up with a new generation, or its
        write problem changed; the status reconciler should look again.
        ``on_departures(pool)``: members left whose Nodes rollout gives back."""
        self.ctx = ctx
        self._on_departures = on_departures
        self._cancel_drain = cancel_drain
        self._secret_state = secret_state
        # whether a sealed pull secret isolates the nodes (the daemons' node-scope
        # admission policy is enforced, ``watchers.nodescope``): else nothing is sealed
        self._may_seal = may_seal
        self._on_processed = on_processed
        self._rejections: dict[str, int] = {}  # pool -> invalid writes in a row
        self._generations: dict[str, int] = {}  # pool -> generation last fully processed
        self._problems: dict[str, str] = {}  # pool -> why the API server refused a write
        self._bad_keys: dict[str, str] = {}  # node -> an unusable sealingKey it published

    def progress(self, pool_name: str) -> MembershipProgress:
        """How far membership got with a pool, for the status reconciler."""
        return MembershipProgress(
            self._generations.get(pool_name), self._problems.get(pool_name, "")
        )

    def _wanted_secret(self, pool: Obj) -> WantedSecret | None:
        ref = (pool.get("spec") or {}).get("pullSecretRef")
        if not ref:
            return WantedSecret(None, None)
        state = self._secret_state(pool)
        if state is None or state.hash is None:
            return None
        return WantedSecret(
            {"name": ref["name"], "namespace": ref["namespace"]},
            state.hash,
            state.dockerconfigjson,
        )

    def _sealed_fields(self, bn: Obj, wanted: WantedSecret) -> dict[str, Any]:
        """The spec fields that (re)seal or clear ``sealedPullSecret`` for this member
        (``sealing_plan.seal_action``); {} when the blob stays as it is."""
        node = bn["metadata"]["name"]
        spec = bn.get("spec") or {}
        if not wanted.ref:
            # The pool names no pull secret: a blob left is cleared, nothing is sealed
            # (and sealing's cryptography, ~8 MiB, is never loaded).
            action = seal_action(spec, None, None, None)
            return {"sealedPullSecret": None} if action is SealAction.CLEAR else {}
        from bootc_operator.sealing import SealingError, key_id, seal  # noqa: PLC0415

        published = (bn.get("status") or {}).get("sealingKey")
        node_key: str | None = None
        if isinstance(published, str):
            try:
                node_key = key_id(published)
            except SealingError as err:
                self._bad_key(node, published, err)
        action = seal_action(spec, wanted.ref, wanted.hash, node_key)
        if action is SealAction.CLEAR:
            return {"sealedPullSecret": None}
        if (
            action is SealAction.KEEP
            or not isinstance(published, str)
            or node_key is None
            or wanted.hash is None
            or wanted.content is None
        ):
            return {}
        if not self._may_seal():
            return {}  # the pool says why (SealingUnavailable); the node keeps its blob
        try:
            sealed = seal(wanted.content, published, node=node, secret_hash=wanted.hash)
        except SealingError as err:
            self._bad_key(node, published, err)
            return {}
        log.info(
            "pull secret sealed to the node's key",
            extra={"node": node, "key_id": node_key[:12], "hash": wanted.hash},
        )
        return {"sealedPullSecret": sealed.to_wire()}

    def _bad_key(self, node: str, published: str, err: Exception) -> None:
        """Log an unusable status.sealingKey once per node and key: nothing is sealed to it."""
        if self._bad_keys.get(node) != published:
            self._bad_keys[node] = published
            log.warning("%s; not sealing the pull secret to it", err, extra={"node": node})

    async def reconcile(self, pool_name: str) -> float | None:
        async with self.ctx.pool_lock(pool_name):
            return await self._reconcile(pool_name)

    async def _reconcile(self, pool_name: str) -> float | None:
        ctx = self.ctx
        pool = ctx.pool(pool_name)
        if pool is None:
            ctx.knowledge.departures.pop(pool_name, None)
            return None
        meta = pool["metadata"]
        if meta.get("deletionTimestamp"):
            await self._finalize(pool)
            return None
        if c.POOL_FINALIZER not in (meta.get("finalizers") or []):
            pool = await ctx.patch_pool(
                pool,
                {"metadata": {"finalizers": [*(meta.get("finalizers") or []), c.POOL_FINALIZER]}},
            )
        policy = ctx.policy(pool)
        if not policy.selector_ok:
            ctx.knowledge.departures.pop(pool_name, None)
            self._processed(pool)  # nothing to match; status says InvalidSpec
            return None
        assignment = assign_nodes(ctx.all_pools(), ctx.all_nodes(), ctx.current_owners())
        members = set(assignment.members(pool_name))
        leaving = [b for b in ctx.bootc_nodes_of(pool_name) if b["metadata"]["name"] not in members]
        desired = policy.desired_image
        try:
            await each(
                self._hand_over(pool_name, leaving),
                lambda bn: self.release(
                    bn, still_managed=bn["metadata"]["name"] in assignment.owner
                ),
            )
            await each(sorted(members), lambda name: self._ensure_member(pool, name, policy))
        except WriteRejected as err:
            return self._rejected(pool, err)
        self._rejections.pop(pool_name, None)
        if self._problems.pop(pool_name, None) is not None:
            self._on_processed(pool_name)
        if (desired is not None or not members) and not ctx.knowledge.departing(pool_name):
            # Members exist with the target (or there are none to create) and the
            # leavers are gone: status may now count them against this generation.
            self._processed(pool)
        state = self._secret_state(pool)
        return SECRET_RETRY if state is not None and state.pending else None

    def _processed(self, pool: Obj) -> None:
        name, generation = pool["metadata"]["name"], pool["metadata"].get("generation")
        if generation is not None and self._generations.get(name) != generation:
            self._generations[name] = generation
            self._on_processed(name)

    def _rejected(self, pool: Obj, err: WriteRejected) -> float:
        """A write the API server refused as invalid: a condition and backoff, not a loop."""
        name = pool["metadata"]["name"]
        failures = self._rejections[name] = self._rejections.get(name, 0) + 1
        delay = min(REJECTED_RETRY * 2.0 ** (failures - 1), REJECTED_RETRY_MAX)
        if self._problems.get(name) != str(err):
            self._problems[name] = str(err)
            self._on_processed(name)  # status shows it
        log.warning(
            "%s; retrying in %.0fs",
            err,
            delay,
            extra={"pool": name, "node": err.node, "attempt": failures},
        )
        return delay

    async def _ensure_member(self, pool: Obj, node_name: str, policy: PoolPolicy) -> None:
        try:
            await self._ensure_member_writes(pool, node_name, policy)
        except ApiError as err:
            if err.status not in (400, 422):
                raise
            raise WriteRejected(node_name, err) from err

    async def _ensure_member_writes(self, pool: Obj, node_name: str, policy: PoolPolicy) -> None:
        ctx = self.ctx
        desired = policy.desired_image
        bn = ctx.bootc_node(node_name)
        if bn is not None and pool_of(bn) != pool["metadata"]["name"]:
            return  # still owned by the pool that lost it; that pool releases it first
        # (ref, hash) to publish, or None to leave the node's credentials as they are
        # (the Secret is missing or malformed: nodes keep their last good ones).
        wanted = self._wanted_secret(pool)
        if bn is None:
            if desired is None:
                return
            await self._create_member(pool, node_name, policy, desired, wanted)
        else:
            await self._update_member(pool, bn, policy, wanted)
        await ctx.set_managed_label(node_name, True)

    async def _create_member(
        self,
        pool: Obj,
        node_name: str,
        policy: PoolPolicy,
        desired: str,
        wanted: WantedSecret | None,
    ) -> None:
        spec: dict[str, Any] = {"desiredImage": desired, "desiredImageState": STAGED}
        if wanted is not None and wanted.ref:
            # no seal yet: the node's daemon publishes its key once it runs
            spec["pullSecretRef"], spec["pullSecretHash"] = wanted.ref, wanted.hash
        if policy.reboot_policy:
            spec["rebootPolicy"] = policy.reboot_policy
        await self.ctx.create_bootc_node(member_body(pool, node_name, spec))
        log.info("node joined pool", extra={"pool": pool["metadata"]["name"], "node": node_name})
        self.ctx.recorder.emit_batched(
            pool_ref(pool),
            "Normal",
            "NodeJoined",
            "Membership",
            subject=node_name,
            note=f"{node_name} joined the pool",
            summary="{n} nodes joined the pool",
        )

    async def _update_member(
        self, pool: Obj, bn: Obj, policy: PoolPolicy, wanted: WantedSecret | None
    ) -> None:
        """One patch of what differs: the pool label, the pull secret (ref, hash and
        seal together), the reboot policy. The target is the rollout loop's to change
        (``slots.retargets_due``)."""
        pool_name = pool["metadata"]["name"]
        current = bn.get("spec") or {}
        patch: dict[str, Any] = {}
        have = bn["metadata"].get("labels") or {}
        if have.get(c.POOL_LABEL) != pool_name:
            # owned through its ownerReference only (the Go operator writes no labels)
            patch.setdefault("metadata", {}).setdefault("labels", {})[c.POOL_LABEL] = pool_name
        if wanted is not None:
            # ref, hash and the blob bound to them: always in one request
            secret_patch = self._sealed_fields(bn, wanted)
            if (current.get("pullSecretRef"), current.get("pullSecretHash")) != (
                wanted.ref,
                wanted.hash,
            ):
                secret_patch["pullSecretRef"] = wanted.ref
                secret_patch["pullSecretHash"] = wanted.hash
            if secret_patch:
                patch.setdefault("spec", {}).update(secret_patch)
        if current.get("rebootPolicy") != policy.reboot_policy:
            patch.setdefault("spec", {})["rebootPolicy"] = policy.reboot_policy
        if patch:
            await self.ctx.patch_bootc_node(bn, patch)

    def _hand_over(self, pool_name: str, leaving: list[Obj]) -> list[Obj]:
        """Leaving members whose Node a slot changed go to rollout first (module doc):
        their drains cancelled at once, their names in ``PoolKnowledge.departures``.
        The others, to release now."""
        ctx = self.ctx
        handed = [
            bn
            for bn in leaving
            if ctx.node(bn["metadata"]["name"]) is not None
            and gives_node_back(bn["metadata"].get("annotations") or {})
        ]
        names = frozenset(bn["metadata"]["name"] for bn in handed)
        if not names:
            ctx.knowledge.departures.pop(pool_name, None)
            return leaving
        for name in names:
            self._cancel_drain(name)
        ctx.knowledge.departures[pool_name] = names
        self._on_departures(pool_name)
        return [bn for bn in leaving if bn["metadata"]["name"] not in names]

    async def release(self, bn: Obj, *, still_managed: bool = False) -> None:
        """Let a node go whose Node no slot changes (``_hand_over``): cancel its drain,
        unlabel, delete its BootcNode."""
        ctx = self.ctx
        name = bn["metadata"]["name"]
        pool_name = pool_of(bn) or ""
        self._cancel_drain(name)
        if not still_managed:
            await ctx.set_managed_label(name, False)
        await ctx.delete_bootc_node(bn)
        log.info("node left pool", extra={"pool": pool_name, "node": name})
        ctx.recorder.emit(
            ctx.node_ref(name), "Normal", "NodeLeft", "Membership", f"{name} left pool {pool_name}"
        )

    async def _finalize(self, pool: Obj) -> None:
        ctx = self.ctx
        pool_name = pool["metadata"]["name"]
        finalizers = pool["metadata"].get("finalizers") or []
        cleanup = (c.POOL_FINALIZER, c.GO_POOL_FINALIZER)
        if not any(f in finalizers for f in cleanup):
            return
        assignment = assign_nodes(ctx.all_pools(), ctx.all_nodes(), ctx.current_owners())

        async def release(bn: Obj) -> None:
            name = bn["metadata"]["name"]
            await self.release(bn, still_managed=assignment.owner.get(name, pool_name) != pool_name)

        members = ctx.bootc_nodes_of(pool_name)
        free = self._hand_over(pool_name, members)
        await each(free, release)
        if len(free) < len(members):
            return  # rollout gives their Nodes back, then wakes us to finish
        # the Go operator's finalizer guards the same cleanup, just done: a pool taken
        # over from it would otherwise never go
        remaining = [f for f in finalizers if f not in cleanup]
        try:
            await ctx.patch_pool(pool, {"metadata": {"finalizers": remaining or None}})
        except ApiError as err:
            if err.not_found:  # a pass on a stale cache: an earlier one already finished
                return
            raise
        log.info("pool cleaned up", extra={"pool": pool_name})
