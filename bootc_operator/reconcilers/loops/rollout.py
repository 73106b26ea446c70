"""Rollout: reboot slots, cordon, drain and the switch to ``desiredImageState: Booted``.

``reconcile(pool_name)`` turns ``slots.plan_rollout`` into writes in three
steps, strictly in this order so the number of slot holders never exceeds
maxUnavailable even if a write fails half-way. Within a step the nodes are
handled concurrently, at most ``fanout.WRITE_CONCURRENCY`` at once (a wave of
hundreds of nodes would otherwise cost hundreds of sequential round trips); each
node's own writes keep their order, and one node's failure never stops another
node's steps (``fanout.settle``): a node whose write the API server refuses (a
422: say, a Node carrying annotations too long to record) must not leave the
nodes that took a slot beside it cordoned and undrained. Only a failed release
stops the takes of the same pass (its node may still hold its slot). A refused
write (400, 403, 413, 422, or a take whose record does not fit) is remembered
(``policy.refusals``): the node is named in the pool's Degraded message
(NodeDegraded) and in a Warning Event, and a node whose take was refused is no
candidate until its retry (capped backoff), so the slot goes to the next one. Any
other failure (a conflict, a timeout) is raised at the end of the pass, which is
retried from fresh caches.

Before the steps, whatever the spec (this loop is the one writer of a slot's fields,
on the BootcNode and on its Node):

- **departures**: the members membership let go whose Node a slot changed
  (``PoolKnowledge.departures``; also those of a pool being deleted) get their
  Nodes back (drain cancelled, cordon and autoscaler annotations restored, the
  slot's record cleared), then membership is woken to delete their BootcNodes; a
  failure ends the pass, so no slot is taken meanwhile;
- **retargets**: every member due (``slots.retargets_due``: a slot holder, and
  without stageAhead every other member, unless held back from the digest) whose
  desiredImage is not the pool's target gets desiredImage and ``Staged`` in one
  write (this loop is the one writer of both once membership created the
  BootcNode); a holder not yet told to reboot gives its slot back in it (drain
  cancelled, cordon restored first), a ``DrainCancelled`` step. A BootcNode from
  before the ``bootc.dev/desired-digest`` label gets it. A pass that wrote one
  ends there: its own writes wake it again.

The steps:

1. **release** holders that are done (UpToDate, Idle, Ready) or whose target
   moved before they rebooted: cancel the drain, uncordon unless
   ``bootc.dev/was-cordoned: "true"``, put the autoscaler annotations back as
   ``bootc.dev/autoscaler-prior`` recorded them (``policy/autoscaler.py``),
   remove the slot annotations;
2. **take** new slots: annotate the BootcNode (``bootc.dev/in-reboot-slot`` =
   time taken, ``bootc.dev/was-cordoned``, ``bootc.dev/autoscaler-prior``, read
   from the cached Node) *then* cordon the Node and annotate it for the
   autoscalers (one write, conditional on the Node's resourceVersion as read, so
   the record is exactly what the cordon replaced; on 409 the Node is read from
   the server, the record corrected and the cordon tried again), then start its
   drain;
3. **health gate** (``spec.health``, ``health.py``): a holder that rebooted into
   the target keeps its slot until its checks pass; its BootcNode's
   ``bootc.dev/health-check`` annotation says which check is pending. A failed
   gate halts the rollout; with ``onFailure: Rollback`` the holder is pointed
   at its rollback deployment (``desiredImage`` = that digest, ``Booted``,
   ``bootc.dev/health-failed`` = the target digest, a fresh
   ``reboot-requested``, in one write): our daemon applies it with ``bootc
   rollback`` and reboots (the node is still cordoned and drained), and once it
   runs that image again its slot is released like any other;
4. **drain** every holder that still needs it (those that kept their slot beside
   steps 1-3, not behind their writes: none of it adds a holder; a node taken in
   this pass once its cordon is written; a holder whose drain finished meanwhile
   at the end of the pass): keep it cordoned, keep its drain task running; once
   drained set ``desiredImageState: Booted`` and
   ``bootc.dev/reboot-requested`` (the reboot timeout's start, to the microsecond)
   in one write (with a resourceVersion precondition, so a desiredImage change that
   raced us wins);
   past the drain timeout (``drain.timeoutSeconds``, else ``drainTimeoutSeconds``)
   do what ``drain.onTimeout`` says (``drainplan.timeout_action``): by default give
   the slot back, restore the cordon and mark the BootcNode
   ``bootc.dev/drain-blocked`` naming the blocking pods, so the rollout goes
   around it; ``Skip`` the same with ``bootc.dev/drain-skipped`` (tried again
   later, a bounded number of times); ``Halt`` keep the slot and the drain (the
   plan starts no new slots); ``Force`` have the drain delete the pods left.

A pool whose target was withdrawn (``spec.image.verification``: the signature loop
found the keys unusable, or refused the digest with the keys the pool trusts now;
``PoolKnowledge.withdrawn``) has no target: instead of the steps, the holders not yet
told to reboot give their slots back at once (drain cancelled, cordon restored, a
``TargetWithdrawn`` Warning on the node and the pool), and those told to reboot once
their node is back (``slots.plan_withdrawn``). A target merely not known yet (a tag
not resolved, a signature not checked since a restart or a key change) freezes the
pool as it is.

All rollout state lives in BootcNode annotations; a restarted (or newly
elected) controller resumes drains of slotted nodes from them. Before the steps,
slots a previous controller left in a state this one never writes (the Go
operator's: no time on the slot, ``Booted`` without ``reboot-requested``) are
adopted (``slots.adoption``, a Normal ``SlotAdopted`` Event saying what was found
and what happens next), and any other ``Booted`` without a drained slot is put
back to ``Staged`` (an ``UnsafeBootedRestored`` Warning).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from bootc_operator.api import constants as c
from bootc_operator.api.timefmt import micro_time, parse_time
from bootc_operator.api.v1alpha1 import RebootKind
from bootc_operator.gates.healthqueries import HealthQueries
from bootc_operator.kube import ApiError
from bootc_operator.policy.autoscaler import UnrecordableProtection, prior_record, protection
from bootc_operator.policy.drainplan import (
    MAX_TRIES,
    DrainPolicy,
    TimeoutAction,
    timeout_action,
)
from bootc_operator.policy.health import (
    GateResult,
    Verdict,
)
from bootc_operator.policy.nodestate import NodeState, NodeView, drain_skips_of
from bootc_operator.policy.ownership import digest_label_patch, retarget_patch
from bootc_operator.policy.poolspec import PoolPolicy
from bootc_operator.policy.refusals import TAKE, Refusals
from bootc_operator.policy.slots import (
    BOOTED,
    STAGED,
    Adoption,
    RolloutPlan,
    adoption,
    adoption_patch,
    asked_to_reboot,
    gives_node_back,
    gives_slot_back_on_retarget,
    hold_repair_patch,
    is_candidate,
    must_restore_staged,
    next_reboot_deadline,
    plan_pool,
    plan_withdrawn,
    release_annotations,
    release_patch,
    retargets_due,
    take_patch,
)
from bootc_operator.reconcilers.context import Context, Obj, pool_ref
from bootc_operator.reconcilers.fanout import each, settle
from bootc_operator.reconcilers.metrics import (
    DRAIN_OUTCOMES,
    HEALTH_CHECK_DURATION,
    HEALTH_CHECK_FAILURES,
    NODE_REBOOTS,
    NODE_UPDATE_DURATION,
    ROLLBACKS,
)
from bootc_operator.reconcilers.watchers.drain import DrainManager, DrainResult
from bootc_operator.reconcilers.watchers.healthpods import HealthPods, health_gates

log = logging.getLogger("rollout")


#: answers of the API server that refuse a write as such: the same write fails again
REFUSED_STATUSES = frozenset({400, 403, 413, 422})


def refused_because(err: Exception) -> str | None:
    """Why a step was refused for good (retrying it as is fails again); None: another
    failure (a conflict, a timeout, a 5xx), retried with the pass."""
    if isinstance(err, UnrecordableProtection):
        return str(err)
    if isinstance(err, ApiError) and err.status in REFUSED_STATUSES:
        return f"the API server refused the write ({err.status}): {err.message[:300]}"
    return None


#: cordons tried on a take before the pass gives up (each after a 409: the Node moved)
TAKE_ATTEMPTS = 3


def slot_record(node: Obj | None) -> tuple[bool, str]:
    """What a slot records of its Node: was it cordoned, and its autoscaler annotations
    (``autoscaler.prior_record``). A Node not (or no longer) there had neither."""
    meta = (node or {}).get("metadata") or {}
    cordoned = bool((node or {}).get("spec", {}).get("unschedulable"))
    return cordoned, prior_record(meta.get("annotations") or {})


def resource_version(obj: Obj | None) -> str | None:
    return None if obj is None else (obj["metadata"].get("resourceVersion") or None)


def slot_taken_at(bn: Obj) -> dt.datetime | None:
    value = (bn["metadata"].get("annotations") or {}).get(c.IN_REBOOT_SLOT_ANNOTATION)
    return parse_time(value)


class _Steps:
    """One pass's per-node steps: each runs on its nodes concurrently (``settle``);
    which (step, node) were tried, which node failed in which step, and a node's
    refusal cleared once its step went through."""

    def __init__(self, rollout: RolloutReconciler, pool_name: str) -> None:
        self.rollout = rollout
        self.pool_name = pool_name
        self.failed: dict[str, tuple[str, Exception]] = {}  # node -> (step, error)
        self.tried: set[tuple[str, str]] = set()  # (step, node)

    async def __call__(
        self, what: str, names: Sequence[str], run: Callable[[str], Awaitable[float | None]]
    ) -> dict[str, float | None]:
        self.tried.update((what, n) for n in names)
        done, errors = await settle(names, run)
        for name, err in errors.items():
            self.failed.setdefault(name, (what, err))
        refusals = self.rollout.refusals
        for name in done:
            if (r := refusals.get(self.pool_name, name)) is not None and r.step == what:
                refusals.clear(self.pool_name, name)
                self.rollout._on_problem(self.pool_name)
        return done


class RolloutReconciler:
    name = "rollout"

    def __init__(
        self,
        ctx: Context,
        drains: DrainManager,
        health_pods: HealthPods,
        *,
        verbose_node_events: bool = False,
        health_queries: HealthQueries | None = None,
        on_problem: Callable[[str], None] = lambda pool: None,
        on_departed: Callable[[str], None] = lambda pool: None,
    ) -> None:
        """``on_problem(pool)``: the refused writes of ``pool`` changed (``problems``):
        the status reconciler should look again. ``on_departed(pool)``: the Nodes of
        members membership let go were given back; it deletes their BootcNodes."""
        self.ctx = ctx
        self._on_departed = on_departed
        self.refusals = Refusals()
        self._on_problem = on_problem
        self.drains = drains
        self.health_pods = health_pods
        self.health_queries = health_queries
        # Per node and rollout: one Event (NodeUpdated, or a Warning) by default;
        # verbose adds the steps (Cordoned, RebootRequested, DrainCancelled).
        self.verbose_node_events = verbose_node_events
        # when this controller began rolling out: slots stamped earlier were taken
        # by a previous controller (slots.adoption)
        self._since: dt.datetime | None = None

    async def reconcile(self, pool_name: str) -> float | None:
        async with self.ctx.pool_lock(pool_name):
            return await self._reconcile(pool_name)

    async def _reconcile(self, pool_name: str) -> float | None:
        ctx = self.ctx
        pool = ctx.pool(pool_name)
        if pool is not None:
            bns = {bn["metadata"]["name"]: bn for bn in ctx.bootc_nodes_of(pool_name)}
            bns = await self._let_go(pool, bns)
        if pool is None or pool["metadata"].get("deletionTimestamp"):
            # nothing of it is gated any more: its pod watches and polls end with it
            self._retain_none(pool_name)
            return None
        policy = ctx.policy(pool)
        views = {n: ctx.view(bn, policy.targets) for n, bn in bns.items()}
        step = _Steps(self, pool_name)
        if await self._point_at_target(pool, bns, views, policy, step):
            # our own writes wake us again, from fresh caches
            return self.refusals.next_retry(pool_name, ctx.now())
        # Before anything else, and whatever the spec: slots a previous controller
        # left are adopted, and Booted on a node without a drained slot (that would
        # let its daemon reboot it undrained) is put back to Staged.
        if self._since is None:
            self._since = ctx.now()
        since = self._since
        if self.refusals.retain(pool_name, bns):
            self._on_problem(pool_name)
        adopt = {n: a for n, v in views.items() if (a := adoption(v, since)) is not None}
        await each(list(adopt), lambda n: self._adopt(pool, bns[n], adopt[n]))
        restore = [n for n, v in views.items() if must_restore_staged(v) and n not in adopt]
        await each(restore, lambda n: self._restore_staged(pool, bns[n], views[n]))
        if adopt or restore:
            return None  # our own writes wake us again, from fresh caches
        if not policy.valid or not policy.targets:
            self._retain_none(pool_name)  # no gate is judged meanwhile
            # a target withdrawn (its verification no longer holds): no node stays
            # cordoned for a reboot that will not come
            verified = policy.valid and policy.verification is not None
            if verified and (why := ctx.knowledge.withdrawn(pool)):
                await self._withdraw(pool, bns, views, why)
            return None
        return await self._roll(pool, policy, bns, views, step)

    async def _let_go(self, pool: Obj, bns: dict[str, Obj]) -> dict[str, Obj]:
        """Give back the Nodes of the members membership let go
        (``PoolKnowledge.departures``), then wake it to delete their BootcNodes; the
        other members, for the rest of the pass. A failure ends the pass: no slot is
        taken while a leaving holder may still hold one."""
        pool_name = pool["metadata"]["name"]
        leaving = sorted(
            n
            for n in self.ctx.knowledge.departing(pool_name)
            if n in bns and gives_node_back(bns[n]["metadata"].get("annotations") or {})
        )
        if leaving:
            await each(leaving, lambda n: self._give_back(bns[n]))
            self._on_departed(pool_name)
        departing = self.ctx.knowledge.departing(pool_name)
        return {n: bn for n, bn in bns.items() if n not in departing}

    async def _give_back(self, bn: Obj) -> None:
        """A leaving member's Node: drain cancelled, cordon and autoscaler annotations
        restored (``give_node_back``), then the slot's record cleared (``Staged``)."""
        name = bn["metadata"]["name"]
        self.drains.cancel(name)
        await self.ctx.give_node_back(name, bn["metadata"].get("annotations") or {})
        state = (bn.get("spec") or {}).get("desiredImageState", STAGED)
        await self.ctx.patch_bootc_node(bn, release_patch(state))

    async def _point_at_target(
        self,
        pool: Obj,
        bns: dict[str, Obj],
        views: dict[str, NodeView],
        policy: PoolPolicy,
        step: _Steps,
    ) -> bool:
        """Point the members due (``slots.retargets_due``) at the pool's target, and give
        a BootcNode that lacks it the desired-digest label of its desiredImage; True
        when a write went through. A refused write is remembered and reported
        (NodeDegraded, a WriteRefused Event) and the pass goes on without that node;
        any other failure is raised."""
        desired = policy.desired_image
        due = retargets_due(views.values(), policy)
        unlabelled = [n for n, v in views.items() if n not in due and not v.digest_labelled]
        done: dict[str, float | None] = {}
        if desired is not None:
            done |= await step("retarget", due, lambda n: self._retarget(pool, bns[n], desired))
        done |= await step("label", unlabelled, lambda n: self._label(bns[n]))
        if step.failed:
            self._failed(pool, step.failed, self.ctx.now())
            step.failed.clear()
        return bool(done)

    async def _label(self, bn: Obj) -> None:
        """The desired-digest label of a BootcNode from before the label (kubectl get)."""
        label = digest_label_patch(
            bn["metadata"].get("labels") or {}, (bn.get("spec") or {}).get("desiredImage")
        )
        await self.ctx.patch_bootc_node(bn, {"metadata": {"labels": label}})

    async def _retarget(self, pool: Obj, bn: Obj, desired: str) -> None:
        """desiredImage and ``Staged`` in one write (``ownership.retarget_patch``); a
        holder's through ``_retarget_holder``."""
        name = bn["metadata"]["name"]
        if c.IN_REBOOT_SLOT_ANNOTATION in (bn["metadata"].get("annotations") or {}):
            await self._retarget_holder(pool, bn, desired)
            return
        await self.ctx.patch_bootc_node(bn, retarget_patch(desired))
        log.info(
            "node target changed",
            extra={"pool": pool["metadata"]["name"], "node": name, "image": desired},
        )

    async def _retarget_holder(self, pool: Obj, bn: Obj, desired: str) -> None:
        """desiredImage and ``Staged`` in one write; a holder not yet told to reboot
        gives its slot back in it (its drain is void), its cordon restored first so a
        failure never leaves a node cordoned without a slot."""
        name, pool_name = bn["metadata"]["name"], pool["metadata"]["name"]
        held = bn["metadata"].get("annotations") or {}
        patch = retarget_patch(desired)
        self.drains.cancel(name)
        released = gives_slot_back_on_retarget(
            held, (bn.get("spec") or {}).get("desiredImageState", "")
        )
        if released:
            await self.ctx.give_node_back(name, held)
            patch["metadata"]["annotations"].update(release_annotations())
        await self.ctx.patch_bootc_node(bn, patch)
        log.info("node target changed", extra={"pool": pool_name, "node": name, "image": desired})
        if released:
            msg = f"{name}: target changed before its reboot; drain cancelled, slot released"
            summary = "the target changed before {n} nodes rebooted; drains cancelled"
            self._report(pool, name, "Normal", "DrainCancelled", msg, summary, step=True)

    async def _withdraw(
        self, pool: Obj, bns: dict[str, Obj], views: dict[str, NodeView], why: str
    ) -> None:
        """No digest's signature verification holds for the pool (``why``): slots not yet
        used for a reboot are given back, the others once their node is back
        (``slots.plan_withdrawn``); nothing is taken, drained or told to reboot."""
        pool_name = pool["metadata"]["name"]
        plan = plan_withdrawn(views.values())
        step = _Steps(self, pool_name)
        await step(
            "release",
            plan.release,
            lambda n: self._release(
                pool, bns[n], views[n], cancelled=False, gate=None, withdrawn=why
            ),
        )
        await step("hold", plan.holders, lambda n: self._keep_held(pool_name, bns[n], cordon=False))
        if self.refusals.prune(pool_name, lambda n, r: (r.step, n) in step.tried):
            self._on_problem(pool_name)
        if step.failed:
            self._failed(pool, step.failed, self.ctx.now())

    async def _roll(
        self,
        pool: Obj,
        policy: PoolPolicy,
        bns: dict[str, Obj],
        views: dict[str, NodeView],
        step: _Steps,
    ) -> float | None:
        """One pass of the plan's steps (``step``: the pass's, which may have tried
        retargets already); each node's steps independent of the others'."""
        pool_name = pool["metadata"]["name"]
        now = self.ctx.now()
        gates = health_gates(
            self.health_pods,
            pool_name,
            policy,
            views.values(),
            now,
            watch=True,
            health_queries=self.health_queries,
        )
        plan, window = plan_pool(
            policy,
            list(views.values()),
            now,
            gates,
            alerts_blocked=self.ctx.knowledge.alerts_blocked(pool),
            refused=self.refusals.excluded(pool_name, now, self._basis),
        )
        waits = await self._run_steps(pool, policy, bns, views, plan, gates, step, now)
        # a refusal whose step is not due any more (its node is no candidate for a
        # slot now, or its step was not tried) is not news on the pool any more
        if self.refusals.prune(
            pool_name,
            lambda n, r: (
                n in views and is_candidate(views[n])
                if r.step == TAKE
                else (r.step, n) in step.tried
            ),
        ):
            self._on_problem(pool_name)
        requeue: float | None = None
        if step.failed and self._failed(pool, step.failed, now):
            requeue = 0.1  # a take refused: the slot goes to the next candidate now
        waits = [*waits, self.refusals.next_retry(pool_name, now)]
        waits += [g.wait for g in gates.values()]  # minReadySeconds or the gate's timeout
        waits.append(next_reboot_deadline(views.values(), now, policy.reboot_timeout))
        if plan.window_closed and window.next_opening is not None:
            # slots wait for the window: look again when it opens (no polling)
            waits.append((window.next_opening - now).total_seconds() + 0.5)
        return min((w for w in [requeue, *waits] if w is not None), default=None)

    async def _run_steps(
        self,
        pool: Obj,
        policy: PoolPolicy,
        bns: dict[str, Obj],
        views: dict[str, NodeView],
        plan: RolloutPlan,
        gates: Mapping[str, GateResult],
        step: _Steps,
        now: dt.datetime,
    ) -> list[float | None]:
        """The plan's writes, step by step (module doc); the drains' next looks."""
        pool_name = pool["metadata"]["name"]

        def drive(n: str) -> Awaitable[float | None]:
            return self._drive_drain(pool, n, policy.drain, now)

        # The drains of the holders that keep their slot go beside the releases and
        # takes, not behind them: a drain found done gets its Booted write now rather
        # than after every write of the pass. They concern other nodes, and none adds
        # a holder (a drain past its timeout may give its slot back: one fewer).
        kept = [n for n in plan.drain if n not in plan.take]
        kept_waits, taken = await asyncio.gather(
            step("drain", kept, drive),
            self._hand_over(pool, policy, bns, views, plan, gates, step),
        )
        # the other holders (rebooting, under health check) keep their autoscaler
        # annotations too (the draining ones in _drive_drain, with their cordon)
        busy = {*plan.release, *plan.rollback, *plan.take, *plan.drain}
        holders = [n for n, v in views.items() if v.in_slot and n not in busy]
        await step("hold", holders, lambda n: self._keep_held(pool_name, bns[n], cordon=False))
        # The nodes whose take went through in this pass (their drain started with it;
        # a take that failed took no slot: its node is neither cordoned nor drained),
        # and the holders whose drain finished while the pass wrote: their Booted write
        # now, as this step always did, not after one more pass.
        late = [n for n in kept if n not in step.failed and self._drain_done(n)]
        waits = await step("drain", [n for n in plan.take if n in taken] + late, drive)
        desired = policy.desired_image
        if desired is not None:
            # stageAhead: the next few members start staging as others move on
            await step("retarget", plan.stage, lambda n: self._retarget(pool, bns[n], desired))
        return list({**kept_waits, **waits}.values())

    def _drain_done(self, name: str) -> bool:
        """Its drain finished and its Booted write is still to come (``_drained``
        forgets the result once written)."""
        res = self.drains.result(name)
        return res is not None and res.done

    async def _hand_over(
        self,
        pool: Obj,
        policy: PoolPolicy,
        bns: dict[str, Obj],
        views: dict[str, NodeView],
        plan: RolloutPlan,
        gates: Mapping[str, GateResult],
        step: _Steps,
    ) -> dict[str, float | None]:
        """Releases, health notes, rollbacks, then takes; the nodes taken."""
        # Per-node steps run concurrently (bounded); every release completes before
        # any take starts, so holders never exceed maxUnavailable: a release that
        # failed (its node may still hold its slot) stops this pass' takes.
        released = await step(
            "release",
            plan.release,
            lambda n: self._release(
                pool, bns[n], views[n], cancelled=n in plan.cancel, gate=gates.get(n)
            ),
        )
        await step(
            "health note",
            [n for n in gates if n not in plan.release and n not in plan.rollback],
            lambda n: self._note_gate(pool, bns[n], views[n], gates[n]),
        )
        await step(
            "rollback",
            plan.rollback,
            lambda n: self._roll_back(pool, bns[n], views[n], gates[n], policy),
        )
        takes = plan.take if len(released) == len(plan.release) else ()
        return await step(TAKE, takes, lambda n: self._take_and_drain(pool, bns[n], policy))

    async def _take_and_drain(self, pool: Obj, bn: Obj, policy: PoolPolicy) -> None:
        """Take a slot (step 2), then start the node's drain as soon as its own cordon
        is written (``_take`` returned), not after the other takes of the pass: its
        first pod read waits up to ~100 ms for the apiserver's watch cache, and that
        wait overlaps the rest of the pass. The drain step finds it running, or done."""
        await self._take(pool, bn)
        self._start_drain(bn["metadata"]["name"], pool["metadata"]["name"], policy.drain)

    def _start_drain(self, name: str, pool_name: str, drain: DrainPolicy) -> DrainResult:
        """The holder's drain task, started unless it runs or is done; its result."""
        return self.drains.ensure(name, pool_name, drain.grace_period, drain.delete_emptydir_data)

    def problems(self, pool: Obj) -> dict[str, str]:
        """The pool's refused writes, named by node (NodeDegraded)."""
        message = self.refusals.message(pool["metadata"]["name"])
        return {c.REASON_NODE_DEGRADED: message} if message else {}

    def _basis(self, name: str) -> str:
        """What a refused take depended on: the Node's autoscaler annotations (the
        record that did not fit); once they change the node may try again at once."""
        node = self.ctx.node(name)
        values = protection(node) if node is not None else {}
        return hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()

    def _failed(
        self, pool: Obj, failed: dict[str, tuple[str, Exception]], now: dt.datetime
    ) -> bool:
        """After a pass: remember and report the refused steps; raise any other failure
        (the pass is retried with backoff; the other nodes' steps have been done).
        True when a take was refused."""
        pool_name = pool["metadata"]["name"]
        other: Exception | None = None
        took = False
        for name, (what, err) in sorted(failed.items()):
            why = refused_because(err)
            if why is None:
                log.warning(f"{what} failed: {err}", extra={"pool": pool_name, "node": name})
                other = other or err
                continue
            before = self.refusals.get(pool_name, name)
            basis = self._basis(name) if what == TAKE else ""
            refusal = self.refusals.refuse(pool_name, name, what, f"{name}: {why}", now, basis)
            retry = (refusal.retry_at - now).total_seconds()
            if what == TAKE:
                took = True
                consequence = f"it takes no reboot slot; tried again in {retry:.0f}s"
            else:
                consequence = f"its {what} is tried again on the next pass"
            msg = f"{refusal.message}; {consequence}"
            log.warning(msg, extra={"pool": pool_name, "node": name})
            if before is None or before.message != refusal.message:
                self._on_problem(pool_name)
                reason = "SlotRefused" if what == TAKE else "WriteRefused"
                summary = "{n} nodes' rollout writes were refused (see the pool's Degraded)"
                self._report(pool, name, "Warning", reason, msg, summary)
        if other is not None:
            raise other
        return took

    def _retain_none(self, pool_name: str) -> None:
        self.health_pods.retain((), pool_name)
        if self.health_queries is not None:
            self.health_queries.retain((), pool_name)

    async def _note_gate(self, pool: Obj, bn: Obj, v: NodeView, gate: GateResult) -> None:
        """Say on the BootcNode which check is pending (or failed), once per change."""
        note = gate.describe()[:1000]
        if note == v.health_note:
            return
        await self.ctx.patch_bootc_node(
            bn, {"metadata": {"annotations": {c.HEALTH_CHECK_ANNOTATION: note}}}
        )
        if gate.verdict is not Verdict.FAILED:
            return
        pool_name = pool["metadata"]["name"]
        HEALTH_CHECK_FAILURES.labels(pool_name, gate.check).inc()
        msg = (
            f"{v.name} failed its health check on {v.booted_digest}: {gate.check}: "
            f"{gate.message}; it keeps its reboot slot and no new reboots start"
        )
        log.warning(msg, extra={"pool": pool_name, "node": v.name})
        summary = "{n} nodes failed their health check; the rollout is halted"
        self._report(pool, v.name, "Warning", "HealthCheckFailed", msg, summary)

    async def _roll_back(
        self, pool: Obj, bn: Obj, v: NodeView, gate: GateResult, policy: PoolPolicy
    ) -> None:
        """Point a holder that failed its health gate at its rollback deployment."""
        ctx = self.ctx
        assert v.rollback_image is not None  # plan_rollout only rolls back when known
        failed_on = policy.target_digest or v.booted_digest or ""
        patch = retarget_patch(v.rollback_image)
        patch["spec"]["desiredImageState"] = BOOTED
        patch["metadata"]["annotations"] = {
            c.HEALTH_FAILED_ANNOTATION: failed_on,
            c.HEALTH_CHECK_ANNOTATION: gate.describe()[:1000],
            c.REBOOT_REQUESTED_ANNOTATION: micro_time(ctx.now()),
        }
        await ctx.patch_bootc_node(bn, patch)
        pool_name = pool["metadata"]["name"]
        HEALTH_CHECK_FAILURES.labels(pool_name, gate.check).inc()
        ROLLBACKS.labels(pool_name).inc()
        msg = (
            f"{v.name} failed its health check on {failed_on}: {gate.check}: {gate.message}; "
            f"rolling back to {v.rollback_image}"
        )
        log.warning(msg, extra={"pool": pool_name, "node": v.name})
        summary = "{n} nodes failed their health check and are being rolled back"
        self._report(pool, v.name, "Warning", "HealthCheckFailed", msg, summary)

    async def _adopt(self, pool: Obj, bn: Obj, adopt: Adoption) -> None:
        """Take over a slot holder a previous controller left (slots.adoption)."""
        name = bn["metadata"]["name"]
        await self.ctx.patch_bootc_node(bn, adoption_patch(adopt, micro_time(self.ctx.now())))
        pool_name = pool["metadata"]["name"]
        msg = adopt.message(name)
        log.info(msg, extra={"pool": pool_name, "node": name})
        summary = "{n} reboot slots adopted from a previous controller"
        self._report(pool, name, "Normal", "SlotAdopted", msg, summary)

    async def _restore_staged(self, pool: Obj, bn: Obj, v: NodeView) -> None:
        """Put a Booted that the rollout did not write back to Staged (slots.py)."""
        await self.ctx.patch_bootc_node(bn, {"spec": {"desiredImageState": STAGED}})
        pool_name = pool["metadata"]["name"]
        if v.state is NodeState.UP_TO_DATE:
            # Already runs its image (e.g. left so by an earlier operator): nothing to undo.
            log.info("desiredImageState reset to Staged", extra={"pool": pool_name, "node": v.name})
            return
        missing = "a reboot slot" if not v.in_slot else "a finished drain"
        msg = (
            f"desiredImageState of {v.name} was set to Booted without {missing}; "
            "restored Staged so the node is not rebooted undrained"
        )
        log.warning(msg, extra={"pool": pool_name, "node": v.name})
        summary = "{n} nodes had desiredImageState Booted without a drained reboot slot; restored"
        self._report(pool, v.name, "Warning", "UnsafeBootedRestored", msg, summary)

    async def _release(
        self,
        pool: Obj,
        bn: Obj,
        v: NodeView,
        *,
        cancelled: bool,
        gate: GateResult | None,
        withdrawn: str = "",
    ) -> None:
        """Give ``v``'s slot back; ``withdrawn``: why the pool's target was withdrawn
        (``plan_withdrawn``), for the Event."""
        ctx = self.ctx
        name = v.name
        self.drains.cancel(name)
        await ctx.give_node_back(name, bn["metadata"].get("annotations") or {})
        taken = slot_taken_at(bn)
        # a rolled-back node keeps the note saying why it was held back
        keep = {c.HEALTH_CHECK_ANNOTATION: v.health_note} if v.rolling_back else None
        await ctx.patch_bootc_node(bn, release_patch(v.desired_image_state, keep))
        pool_name = pool["metadata"]["name"]
        # how the node rebooted, as its daemon wrote with Rebooting (a daemon that does not
        # write lastRebootKind only reboots fully); a cancelled holder never rebooted
        soft = (bn.get("status") or {}).get("lastRebootKind") == RebootKind.SOFT.value
        if v.reboot_requested_at is not None and not cancelled:
            NODE_REBOOTS.labels(pool_name, "soft" if soft else "full").inc()
        if v.rolling_back:
            self._report_rolled_back(pool, v)
            return
        if withdrawn and not asked_to_reboot(v):
            self._report_withdrawn(pool, v, withdrawn)
            return
        if cancelled:
            msg = f"{name}: target changed before its reboot; drain cancelled, slot released"
            log.info(msg, extra={"pool": pool_name, "node": name})
            summary = "the target changed before {n} nodes rebooted; drains cancelled"
            self._report(pool, name, "Normal", "DrainCancelled", msg, summary, step=True)
            return
        if taken is not None:
            NODE_UPDATE_DURATION.observe(max(0.0, (ctx.now() - taken).total_seconds()))
        self._report_updated(pool, bn, v, gate, soft=soft, withdrawn=withdrawn)

    def _report_rolled_back(self, pool: Obj, v: NodeView) -> None:
        """The RolledBack Event of a holder released after its health-gate rollback."""
        name, pool_name = v.name, pool["metadata"]["name"]
        kept = "left cordoned as it was before" if v.was_cordoned else "uncordoned"
        msg = (
            f"{name} was rolled back to {v.booted_digest} after failing its health check "
            f"on {v.health_failed}; {kept}, slot released; it is not updated to "
            f"{v.health_failed} again until the pool's target changes"
        )
        log.info(msg, extra={"pool": pool_name, "node": name})
        summary = "{n} nodes were rolled back after failing their health check"
        self._report(pool, name, "Warning", "RolledBack", msg, summary)

    def _report_updated(
        self,
        pool: Obj,
        bn: Obj,
        v: NodeView,
        gate: GateResult | None,
        *,
        soft: bool,
        withdrawn: str,
    ) -> None:
        """The NodeUpdated Event of a holder released on its target (and the health
        check's duration)."""
        ctx = self.ctx
        name, pool_name = v.name, pool["metadata"]["name"]
        kept = "left cordoned as it was before" if v.was_cordoned else "uncordoned"
        checked = ""
        if gate is not None and v.reboot_requested_at is not None:
            took = max(0.0, (ctx.now() - v.reboot_requested_at).total_seconds())
            HEALTH_CHECK_DURATION.observe(took)
            checked = f", healthy {took:.0f}s after its reboot request"
        drained = (bn["metadata"].get("annotations") or {}).get(c.DRAIN_SUMMARY_ANNOTATION)
        drained = f"; drained before its reboot: {drained}" if drained else ""
        how = " (soft reboot)" if soft else ""
        msg = (
            f"{name} runs {v.booted_digest or 'the target'}{how}{checked}; {kept}, "
            f"slot released{drained}"
        )
        if withdrawn:
            msg += (
                "; the pool's target was withdrawn meanwhile (its signature verification "
                "no longer holds): no other node is told to reboot until a digest verifies"
            )
        log.info("node updated", extra={"pool": pool_name, "node": name})
        summary = "{n} nodes updated and released their slots"
        self._report(pool, name, "Normal", "NodeUpdated", msg, summary)

    def _report_withdrawn(self, pool: Obj, v: NodeView, why: str) -> None:
        """A Warning on the node and the pool: its slot was given back, unused, because
        the pool's target was withdrawn before the node was told to reboot."""
        kept = "left cordoned as it was before" if v.was_cordoned else "uncordoned"
        digest = v.desired_image.rpartition("@")[2] or "its target"
        msg = (
            f"{v.name}: the pool's target {digest} was withdrawn before {v.name} was told to "
            f"reboot (its signature verification no longer holds: {why[:300]}); drain "
            f"cancelled, {kept}, reboot slot released; it is not rebooted until a digest "
            "verifies again"
        )
        log.warning(msg, extra={"pool": pool["metadata"]["name"], "node": v.name})
        summary = "{n} nodes gave their reboot slots back: the pool's target was withdrawn"
        self._report(pool, v.name, "Warning", "TargetWithdrawn", msg, summary)

    def _report(
        self,
        pool: Obj,
        name: str,
        type_: str,
        reason: str,
        note: str,
        summary: str,
        *,
        node_reason: str = "",
        pool_note: str = "",
        step: bool = False,
    ) -> None:
        """News about node ``name``: an Event on the node (as ``node_reason``, default
        ``reason``) and one on the pool, batched with other nodes'. A ``step`` of the
        rollout (slot taken, drained, drain cancelled) is an Event on the node only with
        ``--node-events=verbose``: by default a node hears once per rollout."""
        recorder = self.ctx.recorder
        recorder.emit_batched(
            pool_ref(pool),
            type_,
            reason,
            "Rollout",
            subject=name,
            note=pool_note or note,
            summary=summary,
        )
        if not step or self.verbose_node_events:
            recorder.emit(self.ctx.node_ref(name), type_, node_reason or reason, "Rollout", note)

    async def _take(self, pool: Obj, bn: Obj) -> None:
        ctx = self.ctx
        name = bn["metadata"]["name"]
        # What the slot will restore is read from the cache (with this process's own
        # writes), and the cordon is written only if the Node is still the version
        # read: a lagging cache (one that could show our own annotations of an earlier
        # slot as the admin's) fails the cordon with 409, and only then is the Node
        # read from the server, the record corrected and the cordon tried again.
        node = ctx.node(name)
        # The drain timeout counts from this stamp: the moment the take is written, to
        # the microsecond (issue 37 §6: a whole-second stamp from the start of the pass
        # cut drains short by up to a second plus the pass's earlier writes).
        taken = micro_time(ctx.now())
        recorded: tuple[bool, str] | None = None
        was_cordoned = False
        held = bn
        for attempt in range(1, TAKE_ATTEMPTS + 1):
            try:
                # bounded: a record that does not fit takes no slot (UnrecordableProtection)
                record = was_cordoned, prior = slot_record(node)
            except UnrecordableProtection:
                if recorded is not None:  # the Node read again: the slot was taken
                    await self._untake(name, held)
                raise
            if record != recorded:  # the first time, or the Node read again says otherwise
                taking = take_patch(taken, was_cordoned=was_cordoned, autoscaler_prior=prior)
                held = await ctx.patch_bootc_node(held, taking)
                recorded = record
            try:
                await ctx.hold_node(name, resource_version=resource_version(node))
                break
            except ApiError as err:
                if err.status in REFUSED_STATUSES:
                    await self._untake(name, held)
                    raise
                if not err.conflict or attempt == TAKE_ATTEMPTS:
                    raise  # the slot is held; the drain step cordons it on the next pass
            node = await ctx.live_node(name)
        pool_name = pool["metadata"]["name"]
        if was_cordoned:
            # Someone else cordoned it: we did not, and we will leave it cordoned.
            what = "was already cordoned by someone else (it stays cordoned afterwards)"
            node_reason = "AlreadyCordoned"
        else:
            what = "cordoned"
            node_reason = "Cordoned"
        log.info(f"reboot slot taken; {what}", extra={"pool": pool_name, "node": name})
        msg = f"{name} took a reboot slot in pool {pool_name}; {what}; draining"
        summary = "{n} nodes took a reboot slot"
        self._report(
            pool, name, "Normal", "SlotTaken", msg, summary, node_reason=node_reason, step=True
        )

    async def _untake(self, name: str, held: Obj) -> None:
        """The Node refuses the cordon and annotations (e.g. its own annotations fill
        its size limit): the slot goes straight back, or it would be held by a node
        that is never cordoned nor drained. The merge patch that failed changed
        nothing, so this restores nothing but what it recorded."""
        await self.ctx.give_node_back(name, held["metadata"].get("annotations") or {})
        await self.ctx.patch_bootc_node(held, release_patch(STAGED))

    async def _keep_held(self, pool_name: str, bn: Obj, *, cordon: bool) -> None:
        """Put back on a holder's Node what someone took off while its slot is held:
        the cordon (``cordon``: while it drains) and the autoscaler annotations
        (``autoscaler.protection_to_reapply``). Judged from the cache: the take's
        writes were forced, so a lagging cache costs at most a needless write."""
        name = bn["metadata"]["name"]
        node = self.ctx.node(name)
        if node is None:
            return
        patch = hold_repair_patch(node, bn["metadata"].get("annotations") or {}, cordon=cordon)
        if not patch:
            return
        if "metadata" in patch:
            keys = ", ".join(sorted(patch["metadata"]["annotations"]))
            log.warning(
                f"{keys} removed or changed while it holds a reboot slot; written again",
                extra={"pool": pool_name, "node": name},
            )
        await self.ctx.patch_node(name, patch)

    async def _drive_drain(
        self, pool: Obj, name: str, drain: DrainPolicy, now: dt.datetime
    ) -> float | None:
        """Advance one holder's drain; seconds until its timeout, if one applies."""
        pool_name = pool["metadata"]["name"]
        bn = self.ctx.bootc_node(name)
        if bn is None:
            return None
        # someone may have uncordoned it (the take's cordon was a forced write)
        await self._keep_held(pool_name, bn, cordon=True)
        res = self._start_drain(name, pool_name, drain)
        if res.done:
            await self._drained(pool, name, bn, res)
            return None
        if drain.timeout is None:
            return None
        taken = slot_taken_at(bn)
        elapsed = (now - taken).total_seconds() if taken else 0.0
        if elapsed < drain.timeout:
            return drain.timeout - elapsed + 0.5
        await self._drain_timed_out(pool, name, bn, res, drain)
        return None

    async def _drained(self, pool: Obj, name: str, bn: Obj, res: DrainResult) -> None:
        """The holder is drained: its reboot is requested."""
        ctx = self.ctx
        pool_name = pool["metadata"]["name"]
        await ctx.patch_bootc_node(
            bn,
            {
                "metadata": {
                    "annotations": {
                        c.REBOOT_REQUESTED_ANNOTATION: micro_time(ctx.now()),
                        # for the node's NodeUpdated Event, whoever releases the slot
                        c.DRAIN_SUMMARY_ANNOTATION: res.summary(),
                    }
                },
                "spec": {"desiredImageState": BOOTED},
            },
        )
        self.drains.forget(name)
        log.info("drained; reboot requested", extra={"pool": pool_name, "node": name})
        msg = f"{name} drained ({res.summary()}); desiredImageState set to Booted"
        summary = "{n} nodes drained and told to reboot"
        self._report(pool, name, "Normal", "RebootRequested", msg, summary, step=True)

    async def _drain_timed_out(
        self, pool: Obj, name: str, bn: Obj, res: DrainResult, drain: DrainPolicy
    ) -> None:
        """The holder's drain is past spec.drain.timeout: what onTimeout says (once)."""
        pool_name = pool["metadata"]["name"]
        annotations = bn["metadata"].get("annotations") or {}
        skips = drain_skips_of(annotations.get(c.DRAIN_SKIPPED_ANNOTATION))
        action = timeout_action(drain, skips)
        message = f"drain timed out after {int(drain.timeout or 0)}s: {res.message(name)}"
        if action is TimeoutAction.HALT:
            if not res.halted:  # the drain goes on; plan_pool stops new slots meanwhile
                res.halted = True
                DRAIN_OUTCOMES.labels(pool_name, action.value).inc()
                message += (
                    "; onTimeout Halt: it keeps its slot, no new reboots start until it drains"
                )
                log.warning(message, extra={"pool": pool_name, "node": name})
                summary = "{n} drains timed out; the rollout halts until they finish"
                self._report(pool, name, "Warning", "DrainTimeout", message, summary)
                self.drains.changed(name)  # the pool's status says RolloutHalted now
            return
        if action is TimeoutAction.FORCE:
            if not res.force:
                DRAIN_OUTCOMES.labels(pool_name, action.value).inc()
                message += "; onTimeout Force: deleting the pods left without the Eviction API"
                log.warning(message, extra={"pool": pool_name, "node": name})
                summary = "{n} drains timed out; their pods left are deleted"
                self._report(pool, name, "Warning", "DrainTimeout", message, summary)
                self.drains.force(name)
            return
        await self._give_up_drain(pool, name, bn, drain, action, skips, message)

    async def _give_up_drain(
        self,
        pool: Obj,
        name: str,
        bn: Obj,
        drain: DrainPolicy,
        action: TimeoutAction,
        skips: int,
        message: str,
    ) -> None:
        """onTimeout Skip (or Skip given up): the slot is released, the node uncordoned
        and marked to be tried again after the others (Skip) or not at all."""
        ctx = self.ctx
        pool_name = pool["metadata"]["name"]
        annotations = bn["metadata"].get("annotations") or {}
        self.drains.cancel(name)
        await ctx.give_node_back(name, annotations)
        spec_state = (bn.get("spec") or {}).get("desiredImageState", STAGED)
        if action is TimeoutAction.SKIP:
            skips += 1
            message += (
                f"; onTimeout Skip (try {skips} of {MAX_TRIES}): slot released and node "
                "uncordoned, it is tried again after the other nodes"
            )
            mark = {c.DRAIN_SKIPPED_ANNOTATION: f"{skips} {message}"[:1000]}
            summary = "{n} nodes could not be drained in time and wait for another try"
        else:
            if drain.on_timeout == "Skip":
                message += f"; onTimeout Skip (try {skips + 1} of {MAX_TRIES}): given up"
            mark = {c.DRAIN_BLOCKED_ANNOTATION: message[:1000]}
            summary = "{n} nodes could not be drained in time and were skipped (see their Events)"
        await ctx.patch_bootc_node(bn, release_patch(spec_state, mark))
        DRAIN_OUTCOMES.labels(pool_name, action.value).inc()
        log.warning(message, extra={"pool": pool_name, "node": name})
        self._report(
            pool, name, "Warning", "DrainTimeout", message, summary, pool_note=f"{name}: {message}"
        )
