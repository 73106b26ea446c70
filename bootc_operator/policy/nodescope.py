"""Whether sealed pull secrets isolate nodes: the daemons' node-scope admission policy. Pure.

A pull secret is sealed to the key a node's daemon publishes in its BootcNode's
``status.sealingKey`` (``bootc_operator.sealing``). That isolates the nodes only
while a daemon can write *its own* BootcNode alone: RBAC lets the daemons'
ServiceAccount patch every BootcNode's status, and only the ValidatingAdmissionPolicy
``bootc-operator-daemon-node-scope`` (``manifests/admission``) confines each daemon
to the BootcNode of its node. Without it, any node's daemon can publish its own key
as another node's ``sealingKey``, be sealed that node's pull secret, and open it.

``scope_problem(served, policy, binding, name)`` says why the policy does not
confine the daemons ("" when it does): its API not served (Kubernetes < 1.30), the
policy or its binding missing, a binding that does not deny (``Warn``/``Audit``
only) or names another policy, a policy that lets writes through when it fails
(``failurePolicy: Ignore``). ``sealing_refused(ref, problem)`` is the pool's
``Degraded=True/SealingUnavailable`` message: the controller seals nothing while the
policy is not enforced, unless started with ``--seal-without-node-scope``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: the policy's (and its binding's) name in manifests/admission and install.yaml
DEFAULT_POLICY: Final = "bootc-operator-daemon-node-scope"
#: the controller flag that seals without the policy (accepting no isolation)
OPT_OUT_FLAG: Final = "--seal-without-node-scope"


def scope_problem(
    served: bool,
    policy: Mapping[str, Any] | None,
    binding: Mapping[str, Any] | None,
    name: str = DEFAULT_POLICY,
) -> str:
    """Why the admission policy ``name`` does not confine each daemon to its own
    BootcNode, or "" when it does (``policy``/``binding``: the objects, None when
    absent; ``served``: whether the API server serves ValidatingAdmissionPolicies)."""
    if not served:
        return (
            "the API server does not serve admissionregistration.k8s.io/v1 "
            f"ValidatingAdmissionPolicies (Kubernetes < 1.30), so the policy {name} "
            "cannot confine each daemon to its own BootcNode"
        )
    if policy is None:
        return f"the ValidatingAdmissionPolicy {name} is not installed"
    if (policy.get("spec") or {}).get("failurePolicy", "Fail") != "Fail":
        return (
            f"the ValidatingAdmissionPolicy {name} has failurePolicy "
            f"{policy['spec']['failurePolicy']}: a write it cannot judge goes through"
        )
    if binding is None:
        return f"the ValidatingAdmissionPolicyBinding {name} is not installed (nothing enforces it)"
    spec = binding.get("spec") or {}
    if spec.get("policyName") != name:
        return (
            f"the ValidatingAdmissionPolicyBinding {name} binds "
            f"{spec.get('policyName') or 'no policy'}, not {name}"
        )
    actions = list(spec.get("validationActions") or ())
    if "Deny" not in actions:
        shown = ", ".join(str(a) for a in actions) or "none"
        return (
            f"the ValidatingAdmissionPolicyBinding {name} does not deny "
            f"(validationActions: {shown})"
        )
    return ""


def sealing_refused(secret: str, problem: str) -> str:
    """The pool's SealingUnavailable message: pull secret ``secret`` (``ns/name``) is
    not sealed because of ``problem`` (``scope_problem``), and what to do."""
    return (
        f"pull secret {secret} is not sealed to the nodes: {problem}; without it any "
        "node's daemon could publish its key as another node's sealingKey and open that "
        "node's pull secret. Install manifests/admission (Kubernetes >= 1.30), or start "
        f"the controller with {OPT_OUT_FLAG} to seal without that isolation"
    )
