"""Refused rollout steps, per pool and node (``policy.refusals``, issue 37 item 4): what
keeps a node whose writes are refused from taking its pool's slot pass after pass."""

from __future__ import annotations

import datetime as dt

from bootc_operator.policy.refusals import MAX_RETRY, TAKE, Refusals, retry_delay

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_retries_back_off_up_to_a_cap() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    assert retry_delay(30) == MAX_RETRY


def test_a_refused_take_excludes_its_node_until_its_retry_or_a_new_basis() -> None:
    r = Refusals()
    first = r.refuse("p", "bad", TAKE, "bad: too long", T0, basis="b1")
    assert (first.failures, first.retry_at) == (1, at(5))
    assert r.excluded("p", at(1), lambda n: "b1") == {"bad"}
    assert r.excluded("p", at(1), lambda n: "b2") == frozenset()  # its annotations changed
    assert r.excluded("p", at(5), lambda n: "b1") == frozenset()  # its retry is due
    assert r.next_retry("p", at(1)) == 4.1
    again = r.refuse("p", "bad", TAKE, "bad: too long", at(5), basis="b1")
    assert (again.failures, again.retry_at) == (2, at(15))
    # other steps never exclude a node from slots (they finish what a slot began)
    r.refuse("p", "holder", "drain", "holder: refused", T0)
    assert r.excluded("p", at(6), lambda n: "b1") == {"bad"}
    assert r.message("p") == "bad: too long; holder: refused"
    assert r.message("other") == "" and r.excluded("other", T0) == frozenset()


def test_refusals_end_when_the_step_succeeds_is_not_due_or_the_node_leaves() -> None:
    r = Refusals()
    for node in ("a", "b", "c"):
        r.refuse("p", node, TAKE, f"{node}: no", T0)
    assert r.clear("p", "a") and not r.clear("p", "a")
    assert r.prune("p", lambda n, refusal: n != "b") and r.message("p") == "c: no"
    assert not r.retain("p", {"c"}) and r.retain("p", set())
    assert r.message("p") == "" and r.next_retry("p", T0) is None
    assert not r.prune("p", lambda n, refusal: False)
