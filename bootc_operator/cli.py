"""The ``bootc-operator`` command: one image, two modes (``controller``, ``daemon``).

Flags are declared here so ``--help`` lists every one with its default; each
mode's ``run(args)`` receives the parsed namespace. One parser builder per mode
(``_controller_parser``, ``_daemon_parser``); flags that belong together (leader
election, the probe and metrics endpoints, registries, the alert gate) are added
by one function each. A mode returns a process exit
code; bad flags exit 2 with one readable line naming the flag.

Boolean flags read the way controller-runtime (Go's pflag) users type them:
``--leader-elect``, ``--leader-elect=true``, ``--leader-elect=false`` (any of
``true/false``, ``t/f``, ``1/0``, in any case), and ``--no-leader-elect``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn, TypeAlias

from bootc_operator import __version__
from bootc_operator.logs import FORMATS, setup_logging
from bootc_operator.policy.nodescope import DEFAULT_POLICY

DEFAULT_HOST_EXEC = "nsenter --target 1 --mount --pid --cgroup --setuid 0 --setgid 0 --env --"
DEFAULT_NAMESPACE = "bootc-operator"

#: what ``add_subparsers`` returns (argparse names no public type): modes are added to it
_Modes: TypeAlias = "argparse._SubParsersAction[_Parser]"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """``"5m"`` → 300.0; ``"1.5s"``, ``"250ms"``, ``"2h"`` and bare seconds too."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use a number with an optional unit ms, s, m or h"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool`` spellings (case-insensitive): true/t/1, false/f/0."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}: use true or false")


class BoolFlag(argparse.Action):
    """``--X``, ``--X=true|false`` and ``--no-X`` for one boolean ``dest``.

    argparse's own ``BooleanOptionalAction`` rejects ``--X=false`` ("ignored
    explicit argument"), which is how every controller-runtime manager's flags
    are written (the user guide and most Kubernetes manifests use it).
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        default: bool = False,
        required: bool = False,
        help: str | None = None,
    ) -> None:
        negated = [f"--no-{opt[2:]}" for opt in option_strings if opt.startswith("--")]
        super().__init__(
            [*option_strings, *negated],
            dest,
            nargs="?",
            const=None,
            default=default,
            required=required,
            help=help,
            metavar="true|false",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        negated = bool(option_string and option_string.startswith("--no-"))
        if values is None:
            setattr(namespace, self.dest, not negated)
            return
        if negated:
            raise argparse.ArgumentError(self, f"{option_string} takes no value")
        try:
            setattr(namespace, self.dest, parse_bool(str(values)))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentError(self, str(err)) from None


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a boolean flag as ``--X[=true|false], --no-X``."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, BoolFlag):
            return ", ".join(
                opt if opt.startswith("--no-") else f"{opt}[=true|false]"
                for opt in action.option_strings
            )
        return super()._format_action_invocation(action)


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (and exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG", ""),
        help="kubeconfig file; empty means in-cluster config (default: $KUBECONFIG or in-cluster)",
    )
    p.add_argument("--log-format", choices=FORMATS, default="text", help="log format")
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="log level",
    )


def _add_serving(
    p: argparse.ArgumentParser, *, metrics: str, probes: str, probe_paths: str
) -> None:
    """The probe and metrics endpoints' flags (kubebuilder's names and defaults)."""
    p.add_argument(
        "--metrics-bind-address",
        default=metrics,
        help="address for /metrics, HOST:PORT or :PORT (every interface, IPv4 and IPv6); "
        "'0' disables",
    )
    p.add_argument(
        "--metrics-secure",
        action=BoolFlag,
        default=True,
        help="serve /metrics over HTTPS, only to bearer tokens that pass a TokenReview and "
        "a SubjectAccessReview for get on /metrics (ClusterRole bootc-operator-metrics-reader); "
        "false: plain HTTP open to anyone who reaches the port (local development)",
    )
    p.add_argument(
        "--metrics-cert-path",
        default="",
        help="directory with the metrics serving certificate (reloaded when it changes); "
        "empty: a self-signed one made at start",
    )
    p.add_argument(
        "--metrics-cert-name", default="tls.crt", help="certificate file in --metrics-cert-path"
    )
    p.add_argument(
        "--metrics-cert-key", default="tls.key", help="private key file in --metrics-cert-path"
    )
    p.add_argument(
        "--health-probe-bind-address",
        default=probes,
        help=f"address for {probe_paths} (always plain HTTP); '0' disables",
    )


def build_parser() -> argparse.ArgumentParser:
    """``bootc-operator [--version] MODE ...``: one sub-parser per mode, each built by its own
    function below (``--help`` of each lists its flags in the order they are added)."""
    parser = _Parser(
        prog="bootc-operator",
        description="Roll bootc OS images out to Kubernetes nodes safely.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    modes = parser.add_subparsers(dest="mode", metavar="MODE", required=True)
    _controller_parser(modes)
    _daemon_parser(modes)
    return parser


def _mode(modes: _Modes, name: str, *, help: str, description: str) -> argparse.ArgumentParser:
    """Mode ``name``'s sub-parser, with the flags every mode has."""
    p = modes.add_parser(name, help=help, description=description, formatter_class=_HelpFormatter)
    _add_common(p)
    return p


