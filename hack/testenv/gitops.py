"""What Flux and Argo CD read from an object, computed by their own code, and a recorder
of every version of the objects a rollout writes.

- :func:`kstatus` runs ``hack/kstatus`` (sigs.k8s.io/cli-utils ``pkg/kstatus``, what
  Flux computes health with) over objects: one :class:`Verdict` each (``Current``,
  ``InProgress``, ``Failed``, ...).
- :func:`argocd_health` runs ``hack/argocd-health`` (Argo CD's settings manager and
  Lua runtime) over objects with the health checks of ``manifests/argocd/argocd-cm.yaml``
  (or another argocd-cm): ``Healthy``, ``Progressing``, ``Degraded``, ``Suspended``.
- :class:`Recorder` watches pools and BootcNodes (the project's informer) and keeps
  every version the API server held, in the order seen, so a test judges each
  transient state (Staging, Rebooting, a pause) without racing the rollout.

The tools are built and cached by ``hack/build-kstatus.sh`` and
``hack/build-argocd-health.sh`` (``$BOOTC_OPERATOR_KSTATUS`` /
``$BOOTC_OPERATOR_ARGOCD_HEALTH`` name prebuilt ones).
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.api import constants as c
from bootc_operator.informers import EventHandler, Informer
from bootc_operator.kube import BOOTC_NODE_POOLS, BOOTC_NODES
from hack.testenv.controlplane import REPO_ROOT, cached_tool

ARGOCD_CM = REPO_ROOT / "manifests" / "argocd" / "argocd-cm.yaml"
KSTATUS_ENV = "BOOTC_OPERATOR_KSTATUS"
ARGOCD_HEALTH_ENV = "BOOTC_OPERATOR_ARGOCD_HEALTH"
_KINDS = {BOOTC_NODE_POOLS: c.POOL_KIND, BOOTC_NODES: c.NODE_KIND}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One tool's verdict for one object (``status`` "" when it has none)."""

    kind: str
    name: str
    status: str
    message: str = ""
    error: str = ""


def kstatus_tool() -> Path:
    return cached_tool(KSTATUS_ENV, "build-kstatus.sh")


def argocd_health_tool() -> Path:
    return cached_tool(ARGOCD_HEALTH_ENV, "build-argocd-health.sh")


def _with_kind(obj: Mapping[str, Any], kind: str | None = None) -> dict[str, Any]:
    """``obj`` with apiVersion and kind (list items and cached objects may lack them)."""
    out = dict(obj)
    out.setdefault("apiVersion", c.API_VERSION)
    if kind is not None:
        out.setdefault("kind", kind)
    return out


def _run(argv: list[str], objs: Iterable[Mapping[str, Any]]) -> list[Verdict]:
    docs = [_with_kind(o) for o in objs]
    res = subprocess.run(
        argv,
        input="".join(json.dumps(d) + "\n" for d in docs),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({res.returncode}): {res.stderr.strip()}")
    verdicts = [Verdict(**json.loads(line)) for line in res.stdout.splitlines() if line.strip()]
    if len(verdicts) != len(docs):
        raise RuntimeError(f"{argv[0]} judged {len(verdicts)} of {len(docs)} objects")
    return verdicts


def kstatus(objs: Iterable[Mapping[str, Any]]) -> list[Verdict]:
    """kstatus's verdict for each of ``objs`` (in order)."""
    return _run([str(kstatus_tool())], objs)


def argocd_health(objs: Iterable[Mapping[str, Any]], argocd_cm: Path = ARGOCD_CM) -> list[Verdict]:
    """Argo CD's health of each of ``objs`` with the health checks of ``argocd_cm``."""
    return _run([str(argocd_health_tool()), str(argocd_cm)], objs)


@dataclass
class Recorder:
    """Every version of the pools and BootcNodes the API server held while it ran
    (``versions``: (monotonic time seen, object), oldest first; ``of(kind, name)``).

    Use as ``async with Recorder(api) as rec:``; ``record(obj)`` adds one seen
    elsewhere (e.g. the answer to a create, before any watch event)."""

    api: ApiClient
    versions: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    _informers: list[Informer] = field(default_factory=list)
    _seen: set[tuple[str, str, str]] = field(default_factory=set)

    def record(self, obj: Mapping[str, Any], kind: str | None = None) -> None:
        doc = _with_kind(copy.deepcopy(dict(obj)), kind)
        meta = doc.get("metadata") or {}
        key = (doc.get("kind", ""), meta.get("name", ""), meta.get("resourceVersion", ""))
        if key in self._seen:
            return
        self._seen.add(key)
        self.versions.append((time.monotonic(), doc))

    def of(self, kind: str, name: str) -> list[dict[str, Any]]:
        """The versions of one object, oldest first."""
        return [
            o
            for _, o in self.versions
            if o.get("kind") == kind and (o.get("metadata") or {}).get("name") == name
        ]

    async def __aenter__(self) -> Recorder:
        for resource, kind in _KINDS.items():
            inf = Informer(self.api, resource)

            def seen(*objs: Any, kind: str = kind) -> None:
                self.record(objs[-1], kind)

            inf.add_event_handler(EventHandler(on_add=seen, on_update=seen))
            inf.start()
            self._informers.append(inf)
        for inf in self._informers:
            await inf.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for inf in self._informers:
            await inf.stop()
