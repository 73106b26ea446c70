"""Whether sealed pull secrets isolate nodes: the daemons' node-scope admission policy
(``policy.nodescope``, and how ``watchers.nodescope`` reads its informers), issue 37 §15."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bootc_operator.api import constants as c
from bootc_operator.policy.nodescope import DEFAULT_POLICY, scope_problem, sealing_refused
from bootc_operator.reconcilers.watchers.nodescope import NodeScopeWatcher

N = DEFAULT_POLICY
POLICY: dict[str, Any] = {"metadata": {"name": N}, "spec": {"failurePolicy": "Fail"}}
BOUND: dict[str, Any] = {"policyName": N, "validationActions": ["Deny"]}
BINDING: dict[str, Any] = {"metadata": {"name": N}, "spec": BOUND}


def binding(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": N}, "spec": {**BOUND, **spec}}


def test_the_installed_policy_confines_the_daemons() -> None:
    assert scope_problem(True, POLICY, BINDING) == ""
    assert scope_problem(True, {"metadata": {"name": N}, "spec": {}}, BINDING) == ""  # Fail
    assert scope_problem(True, POLICY, binding(validationActions=["Deny", "Audit"])) == ""


@pytest.mark.parametrize(
    ("served", "policy", "bound", "problem"),
    [
        (False, None, None, "does not serve admissionregistration.k8s.io/v1 "),
        (True, None, BINDING, f"the ValidatingAdmissionPolicy {N} is not installed"),
        (True, POLICY, None, f"the ValidatingAdmissionPolicyBinding {N} is not installed"),
        (
            True,
            POLICY,
            binding(validationActions=["Warn"]),
            "does not deny (validationActions: Warn)",
        ),
        (True, POLICY, binding(validationActions=[]), "does not deny (validationActions: none)"),
        (True, POLICY, binding(policyName="other"), f"binds other, not {N}"),
        (
            True,
            {"metadata": {"name": N}, "spec": {"failurePolicy": "Ignore"}},
            BINDING,
            "failurePolicy Ignore: a write it cannot judge goes through",
        ),
    ],
)
def test_what_leaves_the_daemons_unconfined_is_named(
    served: bool, policy: Any, bound: Any, problem: str
) -> None:
    assert problem in scope_problem(served, policy, bound)


def test_the_pools_message_says_what_to_do() -> None:
    msg = sealing_refused("bootc-operator/pull", "the X is not installed")
    assert msg.startswith("pull secret bootc-operator/pull is not sealed to the nodes: the X")
    assert "Install manifests/admission" in msg and "--seal-without-node-scope" in msg


def fake(synced: bool, obj: Any = None, error: str = "") -> Any:
    return SimpleNamespace(
        has_synced=synced,
        get=lambda _name: obj,
        stats=SimpleNamespace(last_error=error),
        resource="validatingadmissionpolicies.admissionregistration.k8s.io",
    )


def watcher(*informers: Any, allow: bool = False) -> NodeScopeWatcher:
    w = NodeScopeWatcher(None, on_change=lambda: None, allow_unscoped=allow)
    if informers:
        w._informers = informers
    return w


POOL = {"spec": {"pullSecretRef": {"name": "pull", "namespace": "bootc-operator"}}}


def test_the_watcher_seals_only_once_it_read_an_enforced_policy() -> None:
    assert watcher(fake(True, POLICY), fake(True, BINDING)).state().may_seal
    pending = watcher(fake(True, POLICY), fake(False)).state()
    assert pending.pending and not pending.may_seal and not pending.problem
    assert watcher(fake(True, POLICY), fake(False)).problems(POOL) == {}  # not yet: no news
    missing = watcher(fake(True, POLICY), fake(True, None))
    assert not missing.state().may_seal
    (reason, message), *_ = missing.problems(POOL).items()
    assert reason == c.REASON_SEALING_UNAVAILABLE == "SealingUnavailable"
    assert f"ValidatingAdmissionPolicyBinding {N} is not installed" in message
    assert missing.problems({"spec": {}}) == {}  # no pull secret: nothing to seal
    # the API not served (Kubernetes < 1.30), or not readable: refused, saying so
    old = watcher(
        fake(False, error="ApiError: 404 NotFound: the server could not find"), fake(False)
    )
    assert "(Kubernetes < 1.30)" in old.state().problem
    denied = watcher(fake(False, error="ApiError: 403 Forbidden: cannot list"), fake(False))
    assert "cannot read the admission policy" in denied.state().problem
    assert "403 Forbidden" in denied.state().problem
    # --seal-without-node-scope: sealed whatever the policy
    assert watcher(allow=True).state().may_seal and watcher(allow=True).problems(POOL) == {}
