"""``hack/sim``: a local cluster of simulated bootc nodes, in the background.

    eval "$(hack/sim up --nodes 6)"      # export KUBECONFIG=... SIM_REGISTRY=... SIM_IMAGE=...
    hack/sim up --prometheus             # also a Prometheus (prints its URL, SIM_PROMETHEUS=...)
    hack/sim up --real-bootc 2           # the first 2 nodes on real-bootc hosts (root only)
    hack/sim image push os:v2            # prints 127.0.0.1:PORT/os:v2@sha256:...
    hack/sim image push os:bad --label fakebootc.boot-assessment=fail   # boots fail
    hack/sim image push os:v3 --sign     # signed with the sim's cosign key (image key)
    hack/sim pool --verify --image REF   # the pool rolls out signed digests only
    hack/sim workload                    # a Deployment spread over the nodes + its PDB
    hack/sim pool --stage-ahead 1 --image REF   # create/update the pool ``workers``
    hack/sim status
    hack/sim kubectl get bnp,bn          # the cached kubectl, pointed at the simulation
    hack/sim fault not-ready worker-2    # a fault for a gate to catch (hack.simlib.faults)
    hack/sim fault list                  # the active faults
    hack/sim fault clear                 # all of them (or: clear KIND [TARGET], clear NODE)
    hack/sim down
    eval "$(hack/sim up --clusters 3 --nodes 6)"   # a fleet: KUBECONFIG_1..3, one registry
    hack/sim --cluster 2 kubectl get bnp           # any command, on the fleet's 2nd cluster

``up`` starts a supervisor process (``hack.simlib.supervisor``) that owns every
component, waits until it reports ready (every Node Ready, every daemon healthy,
a controller leading) and returns; all state lives in one directory (``--dir``,
default ``.cache/sim``). ``down``, and ``up`` before it starts anything, clean up
whatever a previous ``up`` left there, even after crashes (``hack.simlib.reaper``).

``up --real-bootc N`` puts the first N nodes on real-bootc hosts
(``hack.simlib.hosts``): the real bootc and libostree on a real ostree sysroot,
pulling every image from the simulation's registry, staging it for real and
booting it at the reboot; the other nodes keep the fake bootc. One rollout then
goes through both.

``up --prometheus`` also runs a real Prometheus scraping the controllers and the
managed nodes' daemons, with the kit's alerting rules on the simulation's clock
(every ``for`` / 60; ``hack.simlib.monitoring``): open its URL for the rollout's
graphs (``/graph``) and alerts (``/alerts``); ``status`` shows it, ``down`` stops it.

``up`` with a pool option (``--pool-file``, ``--max-unavailable``,
``--max-unhealthy``, ``--stage-ahead``, ``--maintenance-window``; see
``hack.simlib.policy``) also applies a pool over the worker nodes on the first
image; ``pool`` applies one (the same options, plus ``--image``) to a running
simulation, keeping its image unless told another.

``up --clusters N`` starts a fleet (``hack.simlib.clusters``): N simulations in
``DIR/cluster-1`` ... each with its own control plane, controllers and nodes, all
pulling from cluster-1's registry and booting one first image; ``--cluster K``
points any other command at one of them, ``status`` and ``down`` take in them all.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from bootc_operator.wording import counted
from hack.simlib import clusters, faults, hosts, signing
from hack.simlib.common import DEFAULT_DIR, MARKER_ENV, SIM_FILE, SimConfig, SimInfo
from hack.simlib.images import ImageError, digest_ref, parse_label
from hack.simlib.policy import (
    PolicyError,
    add_pool_arguments,
    check_alert_gate,
    describe_rollout,
    pool_manifest,
    wants_pool,
)
from hack.simlib.reaper import belongs, recorded_pids, teardown
from hack.simlib.sim import AttachedSim, SimError, SimOps
from hack.testenv.cli import run_command, take_down
from hack.testenv.controlplane import REPO_ROOT
from hack.testenv.procs import log_tail, pid_alive
from hack.testenv.prometheus import PrometheusClient, PrometheusError


def _err(msg: str) -> None:
    print(f"sim: {msg}", file=sys.stderr, flush=True)


def _check_dir(state_dir: Path) -> None:
    if not state_dir.exists() or (state_dir / SIM_FILE).exists() or clusters.is_fleet(state_dir):
        return
    if {p.name for p in state_dir.iterdir()} - {"logs"}:
        raise SimError(
            f"{state_dir} exists but holds no simulation ({SIM_FILE}); refusing to touch it"
        )


def clean(state_dir: Path, *, quiet: bool = False) -> bool:
    """Tear down whatever a previous ``up`` left in ``state_dir``. False if nothing was there."""
    _check_dir(state_dir)
    if not state_dir.exists():
        return False
    killed = []
    # a fleet: every cluster, the one that owns the registry last
    for cluster in reversed(clusters.load(state_dir) or []):
        if cluster.parent == state_dir:
            killed += teardown(cluster)
    killed += teardown(state_dir)
    if killed and not quiet:
        _err("killed leftovers: " + ", ".join(killed))
    return True


def start_detached(
    state_dir: Path,
    config: SimConfig,
    *,
    use_registry: bool = True,
    progress: bool = True,
    timeout: float | None = None,
) -> SimInfo:
    """Start a supervisor for ``state_dir`` (cleaned first) and wait until it is ready."""
    if clean(state_dir, quiet=not progress) and progress:
        _err(f"cleaned up a previous simulation in {state_dir}")
    limit = timeout if timeout is not None else 180.0 + 4.0 * config.nodes
    started = [(state_dir, _launch(state_dir, config, use_registry))]
    (info,) = _await_ready(started, limit, progress)
    return info


def start_clusters(
    root: Path, config: SimConfig, count: int, *, progress: bool = True
) -> list[SimInfo]:
    """``count`` simulations in ``root/cluster-1`` ... (``root`` cleaned first): the
    first with its registry and first image, then the others at once, pulling from
    that registry and booting that image (``hack.simlib.clusters``)."""
    if clean(root, quiet=not progress) and progress:
        _err(f"cleaned up a previous simulation in {root}")
    dirs = clusters.cluster_dirs(root, count)
    clusters.save(root, dirs)
    limit = 180.0 + 4.0 * config.nodes
    try:
        first = _await_ready([(dirs[0], _launch(dirs[0], config, True))], limit, progress, True)
        shared = dataclasses.replace(
            config, registry=first[0].registry, first_image=first[0].first_image
        )
        launched = [(d, _launch(d, shared, True)) for d in dirs[1:]]
        # they start side by side on a shared machine: give them the time of all
        rest = _await_ready(launched, limit * len(launched), progress, True)
    except BaseException:
        clean(root, quiet=True)
        raise
    return [*first, *rest]


def _launch(state_dir: Path, config: SimConfig, use_registry: bool) -> subprocess.Popen[bytes]:
    """A supervisor for ``state_dir`` (``hack.simlib.supervisor``), detached."""
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        MARKER_ENV: str(state_dir),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    argv = [
        sys.executable,
        "-m",
        "hack.simlib.supervisor",
        "--dir",
        str(state_dir),
        "--config",
        json.dumps(dataclasses.asdict(config)),
    ]
    if not use_registry:
        argv.append("--no-registry")
    with (state_dir / "logs" / "supervisor.log").open("ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=REPO_ROOT,
        )


def _await_ready(
    started: list[tuple[Path, subprocess.Popen[bytes]]],
    limit: float,
    progress: bool,
    named: bool = False,
) -> list[SimInfo]:
    """Wait until every supervisor of ``started`` reports its simulation ready (their
    progress shown, prefixed by the directory's name when ``named``); on failure stop
    them all and raise."""
    deadline = time.monotonic() + limit
    shown = dict.fromkeys((d for d, _ in started), 0)
    ready: dict[Path, SimInfo] = {}
    try:
        while len(ready) < len(started):
            for state_dir, proc in started:
                if state_dir in ready:
                    continue
                log_path = state_dir / "logs" / "supervisor.log"
                if progress:
                    prefix = f"{state_dir.name}: " if named else ""
                    shown[state_dir] = _show_progress(log_path, shown[state_dir], prefix)
                info = SimInfo.load(state_dir)
                if info is not None and info.ready:
                    ready[state_dir] = info
                    continue
                if proc.poll() is not None:
                    why = info.error if info is not None and info.error else ""
                    raise SimError(
                        f"the supervisor exited with code {proc.returncode} before the "
                        f"simulation in {state_dir} was ready{': ' + why if why else ''}\n"
                        + _tails(state_dir, log_path)
                    )
                if time.monotonic() > deadline:
                    raise SimError(
                        f"the simulation in {state_dir} was not ready after {limit:.0f}s\n"
                        + _tails(state_dir, log_path)
                    )
            time.sleep(0.2)
    except BaseException:
        for state_dir, proc in started:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
            teardown(state_dir)
        raise
    return [ready[d] for d, _ in started]


def _show_progress(log_path: Path, shown: int, prefix: str = "") -> int:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return shown
    for line in lines[shown:]:
        _err(prefix + line)
    return len(lines)


def _tails(state_dir: Path, supervisor_log: Path) -> str:
    parts = [f"--- {supervisor_log} ---\n{log_tail(supervisor_log, 30)}"]
    nodesim_log = state_dir / "logs" / "nodesim.log"
    if nodesim_log.exists():
        parts.append(f"--- {nodesim_log} ---\n{log_tail(nodesim_log, 30)}")
    return "\n".join(parts)


def exports(info: SimInfo) -> str:
    """What ``up`` prints on stdout (for ``eval``)."""
    return (
        f"export KUBECONFIG={info.kubeconfig}\n"
        f"export SIM_REGISTRY={info.registry or '(none: images come from a catalog)'}\n"
        f"export SIM_IMAGE={info.first_image}\n"
    ) + (f"export SIM_PROMETHEUS={info.prometheus}\n" if info.prometheus else "")


def cmd_up(args: argparse.Namespace) -> int:
    config = SimConfig(
        nodes=args.nodes,
        reboot_seconds=args.reboot_seconds,
        soft_reboot_seconds=args.soft_reboot_seconds,
        stage_seconds=args.stage_seconds,
        boot_complete_delay=args.boot_complete_delay,
        controllers=args.controllers,
        poll_interval=args.poll_interval,
        log_level=args.log_level,
        tag_resolution_interval=args.tag_resolution_interval,
        prometheus=args.prometheus,
        enforce_container_sigpolicy=args.enforce_container_sigpolicy,
        real_bootc=args.real_bootc,
    )
    refused = hosts.refusal(config, registry=not args.no_registry)
    if refused:  # before anything starts
        raise SimError(refused)
    if args.clusters > 1:
        return up_clusters(args, config)
    if wants_pool(args):
        pool_manifest(args, image="")  # a bad file or flag fails before anything starts
        check_alert_gate(args, args.prometheus)
    started = time.monotonic()
    info = start_detached(args.dir, config, use_registry=not args.no_registry)
    _err(
        f"up in {time.monotonic() - started:.1f}s: {counted(len(info.nodes), 'node')}, "
        f"{counted(config.controllers, 'controller')}; API {info.server}"
    )
    _err(f"registry {info.registry or '(catalog)'}; first image {info.first_image}")
    if info.real_bootc_nodes:
        _err(
            "on real-bootc hosts (the real bootc and libostree): "
            + ", ".join(info.real_bootc_nodes)
        )
    _err(f"kubectl: {info.kubectl}   (or: hack/sim kubectl get bnp,bn)")
    _err(f"logs: {args.dir / 'logs'}, {args.dir / 'controlplane' / 'logs'}")
    if info.prometheus:
        _err(
            f"prometheus {info.prometheus}: graphs {info.prometheus}/graph, alerts "
            f"{info.prometheus}/alerts (the kit's rules, every `for` / 60)"
        )
    rc = 0
    if wants_pool(args):
        try:
            apply_pool(AttachedSim(info), args, info.first_image)
        except SimError as exc:  # the CRD refused it: the simulation is up all the same
            _err(f"the pool was not created: {exc}")
            _err("fix it and apply it with: hack/sim pool --pool-file FILE ...")
            rc = 1
    _err("stop with: hack/sim down")
    sys.stdout.write(exports(info))
    return rc


def up_clusters(args: argparse.Namespace, config: SimConfig) -> int:
    """``up --clusters N``: a fleet (``hack.simlib.clusters``); prints one KUBECONFIG_K
    per cluster (KUBECONFIG: the first's)."""
    if wants_pool(args) or args.no_registry:
        raise SimError(
            "--clusters takes no pool options and needs the registry: apply pools cluster "
            "by cluster (hack/sim --cluster K pool ...)"
        )
    started = time.monotonic()
    infos = start_clusters(args.dir, config, args.clusters)
    _err(
        f"up in {time.monotonic() - started:.1f}s: {counted(len(infos), 'cluster')} of "
        f"{counted(config.nodes, 'node')}, each with its own control plane and "
        f"{counted(config.controllers, 'controller')}"
    )
    for k, info in enumerate(infos, start=1):
        _err(f"cluster-{k}: API {info.server}   (hack/sim --cluster {k} kubectl get bnp,bn)")
    _err(f"registry {infos[0].registry} (shared); first image {infos[0].first_image}")
    _err("stop with: hack/sim down")
    lines = [f"export KUBECONFIG_{k}={i.kubeconfig}" for k, i in enumerate(infos, start=1)]
    lines += [
        f"export KUBECONFIG={infos[0].kubeconfig}",
        f"export SIM_CLUSTERS={len(infos)}",
        f"export SIM_REGISTRY={infos[0].registry}",
        f"export SIM_IMAGE={infos[0].first_image}",
    ]
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def apply_pool(sim: SimOps, args: argparse.Namespace, image: str) -> dict[str, Any]:
    """``kubectl apply`` the pool of the pool options (``image`` unless the file names one)."""
    pool = pool_manifest(args, image=image)
    if getattr(args, "verify", False):
        pool["spec"]["image"]["verification"] = signing.verification(sim.state_dir)
    sim.kubectl("apply", "-f", "-", input=json.dumps(pool))
    spec = pool["spec"]
    _err(
        f"pool {pool['metadata']['name']} applied: image {spec['image']['ref']}; "
        f"{describe_rollout(spec.get('rollout') or {})}"
    )
    return pool


def cmd_pool(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    check_alert_gate(args, bool(sim.info.prometheus))
    image = args.image
    if image is None:  # keep the pool's image: re-applying a policy must not roll back
        name = pool_manifest(args, image="").get("metadata", {}).get("name")
        res = sim.kubectl("get", "bootcnodepool", str(name), "-o", "json", check=False)
        current = json.loads(res.stdout) if res.returncode == 0 else {}
        image = ((current.get("spec") or {}).get("image") or {}).get("ref") or sim.info.first_image
    apply_pool(sim, args, image)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    return take_down(args.dir, clean, "simulation", _err)


def cmd_status(args: argparse.Namespace) -> int:
    fleet = clusters.load(args.dir) if clusters.is_fleet(args.dir) else None
    if fleet is not None:
        rc = 0
        for k, cluster in enumerate(fleet, start=1):
            print(f"=== cluster-{k}")
            rc = max(rc, cmd_status(argparse.Namespace(**{**vars(args), "dir": cluster})))
        return rc
    sim = AttachedSim.open(args.dir)
    info = sim.info
    alive = recorded_pids(args.dir)
    ok = True
    print(f"state dir  {args.dir}")
    print(f"API        {info.server}  (export KUBECONFIG={info.kubeconfig})")
    print(f"registry   {info.registry or '(catalog)'}   first image {info.first_image}")
    if info.prometheus:
        print(f"prometheus {info.prometheus}  {prometheus_summary(info.prometheus)}")
    for name, pid in sorted(info.pids.items()):
        running = pid_alive(pid) and belongs(pid, args.dir)
        ok = ok and running
        print(f"  {name:<26} pid {pid:<8} {'running' if running else 'NOT RUNNING'}")
    nodesim = sim.nodesim_state()
    procs = sim.processes()
    controllers = {n: p for n, p in procs.items() if n.startswith("controller-")}
    daemons = {n: p for n, p in procs.items() if n.startswith("daemon/")}
    print(f"leader     {sim.leader() or '(none)'}")
    for name, proc in sorted(controllers.items()):
        print(f"  {name:<26} pid {proc.get('pid')!s:<8} restarts {proc.get('restarts')}")
    up = sum(1 for p in daemons.values() if p.get("pid") in alive.values())
    restarts = sum(int(p.get("restarts") or 0) for p in daemons.values())
    print(f"daemons    {up}/{len(daemons)} running, {restarts} restarts")
    print(f"rebooting  {', '.join(nodesim.get('down') or []) or '-'}")
    print(f"reboots    {len(sim.reboots())}")
    active = faults.load(sim.state_dir)
    print(f"faults     {', '.join(f.name for f in active) or '-'}")
    res = sim.kubectl("get", "bootcnodepools", "-o", "wide", check=False)
    print(res.stdout.rstrip() or "pools      (none)")
    return 0 if ok else 1


def prometheus_summary(url: str) -> str:
    """``N/M targets up; firing: A, B`` of the Prometheus at ``url`` (or why not)."""
    prom = PrometheusClient(url)
    try:
        targets = prom.targets()
        firing = sorted({a["labels"].get("alertname", "?") for a in prom.firing()})
    except (PrometheusError, OSError) as exc:
        return f"NOT ANSWERING ({exc})"
    up = sum(1 for t in targets if t.get("health") == "up")
    return f"{up}/{len(targets)} targets up; firing: {', '.join(firing) or '-'}"


def cmd_push(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    if faults.registry_down(faults.load(sim.state_dir)):
        raise SimError(
            "the registry is down (hack/sim fault registry-down); "
            "start it again with: hack/sim fault clear registry-down"
        )
    labels = dict(parse_label(text) for text in args.label)
    if args.sign and not sim.info.registry:
        raise SimError("--sign needs the simulation's registry (this one has a catalog only)")
    ref = sim.push_image(args.name, labels)
    if args.sign:
        signing.sign(sim.state_dir, digest_ref(ref))
        _err("signed with the simulation's cosign key (hack/sim image key prints it)")
    print(ref)
    return 0


def cmd_image_key(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    print(signing.public_key(sim.state_dir), end="")
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    for created in sim.deploy_workload(args.replicas):
        _err(f"applied {created} (namespace default)")
    return 0


def cmd_fault(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    details: dict[str, Any] = {}
    if args.fault == faults.BOOT_FAIL and args.unit:
        details["unit"] = args.unit
    if args.fault == faults.ALERT:
        labels = dict(faults.DEFAULT_ALERT_LABELS)
        labels.update(parse_label(text) for text in args.label)
        details["labels"] = labels
    target = getattr(args, "target", None) or ""
    applied = faults.apply(sim, faults.Fault(args.fault, target, details))
    _err(f"fault {applied.describe()}")
    return 0


def cmd_fault_list(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    active = faults.load(sim.state_dir)
    held = set(sim.nodesim_state().get("not_ready") or ())
    for fault in active:
        now = " [NotReady now]" if fault.kind == faults.NOT_READY and fault.target in held else ""
        print(fault.describe() + now)
    if not active:
        _err("no faults")
    return 0


def cmd_fault_clear(args: argparse.Namespace) -> int:
    sim = AttachedSim.open(args.dir)
    kind, target = faults.parse_clear(args.what)
    cleared = faults.clear(sim, kind, target)
    for fault in cleared:
        _err(f"cleared {fault.name}")
    if not cleared:
        _err("no such fault was active")
    return 0


def add_fault_parser(sub: Any) -> list[argparse.ArgumentParser]:
    """``hack/sim fault KIND ...``, ``fault list``, ``fault clear``; returns the leaves."""
    fault = sub.add_parser(
        "fault",
        help="give the running simulation a fault for a gate to catch (see hack.simlib.faults)",
        description="Faults the running processes pick up (no restarts); "
        "`fault clear` undoes them, `fault list` shows them.",
    )
    kinds = fault.add_subparsers(dest="fault", required=True)
    leaves = []
    for kind, help_text in (
        (faults.NOT_READY, "from its next reboot on, NODE stays NotReady (the health gate)"),
        (faults.BOOT_FAIL, "from its next boot on, NODE's boot assessment fails (bootComplete)"),
        (faults.DRAIN_BLOCK, "a pod on NODE whose PodDisruptionBudget refuses its eviction"),
        (
            faults.AUTOSCALER,
            "NODE gets the cluster autoscaler's ToBeDeletedByClusterAutoscaler taint "
            "(shown as leaving, no reboot slot)",
        ),
    ):
        leaf = kinds.add_parser(kind, help=help_text, description=help_text)
        leaf.add_argument("target", metavar="NODE")
        leaves.append(leaf)
    leaves[1].add_argument(
        "--unit", help="the failing check (default: greenboot-healthcheck.service)"
    )
    down = kinds.add_parser(
        faults.REGISTRY_DOWN,
        help="stop the registry (tag resolution and pulls fail) until cleared",
    )
    alert = kinds.add_parser(
        faults.ALERT,
        help="an alert that fires in the sim's Prometheus (needs hack/sim up --prometheus)",
    )
    alert.add_argument(
        "target",
        metavar="NAME",
        nargs="?",
        default=faults.DEFAULT_ALERT,
        help="the alert's name (default: %(default)s)",
    )
    alert.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='a label on the alert (repeatable; default severity="critical")',
    )
    leaves += [down, alert]
    for leaf in leaves:
        leaf.set_defaults(func=cmd_fault)
    listing = kinds.add_parser("list", help="the active faults")
    listing.set_defaults(func=cmd_fault_list)
    clearing = kinds.add_parser(
        "clear",
        help="undo faults: all, one KIND, KIND TARGET, or every fault of NODE",
    )
    clearing.add_argument("what", nargs="*", metavar="[KIND] [TARGET]")
    clearing.set_defaults(func=cmd_fault_clear)
    return [*leaves, listing, clearing]


def cmd_kubectl(args: argparse.Namespace) -> int:
    info = AttachedSim.open(args.dir).info
    argv = [str(info.kubectl), f"--kubeconfig={info.kubeconfig}", *args.args]
    return subprocess.call(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hack/sim",
        description="A local cluster of simulated bootc nodes running the real operator.",
    )
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"state directory (default: {DEFAULT_DIR})"
    )
    parser.add_argument(
        "--cluster",
        type=int,
        metavar="K",
        help="in a fleet (up --clusters N), act on its K-th cluster (DIR/cluster-K)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start in the background; prints `export KUBECONFIG=...`")
    up.add_argument("--nodes", type=int, default=3, help="simulated nodes (default: %(default)s)")
    up.add_argument(
        "--clusters",
        type=int,
        default=1,
        help="a fleet: this many clusters (DIR/cluster-K), each its own control plane, "
        "controllers and --nodes nodes, one registry between them; choose one with "
        "hack/sim --cluster K (default: %(default)s)",
    )
    up.add_argument(
        "--reboot-seconds",
        type=float,
        default=5.0,
        help="how long a rebooting Node stays NotReady (default: %(default)s)",
    )
    up.add_argument(
        "--soft-reboot-seconds",
        type=float,
        help="how long a soft-rebooting Node (a pool with rebootPolicy AllowSoftReboot, an "
        "update with the same kernel) stays NotReady (default: a quarter of --reboot-seconds)",
    )
    up.add_argument(
        "--stage-seconds",
        type=float,
        default=1.0,
        help="how long staging an image takes on a host (default: %(default)s)",
    )
    up.add_argument(
        "--boot-complete-delay",
        type=float,
        default=0.0,
        help="seconds after a boot until boot-complete.target (or a failed boot "
        "assessment) (default: %(default)s)",
    )
    up.add_argument(
        "--controllers", type=int, default=2, help="controller processes (default: %(default)s)"
    )
    up.add_argument(
        "--poll-interval", default="5m", help="each daemon's --poll-interval (default: %(default)s)"
    )
    up.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    up.add_argument(
        "--tag-resolution-interval",
        default="30s",
        help="how often the controllers resolve tag refs (default: %(default)s)",
    )
    up.add_argument(
        "--no-registry", action="store_true", help="no OCI registry: images come from a catalog"
    )
    up.add_argument(
        "--prometheus",
        action="store_true",
        help="also run Prometheus (Debian's) scraping the controllers and daemons, with the "
        "kit's alert rules (every `for` / 60); prints its URL",
    )
    up.add_argument(
        "--real-bootc",
        type=int,
        default=0,
        metavar="N",
        help="the first N nodes run on real-bootc hosts: the real bootc and libostree on a "
        "real ostree sysroot (hack/realbootc; root only; the first use builds them, about "
        "15 minutes) instead of the fake bootc (default: %(default)s)",
    )
    up.add_argument(
        "--enforce-container-sigpolicy",
        action="store_true",
        help="the daemons run bootc switch --enforce-container-sigpolicy; set each host's "
        "policy with hack/fake-host policy DIR/hosts/NODE FILE",
    )
    add_pool_arguments(up, alerts=True)
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop everything and remove the state directory")
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", help="processes, leader, reboots, pools")
    status.set_defaults(func=cmd_status)
    image = sub.add_parser("image", help="OS images")
    image_sub = image.add_subparsers(dest="image_command", required=True)
    push = image_sub.add_parser("push", help="push a new, distinct image; prints REF@sha256:...")
    push.add_argument("name", metavar="NAME:TAG", help="e.g. os:v2 (goes to the sim's registry)")
    push.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label on the image's config (repeatable); fakebootc.boot-assessment="
        "fail[:UNIT] or hang[:UNIT] makes every boot of it fail its boot assessment",
    )
    push.add_argument(
        "--sign",
        action="store_true",
        help="sign the pushed digest with the simulation's cosign key (hack/sim image key; "
        "pools trust it with hack/sim pool --verify)",
    )
    push.set_defaults(func=cmd_push)
    key = image_sub.add_parser("key", help="print the simulation's cosign public key (PEM)")
    key.set_defaults(func=cmd_image_key)
    wl = sub.add_parser("workload", help="deploy a sample Deployment with a PodDisruptionBudget")
    wl.add_argument("--replicas", type=int, default=None, help="default: one per node")
    wl.set_defaults(func=cmd_workload)
    pl = sub.add_parser(
        "pool",
        help="create or update a pool from a file and/or rollout-policy flags",
        description="kubectl apply a BootcNodePool: --pool-file and/or the policy flags; "
        "a missing name, nodeSelector or image is filled in (workers, every worker node, "
        "the pool's current image or the first one).",
    )
    pl.add_argument("--image", help="spec.image.ref (e.g. what `hack/sim image push` printed)")
    pl.add_argument(
        "--verify",
        action="store_true",
        help="spec.image.verification: roll out only digests signed with the simulation's "
        "key (hack/sim image push --sign)",
    )
    add_pool_arguments(pl, alerts=True)
    pl.set_defaults(func=cmd_pool)
    fault_leaves = add_fault_parser(sub)
    kc = sub.add_parser("kubectl", help="run the cached kubectl against the simulation")
    kc.set_defaults(func=cmd_kubectl)
    for leaf in (up, down, status, push, key, wl, pl, kc, *fault_leaves):  # --dir also after
        leaf.add_argument("--dir", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    kc.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def interrupt_on_sigterm() -> None:
    """SIGTERM (and SIGINT, even when inherited as ignored) raise KeyboardInterrupt once,
    so a half-started simulation is torn down; a second signal is ignored."""

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.dir = args.dir.resolve()
    if args.cluster is not None:
        args.dir = clusters.cluster_dir(args.dir, args.cluster)
    elif args.command not in ("up", "down", "status") and clusters.is_fleet(args.dir):
        count = len(clusters.load(args.dir) or [])
        _err(f"{args.dir} holds a fleet of {count} clusters: choose one with --cluster K")
        return 2
    interrupt_on_sigterm()
    return run_command(args, (SimError, ImageError, PolicyError, faults.FaultError), _err)


if __name__ == "__main__":
    sys.exit(main())
