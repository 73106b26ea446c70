"""The one pluralisation helper, and the messages that use it."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.policy.membership_plan import assign_nodes
from bootc_operator.policy.poolstatus import halted_message
from bootc_operator.wording import counted, noun


@pytest.mark.parametrize(
    ("n", "singular", "plural", "expected"),
    [
        (1, "node", None, "1 node"),
        (0, "node", None, "0 nodes"),
        (2, "node", None, "2 nodes"),
        (1, "canary", "canaries", "1 canary"),
        (5, "canary", "canaries", "5 canaries"),
        (-1, "second", None, "-1 second"),
    ],
)
def test_counted(n: int, singular: str, plural: str | None, expected: str) -> None:
    assert counted(n, singular, plural) == expected


def test_noun_agrees_without_the_number() -> None:
    assert (noun(1, "is", "are"), noun(2, "is", "are")) == ("is", "are")
    assert (noun(1, "pool"), noun(3, "pool")) == ("pool", "pools")


def test_messages_with_one_node_are_singular() -> None:
    one = halted_message(("worker-1",), 1)
    assert one.startswith("1 node holding a reboot slot is unhealthy (worker-1; maxUnhealthy is 1)")
    assert one.endswith("until it recovers")
    two = halted_message(("a", "b"), 2)
    assert two.startswith("2 nodes holding reboot slots are unhealthy (a, b;")
    assert two.endswith("until they recover")
    spec: dict[str, Any] = {"nodeSelector": {}, "image": {"ref": "x"}}
    early = {"metadata": {"name": "early", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    late = {"metadata": {"name": "late", "creationTimestamp": "2026-01-02T00:00:00Z"}}
    early["spec"] = late["spec"] = spec
    nodes = [{"metadata": {"name": "n1", "labels": {}}}]
    message = assign_nodes([late, early], nodes, {}).conflict_message("late")
    assert message == "1 node matched by this pool belongs to pool early: n1"
