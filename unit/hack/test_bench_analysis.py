"""The benchmark's pure analysis: reaction latencies and the rollout timeline from watch logs."""

from __future__ import annotations

import pytest

from hack.perf.analysis import (
    peak_staging,
    percentiles,
    reaction_latencies,
    rollout_figures,
    wave_chain,
)
from hack.perf.observer import BnFacts, NodeFacts

A, B = "sha256:a", "sha256:b"


def bn(
    *, slot: bool = False, state: str = "Staged", idle: str = "Staged", booted: str = A
) -> BnFacts:
    return BnFacts(True, True, slot, state, B, idle, booted, B if booted == A else None)


def node(*, cordoned: bool = False, ready: bool = True) -> NodeFacts:
    return NodeFacts(True, True, cordoned, ready)


BnLog = list[tuple[float, str, BnFacts]]
NodeLog = list[tuple[float, str, NodeFacts]]


def one_node_rollout(name: str, start: float) -> tuple[BnLog, NodeLog]:
    """Staged before t0; slot, cordon, Booted; the fleet reboots; uncordon and release."""
    bns: BnLog = [
        (start - 5.0, name, bn()),  # staged long before the rollout
        (start + 0.1, name, bn(slot=True)),  # controller: slot (not a reaction)
        (start + 0.3, name, bn(slot=True, state="Booted")),  # controller
        (start + 0.4, name, bn(slot=True, state="Booted", idle="Rebooting")),  # fleet
        (start + 3.4, name, bn(slot=True, state="Booted", idle="Idle", booted=B)),  # fleet
        (start + 3.6, name, bn(slot=False, state="Booted", idle="Idle", booted=B)),  # ctl
    ]
    nodes: NodeLog = [
        (start - 5.0, name, node()),
        (start + 0.2, name, node(cordoned=True)),  # controller
        (start + 0.5, name, node(cordoned=True, ready=False)),  # fleet, not a BootcNode status
        (start + 3.3, name, node(cordoned=True)),  # fleet
        (start + 3.45, name, node(cordoned=False)),  # controller: the answer (50 ms)
    ]
    return bns, nodes


def test_reaction_pairs_a_status_change_with_the_next_write_for_that_node() -> None:
    bns, nodes = one_node_rollout("n1", 10.0)
    got = reaction_latencies(bns, nodes, 10.0, 20.0)
    assert got == [pytest.approx(0.05)], "Idle on B -> uncordon; the slot release is not counted"


def test_writes_without_a_status_change_since_the_last_write_are_not_reactions() -> None:
    bns, nodes = one_node_rollout("n1", 10.0)
    # the status change before t0 does not pair with the slot take after it
    assert reaction_latencies(bns[:2], nodes[:1], 10.0, 20.0) == []


def test_outside_the_window_nothing_counts() -> None:
    bns, nodes = one_node_rollout("n1", 10.0)
    assert reaction_latencies(bns, nodes, 30.0, 40.0) == []


def test_nodes_are_paired_independently() -> None:
    b1, n1 = one_node_rollout("n1", 10.0)
    b2, n2 = one_node_rollout("n2", 11.0)
    bns = sorted(b1 + b2, key=lambda e: e[0])
    nodes = sorted(n1 + n2, key=lambda e: e[0])
    assert sorted(reaction_latencies(bns, nodes, 10.0, 20.0)) == [
        pytest.approx(0.05),
        pytest.approx(0.05),
    ]


def test_rollout_figures_timeline() -> None:
    b1, n1 = one_node_rollout("n1", 10.0)
    b2, n2 = one_node_rollout("n2", 13.7)  # takes the slot n1 freed at 13.6
    bns = sorted(b1 + b2, key=lambda e: e[0])
    nodes = sorted(n1 + n2, key=lambda e: e[0])
    f = rollout_figures(bns, nodes, 10.0, 17.3, max_unavailable=1)
    assert (f["takes"], f["releases"]) == (2, 2)
    assert f["handoff"]["n"] == 1 and f["handoff"]["p50"] == pytest.approx(0.2)
    assert f["drain_path"]["p50"] == pytest.approx(0.2)
    assert f["fleet_reaction"]["p50"] == pytest.approx(0.1)
    assert f["slot_hold"]["p50"] == pytest.approx(3.5)
    assert f["reaction_latency"]["n"] == 2
    assert f["slot_utilisation"] == pytest.approx(7.0 / 7.3)