def _controller_parser(modes: _Modes) -> None:
    """``bootc-operator controller``: the cluster controller (a Deployment)."""
    ctl = _mode(
        modes,
        "controller",
        help="run the cluster controller (Deployment)",
        description="Run the controller: membership, rollout and status reconcilers.",
    )
    _add_leader_election(ctl)
    _add_serving(ctl, metrics=":8080", probes=":8081", probe_paths="/healthz and /readyz")
    ctl.add_argument(
        "--tag-resolution-interval",
        type=parse_duration,
        default=300.0,
        help="how often tag image refs are resolved to digests",
    )
    ctl.add_argument("--workers", type=int, default=4, help="workers per reconciler workqueue")
    _add_registry(ctl)
    ctl.add_argument(
        "--node-events",
        choices=("summary", "verbose"),
        default="summary",
        help="Events on each Node per rollout: summary = one (NodeUpdated with the drain "
        "summary, or a Warning when something went wrong); verbose = also Cordoned and "
        "RebootRequested (pool Events are batched either way)",
    )
    ctl.add_argument(
        "--node-scope-policy",
        default=DEFAULT_POLICY,
        help="the ValidatingAdmissionPolicy (and its binding) that confines each daemon to "
        "its own BootcNode; without it no pull secret is sealed (the pool says "
        "SealingUnavailable)",
    )
    ctl.add_argument(
        "--seal-without-node-scope",
        action=BoolFlag,
        default=False,
        help="seal pull secrets even without that policy (Kubernetes < 1.30): any node's "
        "daemon could then open any other node's pull secret",
    )
    _add_alert_gate(ctl)
    _add_namespace(ctl)


def _daemon_parser(modes: _Modes) -> None:
    """``bootc-operator daemon``: the node agent (a DaemonSet)."""
    dmn = _mode(
        modes,
        "daemon",
        help="run the node agent (DaemonSet)",
        description="Run the node agent: drives bootc on this host from its BootcNode.",
    )
    dmn.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME", ""),
        help="this node's name (default: $NODE_NAME)",
    )
    _add_host(dmn)
    _add_daemon_timing(dmn)
    dmn.add_argument(
        "--enforce-container-sigpolicy",
        action=BoolFlag,
        default=False,
        help="run bootc switch --enforce-container-sigpolicy: the host's containers "
        "policy (/etc/containers/policy.json) must not accept anything by default, and "
        "bootc keeps enforcing it for later upgrades",
    )
    _add_serving(dmn, metrics=":8090", probes=":8091", probe_paths="/healthz and /readyz")
    _add_namespace(dmn)


def _add_host(p: argparse.ArgumentParser) -> None:
    """How the daemon reaches its host (tests point them at a simulated one)."""
    p.add_argument(
        "--host-exec",
        default=DEFAULT_HOST_EXEC,
        help="command prefix that runs a command on the host",
    )
    p.add_argument(
        "--host-root", default="/proc/1/root", help="the host's / as seen from the daemon"
    )


