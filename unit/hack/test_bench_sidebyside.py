"""hack.perf.sidebyside: a controller's requests from the apiserver's count, the
figures of a run, their medians and the table's ratios ours / Go."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hack.perf import sidebyside as sbs


def test_a_controllers_requests_are_the_apiservers_count_less_the_other_clients() -> None:
    server = Counter(
        {
            ("PATCH", "bootcnodes"): 250,
            ("PATCH", "bootcnodes/status"): 400,
            ("LIST", "nodes"): 3,
            ("GET", "nodes"): 100,
            ("WATCH", "nodes"): 2,
            ("GET", "leases"): 50,
            ("POST", "pods/eviction"): 7,
        }
    )
    others = Counter(
        {
            ("PATCH", "bootcnodes/status"): 400,  # the fleet's, all of them
            ("LIST", "nodes"): 1,  # the harness's observer
            ("WATCH", "nodes"): 1,
            ("PATCH", "bootcnodes"): 300,  # more than the apiserver saw: never below zero
        }
    )
    got = sbs.controller_requests(server, others, {"nodes", "bootcnodes", "pods"})
    assert got == Counter(
        {("LIST", "nodes"): 2, ("GET", "nodes"): 100, ("POST", "pods/eviction"): 7}
    )


def run(membership: float, rss: float, requests: dict[str, int], **more: Any) -> dict[str, Any]:
    return {
        "membership": {"seconds": membership},
        "rollout": {
            "actual_seconds": 33.0,
            "handoff": {"p50": 0.010},
            "drain_path": {"p50": None},
            "reaction_latency": {},
        },
        "controller": {"cpu_seconds": 4.0, "peak_rss_mib": rss, "requests": requests},
        "controller_start": {"seconds_to_ready": 0.5, "cpu_seconds": 0.4},
        **more,
    }


def test_the_figures_of_a_run_in_the_tables_units() -> None:
    f = sbs.figures(
        run(
            0.9,
            45.0,
            {"PATCH bootcnodes": 300, "GET nodes": 100, "POST events": 20, "PATCH events": 5},
        )
    )
    assert f["membership convergence"] == 0.9
    assert f["hand-off p50 (slot freed -> next taken)"] == 10.0  # ms
    assert f["drain path p50 (slot -> Booted)"] is None
    assert f["reaction p50"] is None
    assert f["API requests, not Events"] == 400
    assert f["  GET nodes"] == 100
    assert f["  Events"] == 25


def test_a_run_that_gave_up_has_no_rollout_figures() -> None:
    f = sbs.figures({"membership": {"seconds": 2.0}, "timed_out": {}})
    assert f["membership convergence"] == 2.0
    assert f["rollout"] is None
    assert f["peak RSS"] is None


def test_medians_over_the_runs_that_have_the_figure() -> None:
    runs = [sbs.figures(run(m, 60.0, {})) for m in (1.0, 3.0, 2.0)]
    runs.append(sbs.figures({"membership": {"seconds": 100.0}}))
    med = sbs.median(runs)
    assert med["membership convergence"] == 2.5  # of 1, 2, 3, 100
    assert med["peak RSS"] == 60.0  # the fourth run has none
    assert med["reaction p50"] is None


def test_ratio_is_ours_over_go_and_none_without_both() -> None:
    assert sbs.ratio(60.0, 40.0) == 1.5
    assert sbs.ratio(None, 40.0) is None
    assert sbs.ratio(60.0, None) is None
    assert sbs.ratio(3.0, 0.0) is None


def test_the_table_shows_medians_each_run_and_the_ratio() -> None:
    ours = [sbs.figures(run(m, 64.0, {"GET nodes": 0})) for m in (0.8, 1.0)]
    go = [sbs.figures(run(m, 44.0, {"GET nodes": 100})) for m in (0.9, 1.1)]
    text = sbs.table(100, ours, go)
    lines = text.splitlines()
    assert lines[0].startswith("N = 100: median of 2 / 2")
    membership = next(line for line in lines if line.startswith("membership convergence (s)"))
    # label, median ours, median Go, ratio, ours each run, Go each run
    assert membership.split()[3:] == [
        "0.90",
        "1.00",
        "0.90x",
        "0.80",
        "/",
        "1.00",
        "0.90",
        "/",
        "1.10",
    ]
    rss = next(line for line in lines if line.startswith("peak RSS (MiB)"))
    assert "1.45x" in rss  # 64 / 44
    get_nodes = next(line for line in lines if line.startswith("  GET nodes"))
    assert get_nodes.split()[:5] == ["GET", "nodes", "0", "100", "0.00x"]
    reaction = next(line for line in lines if line.startswith("reaction p50"))
    assert reaction.split()[3:6] == ["-", "-", "-"]
