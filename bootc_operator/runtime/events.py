"""Kubernetes Events for pools, nodes and BootcNodes, without blocking reconciles.

Interface::

    recorder = EventRecorder(api, controller="bootc.dev/bootc-operator", instance=pod_name)
    recorder.start()                       # background sender task
    recorder.emit(ref, "Normal", "Cordoned", "Rollout", "node-3 took a reboot slot")
    recorder.emit_batched(pool, "Normal", "SlotTaken", "Rollout",
                          subject="node-3", note="node-3 took a reboot slot",
                          summary="{n} nodes took a reboot slot")
    await recorder.stop()                  # flushes what is queued (bounded wait)

``emit`` never awaits: it queues (bounded per type; overflow is dropped and
counted by type). Warnings have their own queue and are sent first, so a burst
of routine Normal Events during a large rollout cannot crowd out a
``DrainTimeout`` or ``NodeDegraded``. Up to ``senders`` Events are in flight
at once (a busy apiserver answers in tens of milliseconds; one at a time, a
large rollout's node Events would mostly be dropped), never two for the same
object, so each object's Events keep their order.
Repeats of the same (object, type, reason, note) within ``series_window``
update the first Event's ``series`` instead of creating new objects, like
client-go's events broadcaster. Events of cluster-scoped objects live in the
``default`` namespace (where kubectl describe finds them).

What kubectl shows decides how Events are written. ``kubectl describe`` finds
an object's Events by the uid in their object reference (callers pass refs
with uids), sorts them by the core ``lastTimestamp`` alone and prints
``(xN over T)`` from ``series``; ``kubectl get events --sort-by=.lastTimestamp``
sorts by it too. An Event without ``lastTimestamp`` (events.k8s.io/v1's
``deprecatedLastTimestamp``) is listed in the order of its name. The
events.k8s.io/v1 API refuses those fields on create and makes them immutable
on update, so Events are written through the core v1 API, as kubelet's
recorder does: the same stored objects (``kubectl get events.events.k8s.io``
shows them with ``regarding``, ``note`` and ``deprecatedFirstTimestamp`` /
``deprecatedLastTimestamp`` / ``deprecatedCount``), with both the new fields
(``eventTime``, ``series``, reporting controller and instance, ``action``)
and the old ones (``firstTimestamp``, ``lastTimestamp``, ``count``) filled.
Each Event is stamped with the time it was emitted, not sent: Warnings jump
the queue, and the timestamps still order what happened.

``emit_batched`` is for news about one of many members told on the whole (a
pool hearing of each node's slot): every such emit for the same (object,
type, reason) within ``batch_window`` of the first becomes one Event — the
member's own note when it is alone, else ``summary`` with the members named
(:func:`batch_note`, cut to the 1 KiB note limit). A large pool's rollout
then costs a few pool Events per reason rather than one per node and step, so
the nodes' own Events are not crowded out of the bounded queue.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import Counter

from bootc_operator.api.timefmt import micro_time, now_rfc3339
from bootc_operator.kube import Api, ApiError, Resource, create_object, patch_object

log = logging.getLogger("events")

EVENTS_TOTAL: Final = Counter(
    "bootc_operator_events_total", "Events emitted, by type and reason", ["type", "reason"]
)
EVENTS_DROPPED: Final = Counter(
    "bootc_operator_events_dropped_total",
    "Events dropped because the queue for their type was full",
    ["type"],
)

NOTE_MAX: Final = 1024

# Written through core v1 (see the module docstring); read either way.
CORE_EVENTS: Final = Resource("", "v1", "events", namespaced=True, kind="Event")


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def batch_note(summary: str, subjects: list[str], notes: list[str], limit: int = NOTE_MAX) -> str:
    """One note for a batch: the single member's note, or ``summary`` naming them all.

    ``summary`` may contain ``{n}`` (how many). Names that do not fit in ``limit``
    characters are counted instead: ``"3 nodes took a slot: a, b and 1 more"``.
    """
    if len(notes) == 1:
        return notes[0][:limit]
    head = summary.format(n=len(subjects)) + ": "
    shown: list[str] = []
    for i, subject in enumerate(subjects):
        rest = len(subjects) - i - 1
        tail = f" and {rest} more" if rest else ""
        candidate = ", ".join([*shown, subject])
        if len(head) + len(candidate) + len(tail) > limit:
            more = len(subjects) - len(shown)
            return f"{head}{', '.join(shown)} and {more} more"[:limit]
        shown.append(subject)
    return (head + ", ".join(shown))[:limit]


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
    at: dt.datetime  # when it was emitted (a batch: its first member)


@dataclass(slots=True)
class _Batch:
    summary: str
    subjects: list[str]
    notes: list[str]
    # One time for the whole batch, its first member's: kubectl describe shows the
    # age of eventTime and sorts by lastTimestamp, so both must be the same.
    at: dt.datetime
    timer: asyncio.TimerHandle | None = None


BatchKey = tuple[ObjectRef, str, str, str]  # (object, type, reason, action)


class EventRecorder:
    def __init__(
        self,
        api: Api,
        *,
        controller: str = "bootc.dev/bootc-operator",
        instance: str = "",
        queue_size: int = 1000,
        series_window: float = 360.0,
        batch_window: float = 2.0,
        senders: int = 4,
        now: Callable[[], dt.datetime] = _utc_now,
    ) -> None:
        self.api = api
        self.now = now
        self.controller = controller
        self.instance = instance or f"bootc-operator-{uuid.uuid4().hex[:8]}"
        self.series_window = series_window
        self.batch_window = batch_window
        self.senders = senders
        self._batches: dict[BatchKey, _Batch] = {}
        self.queue_size = queue_size
        # Sent in this order: every queued Warning before any Normal.
        self._queues: dict[str, collections.deque[_Pending]] = {
            "Warning": collections.deque(),
            "Normal": collections.deque(),
        }
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        # (uid|name, type, reason, note) -> (event namespace, name, count, first seen)
        self._series: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-recorder")

    def discard_pending(self) -> list[asyncio.Task[None]]:
        """Drop every Event not sent yet and cancel the sends in flight (leadership
        lost: this process writes no more); the cancelled task, to await.

        A later ``stop`` then has nothing to flush.
        """
        dropped = sum(len(q) for q in self._queues.values()) + len(self._batches)
        task, self._task = self._task, None
        for batch in self._batches.values():
            if batch.timer is not None:
                batch.timer.cancel()
        self._batches.clear()
        for queue in self._queues.values():
            queue.clear()
        self._idle.set()
        if dropped:
            log.warning("dropped %d Events not sent yet: no longer the leader", dropped)
        if task is None:
            return []
        task.cancel()
        return [task]

    async def stop(self, flush_within: float = 5.0) -> None:
        for key in list(self._batches):
            self._flush_batch(key)
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_within):
                await self._idle.wait()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def emit(self, ref: ObjectRef, type_: str, reason: str, action: str, note: str) -> None:
        if type_ not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        self._enqueue(_Pending(ref, type_, reason, action, note[:NOTE_MAX], self.now()))

    def emit_batched(
        self,
        ref: ObjectRef,
        type_: str,
        reason: str,
        action: str,
        *,
        subject: str,
        note: str,
        summary: str,
    ) -> None:
        """Like :meth:`emit`, merged with others for ``ref`` within ``batch_window``."""
        if type_ not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        key = (ref, type_, reason, action)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch(summary, [], [], self.now())
            with contextlib.suppress(RuntimeError):  # no running loop: flushed by stop()
                loop = asyncio.get_running_loop()
                batch.timer = loop.call_later(self.batch_window, self._flush_batch, key)
        if subject not in batch.subjects:
            batch.subjects.append(subject)
            batch.notes.append(note)

    def _flush_batch(self, key: BatchKey) -> None:
        batch = self._batches.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        ref, type_, reason, action = key
        note = batch_note(batch.summary, batch.subjects, batch.notes)
        self._enqueue(_Pending(ref, type_, reason, action, note, batch.at))

    def _enqueue(self, item: _Pending) -> None:
        queue = self._queues[item.type]
        if len(queue) >= self.queue_size:
            EVENTS_DROPPED.labels(item.type).inc()
            return
        queue.append(item)
        self._idle.clear()
        self._wakeup.set()

    def _next(self, busy: set[ObjectRef]) -> _Pending | None:
        """The first queued item (Warnings first) whose object has no Event in flight."""
        for queue in self._queues.values():
            for i, item in enumerate(queue):
                if item.ref not in busy:
                    del queue[i]
                    return item
        return None

    async def _run(self) -> None:
        """Keep up to ``senders`` Events in flight, one per object at a time (in order)."""
        in_flight: set[asyncio.Task[None]] = set()
        busy: set[ObjectRef] = set()

        def done(task: asyncio.Task[None], *, ref: ObjectRef) -> None:
            in_flight.discard(task)
            busy.discard(ref)
            self._wakeup.set()

        try:
            while True:
                while len(in_flight) < self.senders:
                    item = self._next(busy)
                    if item is None:
                        break
                    busy.add(item.ref)
                    task = asyncio.create_task(self._deliver(item), name="event-send")
                    in_flight.add(task)
                    task.add_done_callback(functools.partial(done, ref=item.ref))
                if not in_flight and not any(self._queues.values()):
                    self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def _deliver(self, item: _Pending) -> None:
        try:
            await self._send(item)
        except Exception as err:  # an Event is best effort: log, go on
            log.warning(
                "could not record event %s on %s %s: %s",
                item.reason,
                item.ref.kind,
                item.ref.name,
                err,
            )

    @staticmethod
    def _name(item: _Pending, bump: int = 0) -> str:
        """``<object>.<emit time in hex nanoseconds>``, as client-go names Events.

        kubectl describe sorts by ``lastTimestamp``, whole seconds, and keeps the
        list order (names) among Events of the same second: names that sort by
        time keep those in order too (16 hex digits from 2006 to 2554).
        """
        micros = (item.at - _EPOCH) // dt.timedelta(microseconds=1)
        return f"{item.ref.name}.{micros * 1000 + bump:x}"

    def _body(self, item: _Pending, name: str) -> dict[str, Any]:
        """A core v1 Event with the events.k8s.io/v1 fields and the deprecated ones."""
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": item.ref.namespace or "default"},
            "involvedObject": item.ref.to_wire(),
            "type": item.type,
            "reason": item.reason,
            "message": item.note,
            "action": item.action,
            "eventTime": micro_time(item.at),
            "firstTimestamp": now_rfc3339(item.at),
            "lastTimestamp": now_rfc3339(item.at),
            "count": 1,
            "reportingComponent": self.controller,
            "reportingInstance": self.instance,
        }

    async def _send(self, item: _Pending) -> None:
        EVENTS_TOTAL.labels(item.type, item.reason).inc()
        key = (item.ref.uid or item.ref.name, item.type, item.reason, item.note)
        now_mono = time.monotonic()
        known = self._series.get(key)
        if known is not None and now_mono - known[3] < self.series_window:
            namespace, name, count, first = known
            count += 1
            # series for the new readers, count and lastTimestamp for kubectl
            # describe's order (and older readers); series.count is the number
            # of occurrences, as client-go's broadcaster counts it (2 at the
            # first repeat).
            patch = {
                "count": count,
                "lastTimestamp": now_rfc3339(item.at),
                "series": {"count": count, "lastObservedTime": micro_time(item.at)},
            }
            try:
                await patch_object(self.api, CORE_EVENTS, name, patch, namespace)
                self._series[key] = (namespace, name, count, first)
                return
            except ApiError as err:
                if not err.not_found:
                    raise
        namespace = item.ref.namespace or "default"
        for bump in range(3):
            name = self._name(item, bump)
            try:
                await create_object(self.api, CORE_EVENTS, self._body(item, name), namespace)
                break
            except ApiError as err:
                # 409: another Event of this object emitted in the same microsecond
                if not err.conflict or bump == 2:
                    raise
        self._series[key] = (namespace, name, 1, now_mono)
        if len(self._series) > 10_000:
            cutoff = now_mono - self.series_window
            self._series = {k: v for k, v in self._series.items() if v[3] >= cutoff}