def _add_daemon_timing(p: argparse.ArgumentParser) -> None:
    """The daemon's rhythm: how often it looks, how long host commands may take, and
    its retry backoff."""
    p.add_argument(
        "--poll-interval",
        type=parse_duration,
        default=300.0,
        help="re-read bootc status at least this often",
    )
    p.add_argument(
        "--bootc-timeout",
        type=parse_duration,
        default=120.0,
        help="timeout for bootc status and systemctl commands on the host",
    )
    p.add_argument(
        "--stage-timeout",
        type=parse_duration,
        default=3600.0,
        help="timeout for staging an image (bootc switch)",
    )
    p.add_argument(
        "--backoff-initial",
        type=parse_duration,
        default=10.0,
        help="delay before retrying a failed switch, reboot or status read; doubles per "
        "consecutive failure",
    )
    p.add_argument(
        "--backoff-max",
        type=parse_duration,
        default=300.0,
        help="the longest delay between such retries",
    )


def _add_leader_election(p: argparse.ArgumentParser) -> None:
    """The controller's leader election on a Lease (controller-runtime's flags)."""
    p.add_argument(
        "--leader-elect",
        action=BoolFlag,
        default=False,
        help="elect a leader on a coordination.k8s.io Lease; standbys do no writes",
    )
    p.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE),
        help="namespace of the leader-election Lease",
    )
    p.add_argument(
        "--leader-election-id",
        default="bootc-operator-controller",
        help="name of the leader-election Lease",
    )
    p.add_argument(
        "--lease-duration",
        type=parse_duration,
        default=15.0,
        help="leader lease duration (seconds or 15s)",
    )
    p.add_argument(
        "--renew-deadline",
        type=parse_duration,
        default=10.0,
        help="leader gives up if it cannot renew within this",
    )
    p.add_argument(
        "--retry-period",
        type=parse_duration,
        default=2.0,
        help="interval between leader-election attempts",
    )


def _add_registry(p: argparse.ArgumentParser) -> None:
    """How the controller talks to registries when it resolves tags."""
    p.add_argument(
        "--registry-ca-file",
        default="",
        help="PEM bundle trusted (besides the system CAs) when resolving tags",
    )
    p.add_argument(
        "--insecure-registry",
        action="append",
        metavar="HOST[:PORT]",
        default=[],
        help="registry spoken to without TLS verification (plain HTTP if it has no TLS); "
        "repeatable, for test registries only",
    )


def _add_alert_gate(p: argparse.ArgumentParser) -> None:
    """The Prometheus the alert gate (``spec.rollout.blockingAlerts``), the
    preconditions (``spec.rollout.preconditions``) and the health queries
    (``spec.health.queries``) ask."""
    p.add_argument(
        "--prometheus-url",
        default="",
        metavar="URL",
        help="Prometheus (or any server of its query API) asked for the firing alerts of "
        "pools' spec.rollout.blockingAlerts, their spec.rollout.preconditions and "
        "spec.health.queries, e.g. http://prometheus.monitoring:9090",
    )
    p.add_argument(
        "--prometheus-ca-file", default="", help="PEM bundle trusted for --prometheus-url"
    )
    p.add_argument(
        "--prometheus-bearer-token-file",
        default="",
        help="file holding a bearer token for --prometheus-url (re-read on every query)",
    )
    p.add_argument(
        "--prometheus-insecure-skip-verify",
        action=BoolFlag,
        default=False,
        help="do not verify --prometheus-url's TLS certificate (labs only)",
    )
    p.add_argument(
        "--alert-check-interval",
        type=parse_duration,
        default=30.0,
        help="how often a pool's blocking alerts and preconditions, and the health queries "
        "of a node under its health check, are asked",
    )


def _add_namespace(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE),
        help="the operator's own namespace",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_format, args.log_level)
    if args.mode == "daemon" and not args.node_name:
        print(
            "bootc-operator daemon: error: --node-name (or $NODE_NAME) is required", file=sys.stderr
        )
        return 2
    if args.mode == "controller":
        from bootc_operator import controller  # noqa: PLC0415 - keep --help fast

        return asyncio.run(controller.run(args))
    from bootc_operator.daemon import agent  # noqa: PLC0415 - keep --help fast

    return asyncio.run(agent.run(args))
