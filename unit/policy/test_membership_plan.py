"""Node-to-pool assignment and conflict resolution."""

from __future__ import annotations

from typing import Any

from bootc_operator.policy.membership_plan import assign_nodes, claims


def pool(
    name: str, created: str, selector: dict[str, Any], deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeSelector": selector, "image": {"ref": "x"}}}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


WORKERS = {"matchLabels": {"role": "worker"}}
ZONE_A = {"matchLabels": {"zone": "a"}}


def test_disjoint_pools() -> None:
    a = assign_nodes(
        [pool("w", "2026-01-01T00:00:00Z", WORKERS), pool("z", "2026-01-02T00:00:00Z", ZONE_A)],
        [node("n1", role="worker"), node("n2", zone="a"), node("n3")],
        {},
    )
    assert a.owner == {"n1": "w", "n2": "z"} and a.conflicts == {}
    assert a.members("w") == ["n1"] and a.conflict_message("w") == ""


def test_oldest_pool_wins_new_overlap() -> None:
    pools = [
        pool("late", "2026-01-02T00:00:00Z", ZONE_A),
        pool("early", "2026-01-01T00:00:00Z", WORKERS),
    ]
    a = assign_nodes(pools, [node("n1", role="worker", zone="a")], {})
    assert a.owner == {"n1": "early"}
    assert a.conflicts == {"late": {"n1": "early"}}
    assert "early" in a.conflict_message("late") and "n1" in a.conflict_message("late")


def test_incumbent_keeps_its_node() -> None:
    pools = [
        pool("late", "2026-01-02T00:00:00Z", ZONE_A),
        pool("early", "2026-01-01T00:00:00Z", WORKERS),
    ]
    a = assign_nodes(pools, [node("n1", role="worker", zone="a")], {"n1": "late"})
    assert a.owner == {"n1": "late"} and a.conflicts == {"early": {"n1": "late"}}


def test_incumbent_that_no_longer_matches_loses() -> None:
    pools = [pool("w", "2026-01-01T00:00:00Z", WORKERS), pool("z", "2026-01-02T00:00:00Z", ZONE_A)]
    a = assign_nodes(pools, [node("n1", role="worker")], {"n1": "z"})
    assert a.owner == {"n1": "w"} and a.conflicts == {}


def test_invalid_deleting_and_selectorless_pools_claim_nothing() -> None:
    bad = pool("bad", "2026-01-01T00:00:00Z", {"matchLabels": {"a b": "c"}})
    gone = pool("gone", "2026-01-01T00:00:00Z", WORKERS, deleting=True)
    none: dict[str, Any] = {"metadata": {"name": "none"}, "spec": {}}
    assert not claims(bad) and not claims(gone) and not claims(none)
    a = assign_nodes([bad, gone, none], [node("n1", role="worker", a="x")], {})
    assert a.owner == {}


def test_deleting_nodes_are_skipped_and_message_is_bounded() -> None:
    pools = [pool("a", "2026-01-01T00:00:00Z", WORKERS), pool("b", "2026-01-02T00:00:00Z", WORKERS)]
    nodes = [node(f"n{i}", role="worker") for i in range(8)]
    nodes.append(
        {"metadata": {"name": "x", "labels": {"role": "worker"}, "deletionTimestamp": "t"}}
    )
    a = assign_nodes(pools, nodes, {})
    assert "x" not in a.owner and len(a.members("a")) == 8
    assert a.conflict_message("b", limit=3).endswith("n0, n1, n2 and 5 more")
