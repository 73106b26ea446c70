"""What this controller process has learned about each pool that its objects do not say.

One object, built before the loops (``controller.core``), read by every loop through
the ``Context`` (``Context.policy`` resolves a pool's spec with the tag and signature
parts; rollout and status read the gates). Each part has one writer:

- ``tags``: (image ref, digest) the pool's tag last resolved to; writer: the tags loop
  (the status loop shows it as ``status.targetDigest``);
- ``signatures``: (``repo@digest``, fingerprint of the keys) whose signature verified;
  writer: the signatures loop;
- ``signature_errors``: (Degraded reason, message) of the pool's last signature
  failure (a key problem, a digest refused, the registry not answering); writer: the
  signatures loop;
- ``gates``: the answers of the pool's Prometheus gates (blocking alerts,
  preconditions); writer: the alert gate loop (``gates.alertgate.GateStates``);
- ``departures``: the members the pool let go whose Node a slot still changes
  (cordon, autoscaler annotations); writer: membership, which deletes their BootcNodes
  once the rollout loop (its reader, the one writer of a slot's fields) gave the Node
  back.

``keys`` reads the keys a pool trusts now (the signature loop's ``TrustedKeys``, over
the watched key Secrets): a verification holds only while they are the keys that made
it. Nothing here does I/O; a part without its loop (a test's, or no Prometheus) reads
as "nothing known".
"""

from __future__ import annotations

from typing import Any, Protocol

from bootc_operator.api import constants as c
from bootc_operator.gates.alerts import AlertGate

Obj = dict[str, Any]


class GateReader(Protocol):
    def gate(self, pool: Obj) -> AlertGate | None:
        """The pool's Prometheus gates as one (None: it has none)."""


class KeyReader(Protocol):
    def fingerprint(self, pool: Obj) -> str | None:
        """The fingerprint of the keys the pool trusts now (None: none usable)."""


class _Nothing:
    def gate(self, pool: Obj) -> AlertGate | None:
        return None

    def fingerprint(self, pool: Obj) -> str | None:
        return None


class PoolKnowledge:
    """The parts (module doc); ``gates`` and ``keys`` are their loops' objects."""

    def __init__(self, *, gates: GateReader | None = None, keys: KeyReader | None = None) -> None:
        self.tags: dict[str, tuple[str, str]] = {}
        self.signatures: dict[str, tuple[str, str]] = {}
        self.signature_errors: dict[str, tuple[str, str]] = {}
        self.departures: dict[str, frozenset[str]] = {}
        self.gates: GateReader = gates if gates is not None else _Nothing()
        self.keys: KeyReader = keys if keys is not None else _Nothing()

    def resolved_tag(self, pool_name: str) -> tuple[str, str] | None:
        """(ref, digest) the pool's tag last resolved to in this process, if any."""
        return self.tags.get(pool_name)

    def departing(self, pool_name: str) -> frozenset[str]:
        """Members membership let go whose Node rollout must give back first."""
        return self.departures.get(pool_name, frozenset())

    def verified(self, pool: Obj) -> str | None:
        """The ``repo@digest`` verified for the pool, while that verification holds:
        the pool trusts exactly the keys that made it, all of them readable now."""
        held = self.signatures.get(pool["metadata"]["name"])
        if held is None:
            return None
        fingerprint = self.keys.fingerprint(pool)
        return held[0] if fingerprint is not None and fingerprint == held[1] else None

    def withdrawn(self, pool: Obj) -> str:
        """Why no digest's verification holds for the pool, when that is *known*: the
        signatures loop found its keys unusable or refused the digest with the keys the
        pool trusts now (``SignatureVerificationFailed``). "" otherwise: a verification
        holds, or none is known yet (not checked since a key change or a restart, the
        registry not answering): the pool's rollout then waits rather than undo
        anything (``slots.plan_withdrawn`` only for a known withdrawal)."""
        if self.verified(pool) is not None:
            return ""
        failed = self.signature_errors.get(pool["metadata"]["name"])
        if failed is None or failed[0] != c.REASON_SIGNATURE_VERIFICATION_FAILED:
            return ""
        return failed[1]

    def gate(self, pool: Obj) -> AlertGate | None:
        """The pool's Prometheus gates (None: it has none); closed until answered."""
        return self.gates.gate(pool)

    def alerts_blocked(self, pool: Obj) -> bool:
        gate = self.gate(pool)
        return gate is not None and gate.blocked
