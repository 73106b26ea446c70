"""Leader election on a coordination.k8s.io/v1 Lease (client-go semantics).

Interface::

    elector = LeaderElector(api, namespace, name, identity, lease_duration=15,
                            renew_deadline=10, retry_period=2)
    async with elector.leading():   # waits until this process leads
        ...                         # do leader-only work
    # leaving the block (or cancellation) releases the lease

or, step by step: ``await elector.acquire()``, ``elector.start_renewing()``,
``await elector.release_and_stop()``.

``elector.lost`` is an ``asyncio.Event`` set when leadership is lost; the
caller must then stop all writes at once — the controller cancels its
reconcilers and drains and exits so its Deployment restarts it as a standby.

Leading is proven, never assumed:

- an attempt that fails in *any* way (an API error, a dropped connection such
  as aiohttp's ``ServerDisconnectedError``, a cut or non-JSON body, a Lease
  without a ``resourceVersion``, a timeout) counts as "not leading";
- ``acquire`` returns only after an attempt succeeded; ``is_leader`` is set
  only then;
- the renewal deadline runs from when the last *successful* renewal was
  *sent* (the server wrote it no earlier), so the leader gives up at
  ``renew_deadline`` after that write at the latest, while a standby that
  observed it can take over only ``lease_duration`` after it: the difference
  is the time the leader has to stop writing;
- a renew task that ends for any reason other than ``release_and_stop``
  counts as a lost Lease.

Expiry is judged on this process's monotonic clock from when the current
record was *observed* (like client-go), not from the record's renewTime, so
clock skew between replicas cannot make two leaders. The pure decision lives
in ``decide``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from bootc_operator.api.timefmt import micro_time
from bootc_operator.kube import LEASES, Api, ApiError, create_object, get_object, request_json

log = logging.getLogger("leaderelection")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    lease_duration: float
    transitions: int
    acquire_time: str | None
    renew_time: str | None

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            lease_duration=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
        )


class Decision(Enum):
    CREATE = "create"  # no lease yet
    TAKE = "take"  # held by nobody, or expired: take over
    RENEW = "renew"  # we hold it
    WAIT = "wait"  # someone else holds a live lease


def decide(record: LeaseRecord | None, identity: str, observed_at: float, now: float) -> Decision:
    """What to do given the current record, observed at monotonic ``observed_at``."""
    if record is None:
        return Decision.CREATE
    if record.holder == identity:
        return Decision.RENEW
    if not record.holder:
        return Decision.TAKE
    if observed_at + record.lease_duration <= now:
        return Decision.TAKE
    return Decision.WAIT


class LeaderElector:
    def __init__(
        self,
        api: Api,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election needs lease-duration > renew-deadline > retry-period > 0, got "
                f"{lease_duration} / {renew_deadline} / {retry_period}"
            )
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._monotonic = monotonic
        self._observed: LeaseRecord | None = None
        self._observed_rv = ""
        self._observed_at = 0.0
        self.is_leader = False
        self.lost = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None
        # Loop time at which the last successful attempt was sent.
        self._renewed_at = 0.0
        self._stopping = False

    # ------------------------------------------------------------ one attempt

    async def try_acquire_or_renew(self) -> bool:
        """One round of client-go's tryAcquireOrRenew; True when we hold the lease."""
        path = LEASES.path(self.namespace, self.name)
        try:
            lease = await get_object(self.api, LEASES, self.name, self.namespace)
        except ApiError as err:
            if not err.not_found:
                raise
            lease = None
        now_mono = self._monotonic()
        if lease is not None:
            record = LeaseRecord.from_lease(lease)
            rv = lease["metadata"]["resourceVersion"]
            if record != self._observed or rv != self._observed_rv:
                self._observed, self._observed_rv, self._observed_at = record, rv, now_mono
        else:
            record = None
        decision = decide(record, self.identity, self._observed_at, now_mono)
        if decision is Decision.WAIT:
            return False
        now = micro_time()
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": now,
        }
        if decision is Decision.CREATE:
            spec.update(acquireTime=now, leaseTransitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                created = await create_object(self.api, LEASES, body, self.namespace)
            except ApiError as err:
                if err.status == 409:  # someone else created it first
                    return False
                raise
            self._remember(created)
            return True
        assert record is not None and lease is not None
        if decision is Decision.TAKE:
            spec.update(acquireTime=now, leaseTransitions=record.transitions + 1)
        else:
            spec.update(acquireTime=record.acquire_time or now, leaseTransitions=record.transitions)
        lease = {**lease, "spec": {**(lease.get("spec") or {}), **spec}}
        try:
            # PUT with the observed resourceVersion: optimistic concurrency.
            updated = await request_json(self.api, "PUT", path, body=lease)
        except ApiError as err:
            if err.status == 409:
                return False
            raise
        self._remember(updated)
        return True

    def _remember(self, lease: dict[str, Any]) -> None:
        self._observed = LeaseRecord.from_lease(lease)
        self._observed_rv = lease["metadata"]["resourceVersion"]
        self._observed_at = self._monotonic()

    async def _attempt(self) -> bool:
        """One attempt; any failure (not only API errors) means "not leading"."""
        try:
            return await self.try_acquire_or_renew()
        except Exception as err:  # every doubt counts as not leading
            log.warning(
                "lease %s/%s: attempt failed: %s: %s",
                self.namespace,
                self.name,
                type(err).__name__,
                err or "(no message)",
            )
            return False

    # ------------------------------------------------------------ loops

    def _jittered(self) -> float:
        return self.retry_period * (1 + random.uniform(0, 0.2))

    async def acquire(self) -> None:
        """Block until this process holds the lease (an attempt succeeded)."""
        log.info("waiting to lead lease %s/%s as %s", self.namespace, self.name, self.identity)
        loop = asyncio.get_running_loop()
        while True:
            sent = loop.time()
            if await self._attempt():
                break
            await asyncio.sleep(self._jittered())
        self._renewed_at = sent
        self.is_leader = True
        log.info("became leader of lease %s/%s", self.namespace, self.name)

    async def _renew_loop(self) -> None:
        """Renew every ``retry_period``; give up ``renew_deadline`` after the last
        successful renewal was sent, even while an attempt is still waiting."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                deadline = self._renewed_at + self.renew_deadline
                await asyncio.sleep(max(0.0, min(self.retry_period, deadline - loop.time())))
                if loop.time() >= deadline:
                    break
                sent = loop.time()
                try:
                    async with asyncio.timeout_at(deadline):
                        ok = await self._attempt()
                except TimeoutError:
                    ok = False
                if ok:
                    self._renewed_at = sent
            log.error(
                "lost leadership of lease %s/%s: no renewal succeeded for %.1fs",
                self.namespace,
                self.name,
                self.renew_deadline,
            )
        except asyncio.CancelledError:
            if self._stopping:
                raise
            log.error(
                "lost leadership of lease %s/%s: renewal cancelled", self.namespace, self.name
            )
            raise
        except BaseException:
            log.exception(
                "lost leadership of lease %s/%s: renewal failed", self.namespace, self.name
            )
            raise
        finally:
            if not self._stopping:
                self._lose()

    @property
    def _key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _lose(self) -> None:
        self.is_leader = False
        self.lost.set()

    async def release(self) -> None:
        """Hand the lease back (holder cleared) so a standby takes over at once."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await get_object(self.api, LEASES, self.name, self.namespace)
            if LeaseRecord.from_lease(lease).holder != self.identity:
                return
            now = micro_time()
            lease["spec"].update(holderIdentity="", leaseDurationSeconds=1, renewTime=now)
            await request_json(self.api, "PUT", LEASES.path(self.namespace, self.name), body=lease)
            log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as err:  # the lease then expires on its own
            log.warning(
                "could not release lease %s/%s: %s: %s",
                self.namespace,
                self.name,
                type(err).__name__,
                err or "(no message)",
            )

    def start_renewing(self) -> None:
        """After ``acquire``: keep renewing in the background; ``lost`` is set on failure."""
        if not self.is_leader:
            raise RuntimeError("start_renewing before acquire succeeded")
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_loop(), name="lease-renew")
            self._renewer.add_done_callback(self._renewer_done)

    def _renewer_done(self, task: asyncio.Task[None]) -> None:
        # The loop's own ``finally`` already reports a loss; this also covers a task
        # cancelled before it first ran (its body, and so its ``finally``, never ran).
        if not task.cancelled():
            task.exception()  # logged by the loop itself; retrieved here
        if not self._stopping:
            self._lose()

    def renewing(self) -> bool:
        """True while the renew task runs (a leader whose renewer died is not leading)."""
        return self._renewer is not None and not self._renewer.done()

    async def release_and_stop(self) -> None:
        self._stopping = True
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        await asyncio.shield(self.release())

    @contextlib.asynccontextmanager
    async def leading(self) -> AsyncIterator[LeaderElector]:
        await self.acquire()
        self.start_renewing()
        try:
            yield self
        finally:
            await self.release_and_stop()
