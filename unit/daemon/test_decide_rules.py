"""``decide``'s rules one at a time: ``RULES`` is the numbered list of the module
docstring, in order; each rule decides some rows of the decision table
(``test_daemon_decide.ROWS``) and only those the rules before it left; each declines
(None) the situations that are not its own."""

from __future__ import annotations

import re

import pytest

from bootc_operator.daemon import decide as d
from bootc_operator.daemon.decide import (
    RULES,
    Attempt,
    Decision,
    Desired,
    HostView,
    Rule,
    Situation,
    Work,
)
from unit.daemon.test_daemon_decide import (
    A_STAGED_B,
    B_QUEUED_A,
    B_ROLLBACK_A,
    BOOTED,
    DRAINED,
    NOW,
    ON_A,
    RETRY,
    ROWS,
    A,
    B,
    C,
    allowing,
    entry,
    host,
)

NOTHING = Work()


def situation(desired: Desired | None, view: HostView, work: Work = NOTHING) -> Situation:
    return Situation(desired, view, work, NOW, RETRY)


def deciding(s: Situation) -> tuple[Rule, Decision]:
    """The first rule with a decision, and its decision."""
    for rule in RULES:
        if (decision := rule(s)) is not None:
            return rule, decision
    raise AssertionError("no rule decided")


def test_the_rules_are_the_docstrings_numbered_list_in_order() -> None:
    doc = d.__doc__ or ""
    named = re.findall(r"^\s*(\d+|a)\. \(``(\w+)``", doc, flags=re.MULTILINE)
    # 4a is tried before 4 (a queued rollback is reverted before "nothing to do")
    assert [name for _, name in named] == [
        "invalid_image",
        "switch_running",
        "no_status",
        "unmanageable",
        "booted_desired",
        "revert_queued_rollback",
        "boots_next",
        "roll_back",
        "stage",
    ]
    order = [rule.__name__ for rule in RULES]
    assert order[4:6] == ["revert_queued_rollback", "booted_desired"]
    assert sorted(order) == sorted(name for _, name in named)


@pytest.mark.parametrize(
    ("desired", "view", "work", "problems", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_decide_is_the_first_rule_that_decides(
    desired: Desired | None,
    view: HostView,
    work: Work,
    problems: tuple[str, ...],
    expected: Decision,
) -> None:
    s = Situation(desired, view, work, NOW, RETRY, tuple(p for p in problems if p))
    rule, decision = deciding(s)
    assert decision == expected
    assert d.decide(desired, view, work, now=NOW, retry=RETRY, pull_problems=problems) == decision
    # every rule before it declined this situation
    assert all(earlier(s) is None for earlier in RULES[: RULES.index(rule)])


def test_every_rule_decides_some_row_of_the_table() -> None:
    used = {
        deciding(Situation(row[1], row[2], row[3], NOW, RETRY, tuple(row[4])))[0].__name__
        for row in ROWS
    }
    # rule 0's rows are test_an_image_that_fails_the_crd_pattern_is_never_switched_to's
    assert deciding(situation(Desired(f"-{B}"), ON_A))[0] is d.invalid_image
    used.add("invalid_image")
    assert {rule.__name__ for rule in RULES} - used == set()


ASKS_B = Desired(B)
BOOT_B = Desired(B, BOOTED)

#: (rule, a situation it declines: it is another rule's)
DECLINED: list[tuple[Rule, Situation]] = [
    (d.invalid_image, situation(ASKS_B, ON_A)),
    (d.invalid_image, situation(None, ON_A)),
    (d.switch_running, situation(ASKS_B, ON_A, Work(switching=C))),
    (d.switch_running, situation(None, ON_A, Work(switching=C))),
    (d.no_status, situation(ASKS_B, ON_A)),
    (d.unmanageable, situation(ASKS_B, ON_A)),
    (d.revert_queued_rollback, situation(Desired(B), B_ROLLBACK_A)),  # nothing queued
    (d.revert_queued_rollback, situation(Desired(A), B_QUEUED_A)),  # B booted, not A
    (d.booted_desired, situation(ASKS_B, ON_A)),
    (d.boots_next, situation(ASKS_B, ON_A)),  # B is not staged
    (d.boots_next, situation(Desired(A), B_ROLLBACK_A)),  # A is not queued
    (d.roll_back, situation(Desired(C), B_ROLLBACK_A)),
    (d.roll_back, situation(ASKS_B, ON_A)),
]


@pytest.mark.parametrize(
    ("rule", "s"), DECLINED, ids=[f"{r.__name__}-{i}" for i, (r, _) in enumerate(DECLINED)]
)
def test_each_rule_declines_what_is_not_its_own(rule: Rule, s: Situation) -> None:
    assert rule(s) is None


def test_the_last_rule_always_decides() -> None:
    assert d.stage(situation(ASKS_B, ON_A)) == Decision(d.staging(B), d.HEALTHY, start_switch=B)
    assert d.stage(situation(ASKS_B, A_STAGED_B)) is not None  # even where 5 would have


def test_a_situation_derives_its_facts_once_and_for_the_desired_image_only() -> None:
    other = Attempt("switch", C, 1, NOW, "boom")
    s = situation(ASKS_B, host(entry(A), entry(C)), Work(last=other, switching=C))
    assert s.last is None and s.forget  # an attempt at C says nothing about B
    assert s.other_switch and s.staged_image == C and not s.queued
    same = situation(ASKS_B, ON_A, Work(last=Attempt("switch", B, 1, NOW, None)))
    assert same.last is not None and not same.forget and not same.other_switch
    with pytest.raises(AssertionError):
        _ = situation(None, ON_A).want
    with pytest.raises(AssertionError):
        _ = situation(ASKS_B, HostView(error="x")).status
    assert BOOT_B.missing_permits  # Booted without the drained slot: rule 5 says why


def test_a_full_reboot_asked_on_a_capable_host_still_says_why_it_is_not_soft() -> None:
    """Found by comparing the rule table with the single function it replaced over a
    million random situations: a full reboot requested before the pool allowed soft
    ones keeps saying why it is not soft, as before."""
    view = host(entry(A), entry(B, softRebootCapable=True))
    work = Work(reboot_requested=B, reboot_soft=False)
    decision = d.decide(allowing(B), view, work, now=NOW, retry=RETRY)
    assert decision.idle == d.rebooting(B, full_why=d.NOT_CAPABLE)


def test_a_failed_soft_reboot_is_waited_out_even_once_soft_reboots_are_not_allowed() -> None:
    view = host(entry(A), entry(B, softRebootCapable=True))
    failed = Attempt("soft-reboot", B, 1, NOW - 1, None)
    work = Work(last=failed, soft_reboot_failed=B)
    decision = d.decide(Desired(B, BOOTED, DRAINED), view, work, now=NOW, retry=RETRY)
    assert not decision.reboot and decision.requeue_after == RETRY.delay(1) - 1
    assert decision.degraded == d.degraded(f"the soft reboot into {B} had no effect")
