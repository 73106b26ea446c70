"""``poolsummary.summarize``: the pool's status as one pure function of what the status
loop gathered (its problems, the plan's news, the conditions, the fields, when to look
again). The conditions' own rules are ``poolstatus``'s tests; here how the summary
puts the inputs together."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.policy.poolspec import check_pool
from bootc_operator.policy.poolsummary import (
    SECRET_PENDING_RECHECK,
    PoolInputs,
    membership_done,
    summarize,
)
from bootc_operator.policy.slots import retargets_due
from unit.policy.test_health_gate import NEW, NOW, OLD, REPO, S, node

POOL: dict[str, Any] = {
    "metadata": {"name": "p", "generation": 3},
    "spec": {"nodeSelector": {"matchLabels": {"a": "b"}}, "image": {"ref": f"{REPO}@{NEW}"}},
}


def inputs(*views: Any, pool: dict[str, Any] | None = None, **kw: Any) -> PoolInputs:
    body = pool or POOL
    return PoolInputs(
        pool=body,
        policy=check_pool(body),
        views=list(views),
        now=NOW,
        membership_generation=3,
        **kw,
    )


def test_a_pool_whose_members_run_the_target_is_up_to_date_and_deployed() -> None:
    done = [node("a", S.UP_TO_DATE, booted_digest=NEW), node("b", S.UP_TO_DATE)]
    summary = summarize(inputs(*done))
    assert summary.up[:2] == (True, c.REASON_ALL_UPDATED)
    assert summary.degraded[:2] == (False, c.REASON_HEALTHY)
    fields = summary.fields
    assert fields["deployedDigest"] == NEW and fields["updateAvailable"] is False
    assert (fields["nodeCount"], fields["updatedCount"]) == (2, 2)
    assert fields["observedGeneration"] == 3 and fields["targetDigest"] == NEW
    assert summary.max_unavailable == 1 and summary.requeue is None


def test_a_rollout_in_progress_keeps_the_deployed_digest_and_takes_a_slot() -> None:
    pool = {**POOL, "status": {"deployedDigest": OLD}}
    summary = summarize(inputs(node("a"), node("b", S.UP_TO_DATE), pool=pool))
    assert summary.up[:2] == (False, c.REASON_ROLLOUT_IN_PROGRESS)
    assert summary.fields["deployedDigest"] == OLD and summary.fields["updateAvailable"]


def test_problems_come_from_every_source_and_the_highest_wins() -> None:
    degraded = replace(node("a", S.DEGRADED), degraded_message="disk full")
    summary = summarize(
        inputs(
            degraded,
            conflict="node x is also selected by pool q",
            secret_problem="Secret ns/s not found",
            membership_problem="admission refused",
            extra_problems={c.REASON_TAG_RESOLUTION_ERROR: "registry down"},
        )
    )
    assert set(summary.problems) == {
        c.REASON_TAG_RESOLUTION_ERROR,
        c.REASON_NODE_CONFLICT,
        c.REASON_INVALID_SPEC,
        c.REASON_NODE_DEGRADED,
        c.REASON_PULL_SECRET_ERROR,
    }
    assert summary.problems[c.REASON_INVALID_SPEC] == "admission refused"
    assert summary.problems[c.REASON_PULL_SECRET_ERROR].endswith("last good credentials")
    assert summary.degraded[:2] == (True, c.REASON_TAG_RESOLUTION_ERROR)


def test_a_halting_drain_is_named_with_its_own_message() -> None:
    pool = {
        **POOL,
        "spec": {**POOL["spec"], "rollout": {"drain": {"timeoutSeconds": 10, "onTimeout": "Halt"}}},
    }
    holder = node("a", in_slot=True, slot_since=NOW.replace(year=2025))
    summary = summarize(
        inputs(
            holder,
            node("b"),
            pool=pool,
            drain_message=lambda n: f"{n}: pod web-1 refused by its PDB",
            blocked_drains=["a: pod web-1 refused by its PDB"],
        )
    )
    halted = summary.problems[c.REASON_ROLLOUT_HALTED]
    assert "pod web-1 refused by its PDB" in halted
    assert summary.up[0] is False and summary.up[2].endswith("a: pod web-1 refused by its PDB")


def test_membership_must_have_seen_the_generation_before_it_is_claimed() -> None:
    first = inputs(node("a", S.UP_TO_DATE))
    assert membership_done(first)
    unseen = replace(first, membership_generation=None)
    assert not membership_done(unseen)
    assert summarize(unseen).fields["observedGeneration"] is None
    restarted = replace(unseen, pool={**POOL, "status": {"observedGeneration": 3}})
    assert membership_done(restarted)


def test_the_generation_is_claimed_only_once_every_member_due_names_the_target() -> None:
    # A pool reverted to the image its nodes still run: they are counted updated from
    # what they booted, but a member whose spec still names the abandoned digest (the
    # rollout loop retargets it) keeps kubectl wait from returning.
    behind = node("b", S.UP_TO_DATE, desired_image=f"{REPO}@{OLD}", spec_in_sync=False)
    waiting = inputs(node("a", S.UP_TO_DATE), behind)
    assert not membership_done(waiting)
    summary = summarize(waiting)
    assert summary.fields["observedGeneration"] is None
    assert summary.up[:2] == (False, c.REASON_PENDING)
    assert membership_done(inputs(node("a", S.UP_TO_DATE), node("b", S.UP_TO_DATE)))
    # not due: held back from the target (rolled back from it), or under stageAhead
    held = replace(behind, health_failed=NEW)
    assert membership_done(inputs(node("a", S.UP_TO_DATE), held))
    ahead = {**POOL, "spec": {**POOL["spec"], "rollout": {"stageAhead": 1}}}
    assert membership_done(inputs(node("a", S.UP_TO_DATE), behind, pool=ahead))
    # ... but a slot holder is due whatever stageAhead says
    holding = replace(behind, in_slot=True)
    assert not membership_done(inputs(node("a", S.UP_TO_DATE), holding, pool=ahead))
    # an invalid selector matches nothing: members keep what they were told, holders not
    unmatched = {**POOL, "spec": {**POOL["spec"], "nodeSelector": {"matchLabels": {"a": "-"}}}}
    assert not check_pool(unmatched).selector_ok
    holder = replace(holding, name="h")
    assert retargets_due([behind, holder], check_pool(unmatched)) == ("h",)
    assert retargets_due([behind, holder], check_pool(POOL)) == ("b", "h")


def test_a_pending_pull_secret_is_looked_at_again_soon() -> None:
    summary = summarize(inputs(node("a"), secret_pending=True))
    assert summary.requeue == SECRET_PENDING_RECHECK


def test_an_invalid_spec_plans_nothing() -> None:
    bad = {**POOL, "spec": {**POOL["spec"], "rollout": {"maxUnavailable": "ten"}}}
    summary = summarize(inputs(node("a"), pool=bad))
    assert summary.max_unavailable == 0
    assert summary.up[:2] == (False, c.REASON_INVALID_SPEC)
    assert summary.degraded[:2] == (True, c.REASON_INVALID_SPEC)
