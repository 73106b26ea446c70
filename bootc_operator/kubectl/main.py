"""``kubectl bootc``: the ``kubectl-bootc`` executable (a kubectl plugin).

Subcommands: ``status [POOL]`` (``-w``, ``-o json|yaml``), ``why NODE|POOL``,
``approve POOL [--digest D] [--force]``, ``pause POOL``, ``resume POOL``,
``events POOL|NODE``. Global flags as kubectl spells them: ``--kubeconfig``,
``--context``, ``-n/--namespace`` (where ``events`` looks; default: all).

Start-up is kept short: this module imports only ``argparse``; each subcommand
imports what it needs (``kube.lite``'s aiohttp client, never ``kubernetes_asyncio``
nor pydantic). ``hack/perf/kubectl_startup.py`` measures it.

``-w`` redraws in place on a terminal; otherwise it prints the block again on each
change (text: after a blank line; YAML: after ``---``; JSON: one document per line).

Errors are one line on stderr (``error: ...``) and exit code 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bootc_operator.kubectl.cluster import Cluster, Watches
    from bootc_operator.kubectl.explain import PoolReport

PROG = "kubectl bootc"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Watch and steer bootc-operator rollouts (BootcNodePools).",
    )
    parser.add_argument("--kubeconfig", help="path to the kubeconfig file to use")
    parser.add_argument("--context", help="the kubeconfig context to use")
    parser.add_argument(
        "-n", "--namespace", help="namespace of the Events (default: all namespaces)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    status = sub.add_parser(
        "status", help="each pool's phase, progress, what it waits for, and its nodes"
    )
    status.add_argument("pool", nargs="?", help="one pool (default: every pool)")
    status.add_argument("-w", "--watch", action="store_true", help="redraw on every change")
    status.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")

    why = sub.add_parser("why", help="one paragraph: why a node or pool is where it is")
    why.add_argument("name", metavar="NODE|POOL")

    approve = sub.add_parser(
        "approve", help="approve the digest the canaries ran (spec.rollout.approvedDigest)"
    )
    approve.add_argument("pool")
    approve.add_argument("--digest", help="the digest to approve (default: the pool's target)")
    approve.add_argument(
        "--force", action="store_true", help="approve a digest no canary ran successfully"
    )

    for verb, text in (("pause", "stop new reboots"), ("resume", "let reboots start again")):
        p = sub.add_parser(verb, help=f"{text} (spec.rollout.paused)")
        p.add_argument("pool")

    events = sub.add_parser("events", help="the rollout's Events, oldest first")
    events.add_argument("name", metavar="POOL|NODE")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import asyncio  # noqa: PLC0415

    from bootc_operator.kubectl.cluster import PluginError  # noqa: PLC0415
    from bootc_operator.kubectl.safetext import clean  # noqa: PLC0415

    try:
        return asyncio.run(_run(args))
    except PluginError as e:
        # it may quote the server (a webhook's denial, a Status message): cleaned too
        print(f"error: {clean(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace) -> int:
    from bootc_operator.kubectl.cluster import Cluster, open_client  # noqa: PLC0415

    async with Cluster(open_client(args.kubeconfig, args.context)) as cluster:
        handler = {
            "status": _status,
            "why": _why,
            "approve": _approve,
            "pause": _pause,
            "resume": _pause,
            "events": _events,
        }[args.command]
        return await handler(cluster, args)


def _now() -> Any:
    import datetime as dt  # noqa: PLC0415

    return dt.datetime.now(dt.UTC)


async def _reports(cluster: Cluster, pool: str | None) -> tuple[list[PoolReport], Watches]:
    from bootc_operator.kubectl.explain import pods_wanted, pool_report  # noqa: PLC0415

    pools, bns, nodes, watches = await cluster.pool_objects(pool)
    now = _now()
    reports = []
    for p in sorted(pools, key=lambda obj: str(obj["metadata"]["name"])):
        report = pool_report(p, bns, nodes, now)
        wanted = pods_wanted(report)
        if wanted:  # a pods health check: judge it from the Pods, as the controller does
            report = pool_report(p, bns, nodes, now, await cluster.pods_on(wanted))
        reports.append(report)
    return reports, watches


def _dump(data: Any, output: str, *, stream: bool = False) -> str:
    """JSON or YAML; ``stream`` (``-w``): JSON as one line per document."""
    if output == "json":
        import json  # noqa: PLC0415

        return json.dumps(data, separators=(",", ":")) if stream else json.dumps(data, indent=2)
    import yaml  # noqa: PLC0415

    return str(yaml.safe_dump(data, sort_keys=False)).rstrip("\n")


async def _status(cluster: Cluster, args: argparse.Namespace) -> int:
    from bootc_operator.kubectl.render import pool_data, status_lines  # noqa: PLC0415
    from bootc_operator.kubectl.table import Screen  # noqa: PLC0415

    tty = sys.stdout.isatty()
    screen = Screen() if tty and args.watch and args.output == "text" else None
    shown = ""
    while True:
        reports, watches = await _reports(cluster, args.pool)
        if args.output == "text":
            text = "\n".join(status_lines(reports, color=tty))
        elif args.pool:
            text = _dump(pool_data(reports[0]), args.output, stream=args.watch)
        else:
            data = {"pools": [pool_data(r) for r in reports]}
            text = _dump(data, args.output, stream=args.watch)
        if text != shown:
            if screen is not None:
                screen.draw(text.splitlines())
            else:
                if shown and args.output != "json":
                    print("---" if args.output == "yaml" else "")
                print(text, flush=True)
            shown = text
        if not args.watch:
            return 0
        await cluster.wait_change(watches, seconds=5.0)


async def _find(cluster: Cluster, name: str) -> tuple[str | None, str | None]:
    """(pool, node): ``name`` as a pool, else as a BootcNode (whose pool it names)."""
    from bootc_operator.api import constants as c  # noqa: PLC0415
    from bootc_operator.kube.resources import BOOTC_NODE_POOLS, BOOTC_NODES  # noqa: PLC0415
    from bootc_operator.kubectl.cluster import PluginError  # noqa: PLC0415

    pools, _ = await cluster.list_all(BOOTC_NODE_POOLS)
    if any(p["metadata"]["name"] == name for p in pools):
        return name, None
    try:
        bn = await cluster.get(BOOTC_NODES, name)
    except PluginError as e:
        if "no such" not in str(e):
            raise
        raise PluginError(
            f'no such pool or node "{name}" (kubectl get bootcnodepools,bootcnodes lists them)'
        ) from None
    pool = (bn["metadata"].get("labels") or {}).get(c.POOL_LABEL)
    return pool, name


async def _why(cluster: Cluster, args: argparse.Namespace) -> int:
    from bootc_operator.kubectl.cluster import PluginError  # noqa: PLC0415
    from bootc_operator.kubectl.explain import why_node, why_pool  # noqa: PLC0415

    pool, node = await _find(cluster, args.name)
    if pool is None:
        raise PluginError(f"{args.name} is not a member of any pool")
    reports, _ = await _reports(cluster, pool)
    report = reports[0]
    if node is not None and node not in report.views:
        raise PluginError(f"{node} is not a member of pool {pool}")
    print(why_node(report, node) if node is not None else why_pool(report))
    return 0


async def _approve(cluster: Cluster, args: argparse.Namespace) -> int:
    from bootc_operator.kube.resources import BOOTC_NODE_POOLS  # noqa: PLC0415
    from bootc_operator.kubectl.cluster import PluginError  # noqa: PLC0415
    from bootc_operator.kubectl.explain import approval  # noqa: PLC0415

    reports, _ = await _reports(cluster, args.pool)
    verdict = approval(reports[0], args.digest)
    for line in verdict.lines:
        print(line)
    if not verdict.ok and not args.force:
        raise PluginError(f"{verdict.refusal}; pass --force to approve it anyway")
    await cluster.patch(
        BOOTC_NODE_POOLS, args.pool, {"spec": {"rollout": {"approvedDigest": verdict.digest}}}
    )
    print(f"pool {args.pool}: spec.rollout.approvedDigest set to {verdict.digest}")
    return 0


async def _pause(cluster: Cluster, args: argparse.Namespace) -> int:
    from bootc_operator.kube.resources import BOOTC_NODE_POOLS  # noqa: PLC0415

    paused = args.command == "pause"
    await cluster.get(BOOTC_NODE_POOLS, args.pool)  # "no such pool" before any write
    await cluster.patch(BOOTC_NODE_POOLS, args.pool, {"spec": {"rollout": {"paused": paused}}})
    if paused:
        print(f"pool {args.pool} paused: no new reboots start (nodes still stage)")
    else:
        print(f"pool {args.pool} resumed")
    return 0


async def _events(cluster: Cluster, args: argparse.Namespace) -> int:
    from bootc_operator.api import constants as c  # noqa: PLC0415
    from bootc_operator.kube.resources import BOOTC_NODES  # noqa: PLC0415
    from bootc_operator.kubectl.cluster import event_queries  # noqa: PLC0415
    from bootc_operator.kubectl.render import events_lines  # noqa: PLC0415

    _, node = await _find(cluster, args.name)
    if node is not None:
        queries = event_queries(None, [node])
    else:
        label = f"{c.POOL_LABEL}={args.name}"
        members, _ = await cluster.list_all(BOOTC_NODES, label_selector=label)
        queries = event_queries(args.name, [str(bn["metadata"]["name"]) for bn in members])
    print("\n".join(events_lines(await cluster.events(args.namespace, queries))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
