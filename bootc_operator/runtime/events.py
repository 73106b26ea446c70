"""Kubernetes Events (events.k8s.io/v1) for pools and nodes, without blocking reconciles.

Interface::

    recorder = EventRecorder(api, controller="bootc.dev/bootc-operator", instance=pod_name)
    recorder.start()                       # background sender task
    recorder.emit(ref, "Normal", "SlotTaken", "Rollout", "node-3 took a reboot slot")
    await recorder.stop()                  # flushes what is queued (bounded wait)

``emit`` never awaits: it queues (bounded; overflow is dropped and counted).
Repeats of the same (object, type, reason, note) within ``series_window``
update the first Event's ``series`` instead of creating new objects, like
client-go's events broadcaster. Events of cluster-scoped objects live in the
``default`` namespace (where kubectl describe finds them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

from kubernetes_asyncio.client import ApiClient
from prometheus_client import Counter

from bootc_operator.kube import EVENTS, ApiError, create_object, patch_object
from bootc_operator.runtime.leaderelection import micro_time

log = logging.getLogger("events")

EVENTS_TOTAL: Final = Counter(
    "bootc_operator_events_total", "Events emitted, by type and reason", ["type", "reason"]
)
EVENTS_DROPPED: Final = Counter(
    "bootc_operator_events_dropped_total", "Events dropped because the queue was full"
)

NOTE_MAX: Final = 1024


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str
    kind: str
    name: str
    uid: str = ""
    namespace: str = ""

    @classmethod
    def of(cls, obj: dict[str, Any], api_version: str = "", kind: str = "") -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=obj.get("apiVersion") or api_version,
            kind=obj.get("kind") or kind,
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            namespace=meta.get("namespace") or "",
        )

    def to_wire(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.uid:
            ref["uid"] = self.uid
        if self.namespace:
            ref["namespace"] = self.namespace
        return ref


@dataclass(frozen=True, slots=True)
class _Pending:
    ref: ObjectRef
    type: str
    reason: str
    action: str
    note: str


class EventRecorder:
    def __init__(
        self,
        api: ApiClient,
        *,
        controller: str = "bootc.dev/bootc-operator",
        instance: str = "",
        queue_size: int = 1000,
        series_window: float = 360.0,
    ) -> None:
        self.api = api
        self.controller = controller
        self.instance = instance or f"bootc-operator-{uuid.uuid4().hex[:8]}"
        self.series_window = series_window
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(queue_size)
        self._task: asyncio.Task[None] | None = None
        # (uid|name, type, reason, note) -> (event namespace, name, count, first seen)
        self._series: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-recorder")

    async def stop(self, flush_within: float = 5.0) -> None:
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_within):
                await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def emit(self, ref: ObjectRef, type_: str, reason: str, action: str, note: str) -> None:
        if type_ not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        try:
            self._queue.put_nowait(_Pending(ref, type_, reason, action, note[:NOTE_MAX]))
        except asyncio.QueueFull:
            EVENTS_DROPPED.inc()

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._send(item)
            except (ApiError, OSError, TimeoutError) as err:
                log.warning(
                    "could not record event %s on %s %s: %s",
                    item.reason,
                    item.ref.kind,
                    item.ref.name,
                    err,
                )
            finally:
                self._queue.task_done()

    async def _send(self, item: _Pending) -> None:
        EVENTS_TOTAL.labels(item.type, item.reason).inc()
        key = (item.ref.uid or item.ref.name, item.type, item.reason, item.note)
        now_mono = time.monotonic()
        known = self._series.get(key)
        if known is not None and now_mono - known[3] < self.series_window:
            namespace, name, count, first = known
            count += 1
            try:
                await patch_object(
                    self.api,
                    EVENTS,
                    name,
                    {"series": {"count": count, "lastObservedTime": micro_time()}},
                    namespace,
                )
                self._series[key] = (namespace, name, count, first)
                return
            except ApiError as err:
                if not err.not_found:
                    raise
        namespace = item.ref.namespace or "default"
        name = f"{item.ref.name}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": item.action,
            "reason": item.reason,
            "note": item.note,
            "type": item.type,
            "regarding": item.ref.to_wire(),
        }
        await create_object(self.api, EVENTS, body, namespace)
        self._series[key] = (namespace, name, 1, now_mono)
        if len(self._series) > 10_000:
            cutoff = now_mono - self.series_window
            self._series = {k: v for k, v in self._series.items() if v[3] >= cutoff}
