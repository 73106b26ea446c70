"""``hack/bench``: the scale and performance benchmark (issue 9). Figures, not tests.

For each N (default 100, 1,000 and 5,000; ``--quick``: 100 only) a fresh etcd +
kube-apiserver, N simulated nodes (``hack.perf.simfleet``) and the real
controller process (``hack.perf.scale``): membership convergence against a bare
client's throughput, rollout efficiency, reaction latencies, controller cost.
At N = 1,000 (``--quick``: 100; ``--stage-ahead-sizes``) two more rollouts
stage as they go, ``stageAhead`` = M vs unset: their times and the most nodes
staging at once. Then N = 20 real daemon processes on simulated hosts
(``hack.perf.daemons``): idle RSS and CPU, API requests per node per rollout, and
the rollout time with soft reboots (``rebootPolicy: AllowSoftReboot``, a userspace-only
image; ``--soft-reboot-seconds``, default R/4) against full ones (R)
(``--no-soft-rollout`` skips that rollout). Before the daemons, a drain a
PodDisruptionBudget holds (``hack.perf.pdbdrain``, ``--pdb-rounds``): the time from
its replacement pod turning Ready (``--replacement-seconds`` after the slot was
taken) to the eviction.

``--go-controller BIN`` (built by hack/build-go-operator.sh): for each N, ``--rounds``
rounds of this controller then the Go bootc-operator's, alternating, each on a fresh
apiserver and fleet; then a side-by-side table of what both can be measured on, with
ratios ours / Go (``hack.perf.sidebyside``). Stage-ahead, the PDB-held drain and the
daemons (ours only) are skipped in that mode.

Prints the machine and a table; writes every figure as JSON (``--json``,
default ``.cache/bench/results.json``). Nothing fails on a number. The machine
is shared: the table reports the load average and how much CPU other
processes took during each run, so repeat runs before trusting a difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bootc_operator.logs import setup_logging
from hack.perf import daemons, pdbdrain, scale, sidebyside
from hack.perf.analysis import CHAIN_STEPS
from hack.perf.procinfo import machine

REPO = Path(__file__).resolve().parents[2]
DEFAULT_JSON = REPO / ".cache" / "bench" / "results.json"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _pair(d: dict[str, Any], key: str) -> str:
    p = d.get(key) or {}
    return f"{_ms(p.get('p50'))} / {_ms(p.get('p99'))}"


def table(results: dict[str, Any]) -> str:
    sizes: list[dict[str, Any]] = results["sizes"]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Any) -> None:
        cells = []
        for r in sizes:
            try:
                cells.append(str(fn(r)))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("-")
        rows.append((label, cells))

    row("1. membership: pool -> all BootcNodes + labels (s)", lambda r: r["membership"]["seconds"])
    row("   controller writes/s", lambda r: r["membership"]["writes_per_second"])
    row(
        "   bare client writes/s (1 in flight)",
        lambda r: r["bare_client"]["sequential"]["writes_per_second"],
    )
    row(
        "   bare client writes/s (32 in flight)",
        lambda r: r["bare_client"]["concurrent"]["writes_per_second"],
    )
    row(
        "   controller time / bare client (32 in flight)",
        lambda r: f"{r['membership']['overhead_vs_concurrent']}x",
    )
    row("   retarget: all BootcNodes name B (s)", lambda r: r["staging"]["retarget_seconds"])
    row(
        "2. rollout M=10%, R: ideal ceil(N/M)*R (s)",
        lambda r: f"{r['rollout']['ideal_seconds']:.0f} (R={r['reboot_seconds']:g})",
    )
    row("   actual (s)", lambda r: r["rollout"]["actual_seconds"])
    row("   efficiency ideal/actual", lambda r: f"{r['rollout']['efficiency'] * 100:.0f}%")
    row(
        "   apiserver bound: rollout requests / bare rate (s)",
        lambda r: f"{r['rollout']['apiserver_bound_seconds']:.0f}",
    )
    row(
        "   efficiency vs max(ideal, apiserver bound)",
        lambda r: f"{r['rollout']['efficiency_vs_bound'] * 100:.0f}%",
    )
    row("   slot utilisation", lambda r: f"{r['rollout']['slot_utilisation'] * 100:.0f}%")
    row("   slot hold p50 / p99 (ms)", lambda r: _pair(r["rollout"], "slot_hold"))
    row(
        "   stage-ahead: rollout with staging, unset / stageAhead=M (s)",
        lambda r: f"{r['stage_ahead']['unset']['seconds']} / {r['stage_ahead']['set']['seconds']}",
    )
    row(
        "   peak nodes staging at once, unset / stageAhead=M",
        lambda r: (
            f"{r['stage_ahead']['unset']['peak_staging']} / "
            f"{r['stage_ahead']['set']['peak_staging']}"
        ),
    )
    row(
        "3. reaction: status change -> next write p50 / p99 (ms)",
        lambda r: _pair(r["rollout"], "reaction_latency"),
    )
    row("   handoff: slot freed -> taken p50 / p99 (ms)", lambda r: _pair(r["rollout"], "handoff"))
    row("   drain path: slot -> Booted p50 / p99 (ms)", lambda r: _pair(r["rollout"], "drain_path"))
    row(
        "   (fleet: Booted -> Rebooting p50 / p99 (ms))",
        lambda r: _pair(r["rollout"], "fleet_reaction"),
    )
    row(
        "   per-wave overhead: (actual - ideal) / waves (ms)",
        lambda r: r["rollout"]["chain"]["overhead_per_wave_ms"],
    )
    for key, what in CHAIN_STEPS:
        row(f"     {what} p50 / p99 (ms)", lambda r, k=key: _pair(r["rollout"]["chain"], k))
    row(
        "     start: unpaused -> M slots taken / end: last release -> done (ms)",
        lambda r: f"{r['rollout']['chain']['start_ms']} / {r['rollout']['chain']['end_ms']}",
    )
    row(
        "   apiserver: consistent pod LIST after a write / idle p50 (ms)",
        lambda r: (
            f"{_ms(r['consistent_read']['after_write']['p50'])} / "
            f"{_ms(r['consistent_read']['idle']['p50'])}"
        ),
    )
    row("4. controller peak RSS (MiB)", lambda r: r["controller"]["peak_rss_mib"])
    row(
        "   start to ready: process start -> /readyz, wall / CPU (s)",
        lambda r: (
            f"{r['controller_start']['seconds_to_ready']} / {r['controller_start']['cpu_seconds']}"
        ),
    )
    row(
        "   controller CPU s: membership / rollout / whole run",
        lambda r: (
            f"{r['membership']['cpu']['controller']:.1f} / "
            f"{r['rollout']['cpu']['controller']:.1f} / {r['controller']['cpu_seconds']:.1f}"
        ),
    )
    row("   API requests, whole run", lambda r: r["controller"]["requests_total"])
    row(
        "   API requests, not Events / GET nodes",
        lambda r: (
            f"{sum(v for k, v in r['controller']['requests'].items() if 'events' not in k)}"
            f" / {r['controller']['requests'].get('GET nodes', 0)}"
        ),
    )
    for verb in ("POST", "PATCH", "DELETE", "GET", "LIST", "WATCH"):
        row(f"     {verb}", lambda r, v=verb: r["controller"]["requests_by_verb"].get(v, 0))
    row(
        "   LIST after initial sync (pods: one per drain)",
        lambda r: (
            ", ".join(f"{k} {v}" for k, v in r["controller"]["lists_after_sync"].items()) or "0"
        ),
    )
    row(
        "   client counts = apiserver_request_total",
        lambda r: "yes" if not r["controller"]["crosscheck_mismatches"] else "NO (see JSON)",
    )
    row("   Events dropped (recorder queue full)", lambda r: r["controller"]["events_dropped"])
    row(
        "   fleet CPU s / queue wait p99 (ms)",
        lambda r: f"{r['fleet']['cpu_seconds_since_go']:.1f} / {_ms(r['fleet']['queue_wait_p99'])}",
    )
    row(
        "   kube-apiserver / etcd CPU s",
        lambda r: "{:.0f} / {:.0f}".format(
            *(r["cpu_by_process"][k] for k in ("kube-apiserver", "etcd"))
        ),
    )
    row(
        "machine: load before; CPU s used by others",
        lambda r: f"{r['load_before'][0]}; {r['machine_window']['others_cpu_seconds']:.0f}",
    )

    label_w = max(len(label) for label, _ in rows)
    col_w = max([12, *(len(c) for _, cells in rows for c in cells)])
    head = " " * label_w + "".join(
        f"  {'N=' + str(r['nodes']) + (' ' + r['side'] if 'side' in r else ''):>{col_w}}"
        for r in sizes
    )
    lines = [head] if sizes else []
    for label, cells in rows if sizes else ():
        lines.append(f"{label:<{label_w}}" + "".join(f"  {c:>{col_w}}" for c in cells))
    for r in sizes:
        if "timed_out" in r:
            t = r["timed_out"]
            lines.append(
                f"N={r['nodes']} gave up: {t['error'].split(';')[0]} "
                f"(by then {t.get('bootc_nodes', '?')} BootcNodes, {t.get('labelled', '?')} "
                f"Nodes labelled, {t['updated']} updated; controller "
                f"{t['controller_cpu_seconds']:.0f} CPU s, "
                f"peak RSS {t['controller_peak_rss_mib']} MiB)"
            )
    pdb = results.get("pdb_drain")
    if pdb:
        ready = pdb["ready_to_eviction"]
        lines += [
            "",
            f"6. a drain held by a PodDisruptionBudget, its replacement pod Ready "
            f"{pdb['replacement_seconds']:g} s after the slot was taken ({pdb['rounds']} rounds):",
            f"   Ready -> eviction p50 {_ms(ready.get('p50'))} ms, max {_ms(ready.get('max'))} ms "
            f"(each: {', '.join(f'{x * 1000:.0f}' for x in pdb['samples'])} ms); "
            f"evictions tried per round {pdb['evictions_per_round']}",
        ]
    d = results.get("daemons")
    if d:
        idle, roll = d["idle"], d["rollout"]
        lines += [
            "",
            f"5. daemon, {d['daemons']} real processes on simulated hosts:",
            f"   idle RSS {idle['rss_mib_mean']} MiB (max {idle['rss_mib_max']}); "
            f"idle CPU {idle['cpu_seconds_per_hour']} s/hour "
            f"({idle['cpu_seconds_in_window_mean']} s over {idle['window_seconds']:g} s "
            f"+ 12 polls x {idle['reread_cpu_ms']} ms)",
            f"   API requests per node per rollout: {roll['requests_per_node']} "
            + "("
            + ", ".join(f"{k} {v:g}" for k, v in roll["requests_per_node_by_verb"].items())
            + f"); rollout of {d['daemons']} nodes, M={d['max_unavailable']}: {roll['seconds']} s",
        ]
        start = roll.get("startup_seconds") or {}
        if start.get("n"):
            lines.append(
                f"   start-up after a reboot (process start -> first status write): median "
                f"{start['median']} s, max {start['max']} s ({start['n']} daemons)"
            )
        soft = d.get("soft_rollout")
        if soft:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(soft["reboots"].items()))
            lines.append(
                f"   rollout with soft reboots (down {soft['soft_reboot_seconds']:g} s) / full "
                f"(down {soft['reboot_seconds']:g} s): {soft['seconds']} s / "
                f"{soft['full_seconds']} s = {soft['soft_over_full']} ({kinds} reboots)"
            )
    return "\n".join(lines)


def header(info: dict[str, Any]) -> str:
    return (
        f"machine: {info['cores']} cores ({info['cpu']}), {info['memory_gib']} GiB, "
        f"Python {info['python']}, Linux {info['kernel']}; "
        f"load average {' '.join(str(x) for x in info['load_average'])}"
    )


def write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def side_by_side(
    results: dict[str, Any],
    n: int,
    opts: scale.Options,
    go_binary: Path,
    rounds: int,
    logs: Path,
    json_path: Path,
) -> None:
    """``rounds`` x (ours, then Go) at size ``n``, each on a fresh apiserver and fleet."""
    sides = results.setdefault("side_by_side", {}).setdefault(str(n), {"ours": [], "go": []})
    for i in range(rounds):
        for side, binary in (("ours", None), ("go", go_binary)):
            load = " ".join(f"{x:.1f}" for x in machine()["load_average"])
            print(f"bench: N={n} round {i + 1}/{rounds}: {side} (load {load})", flush=True)
            run_opts = dataclasses.replace(opts, go_binary=binary)
            result = scale.run(n, run_opts, logs / f"n{n}-{side}-{i + 1}")
            result |= {"side": side, "round": i + 1}
            results["sizes"].append(result)
            sides[side].append(sidebyside.figures(result))
            write(json_path, results)  # partial figures survive an interrupted run
        print(sidebyside.table(n, sides["ours"], sides["go"]), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hack/bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="N = 100 only (and the daemons)")
    p.add_argument(
        "--sizes", help="comma-separated N values (default 100,1000,5000; 'none': no size)"
    )
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument("--reboot-seconds", type=float, default=3.0, help="simulated reboot time R")
    p.add_argument(
        "--stage-seconds",
        type=float,
        default=1.0,
        help="how long the simulated fleet takes to stage an image (pull + deploy)",
    )
    p.add_argument("--workers", type=int, default=4, help="the controller's --workers")
    p.add_argument("--daemons", type=int, default=20, help="real daemon processes (0: skip)")
    p.add_argument("--daemon-idle-seconds", type=float, default=60.0)
    p.add_argument(
        "--soft-reboot-seconds",
        type=float,
        help="simulated soft reboot time of the daemons' soft rollout (default: R/4)",
    )
    p.add_argument(
        "--no-soft-rollout",
        dest="soft_rollout",
        action="store_false",
        help="skip the daemons' third rollout, with soft reboots",
    )
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=900.0,
        help="give up a size after waiting this long for one phase (its figures so far are kept)",
    )
    p.add_argument(
        "--pdb-rounds",
        type=int,
        default=3,
        help="rounds of the drain a PodDisruptionBudget holds (0: skip)",
    )
    p.add_argument(
        "--replacement-seconds",
        type=float,
        default=5.0,
        help="after how long the held pod's replacement turns Ready (the PDB allows)",
    )
    p.add_argument("--logs", type=Path, help="keep component logs here (default: a temp dir)")
    p.add_argument(
        "--profile",
        type=Path,
        help="sample the controller with py-spy into this directory (raw collapsed stacks)",
    )
    p.add_argument(
        "--controller-source",
        type=Path,
        help="run the controller from this checkout (e.g. a git worktree of an older commit)",
    )
    p.add_argument(
        "--go-controller",
        type=Path,
        metavar="BIN",
        help="also run the Go bootc-operator's controller (hack/build-go-operator.sh), "
        "alternating with ours, and print both side by side",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="with --go-controller: rounds of ours then Go per size",
    )
    p.add_argument(
        "--stage-ahead-sizes",
        help="the N at which to also roll out twice staging as it goes, stageAhead = M vs "
        "unset (default: 1000, or 100 with --quick; 'none' skips it)",
    )
    args = p.parse_args(argv)
    # The harness's own informers warn with context (resource, error), as the operator does.
    setup_logging("text", "warning")

    sizes = [100] if args.quick else [100, 1000, 5000]
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip() and s.strip() != "none"]
    compare = {100} if args.quick else {1000}
    if args.stage_ahead_sizes:
        spec = args.stage_ahead_sizes.strip()
        compare = set() if spec == "none" else {int(s) for s in spec.split(",") if s.strip()}
    if args.go_controller:
        compare, args.pdb_rounds, args.daemons = set(), 0, 0  # ours only
    info = machine()
    print(header(info), flush=True)
    results: dict[str, Any] = {
        "machine": info,
        "controller_source": str(args.controller_source or REPO),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sizes": [],
    }
    opts = scale.Options(
        reboot_seconds=args.reboot_seconds,
        stage_seconds=args.stage_seconds,
        workers=args.workers,
        profile=args.profile,
        controller_source=args.controller_source,
        timeout=args.phase_timeout,
    )
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as tmp:
        logs = args.logs or Path(tmp)
        started = time.monotonic()
        for n in sizes:
            sized = dataclasses.replace(opts, stage_ahead_compare=n in compare)
            if args.go_controller:
                side_by_side(results, n, sized, args.go_controller, args.rounds, logs, args.json)
                continue
            results["sizes"].append(scale.run(n, sized, logs / f"n{n}"))
            write(args.json, results)  # partial figures survive an interrupted run
            print(table(results), flush=True)
        if args.pdb_rounds:
            results["pdb_drain"] = pdbdrain.run(
                pdbdrain.Options(
                    rounds=args.pdb_rounds,
                    replacement_seconds=args.replacement_seconds,
                    reboot_seconds=args.reboot_seconds,
                    stage_seconds=args.stage_seconds,
                    workers=args.workers,
                    controller_source=args.controller_source,
                ),
                logs / "pdb",
            )
            write(args.json, results)
        if args.daemons:
            results["daemons"] = daemons.run(
                args.daemons,
                idle_seconds=args.daemon_idle_seconds,
                reboot_seconds=args.reboot_seconds,
                log_dir=logs / "daemons",
                soft_reboot_seconds=args.soft_reboot_seconds,
                soft_rollout=args.soft_rollout,
            )
        results["seconds"] = round(time.monotonic() - started, 1)
    results["load_average_end"] = [round(x, 2) for x in machine()["load_average"]]
    write(args.json, results)
    print()
    print(header(info))
    print(table(results))
    for n, sides in results.get("side_by_side", {}).items():
        print(f"\n{sidebyside.table(int(n), sides['ours'], sides['go'])}")
    print(
        f"\nrun took {results['seconds']:.0f} s; load average at the end "
        f"{' '.join(str(x) for x in results['load_average_end'])}; figures in {args.json}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
