"""``PoolKnowledge``: what the loops learned of each pool, one writer per part, read by
every loop through the ``Context`` (the spec's policy with the tag and the verified
digest, the Prometheus gates), built before the loops by the real ``Controller``."""

from __future__ import annotations

from typing import Any

from bootc_operator.api import constants as c
from bootc_operator.controller import Controller
from bootc_operator.gates.alerts import AlertGate
from bootc_operator.reconcilers.knowledge import PoolKnowledge

DIGEST = "sha256:" + "b" * 64
TAG = "quay.io/x/os:v1"


def pool(ref: str = TAG, **spec: Any) -> dict[str, Any]:
    body = {"nodeSelector": {}, "image": {"ref": ref}, **spec}
    return {"metadata": {"name": "p", "uid": "u", "resourceVersion": "1"}, "spec": body}


class Keys:
    def __init__(self) -> None:
        self.now: str | None = "keys-1"

    def fingerprint(self, pool: Any) -> str | None:
        return self.now


class Gates:
    def gate(self, pool: Any) -> AlertGate | None:
        return AlertGate(True, "NodeDown fires")


def test_nothing_known_reads_as_nothing() -> None:
    known = PoolKnowledge()
    assert known.resolved_tag("p") is None and known.verified(pool()) is None
    assert known.gate(pool()) is None and not known.alerts_blocked(pool())


def test_a_verification_holds_only_while_the_pool_trusts_the_keys_that_made_it() -> None:
    keys = Keys()
    known = PoolKnowledge(keys=keys)
    known.signatures["p"] = (f"quay.io/x/os@{DIGEST}", "keys-1")
    assert known.verified(pool()) == f"quay.io/x/os@{DIGEST}"
    keys.now = "keys-2"  # a key Secret changed
    assert known.verified(pool()) is None
    keys.now = None  # a key cannot be read
    assert known.verified(pool()) is None


def test_a_target_is_withdrawn_only_when_the_signature_loop_refused_it() -> None:
    """Issue 37 follow-up: rollout gives slots back only for a *known* withdrawal (keys
    unusable, or the digest refused with the keys trusted now), never for a verification
    merely not known yet (a key change not re-checked, a restart) or a registry outage."""
    keys = Keys()
    known = PoolKnowledge(keys=keys)
    assert known.withdrawn(pool()) == ""  # nothing known: not checked yet
    known.signatures["p"] = (f"quay.io/x/os@{DIGEST}", "keys-1")
    keys.now = "keys-2"  # rotated, not re-checked yet: unknown, not withdrawn
    assert known.verified(pool()) is None and known.withdrawn(pool()) == ""
    refused = "quay.io/x/os@sha256:b… has 1 signature, none made by a trusted key"
    known.signature_errors["p"] = (c.REASON_SIGNATURE_VERIFICATION_FAILED, refused)
    assert known.withdrawn(pool()) == refused
    keys.now = "keys-1"  # an older digest's verification holds again: it is the target
    assert known.withdrawn(pool()) == ""
    del known.signatures["p"]
    known.signature_errors["p"] = (c.REASON_SIGNATURE_REGISTRY_ERROR, "registry down")
    assert known.withdrawn(pool()) == ""


def test_the_gates_part_is_the_alert_loops_answers() -> None:
    known = PoolKnowledge(gates=Gates())
    assert known.alerts_blocked(pool()) and known.gate(pool()) == AlertGate(True, "NodeDown fires")


def test_the_controller_builds_it_first_and_each_loop_writes_its_own_part() -> None:
    ctl = Controller(None, identity="unit")
    known = ctl.knowledge
    assert ctl.ctx.knowledge is known
    assert ctl.tags._targets is known.tags
    assert ctl.signatures._verified is known.signatures
    assert ctl.signatures.errors is known.signature_errors
    assert known.gates is ctl.alerts.states and known.keys is ctl.signatures.keys
    # the tags loop's part is what the policy reads: a tag pool targets its digest
    assert ctl.ctx.policy(pool()).target_digest is None
    known.tags["p"] = (TAG, DIGEST)
    assert ctl.ctx.policy(pool()).target_digest == DIGEST
