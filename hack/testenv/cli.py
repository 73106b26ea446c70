"""``hack/controlplane``: a long-lived local control plane for development.

``up`` starts etcd, kube-apiserver and kube-controller-manager (optionally
kube-scheduler and kwok) detached from the terminal, installs the CRDs and
prints ``export KUBECONFIG=...``; state (PIDs, logs, certificates, etcd data)
lives in one directory, by default ``.cache/controlplane`` in the repository
(``$BOOTC_OPERATOR_CONTROLPLANE_DIR``, or ``--dir``, names another).
``down`` kills what ``up`` started and removes that directory; ``up`` first
does the same for a previous ``up`` that was never taken down. ``status``
shows whether the recorded processes are still alive.

:func:`run_command` (a subcommand's exit code, errors and Ctrl-C reported) and
:func:`take_down` (``down``) also serve ``hack/sim`` (``hack.simlib.cli``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from hack.testenv.controlplane import (
    DEFAULT_CONTROLLERS,
    KWOK_CONTROLLERS,
    REPO_ROOT,
    STATE_FILE,
    STOP_ORDER,
    ControlPlane,
    ControlPlaneError,
)
from hack.testenv.procs import StartupError, cmdline, kill_group, pid_alive

DEFAULT_DIR = REPO_ROOT / ".cache" / "controlplane"
#: Overrides DEFAULT_DIR (a test runs the documented commands as written elsewhere).
DIR_ENV = "BOOTC_OPERATOR_CONTROLPLANE_DIR"


def _err(msg: str) -> None:
    print(f"controlplane: {msg}", file=sys.stderr)


def _read_state(state_dir: Path) -> dict[str, object] | None:
    try:
        state: dict[str, object] = json.loads((state_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ControlPlaneError(f"{state_dir / STATE_FILE} is not valid JSON: {e}") from e
    return state


def _recorded_pids(state_dir: Path, state: dict[str, object]) -> list[tuple[str, int]]:
    """(name, pid) of recorded processes that still run *and* belong to ``state_dir``."""
    pids = state.get("pids")
    if not isinstance(pids, dict):
        return []
    order = {name: i for i, name in enumerate(STOP_ORDER)}
    result: list[tuple[str, int]] = []
    for name, pid in sorted(pids.items(), key=lambda kv: order.get(kv[0], -1)):
        # A recycled PID would not mention our state directory on its command line.
        if (
            isinstance(pid, int)
            and pid_alive(pid)
            and any(str(state_dir) in arg for arg in cmdline(pid))
        ):
            result.append((name, pid))
    return result


def _teardown(state_dir: Path, *, quiet: bool = False) -> bool:
    """Kill what a previous ``up`` left in ``state_dir`` and remove it. False if nothing there."""
    state = _read_state(state_dir)
    if state is None:
        if state_dir.exists() and any(state_dir.iterdir()):
            raise ControlPlaneError(
                f"{state_dir} exists but has no {STATE_FILE}; not a control-plane state "
                "directory, refusing to delete it"
            )
        shutil.rmtree(state_dir, ignore_errors=True)
        return False
    for name, pid in _recorded_pids(state_dir, state):
        if not quiet:
            _err(f"stopping {name} (pid {pid})")
        kill_group(pid)
    shutil.rmtree(state_dir, ignore_errors=True)
    return True


def cmd_up(args: argparse.Namespace) -> int:
    state_dir: Path = args.dir
    if _teardown(state_dir, quiet=True):
        _err(f"cleaned up a previous control plane in {state_dir}")
    if args.controllers:
        controllers = tuple(args.controllers.split(","))
    else:
        controllers = DEFAULT_CONTROLLERS + (KWOK_CONTROLLERS if args.kwok else ())
    cp = ControlPlane(
        state_dir=state_dir,
        controllers=controllers,
        scheduler=args.scheduler,
        watch_cache=not args.no_watch_cache,
        die_with_parent=False,
    )
    _err(f"starting etcd, kube-apiserver, kube-controller-manager in {state_dir} ...")
    cp.start()  # cleans up after itself on failure
    try:
        if args.kwok:
            cp.start_kwok(node_label_selector=args.kwok_selector)
    except BaseException:
        cp.close()
        raise
    cp.detach()
    _err(f"up: {cp.server} (logs in {cp.log_dir}); stop with: hack/controlplane down")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    return take_down(args.dir, _teardown, "control plane", _err)


def take_down(
    state_dir: Path, teardown: Callable[[Path], bool], what: str, say: Callable[[str], None]
) -> int:
    """``down``: ``teardown(state_dir)`` (False: nothing was there) and say which; exit code 0."""
    if teardown(state_dir):
        say(f"stopped and removed {state_dir}")
    else:
        say(f"no {what} in {state_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = _read_state(args.dir)
    if state is None:
        _err(f"no control plane in {args.dir}")
        return 1
    pids = state.get("pids")
    alive = dict(_recorded_pids(args.dir, state))
    ok = isinstance(pids, dict) and bool(pids)
    for name, pid in pids.items() if isinstance(pids, dict) else []:
        running = name in alive
        ok = ok and running
        print(f"{name:<24} pid {pid:<8} {'running' if running else 'NOT RUNNING'}")
    print(f"server {state.get('server')}\nexport KUBECONFIG={state.get('kubeconfig')}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hack/controlplane",
        description="Run a local etcd + kube-apiserver + kube-controller-manager with the CRDs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    default_dir = Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)
    dir_help = f"state directory (default: ${DIR_ENV}, else {DEFAULT_DIR})"
    up = sub.add_parser("up", help="start in the background; prints `export KUBECONFIG=...`")
    up.add_argument("--dir", type=Path, default=default_dir, help=dir_help)
    up.add_argument("--scheduler", action="store_true", help="also run kube-scheduler")
    up.add_argument("--kwok", action="store_true", help="also run kwok (fake nodes)")
    up.add_argument(
        "--kwok-selector",
        default="type=kwok",
        help="label selector of the Nodes kwok manages (default: %(default)s)",
    )
    up.add_argument(
        "--controllers",
        default="",
        help="kube-controller-manager --controllers (default: "
        + ",".join(DEFAULT_CONTROLLERS)
        + "; with --kwok also "
        + ",".join(KWOK_CONTROLLERS)
        + ")",
    )
    up.add_argument(
        "--no-watch-cache", action="store_true", help="run kube-apiserver with --watch-cache=false"
    )
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop it and remove its state directory")
    down.add_argument("--dir", type=Path, default=default_dir, help=dir_help)
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", help="show whether it is running")
    status.add_argument("--dir", type=Path, default=default_dir, help=dir_help)
    status.set_defaults(func=cmd_status)

    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    return run_command(args, (ControlPlaneError, StartupError), _err)


def run_command(
    args: argparse.Namespace, errors: tuple[type[Exception], ...], say: Callable[[str], None]
) -> int:
    """Run the subcommand ``args.func(args)``: its exit code; 1 after one of ``errors``,
    130 after Ctrl-C (both told through ``say``)."""
    try:
        rc: int = args.func(args)
    except errors as e:
        say(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
