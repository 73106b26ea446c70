"""``hack/chaos-soak``: the wire chaos tier (``e2e/test_chaos_wire.py``) over many seeds.

Runs the tier in batches (``--batch`` fresh seeds per simulation, each batch one
pytest run with ``BOOTC_CHAOS_COUNT``) until ``--minutes`` have passed, or once
over ``--seeds``. Prints, per seed, the faults injected by kind, the most
controllers seen writing at once, each leader handover (how long after its last
renewal the old leader last wrote, and when the new one took over) and the
violations; at the end the totals and the seeds that failed (rerun one with
``BOOTC_CHAOS_SEEDS=SEED .venv/bin/pytest e2e/test_chaos_wire.py -s``). Exit code
1 when any seed failed. pytest's output goes to ``--log`` (appended).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIER = "e2e/test_chaos_wire.py"


def line(doc: dict[str, Any]) -> str:
    faults = ", ".join(f"{k} {v}" for k, v in sorted(doc.get("faults", {}).items()))
    violations = doc.get("violations") or []
    return (
        f"seed {doc['seed']}: {doc.get('seconds', 0):.0f}s, {doc.get('requests', 0)} requests, "
        f"faults: {faults or 'none'}; most controllers writing at once: "
        f"{doc.get('max_writers', 0)}; violations: {len(violations)}"
    )


def run_batch(args: argparse.Namespace, env: dict[str, str], report: Path) -> int:
    argv = [str(ROOT / ".venv" / "bin" / "pytest"), TIER, "-s", "-q", "-p", "no:cacheprovider"]
    with args.log.open("a") as log:
        log.write(f"\n===== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n")
        log.flush()
        res = subprocess.run(
            argv,
            cwd=ROOT,
            env={**env, "BOOTC_CHAOS_REPORT": str(report)},
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return res.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/chaos-soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="soak this long (default 30)")
    parser.add_argument("--batch", type=int, default=5, help="seeds per simulation (default 5)")
    parser.add_argument("--seeds", default="", help="run these seeds once (comma-separated)")
    parser.add_argument("--log", type=Path, default=ROOT / ".cache" / "chaos-soak.log")
    args = parser.parse_args(argv)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    docs: list[dict[str, Any]] = []
    failed_batches = 0
    with tempfile.TemporaryDirectory(prefix="chaos-soak-") as tmp:
        report = Path(tmp) / "report.jsonl"
        seen = 0
        while True:
            env = dict(os.environ)
            if args.seeds:
                env["BOOTC_CHAOS_SEEDS"] = args.seeds
            else:
                env.pop("BOOTC_CHAOS_SEEDS", None)
                env["BOOTC_CHAOS_COUNT"] = str(args.batch)
            code = run_batch(args, env, report)
            lines = report.read_text().splitlines() if report.exists() else []
            for text in lines[seen:]:
                doc = json.loads(text)
                docs.append(doc)
                print(line(doc), flush=True)
                for h in doc.get("handovers", []):
                    print(f"    handover: {h}", flush=True)
                for v in doc.get("violations", []):
                    print(f"    violation: {v}", flush=True)
            if code != 0 and len(lines) == seen:
                failed_batches += 1
                print(f"a batch failed before any seed ran (exit {code}); see {args.log}")
            seen = len(lines)
            minutes = (time.monotonic() - started) / 60
            if args.seeds or minutes >= args.minutes or failed_batches >= 3:
                break
    faults: Counter[str] = Counter()
    for doc in docs:
        faults.update(doc.get("faults", {}))
    failing = [d["seed"] for d in docs if d.get("violations")]
    figures = [f for d in docs for f in d.get("handover_figures", [])]

    def extreme(key: str, pick: Any) -> str:
        values = [f[key] for f in figures if key in f]
        return f"{pick(values):.2f}s" if values else "-"

    print(
        f"\n{len(figures)} leader handovers: the old leader's last write came at most "
        f"{extreme('last_write_after_renewal', max)} after its last renewal, at the latest "
        f"{extreme('last_write_before_expiry', min)} before its Lease expired; the new "
        f"leader's first write came at least {extreme('new_first_write_after_old_last', min)} "
        "after the old leader's last"
    )
    print(
        f"{len(docs)} seeds in {(time.monotonic() - started) / 60:.1f} minutes; "
        f"faults injected: {dict(sorted(faults.items()))}; most controllers writing at once: "
        f"{max((d.get('max_writers', 0) for d in docs), default=0)}; "
        f"seeds with violations: {failing or 'none'}"
    )
    return 1 if failing or failed_batches else 0


if __name__ == "__main__":
    sys.exit(main())
