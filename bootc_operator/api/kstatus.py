"""kstatus's conventions on top of the project's own conditions.

Flux computes an object's health with kstatus (sigs.k8s.io/cli-utils
``pkg/kstatus/status``): ``metadata.generation`` not yet observed, or a
``Reconciling=True`` condition, is *InProgress*; ``Stalled=True`` is *Failed*;
otherwise a ``Ready`` condition decides (True: *Current*, else *InProgress*); an
object with none of these is *Current* at once. ``KStatus`` is one object's answer
in those terms, decided by its writer (the pool's by ``policy.poolstatus``, the
BootcNode's by ``daemon.status_report``); ``set_kstatus`` writes it into a
conditions list:

- ``Ready`` is always there, True or False, with the reason and message given;
- ``Reconciling`` and ``Stalled`` are there only while True ("abnormal-true"
  conditions, as Flux's own controllers write them): at most one of them, and
  removed once it no longer holds.

The Go-compatible conditions (``UpToDate``, ``Degraded``, ``Idle``) are not
touched: these are additions beside them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.api.conditions import Conditions, remove_condition, set_condition


@dataclass(frozen=True, slots=True)
class KStatus:
    """An object's kstatus conditions: ``Ready`` (``ready``, ``reason``, ``message``)
    and, when it is not ready, whether it is ``reconciling`` (under way, kstatus
    InProgress) or ``stalled`` (cannot go on without a person, kstatus Failed); neither
    means it waits (paused, awaiting an approval: InProgress through ``Ready=False``).
    ``detail`` is the Reconciling or Stalled condition's reason (default ``reason``);
    both carry ``message``."""

    ready: bool
    reason: str
    message: str = ""
    reconciling: bool = False
    stalled: bool = False
    detail: str = ""

    def __post_init__(self) -> None:
        if self.ready and (self.reconciling or self.stalled):
            raise ValueError("a Ready object is neither Reconciling nor Stalled")
        if self.reconciling and self.stalled:
            raise ValueError("Reconciling and Stalled exclude each other")

    @property
    def verdict(self) -> str:
        """What kstatus computes from these conditions (once the generation is observed)."""
        if self.stalled:
            return "Failed"
        return "Current" if self.ready else "InProgress"


def set_kstatus(
    conditions: Iterable[Mapping[str, Any]] | None,
    k: KStatus,
    *,
    observed_generation: int | None = None,
    now: dt.datetime | None = None,
) -> Conditions:
    """``conditions`` with ``Ready`` set and ``Reconciling``/``Stalled`` present only
    while True (module docstring); other conditions are kept, in order."""
    out = set_condition(
        conditions,
        c.COND_READY,
        k.ready,
        k.reason,
        k.message,
        observed_generation=observed_generation,
        now=now,
    )
    for cond_type, on in ((c.COND_RECONCILING, k.reconciling), (c.COND_STALLED, k.stalled)):
        if on:
            out = set_condition(
                out,
                cond_type,
                True,
                k.detail or k.reason,
                k.message,
                observed_generation=observed_generation,
                now=now,
            )
        else:
            out = remove_condition(out, cond_type)
    return out
