"""``bootc-operator daemon``: the node agent's asyncio runtime (DESIGN §4).

Shaped like client-go's sample-controller with a single key, the node's name:

- an ``Informer`` on BootcNodes with the field selector ``metadata.name=<node>`` (the
  daemon never sees, let alone writes, another node's BootcNode; events for any
  other name are dropped as well);
- ``HostWatch`` (pyinotify on the loop), a poll every ``--poll-interval`` that always
  runs, and the end of a switch mark the host status stale and enqueue the key;
- at start-up: stop a switch unit a dead daemon left, while the BootcNode cache
  syncs; then read ``bootc status`` and the boot assessment while it still syncs
  (the host does not depend on the BootcNode), so the first reconcile uses that
  read instead of waiting for its own;
- one worker (``run_workers``) runs ``Agent.reconcile``, so reconciles never overlap:
  sync the pull secret (below) → re-read ``bootc status`` when stale (never while our switch
  runs: bootc holds the sysroot lock; an image staged since the last read while we ran
  no command was staged out of band: logged, and named in the status while the
  spec's image replaces it) → read the boot assessment when due →
  ``decide`` (pure; it also gets the BootcNode's reboot-permit annotations) → patch
  ``BootcNode.status`` when its content changed → act: cancel / start the switch,
  apply a download-only deployment (``bootc upgrade --from-downloaded``), queue or
  revert a rollback (``bootc rollback``; both followed by a status re-read), or
  reboot: ``systemctl reboot``, or a soft reboot with ``bootc upgrade
  --from-downloaded --apply --soft-reboot=required`` when the BootcNode's
  ``rebootPolicy`` allows it and the staged deployment is soft-reboot capable (the
  Rebooting status, with ``lastRebootKind``, is written first; a failed soft reboot
  makes the retry a full one). The reconcile returns the
  backoff delay of a failed command as its requeue time, or the time of the next
  boot-assessment read if that is sooner.

Boot assessment (``assessment``): read before the first status write of the process
(so no write ever pairs this boot's ``booted`` with an assessment of an earlier
boot), then while it is ``Pending`` or ``Unknown`` again after a short capped backoff
(``assessment.recheck_after``), and never again once ``Complete`` or ``Failed``: the
daemon starts afresh with the host's next boot. It is reported only; it changes no
decision of the daemon.

Pull secret: the daemon reads no Secrets. When its BootcNode names a pull secret it
makes an X25519 key pair (``sealing.NodeKey``, the private key in memory only, so a
restart makes a new one) and publishes the public key with its next status write
(``status.sealingKey``); the controller seals the Secret's content to it
(``spec.sealedPullSecret``); the daemon opens it and writes the auths to the host's
auth.json. Until the blob is sealed to this process's key, a switch that would pull
waits, saying so (``Idle=False/Staging``, not Degraded).

A failed API request (the status patch) is one log line
naming the BootcNode and the API server's reason — "not allowed to write
BootcNode B: ..." for a 403, e.g. a token bound to another node — and the key is
retried after the capped backoff (``--backoff-initial`` .. ``--backoff-max``), never a
traceback per retry. Nothing is done on the host while the status cannot be written
(the Rebooting status must be on the server before a reboot).

Reboots are counted (``metrics.REBOOTS``, by kind) by the process that starts after
one: at its first status write it finds the Rebooting status its predecessor left and
a new booted deployment (``status_report.completed_reboot``).

Version skew: a status field the server drops (an older BootcNode CRD without
``status.bootedShort``, whose schema prunes it) is noticed in the answer to the patch,
logged once and no longer sent, so it cannot cause a write on every reconcile.

The switch runs as a task the agent owns (``_switch_task``), so a reconcile never
waits for a stage: it ends by recording an ``Attempt``, marking status stale and
enqueueing the key. A newer desired image cancels it (which stops the systemd unit).

Status writes read their own writes (``informers.overlay.Overlay``): the server's
answer to a patch is used until the informer caught up, so a stale cache never
causes a second write or a moved ``lastTransitionTime``.

Shutdown (SIGTERM/SIGINT): intake stops (queue, poll, inotify), the reconcile under
way gets a short grace period and is then cancelled (a host command it runs is
killed), and a running switch is **stopped**: its unit gets ``systemctl stop
--no-block`` (the stop job is queued in systemd, so the daemon does not wait for
it). bootc stages transactionally — an interrupted pull leaves the deployments as
they were, and the layers already fetched are reused — so the host stays
consistent, and no bootc runs unsupervised holding the sysroot lock. The next
daemon re-reads status and stages again (after stopping any leftover unit, also at
start). Letting systemd finish the switch instead would leave a half-known state
behind; a requested reboot needs no cleanup.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from bootc_operator.api.wire import BootAssessment
from bootc_operator.daemon import metrics as m
from bootc_operator.daemon.assessment import assess, recheck_after
from bootc_operator.daemon.authfile import (
    PullSecretError,
    auth_content,
    auth_path,
    remove_auth_file,
    write_auth_file,
)
from bootc_operator.daemon.bootc_status import DeploymentImages, HostStatus
from bootc_operator.daemon.decide import (
    Attempt,
    Decision,
    Desired,
    HostView,
    RetryPolicy,
    Work,
    decide,
    desired_from_spec,
    out_of_band_stage,
)
from bootc_operator.daemon.hostcmd import HostCommandError, HostCommands, UnreadableStatus
from bootc_operator.daemon.hostwatch import HostWatch
from bootc_operator.daemon.status_report import (
    Status,
    build_status,
    completed_reboot,
    same_status,
    status_patch,
)
from bootc_operator.informers import EventHandler, Informer, unwrap
from bootc_operator.informers.objects import DeletedFinalStateUnknown, Obj
from bootc_operator.informers.overlay import Overlay
from bootc_operator.kube import (
    BOOTC_NODES,
    Api,
    ApiError,
    ConfigError,
    load_lite_client,
)
from bootc_operator.kube.rest import patch_object
from bootc_operator.runtime.process import serve, unless_stopped, wait_first
from bootc_operator.workqueue import RateLimitingQueue, run_workers

if TYPE_CHECKING:
    from bootc_operator.sealing import NodeKey

log = logging.getLogger("daemon")

SHUTDOWN_GRACE = 10.0
SecretWant = tuple[str, str, str, str, str]  # namespace, name, hash, keyID, data


def secret_want(spec: Obj) -> SecretWant | None:
    """The pull secret the BootcNode's spec names, sealed blob included; None: none named."""
    ref = spec.get("pullSecretRef") or None
    if not isinstance(ref, dict):
        return None
    sealed = spec.get("sealedPullSecret")
    sealed = sealed if isinstance(sealed, dict) else {}
    return (
        str(ref.get("namespace") or ""),
        str(ref.get("name") or ""),
        str(spec.get("pullSecretHash") or ""),
        str(sealed.get("keyID") or ""),
        str(sealed.get("data") or ""),
    )


