"""The apiserver's audit log as a record of who wrote what (owns the audit policy).

``ControlPlane(audit=True)`` starts kube-apiserver with ``POLICY`` (every
successful or failed mutating request by the operator's processes, at
``Metadata`` level; Lease writes at ``Request`` level, so the holder they write is
known; nothing for reads, Events, or the harness's own components) and writes
``audit.log`` in its state directory.

``parse(line)`` turns one audit event into an :class:`ApiWrite` (None for what
is not a write); ``writer(user_agent)`` names the controller process that sent
it from the user agent every ``load_api_client`` client sends
(``bootc-operator/VERSION (POD; pid N)``), None for anything else (the daemons'
``kube.lite``, the harness). ``AuditTail(path, on_write)`` follows the file and
calls ``on_write`` for each write, in the order the apiserver logged them; the
safety monitor (``hack.testenv.monitor``) judges them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  users: [kwok, kube-controller-manager, kube-scheduler, system:apiserver]
- level: None
  userGroups: [system:nodes, system:serviceaccounts]
- level: None
  resources:
  - {group: "", resources: [events]}
  - {group: events.k8s.io, resources: [events]}
- level: None
  resources:
  - {group: coordination.k8s.io, resources: [leases]}
  namespaces: [kube-node-lease]
- level: Request
  resources:
  - {group: coordination.k8s.io, resources: [leases]}
- level: Metadata
"""

_AGENT = re.compile(r"^bootc-operator/\S+ \((?P<who>[^;)]+); pid (?P<pid>\d+)\)")


def writer(user_agent: str) -> str | None:
    """``POD/pid`` of the process a ``load_api_client`` user agent names, else None."""
    m = _AGENT.match(user_agent or "")
    return f"{m['who']}/{m['pid']}" if m else None


def _time(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class ApiWrite:
    """One mutating request as the apiserver logged it (times: epoch seconds)."""

    received: float
    completed: float
    writer: str | None
    verb: str
    resource: str
    namespace: str
    name: str
    code: int
    #: for a Lease write: the holder it wrote ("" releases), else None
    holder: str | None = None
    lease_duration: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.verb} {self.resource} {where} ({self.code})"


def parse(line: str) -> ApiWrite | None:
    """The write one audit log line records (None: not a complete mutating request)."""
    try:
        event: dict[str, Any] = json.loads(line)
    except ValueError:
        return None
    if event.get("stage") != "ResponseComplete" or event.get("verb") in ("get", "list", "watch"):
        return None
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    holder = None
    duration = 0.0
    if ref.get("resource") == "leases":
        spec = (event.get("requestObject") or {}).get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or 0)
    return ApiWrite(
        received=_time(event["requestReceivedTimestamp"]),
        completed=_time(event["stageTimestamp"]),
        writer=writer(str(event.get("userAgent") or "")),
        verb=str(event.get("verb")),
        resource=resource,
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
        holder=holder,
        lease_duration=duration,
    )


class AuditTail:
    """Follows an audit log: ``read()`` hands every new complete line's write to
    ``on_write``; ``start()`` does it every ``interval`` seconds until ``stop()``."""

    def __init__(
        self, path: Path, on_write: Callable[[ApiWrite], None], interval: float = 0.1
    ) -> None:
        self.path = path
        self.on_write = on_write
        self.interval = interval
        self._offset = 0
        self._partial = b""
        self._task: asyncio.Task[None] | None = None

    def read(self) -> int:
        """Hand on every write logged since the last call; returns how many."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return 0
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        count = 0
        for line in lines:
            write = parse(line.decode("utf-8", "replace"))
            if write is not None:
                self.on_write(write)
                count += 1
        return count

    async def _run(self) -> None:
        while True:
            self.read()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="audit-tail")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.read()
