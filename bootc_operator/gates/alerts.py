"""The alert gate's pure part: the query, the verdict, the retry delay.

``alert_query`` turns ``spec.rollout.blockingAlerts`` (entries of PromQL label
matchers, ANDed within an entry, entries ORed) into one instant query of the
firing ``ALERTS`` series; ``firing_gate`` turns its result into an ``AlertGate``
naming the alerts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from bootc_operator.api import constants as c


@dataclass(frozen=True, slots=True)
class AlertGate:
    blocked: bool
    message: str = ""  # why (the alerts firing, or why Prometheus could not say)
    #: the pool's UpToDate reason while blocked (PreconditionNotMet for preconditions)
    reason: str = c.REASON_BLOCKED_BY_ALERTS


FIRST_RETRY: Final = 5.0
#: labels that say nothing about which alert it is (not shown in messages)
_NOISE: Final = frozenset({"__name__", "alertstate"})


def alert_query(selectors: Sequence[str]) -> str:
    """The PromQL for the firing alerts matching any of ``selectors`` (each: matchers)."""
    parts = [f'ALERTS{{alertstate="firing",{s.strip().rstrip(",")}}}' for s in selectors]
    return " or ".join(parts)


def describe_alert(labels: Mapping[str, str]) -> str:
    """``NodeDown{instance="n1",severity="critical"}``."""
    name = labels.get("alertname", "alert")
    rest = ",".join(
        f'{k}="{v}"' for k, v in sorted(labels.items()) if k not in _NOISE | {"alertname"}
    )
    return f"{name}{{{rest}}}" if rest else name


def firing_gate(result: Sequence[Mapping[str, Any]], limit: int = 5) -> AlertGate:
    """The gate for a query result: blocked naming up to ``limit`` alerts, or open."""
    alerts = sorted({describe_alert(r.get("metric") or {}) for r in result})
    if not alerts:
        return AlertGate(False)
    shown = alerts[:limit] + ([f"and {len(alerts) - limit} more"] if len(alerts) > limit else [])
    verb = "fires" if len(alerts) == 1 else "fire"
    return AlertGate(True, f"{', '.join(shown)} {verb}; no new reboots until resolved")


def combine(*gates: AlertGate | None) -> AlertGate | None:
    """One gate of several (alerts, preconditions): None when none applies; blocked
    when any is, with the first blocked one's reason and every blocked message."""
    present = [g for g in gates if g is not None]
    if not present:
        return None
    blocked = [g for g in present if g.blocked]
    if not blocked:
        return present[0]
    return AlertGate(True, "; ".join(g.message for g in blocked), blocked[0].reason)


def retry_delay(failures: int, interval: float) -> float:
    """5 s, 10 s, 20 s ... capped at ``interval``."""
    return float(min(interval, FIRST_RETRY * 2.0 ** max(0, failures - 1)))


def blocking_alerts(pool: Mapping[str, Any]) -> list[str]:
    return list(((pool.get("spec") or {}).get("rollout") or {}).get("blockingAlerts") or [])