def test_percentiles() -> None:
    assert percentiles([])["p50"] is None
    p = percentiles([float(i) for i in range(1, 101)])
    assert (p["p50"], p["p99"], p["max"], p["n"]) == (50.0, 99.0, 100.0, 100)


def staging(name: str, t: float) -> tuple[float, str, BnFacts]:
    return (t, name, bn(idle="Staging", booted=A))


def staged(name: str, t: float) -> tuple[float, str, BnFacts]:
    return (t, name, bn(idle="Staged", booted=A))


def test_peak_staging_counts_overlaps_not_totals() -> None:
    # n1 and n2 overlap in [1.5, 2.0]; n3 starts after both finished
    log: BnLog = [
        staging("n1", 1.0),
        staging("n2", 1.5),
        staged("n1", 2.0),
        staged("n2", 2.5),
        staging("n3", 3.0),
        staged("n3", 4.0),
    ]
    assert peak_staging(log, 0.0, 10.0) == 2
    assert peak_staging(log, 2.6, 10.0) == 1


def test_peak_staging_carries_the_state_at_t0_and_ignores_after_t1() -> None:
    log: BnLog = [
        staging("n1", 1.0),  # still staging at t0 = 2.0
        staging("n2", 3.0),
        staged("n1", 4.0),
        staging("n3", 6.0),  # after t1
        staging("n4", 6.5),
    ]
    assert peak_staging(log, 2.0, 5.0) == 2
    assert peak_staging(log, 2.0, 2.5) == 1, "no entry in the window: the state at t0"
    assert peak_staging(log, 0.0, 0.5) == 0


def test_a_node_staging_twice_counts_once() -> None:
    log: BnLog = [staging("n1", 1.0), staging("n1", 1.2), staged("n1", 2.0)]
    assert peak_staging(log, 0.0, 3.0) == 1


def test_wave_chain_splits_each_slot_hold_into_its_steps() -> None:
    b1, n1 = one_node_rollout("n1", 10.0)
    b2, n2 = one_node_rollout("n2", 13.7)  # takes the slot n1 freed at 13.6
    bns = sorted(b1 + b2, key=lambda e: e[0])
    nodes = sorted(n1 + n2, key=lambda e: e[0])
    chain = wave_chain(bns, nodes, 10.0, 17.3, max_unavailable=1, reboot_seconds=3.0)
    expected = {
        "take_to_cordon": 0.1,
        "cordon_to_booted": 0.1,
        "booted_to_rebooting": 0.1,
        "rebooting_to_back": 3.0,
        "back_to_uncordon": 0.05,
        "uncordon_to_release": 0.15,
        "release_to_next_take": 0.2,
    }
    for step, seconds in expected.items():
        assert chain[step]["p50"] == pytest.approx(seconds), step
    assert chain["take_to_cordon"]["n"] == 2
    assert chain["release_to_next_take"]["n"] == 1, "the last release has no next take"
    assert chain["start_ms"] == 100, "t0 -> the first (M-th) take"
    assert chain["end_ms"] == round((17.3 - 17.3) * 1000)
    # 2 waves of R = 3 s in 7.3 s: 0.65 s over the ideal per wave
    assert chain["overhead_per_wave_ms"] == 650


def test_wave_chain_without_takes_reports_nothing() -> None:
    chain = wave_chain([], [], 0.0, 1.0, max_unavailable=1, reboot_seconds=3.0)
    assert chain["start_ms"] is None and chain["overhead_per_wave_ms"] is None
    assert chain["take_to_cordon"]["n"] == 0
