"""The pool ``hack/sim`` and ``hack/demo`` create: a pool file, rollout-policy flags, or both.

``add_pool_arguments`` gives a command these options:

- ``--pool-file FILE``: a ``BootcNodePool`` in YAML (or JSON). Anything it leaves
  out is filled in: ``metadata.name`` (``workers``), ``spec.nodeSelector`` (every
  worker node: ``node-role.kubernetes.io/worker: ""``) and ``spec.image.ref`` (the
  simulation's current image);
- ``--max-unavailable``, ``--max-unhealthy``, ``--stage-ahead``: an integer or a
  percentage (``"25%"``), written to ``spec.rollout``;
- ``--topology-key KEY`` and ``--topology-order A,B``: ``spec.rollout.topology``
  (zone by zone; the simulated workers carry ``topology.kubernetes.io/zone``);
- ``--order-by-label KEY``, ``--order-by Name|OldestBootFirst|NewestFirst``,
  ``--control-plane First|Last``: ``spec.rollout.order`` (the admin's order);
- ``--drain-timeout SECONDS`` and ``--drain-on-timeout Halt|Skip|Force``:
  ``spec.rollout.drain.timeoutSeconds`` and ``.onTimeout`` (bounded drains; with
  ``hack/sim fault drain-block NODE`` a drain that never ends on its own);
- ``--blocking-alert MATCHERS`` (repeatable; ``hack/sim`` only, ``alerts=True``):
  ``spec.rollout.blockingAlerts``, e.g. ``'severity="critical"'`` (the alert gate;
  ``hack/sim fault alert`` fires one). ``check_alert_gate`` refuses it for a
  simulation without Prometheus, where the gate would block every reboot;
- ``--precondition NAME=EXPR`` (repeatable; ``hack/sim`` only, needs ``--prometheus``
  likewise): ``spec.rollout.preconditions``;
- ``--maintenance-window "[DAYS] START DURATION [TIME_ZONE]"`` (repeatable), e.g.
  ``"Mon-Fri 22:00 4h Europe/Berlin"``, ``"Sat,Sun 10:00 90m"`` or ``"+1m 2m"``:
  DAYS is a comma list of ``Mon``..``Sun`` or ranges (``Mon-Fri``), left out for
  every day; START is ``HH:MM`` or ``+DURATION`` (that long from now, rounded up
  to the next whole minute, in the window's time zone: a window for a demo);
  TIME_ZONE is an IANA name, default UTC.

A flag beats the file's field. The windows are checked here with the
controller's own parser (an unknown time zone is an error before anything
starts); the rest of the validation is the CRD's, when the pool is applied.
``pool_manifest`` builds the pool; ``describe_rollout`` says in one line what its
rollout policy will do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from bootc_operator.api import constants as c
from bootc_operator.policy.windows import parse_duration, parse_windows
from hack.simlib.common import WORKER_LABEL

DEFAULT_POOL = "workers"
#: the rollout fields a flag sets: (argparse dest, spec.rollout key)
FLAG_FIELDS = (
    ("max_unavailable", "maxUnavailable"),
    ("max_unhealthy", "maxUnhealthy"),
    ("stage_ahead", "stageAhead"),
)


#: the drain fields a flag sets: (argparse dest, spec.rollout.drain key)
DRAIN_FIELDS = (
    ("drain_timeout", "timeoutSeconds"),
    ("drain_on_timeout", "onTimeout"),
    ("drain_delete_emptydir_data", "deleteEmptyDirData"),
)
#: flags whose gate asks Prometheus: (argparse dest, flag, gate)
PROMETHEUS_FLAGS = (
    ("blocking_alert", "--blocking-alert", "the alert gate"),
    ("precondition", "--precondition", "the preconditions gate"),
)
DRAIN_ON_TIMEOUT = ("Halt", "Skip", "Force")


class PolicyError(ValueError):
    """A pool file or flag that cannot make a pool."""


def int_or_percent(text: str) -> int | str:
    """An argparse type: ``"2"`` → 2, ``"25%"`` → ``"25%"`` (the CRD checks the range)."""
    value = text.strip()
    if value.endswith("%") and value[:-1].isdigit():
        return value
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError(f'"{text}" is not an integer or a percentage like 25%')


def true_or_false(text: str) -> bool:
    """An argparse type: ``"true"`` → True, ``"false"`` → False (as in the pool's YAML)."""
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise argparse.ArgumentTypeError(f'"{text}" is not true or false')


def name_and_expr(text: str) -> dict[str, str]:
    """An argparse type: ``"NAME=EXPR"`` → ``{"name": NAME, "expr": EXPR}``."""
    name, sep, expr = text.partition("=")
    if not sep or not name.strip() or not expr.strip():
        raise argparse.ArgumentTypeError(f'"{text}" is not NAME=EXPR')
    return {"name": name.strip(), "expr": expr.strip()}


def _days(text: str) -> list[str]:
    """``"Mon,Wed-Fri"`` → ``["Mon", "Wed", "Thu", "Fri"]`` (case-insensitive)."""
    known = {d.lower(): i for i, d in enumerate(c.WINDOW_DAYS)}
    out: list[str] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if first.lower() not in known or (last and last.lower() not in known):
            raise PolicyError(f'"{part.strip()}" is not a day or range of Mon..Sun')
        i, j = known[first.lower()], known[(last or first).lower()]
        span = range(i, j + 1) if i <= j else [*range(i, 7), *range(0, j + 1)]  # Sat-Mon
        out += [c.WINDOW_DAYS[k] for k in span if c.WINDOW_DAYS[k] not in out]
    return out


def parse_window(text: str, now: dt.datetime) -> dict[str, Any]:
    """One ``--maintenance-window`` as a ``spec.rollout.maintenanceWindows`` item.

    ``now`` (aware) resolves a ``+DURATION`` start."""
    words = text.split()
    if not words:
        raise PolicyError("an empty maintenance window")
    days = _days(words.pop(0)) if not (words[0][:1].isdigit() or words[0][:1] == "+") else []
    if len(words) not in (2, 3):
        raise PolicyError(
            f'maintenance window "{text}": expected [DAYS] START DURATION [TIME_ZONE], '
            'e.g. "Mon-Fri 22:00 4h Europe/Berlin" or "+1m 2m"'
        )
    start, duration = words[0], words[1]
    zone = words[2] if len(words) == 3 else "UTC"
    if start.startswith("+"):
        delay = parse_duration(start[1:])
        if delay is None:
            raise PolicyError(f'maintenance window "{text}": {start} is not +DURATION like +2m')
        try:
            local = (now + delay).astimezone(ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            raise PolicyError(f'maintenance window "{text}": unknown time zone {zone}') from None
        minute = dt.datetime.fromtimestamp(math.ceil(local.timestamp() / 60) * 60, tz=local.tzinfo)
        start = minute.strftime("%H:%M")
    window: dict[str, Any] = {"start": start, "duration": duration, "timeZone": zone}
    if days:
        window = {"days": days, **window}
    _, problems = parse_windows([window])
    if problems:
        why = "; ".join(p.removeprefix("spec.rollout.maintenanceWindows[0].") for p in problems)
        raise PolicyError(f'maintenance window "{text}": {why}')
    return window


def add_pool_arguments(
    parser: argparse.ArgumentParser,
    *,
    max_unavailable_default: int | None = None,
    alerts: bool = False,
) -> None:
    """The pool file and the rollout-policy flags (see the module docstring);
    ``max_unavailable_default`` is only shown (the caller applies it); ``alerts``
    adds ``--blocking-alert``."""
    group = parser.add_argument_group(
        "pool", "the BootcNodePool to create (a flag beats the file's field)"
    )
    group.add_argument(
        "--pool-file",
        type=Path,
        metavar="FILE",
        help="a BootcNodePool YAML; a missing name, nodeSelector or image is filled in "
        "(workers; every worker node; the current image)",
    )
    group.add_argument(
        "--max-unavailable",
        type=int_or_percent,
        metavar="N|P%",
        help="spec.rollout.maxUnavailable"
        + ("" if max_unavailable_default is None else f" (default: {max_unavailable_default})"),
    )
    group.add_argument(
        "--max-unhealthy",
        type=int_or_percent,
        metavar="N|P%",
        help="spec.rollout.maxUnhealthy: unhealthy slot holders that halt the rollout",
    )
    group.add_argument(
        "--stage-ahead",
        type=int_or_percent,
        metavar="N|P%",
        help="spec.rollout.stageAhead: nodes beyond the slot holders staging at once",
    )
    group.add_argument(
        "--drain-timeout",
        type=int,
        metavar="SECONDS",
        help="spec.rollout.drain.timeoutSeconds: the longest a drain may take",
    )
    group.add_argument(
        "--drain-on-timeout",
        choices=DRAIN_ON_TIMEOUT,
        help="spec.rollout.drain.onTimeout: what a drain past its timeout does",
    )
    group.add_argument(
        "--drain-delete-emptydir-data",
        type=true_or_false,
        metavar="true|false",
        help="spec.rollout.drain.deleteEmptyDirData: evict pods with emptyDir volumes "
        "(their data is lost); false leaves them and the drain waits",
    )
    group.add_argument(
        "--maintenance-window",
        action="append",
        default=[],
        metavar="'[DAYS] START DURATION [TZ]'",
        help='repeatable; e.g. "Mon-Fri 22:00 4h Europe/Berlin", or "+1m 2m" (opens in a '
        "minute, for two)",
    )
    group.add_argument(
        "--topology-key",
        metavar="KEY",
        help="spec.rollout.topology.key: reboots zone by zone, e.g. topology.kubernetes.io/zone",
    )
    group.add_argument(
        "--max-unavailable-per-domain",
        type=int_or_percent,
        metavar="N|P%",
        help="spec.rollout.topology.maxUnavailablePerDomain (needs --topology-key)",
    )
    group.add_argument(
        "--topology-order",
        type=lambda text: [d.strip() for d in text.split(",") if d.strip()],
        metavar="A,B",
        help="spec.rollout.topology.order: the domains to update first (needs --topology-key)",
    )
    group.add_argument(
        "--order-by-label",
        metavar="KEY",
        help="spec.rollout.order.byLabel: nodes with lower values of this label reboot first",
    )
    group.add_argument(
        "--order-by",
        choices=("Name", "OldestBootFirst", "NewestFirst"),
        help="spec.rollout.order.by",
    )
    group.add_argument(
        "--control-plane",
        choices=("First", "Last"),
        help="spec.rollout.order.controlPlane: control-plane nodes first or last",
    )
    if not alerts:
        return
    group.add_argument(
        "--blocking-alert",
        action="append",
        default=[],
        metavar="MATCHERS",
        help="spec.rollout.blockingAlerts entry (repeatable), PromQL label matchers, e.g. "
        "'severity=\"critical\"': no new reboots while a matching alert fires",
    )
    group.add_argument(
        "--precondition",
        action="append",
        default=[],
        type=name_and_expr,
        metavar="NAME=EXPR",
        help="spec.rollout.preconditions entry (repeatable): a PromQL query that must "
        "return a result before a reboot, e.g. 'capacity=up{job=\"db\"} == 1'",
    )


def wants_pool(args: argparse.Namespace) -> bool:
    """Whether any pool option was given (``hack/sim up`` creates no pool otherwise)."""
    alerts = getattr(args, "blocking_alert", None) or getattr(args, "precondition", None)
    topology = getattr(args, "topology_key", None)
    order = _order(args)
    return bool(args.pool_file or args.maintenance_window or alerts or topology or order) or any(
        getattr(args, dest, None) is not None for dest, _ in FLAG_FIELDS + DRAIN_FIELDS
    )


def check_alert_gate(args: argparse.Namespace, prometheus: bool) -> None:
    """``--blocking-alert`` needs the simulation's Prometheus: without one the gate
    fails closed and no node would ever reboot."""
    for dest, flag, gate in PROMETHEUS_FLAGS:
        if getattr(args, dest, None) and not prometheus:
            raise PolicyError(
                f"{flag} needs a Prometheus for {gate} to ask (without one "
                "no node would reboot): start the simulation with hack/sim up --prometheus"
            )


def load_pool_file(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyError(f"cannot read the pool file {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind", c.POOL_KIND) != c.POOL_KIND:
        raise PolicyError(f"{path} does not hold one {c.POOL_KIND}")
    return doc


def pool_manifest(
    args: argparse.Namespace,
    *,
    image: str,
    now: dt.datetime | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The pool from ``--pool-file`` (or nothing) and the flags; ``image`` when the file
    names none; ``defaults`` are rollout fields used when neither file nor flag set them."""
    doc = load_pool_file(args.pool_file) if args.pool_file else {}
    meta = dict(doc.get("metadata") or {})
    meta.setdefault("name", DEFAULT_POOL)
    spec = dict(doc.get("spec") or {})
    spec.setdefault("nodeSelector", {"matchLabels": {WORKER_LABEL: ""}})
    spec["image"] = {**(spec.get("image") or {})}
    spec["image"].setdefault("ref", image)
    rollout = {**(defaults or {}), **(spec.get("rollout") or {})}
    for dest, key in FLAG_FIELDS:
        value = getattr(args, dest)
        if value is not None:
            rollout[key] = value
    if args.maintenance_window:
        when = now or dt.datetime.now(dt.UTC)
        rollout["maintenanceWindows"] = [parse_window(w, when) for w in args.maintenance_window]
    if getattr(args, "blocking_alert", None):
        rollout["blockingAlerts"] = list(args.blocking_alert)
    if getattr(args, "precondition", None):
        rollout["preconditions"] = list(args.precondition)
    per_domain = getattr(args, "max_unavailable_per_domain", None)
    if (getattr(args, "topology_order", None) or per_domain is not None) and not getattr(
        args, "topology_key", None
    ):
        raise PolicyError("--topology-order and --max-unavailable-per-domain need --topology-key")
    if getattr(args, "topology_key", None):
        topology: dict[str, Any] = {"key": args.topology_key}
        if args.topology_order:
            topology["order"] = list(args.topology_order)
        if per_domain is not None:
            topology["maxUnavailablePerDomain"] = per_domain
        rollout["topology"] = topology
    if order := _order(args):
        rollout["order"] = order
    drain = {
        key: getattr(args, dest)
        for dest, key in DRAIN_FIELDS
        if getattr(args, dest, None) is not None
    }
    if drain:
        rollout["drain"] = {**(rollout.get("drain") or {}), **drain}
    if rollout:
        spec["rollout"] = rollout
    return {**doc, "apiVersion": c.API_VERSION, "kind": c.POOL_KIND, "metadata": meta, "spec": spec}


def _order(args: argparse.Namespace) -> dict[str, str]:
    """``spec.rollout.order`` from the order flags (empty: none given)."""
    flags = (("order_by_label", "byLabel"), ("order_by", "by"), ("control_plane", "controlPlane"))
    return {key: value for dest, key in flags if (value := getattr(args, dest, None))}


def describe_rollout(rollout: Mapping[str, Any]) -> str:
    """``spec.rollout`` in one line, e.g. ``maxUnavailable 2, stageAhead 1, windows: ...``."""
    parts = [f"maxUnavailable {rollout.get('maxUnavailable', 1)}"]
    for key in ("maxUnhealthy", "stageAhead"):
        if rollout.get(key) is not None:
            parts.append(f"{key} {rollout[key]}")
    drain = rollout.get("drain") or {}
    if drain.get("timeoutSeconds") is not None:
        then = drain.get("onTimeout") or "give up on the node"
        parts.append(f"drain timeout {drain['timeoutSeconds']}s then {then}")
    elif drain.get("onTimeout"):
        parts.append(f"drain onTimeout {drain['onTimeout']}")
    if drain.get("deleteEmptyDirData") is not None:
        parts.append(f"drain deleteEmptyDirData {str(drain['deleteEmptyDirData']).lower()}")
    if rollout.get("paused"):
        parts.append("paused")
    if order := rollout.get("order"):
        parts.append("order " + ", ".join(f"{k} {v}" for k, v in order.items()))
    if topology := rollout.get("topology"):
        order = topology.get("order")
        first = f", {' then '.join(order)} first" if order else ""
        parts.append(f"zone by zone by {topology.get('key')}{first}")
    if rollout.get("blockingAlerts"):
        parts.append("blocking alerts " + " or ".join(rollout["blockingAlerts"]))
    if rollout.get("preconditions"):
        parts.append("preconditions " + ", ".join(p["name"] for p in rollout["preconditions"]))
    windows = rollout.get("maintenanceWindows") or []
    if windows:
        shown = [
            f"{','.join(w.get('days') or ['every day'])} {w['start']} {w['duration']} "
            f"{w.get('timeZone', 'UTC')}"
            for w in windows
        ]
        parts.append("maintenance windows " + "; ".join(shown))
    return ", ".join(parts)