@dataclass(frozen=True)
class Config:
    node_name: str
    host_root: Path
    poll_interval: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Config:
        return cls(
            node_name=args.node_name,
            host_root=Path(args.host_root),
            poll_interval=args.poll_interval,
            retry=RetryPolicy(initial=args.backoff_initial, cap=args.backoff_max),
        )


class Agent:
    """One node's agent: owns its informer, queue, host watch, poll and switch tasks."""

    def __init__(
        self,
        api: Api,
        config: Config,
        host: HostCommands,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.node = config.node_name
        self.host = host
        self.clock = clock
        self.informer = Informer(api, BOOTC_NODES, field_selector=f"metadata.name={self.node}")
        self.informer.add_event_handler(
            EventHandler(
                on_add=self._enqueue_obj,
                on_update=lambda _old, new: self._enqueue_obj(new),
                on_delete=self._enqueue_obj,
            )
        )
        self.queue = RateLimitingQueue[str]("daemon")
        self.watch = HostWatch(config.host_root, self.host_changed)
        self._overlay = Overlay()
        self._ctx = {"node": self.node}
        # what bootc status said
        self._host_status: HostStatus | None = None
        self._host_error: str | None = None
        self._host_unreadable = False
        self._status_failures = 0
        self._host_stale = True
        self._host_changes = 0  # host_changed calls: a read clears staleness only if none came
        # a command of ours may have changed the deployments since the last status read
        self._ran_command = False
        # the image someone else staged (seen between two reads of this process)
        self._out_of_band: str | None = None
        # work under way
        self._switch_task: asyncio.Task[None] | None = None
        self._switch_image: str | None = None
        self._last: Attempt | None = None
        self._reboot_requested: str | None = None
        self._reboot_soft = False
        self._soft_reboot_failed: str | None = None
        # whether this process has looked for the reboot it came up from (once)
        self._reboot_checked = False
        # the current boot's assessment; when to read it again (monotonic; None: never)
        self._assessment: BootAssessment | None = None
        self._assess_reads = 0
        self._assess_due: float | None = 0.0
        # pull secret
        self._secret_known = False
        self._secret_want: SecretWant | None = None
        self._secret_problem: str | None = None
        self._secret_wait: str | None = None
        self._key: NodeKey | None = None  # made when a pull secret is first named
        self._seen_spec: tuple[Any, Any] | None = None
        # API requests: consecutive failures (for the retry backoff), status fields the
        # server does not keep (an older CRD)
        self._api_failures = 0
        self._api_failed = False
        self._pruned: set[str] = set()
        # lifecycle
        self._workers: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        # the host reads started while the BootcNode cache syncs (start-up only)
        self._first_read: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ triggers

    def _enqueue_obj(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        if (unwrap(obj).get("metadata") or {}).get("name") == self.node:
            self.queue.add(self.node)

    def host_changed(self) -> None:
        """The host may have changed (inotify, poll): re-read bootc status."""
        self._host_stale = True
        self._host_changes += 1
        self.queue.add(self.node)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.config.poll_interval)
            self.host_changed()

    # ------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        self._api_failed = False
        requeue = await self._reconcile(key)
        if not self._api_failed:
            self._api_failures = 0
            return requeue
        retry = self.config.retry.delay(self._api_failures)
        return retry if requeue is None else min(requeue, retry)

    def _api_error(self, what: str, exc: Exception) -> None:
        """Log one line for a failed API request; the reconcile is retried after the backoff."""
        self._api_failed = True
        self._api_failures += 1
        delay = self.config.retry.delay(self._api_failures)
        if isinstance(exc, ApiError):
            reason = exc.message or exc.reason or f"HTTP {exc.status}"
            if exc.status == 403:
                text = f"not allowed to {what}: {reason}"
            elif not exc.status:  # not an HTTP answer (e.g. a body that is not JSON)
                text = f"cannot {what}: {reason}"
            else:
                text = f"cannot {what}: the API server answered {exc.status}: {reason}"
        else:
            detail = str(exc) or ("request timed out" if isinstance(exc, TimeoutError) else "")
            text = f"cannot {what}: {detail or type(exc).__name__}"
        log.warning(
            "%s; retrying in %gs",
            text,
            delay,
            extra={**self._ctx, "attempt": self._api_failures},
        )

    async def _reconcile(self, key: str) -> float | None:
        obj = self._overlay.read(key, self.informer.get(key))
        if obj is None:
            if self._switch_task is not None:
                log.info("BootcNode is gone; cancelling the switch", extra=self._ctx)
                await self._cancel_switch()
            return None
        meta = obj.get("metadata") or {}
        generation = meta.get("generation")
        first_read, self._first_read = self._first_read, None
        if first_read is not None:
            # Read at start-up after the switch unit stopped, with the host watch running
            # (a change since then marked it stale): fresh enough for this first spec.
            await first_read
            self._seen_spec = (meta.get("uid"), generation)
        if (meta.get("uid"), generation) != self._seen_spec:
            self._seen_spec = (meta.get("uid"), generation)
            self._host_stale = True  # decide a new spec from fresh host status
        spec = obj.get("spec") or {}
        desired = desired_from_spec(spec, meta.get("annotations"))
        secret_problem = self._sync_pull_secret(spec)
        await self._read_host(status=self._switch_task is None and self._host_stale)
        decision = decide(
            desired,
            self._host_view(),
            self._work(),
            now=self.clock(),
            retry=self.config.retry,
            pull_problems=[secret_problem] if secret_problem else [],
            pull_wait=self._secret_wait,
        )
        if decision.forget_attempt:
            self._last = None
        if not await self._write_status(key, obj, decision, generation):
            return None
        requeue = await self._act(key, decision, desired)
        if self._assess_due is None:
            return requeue
        until = max(0.0, self._assess_due - self.clock())
        return until if requeue is None else min(requeue, until)

    def _host_view(self) -> HostView:
        return HostView(
            self._host_status, self._host_error, self._status_failures, self._host_unreadable
        )

    def _work(self) -> Work:
        return Work(
            self._switch_image,
            self._last,
            self._reboot_requested,
            self._reboot_soft,
            self._soft_reboot_failed,
            self._out_of_band,
        )

    async def _read_host(self, *, status: bool) -> None:
        """bootc status (if ``status``) and the boot assessment (if due), at once:
        they are independent host reads."""
        reads = [self._refresh_host()] if status else []
        if self._assess_due is not None and self.clock() >= self._assess_due:
            reads.append(self._refresh_assessment())
        await asyncio.gather(*reads)

    async def _refresh_host(self) -> None:
        changes = self._host_changes
        try:
            status = await self.host.status()
        except HostCommandError as exc:
            message = str(exc)
            if message != self._host_error:
                log.warning("cannot read bootc status: %s", message, extra=self._ctx)
            self._host_error = message
            self._host_unreadable = isinstance(exc, UnreadableStatus)
            self._status_failures += 1
            return
        if self._host_error is not None:
            log.info("bootc status readable again", extra=self._ctx)
        self._note_out_of_band(status)
        self._host_status, self._host_error, self._status_failures = status, None, 0
        self._host_unreadable = False
        # a change reported while bootc status ran may not be in what it printed
        self._host_stale = self._host_changes != changes

    def _note_out_of_band(self, status: HostStatus) -> None:
        """Log an image staged by someone else since the last read; remember it for the
        status message until a command of ours changes the deployments."""
        ours, self._ran_command = self._ran_command, False
        foreign = out_of_band_stage(self._host_status, status, ours=ours)
        if foreign is not None:
            log.warning(
                "%s was staged out of band (bootc status changed without a command of this "
                "daemon); the BootcNode's spec decides what happens to it",
                foreign,
                extra={**self._ctx, "image": foreign},
            )
            self._out_of_band = foreign
        elif ours:
            self._out_of_band = None

    async def _refresh_assessment(self) -> None:
        """Read the boot assessment; schedule the next read unless it is final."""
        probe = await self.host.boot_probe()
        found = assess(probe)
        previous, self._assessment = self._assessment, found
        self._assess_reads = (
            1 if previous is None or previous.state != found.state else (self._assess_reads + 1)
        )
        after = recheck_after(found, self._assess_reads)
        self._assess_due = None if after is None else self.clock() + after
        if previous != found:
            log.log(
                logging.WARNING if probe.error is not None else logging.INFO,
                "boot assessment",
                extra={**self._ctx, "state": found.state, "detail": found.message},
            )

    async def _write_status(
        self, key: str, obj: Obj, decision: Decision, generation: int | None
    ) -> bool:
        """Patch the status subresource if its content changed; False if the object is gone."""
        current = obj.get("status")
        images = (
            self._host_status.reported_images()
            if self._host_status is not None and self._host_error is None
            else None
        )
        if images is not None and not self._reboot_checked:
            self._reboot_checked = True
            self._note_reboot(current, images)
        new = build_status(
            current,
            decision,
            images,
            generation,
            dt.datetime.now(dt.UTC),
            self._assessment,
            sealing_key=self._key.public if self._key is not None else None,
            desired_state=(obj.get("spec") or {}).get("desiredImageState"),
        )
        for pruned in self._pruned:
            new.pop(pruned, None)
        if same_status(current, new):
            return True
        try:
            written = await patch_object(
                self.api, BOOTC_NODES, key, status_patch(new), subresource="status"
            )
        except ApiError as exc:
            if exc.not_found:
                return False
            self._api_error(f"write BootcNode {key}", exc)
            return False
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self._api_error(f"write BootcNode {key}", exc)
            return False
        self._note_pruned(new, written)
        self._overlay.wrote(key, written)
        idle, deg = decision.idle, decision.degraded
        log.info(
            "status updated",
            extra={
                **self._ctx,
                "idle": f"{idle.status}/{idle.reason}" if idle else "unchanged",
                "degraded": f"{deg.status}/{deg.reason}",
                **({"problem": deg.message} if deg.status else {}),
            },
        )
        return True

    def _note_reboot(self, current: Obj | None, images: DeploymentImages) -> None:
        """Count and log a reboot this process came up from (once, at its first status)."""
        came_from = completed_reboot(current, images)
        if came_from is not None:
            m.REBOOTS.labels(came_from.value.lower()).inc()
            log.info(
                "back from a reboot",
                extra={
                    **self._ctx,
                    "kind": came_from.value,
                    "image": images.booted.image if images.booted else None,
                },
            )

    def _note_pruned(self, sent: Status, written: Obj) -> None:
        kept = written.get("status") or {}
        for name, value in sent.items():
            if value is not None and name not in kept and name not in self._pruned:
                self._pruned.add(name)
                log.warning(
                    "the API server does not keep status.%s of BootcNodes (an older "
                    "BootcNode CRD?); no longer writing it",
                    name,
                    extra=self._ctx,
                )

    async def _act(self, key: str, decision: Decision, desired: Desired | None) -> float | None:
        requeue = decision.requeue_after
        if decision.cancel_switch:
            log.info(
                "cancelling the running switch",
                extra={
                    **self._ctx,
                    "image": self._switch_image,
                    "desired": desired and desired.image,
                },
            )
            await self._cancel_switch()
            self._host_stale = True
            requeue = 0.0  # decide again, once this reconcile is done
        if decision.start_switch is not None:
            self._start_switch(decision.start_switch)
        if decision.apply_staged and desired is not None:
            await self._apply_staged(desired.image)
        if decision.rollback and desired is not None:
            await self._rollback(desired.image)
            requeue = 0.0  # judge it from a fresh bootc status, once this reconcile is done
        if decision.reboot and desired is not None and not await self._reboot(desired.image):
            requeue = 0.0  # the reboot failed: decide again (its backoff is in decide)
        if (
            decision.soft_reboot
            and desired is not None
            and not await self._soft_reboot(desired.image)
        ):
            requeue = 0.0  # decide again: a full reboot after the backoff
        return requeue

    # ------------------------------------------------------------ switch

    def _start_switch(self, image: str) -> None:
        last = self._last
        attempts = (
            last.attempts + 1
            if last is not None and last.action == "switch" and last.image == image
            else 1
        )
        m.STAGE_ATTEMPTS.inc()
        log.info("staging", extra={**self._ctx, "image": image, "attempt": attempts})
        self._ran_command = True
        self._switch_image = image
        self._switch_task = asyncio.create_task(
            self._run_switch(image, attempts), name=f"switch {image}"
        )

    async def _run_switch(self, image: str, attempts: int) -> None:
        error: str | None = None
        try:
            await self.host.switch(image)
        except HostCommandError as exc:
            error = str(exc)
        except Exception as exc:
            log.exception("switch failed unexpectedly", extra={**self._ctx, "image": image})
            error = f"bootc switch {image}: unexpected error: {exc}"
        if error is None:
            log.info("switch finished", extra={**self._ctx, "image": image})
        else:
            log.warning("switch failed: %s", error, extra={**self._ctx, "image": image})
        self._last = Attempt("switch", image, attempts, self.clock(), error)
        if self._switch_task is asyncio.current_task():
            self._switch_task, self._switch_image = None, None
        self.host_changed()

    async def _cancel_switch(self) -> None:
        task = self._switch_task
        if task is None:
            return
        task.cancel()
        # asyncio.wait, not ``await task``: a cancellation of *this* task must propagate.
        await asyncio.wait([task])
        if self._switch_task is task:
            self._switch_task, self._switch_image = None, None

    # ------------------------------------------------------------ apply, reboot

    def _attempts(self, action: str, image: str) -> int:
        last = self._last
        same = last is not None and last.action == action and last.image == image
        return last.attempts + 1 if same and last is not None else 1

    async def _apply_staged(self, image: str) -> None:
        """``bootc upgrade --from-downloaded``: the download-only ``image`` boots next."""
        log.info("applying the download-only staged image", extra={**self._ctx, "image": image})
        attempts = self._attempts("apply", image)
        self._ran_command = True
        error: str | None = None
        try:
            await self.host.apply_downloaded()
        except HostCommandError as exc:
            error = str(exc)
            log.warning("applying failed: %s", error, extra={**self._ctx, "image": image})
        self._last = Attempt("apply", image, attempts, self.clock(), error)
        self.host_changed()  # judge it from a fresh bootc status

    async def _rollback(self, image: str) -> None:
        """``bootc rollback``: queue the rollback deployment ``image``, or revert a queued
        rollback while ``image`` is booted; judged from the next status read."""
        log.info("bootc rollback", extra={**self._ctx, "image": image})
        attempts = self._attempts("rollback", image)
        self._ran_command = True
        error: str | None = None
        try:
            await self.host.rollback()
        except HostCommandError as exc:
            error = str(exc)
            log.warning("rollback failed: %s", error, extra={**self._ctx, "image": image})
        self._last = Attempt("rollback", image, attempts, self.clock(), error)
        self._host_stale = True

    async def _reboot(self, image: str) -> bool:
        """``systemctl reboot`` on the host; False when it failed."""
        log.info("rebooting into the staged image", extra={**self._ctx, "image": image})
        try:
            await self.host.reboot()
        except HostCommandError as exc:
            attempts = self._attempts("reboot", image)
            log.warning("reboot failed: %s", exc, extra={**self._ctx, "image": image})
            self._last = Attempt("reboot", image, attempts, self.clock(), str(exc))
            return False
        self._reboot_requested, self._reboot_soft = image, False
        self._last = None
        return True

    async def _soft_reboot(self, image: str) -> bool:
        """Apply the staged ``image`` with a soft reboot; False when bootc failed (the node
        then gets a full reboot after the backoff)."""
        log.info("soft-rebooting into the staged image", extra={**self._ctx, "image": image})
        self._ran_command = True  # bootc may unlock a download-only deployment, then fail
        try:
            await self.host.soft_reboot()
        except HostCommandError as exc:
            attempts = self._attempts("soft-reboot", image)
            log.warning(
                "soft reboot failed: %s; a full reboot follows after the backoff",
                exc,
                extra={**self._ctx, "image": image},
            )
            self._last = Attempt("soft-reboot", image, attempts, self.clock(), str(exc))
            self._soft_reboot_failed = image
            self._host_stale = True  # bootc may have unlocked a download-only deployment
            return False
        self._reboot_requested, self._reboot_soft = image, True
        self._last = None
        return True

    # ------------------------------------------------------------ pull secret

    def _sealing_key(self) -> NodeKey:
        """This process's key pair, made when a pull secret is first named (the private
        key stays in memory; ``sealing`` and ``cryptography`` are imported only then)."""
        if self._key is None:
            from bootc_operator.sealing import NodeKey  # noqa: PLC0415 (about 10 MiB RSS)

            self._key = NodeKey.generate()
            log.info(
                "made a key for the sealed pull secret; publishing it in status.sealingKey",
                extra={**self._ctx, "key_id": self._key.key_id[:12]},
            )
        return self._key

    def _sync_pull_secret(self, spec: Obj) -> str | None:
        """Make the host's auth.json follow spec.sealedPullSecret; a problem text or None.

        Done at start and whenever the ref, hash or sealed blob changes; a problem is
        retried when the host is re-read anyway (poll, inotify). The last good file
        stays. A blob not sealed to this process's key (none yet, or sealed to the key
        of the daemon before a restart) is not a problem: ``_secret_wait`` says what
        the daemon waits for, and a switch waits with it (``decide``'s ``pull_wait``).
        """
        want = secret_want(spec)
        if (
            self._secret_known
            and want == self._secret_want
            and (self._secret_problem is None or not self._host_stale)
        ):
            return self._secret_problem
        self._secret_known, self._secret_want = True, want
        self._secret_wait = None
        if want is None:
            self._secret_problem = self._remove_pull_secret()
        else:
            self._secret_problem = self._write_pull_secret(want)
        return self._secret_problem

    def _remove_pull_secret(self) -> str | None:
        """No pull secret named: remove the file this daemon wrote; a problem text or None."""
        path = auth_path(self.config.host_root)
        try:
            removed = remove_auth_file(self.config.host_root)
            if removed == "removed":
                log.info("pull secret cleared; removed %s", path, extra=self._ctx)
            elif removed == "foreign":
                log.info(
                    "no pull secret named; leaving %s alone: the daemon did not write it",
                    path,
                    extra=self._ctx,
                )
        except OSError as exc:
            problem = f"cannot remove {path}: {exc.strerror}"
            log.warning(problem, extra=self._ctx)
            return problem
        return None

    def _write_pull_secret(self, want: SecretWant) -> str | None:
        """Unseal the named secret into the host's auth.json; a problem text or None.

        Sealed to another key than this process's: no problem, ``_secret_wait`` says so.
        """
        namespace, name, secret_hash, kid, data = want
        where = f"pull secret {namespace}/{name}"
        path = auth_path(self.config.host_root)
        try:
            if not namespace or not name:
                raise PullSecretError("pullSecretRef needs both name and namespace")
            key = self._sealing_key()
            if kid != key.key_id:
                self._secret_wait = (
                    f"{where} is not sealed to this daemon's key {key.key_id[:12]} yet "
                    "(status.sealingKey); waiting for the controller"
                )
                log.info(self._secret_wait, extra=self._ctx)
                return None
            from bootc_operator.sealing import Sealed, SealingError  # noqa: PLC0415

            try:
                content = key.unseal(Sealed(kid, data), node=self.node, secret_hash=secret_hash)
            except SealingError as exc:
                raise PullSecretError(str(exc)) from None
            changed = write_auth_file(self.config.host_root, auth_content(content))
        except PullSecretError as exc:
            problem = f"{where}: {exc}"
        except OSError as exc:
            problem = f"{where}: cannot write {path}: {exc.strerror}"
        else:
            if changed:
                log.info(
                    "pull secret written",
                    extra={
                        **self._ctx,
                        "secret": f"{namespace}/{name}",
                        "hash": secret_hash,
                        "path": str(path),
                    },
                )
                if self._last is not None and self._last.error is not None:
                    self._last = None  # new credentials: retry a failed pull now
            return None
        kept = "keeping the previous file" if path.exists() else "no credentials written"
        problem = f"{problem} ({kept})"
        log.warning(problem, extra=self._ctx)
        return problem

    # ------------------------------------------------------------ lifecycle

    def ready(self) -> bool | str:
        return True if self.informer.has_synced else "BootcNode cache not synced"

    def healthy(self) -> bool | str:
        if self._workers is not None and self._workers.done():
            return "the reconcile worker stopped"
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then shut down (see the module docstring)."""
        log.info(
            "starting",
            extra={
                **self._ctx,
                "host_root": str(self.config.host_root),
                "host_exec": shlex.join(self.host.prefix),
                "poll_interval": self.config.poll_interval,
            },
        )
        try:
            # A switch unit left by a daemon that died without cleaning up holds the
            # sysroot lock and nobody would supervise it: stop it before anything else.
            # (The BootcNode watch does not touch the host: it starts meanwhile.)
            self.informer.start()
            sync = asyncio.create_task(self.informer.wait_for_sync(), name="sync")
            await self.host.stop_switch()
            self.watch.start()
            # The host does not depend on the BootcNode: read it while the cache syncs.
            self._first_read = asyncio.create_task(self._read_host(status=True), name="read")
            self._poller = asyncio.create_task(self._poll(), name="poll")
            if not await unless_stopped(sync, stop):
                return
            log.info("BootcNode cache synced", extra=self._ctx)
            self.queue.add(self.node)
            self._workers = asyncio.create_task(
                run_workers(self.queue, self.reconcile, 1, log=log), name="reconcile"
            )
            await wait_first(stop, self._workers)
            if self._workers.done() and not self._workers.cancelled():
                exc = self._workers.exception()
                if exc is not None:
                    log.error("reconcile worker failed", exc_info=exc, extra=self._ctx)
        finally:
            await self.shutdown()

    async def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        log.info("shutting down", extra=self._ctx)
        self.host.shutting_down = True
        self.queue.shut_down()
        self.watch.stop()
        for task in (self._poller, self._first_read):
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
        if self._workers is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.queue.shut_down_with_drain()
            self._workers.cancel()
            await asyncio.wait([self._workers])
        if self._switch_task is not None:
            log.info(
                "stopping the running switch",
                extra={**self._ctx, "image": self._switch_image},
            )
            await self._cancel_switch()
        await self.informer.stop()


async def run(args: argparse.Namespace) -> int:
    """The ``daemon`` mode's entry point; returns the process exit code."""
    config = Config.from_args(args)
    host = HostCommands(
        shlex.split(args.host_exec),
        command_timeout=args.bootc_timeout,
        stage_timeout=args.stage_timeout,
        enforce_sigpolicy=args.enforce_container_sigpolicy,
    )
    try:
        # The small client: the daemon never imports kubernetes_asyncio (~70 MiB of models).
        api = load_lite_client(args.kubeconfig)
    except ConfigError as e:
        log.error("cannot configure API access: %s", e, extra={"node": config.node_name})
        return 1
    agent = Agent(api, config, host)

    async def work(stop: asyncio.Event) -> int:
        await agent.run(stop)
        return 0

    code = await serve(
        args, work, ready=agent.ready, healthy=agent.healthy, close=(api.close,), api=api
    )
    log.info("stopped", extra={"node": config.node_name})
    return code
