"""Names on the wire: API group, kinds, labels, annotations, condition types and reasons.

Wire-compatible with the Go bootc-operator's ``node.bootc.dev/v1alpha1``.
"""

from typing import Final

GROUP: Final = "node.bootc.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

POOL_KIND: Final = "BootcNodePool"
POOL_PLURAL: Final = "bootcnodepools"
NODE_KIND: Final = "BootcNode"
NODE_PLURAL: Final = "bootcnodes"

# Node label marking a node as managed: the daemon DaemonSet selects on it. Under
# the node-restriction.kubernetes.io domain, which the NodeRestriction admission
# plugin forbids a kubelet to set on its own Node: a compromised node cannot
# label itself into receiving a daemon Pod, and with it the daemon's token. The
# controller sets it on members only and strips it from any Node without a
# BootcNode (``placement``).
MANAGED_LABEL: Final = "bootc.dev.node-restriction.kubernetes.io/managed"
# The Go operator's member label (part of the API): members still carry it, for
# admins and tools that select on it, but any kubelet may set it on its own Node,
# so nothing places the daemon by it; it is stripped from non-members.
LEGACY_MANAGED_LABEL: Final = "bootc.dev/managed"
# BootcNode label naming its pool, so `kubectl get bn -l bootc.dev/pool=NAME` works.
POOL_LABEL: Final = "bootc.dev/pool"
# BootcNode label: the first 12 hex digits of spec.desiredImage's digest, written with
# it, so `kubectl get bn` shows DESIRED and BOOTED in the same short form.
DESIRED_DIGEST_LABEL: Final = "bootc.dev/desired-digest"
# BootcNode annotations: the rollout's only memory, so a restarted controller resumes.
IN_REBOOT_SLOT_ANNOTATION: Final = "bootc.dev/in-reboot-slot"
WAS_CORDONED_ANNOTATION: Final = "bootc.dev/was-cordoned"
# What the Node carried under the autoscaler annotations a slot holder gets (JSON of
# the keys present), restored when the slot ends (policy/autoscaler.py).
AUTOSCALER_PRIOR_ANNOTATION: Final = "bootc.dev/autoscaler-prior"
# When the controller asked a slot holder to reboot (set desiredImageState: Booted);
# rebootTimeoutSeconds counts from here.
REBOOT_REQUESTED_ANNOTATION: Final = "bootc.dev/reboot-requested"
# BootcNode annotation written with Booted: how the drain went ("3 pods evicted in 2s"),
# for the node's one NodeUpdated Event; removed with the slot.
DRAIN_SUMMARY_ANNOTATION: Final = "bootc.dev/drain-summary"
# BootcNode annotation set when a drain timed out: the node is skipped (and shown
# degraded) until its target changes or an admin removes the annotation.
DRAIN_BLOCKED_ANNOTATION: Final = "bootc.dev/drain-blocked"
#: spec.rollout.drain.onTimeout Skip let the node go: "<times> <why>"; cleared when
#: the node gets through (its slot released) or its target changes
DRAIN_SKIPPED_ANNOTATION: Final = "bootc.dev/drain-skipped"
# BootcNode annotation: the target digest this node failed its health check on and
# was rolled back from; it is not offered that digest again until the pool's target
# changes (or an admin removes the annotation).
HEALTH_FAILED_ANNOTATION: Final = "bootc.dev/health-failed"
# BootcNode annotation written by the rollout while a node is checked after its
# reboot: "Pending|Passed|Failed: <check>: <message>" (kubectl describe bn).
HEALTH_CHECK_ANNOTATION: Final = "bootc.dev/health-check"
# Node label: canaries are chosen among labelled nodes first (then by name).
CANARY_LABEL: Final = "bootc.dev/canary"
#: a qualified label key (optional DNS-subdomain prefix and "/", then a name of 1-63)
LABEL_KEY_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
CONTROL_PLANE_LABEL: Final = "node-role.kubernetes.io/control-plane"
#: a label value (may be empty)
LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# Finalizer on pools: nodes are unlabelled/uncordoned before BootcNodes are collected.
POOL_FINALIZER: Final = "node.bootc.dev/pool-cleanup"
# The Go bootc-operator's finalizer for the same cleanup: a pool taken over from it
# carries it, and the controller removes it with its own (it did the cleanup).
GO_POOL_FINALIZER: Final = "bootc.dev/pool-cleanup"

# spec.rollout.maintenanceWindows[]: days, "HH:MM" start, "4h" / "90m" / "1h30m" duration.
WINDOW_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
WINDOW_START_PATTERN: Final = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
WINDOW_DURATION_PATTERN: Final = r"^([0-9]{1,3}h)?([0-9]{1,5}m)?$"

# Condition types.
COND_UP_TO_DATE: Final = "UpToDate"
COND_DEGRADED: Final = "Degraded"
COND_IDLE: Final = "Idle"
# kstatus's conditions (sigs.k8s.io/cli-utils pkg/kstatus, what Flux and kubectl wait
# read): Ready on both kinds, Reconciling and Stalled only while True (api/kstatus.py).
COND_READY: Final = "Ready"
COND_RECONCILING: Final = "Reconciling"
COND_STALLED: Final = "Stalled"

# Pool UpToDate reasons.
REASON_ALL_UPDATED: Final = "AllUpdated"
REASON_ROLLOUT_IN_PROGRESS: Final = "RolloutInProgress"
REASON_PAUSED: Final = "Paused"
# Not yet known: membership has not processed the current generation, or the tag
# has not been resolved yet.
REASON_PENDING: Final = "Pending"
# True, vacuously: the selector matches no node.
REASON_NO_MATCHING_NODES: Final = "NoMatchingNodes"
# maxUnavailable resolves to 0, or nodes outside the rollout use it up: nothing may reboot.
REASON_ROLLOUT_BLOCKED: Final = "RolloutBlocked"
# Outside every maintenance window: no new reboot slots.
REASON_AWAITING_MAINTENANCE_WINDOW: Final = "AwaitingMaintenanceWindow"
# A Prometheus alert matching spec.rollout.blockingAlerts fires, or Prometheus cannot
# be queried (fail closed): no new reboot slots.
REASON_BLOCKED_BY_ALERTS: Final = "BlockedByAlerts"
# A query of spec.rollout.preconditions returns an empty result, or Prometheus cannot
# be queried for it (fail closed): no new reboot slots.
REASON_PRECONDITION_NOT_MET: Final = "PreconditionNotMet"
# spec.health.queries[].for: "30s", "5m", "1m30s" (hours, minutes, seconds; "0s": once).
QUERY_FOR_PATTERN: Final = r"^([0-9]{1,3}h)?([0-9]{1,5}m)?([0-9]{1,6}s)?$"
#: spec.health.queries[].name and spec.rollout.preconditions[].name: a DNS label
QUERY_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# spec.rollout.blockingAlerts[]: comma-separated PromQL label matchers (ANDed).
ALERT_MATCHERS_PATTERN: Final = (
    r'^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"([^"\\]|\\.)*"\s*'
    r'(,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"([^"\\]|\\.)*"\s*)*,?\s*$'
)
# Canaries passed; spec.rollout.approvedDigest does not name the target yet.
REASON_AWAITING_APPROVAL: Final = "AwaitingApproval"
# Updated nodes are still being checked (spec.health) before their slots are released.
REASON_HEALTH_CHECK_PENDING: Final = "HealthCheckPending"
# (UpToDate is also False with InvalidSpec, TagResolutionError, SignatureRegistryError,
# SignatureVerificationFailed or RolloutHalted: the Degraded reason that stops the rollout.)

# status.phase: one word for `kubectl get bnp`.
PHASE_PENDING: Final = "Pending"
PHASE_PROGRESSING: Final = "Progressing"
PHASE_PAUSED: Final = "Paused"
PHASE_BLOCKED: Final = "Blocked"
PHASE_HALTED: Final = "Halted"
PHASE_AWAITING_WINDOW: Final = "AwaitingWindow"
PHASE_AWAITING_APPROVAL: Final = "AwaitingApproval"
PHASE_DEGRADED: Final = "Degraded"
PHASE_UP_TO_DATE: Final = "UpToDate"
PHASES: Final = (
    PHASE_PENDING,
    PHASE_PROGRESSING,
    PHASE_PAUSED,
    PHASE_BLOCKED,
    PHASE_HALTED,
    PHASE_AWAITING_WINDOW,
    PHASE_AWAITING_APPROVAL,
    PHASE_DEGRADED,
    PHASE_UP_TO_DATE,
)

# Pool Degraded reasons, lowest to highest precedence (the highest present wins).
REASON_HEALTHY: Final = "Healthy"
REASON_NODE_DEGRADED: Final = "NodeDegraded"
REASON_NODE_CONFLICT: Final = "NodeConflict"
REASON_ROLLOUT_HALTED: Final = "RolloutHalted"
# A node failed its post-reboot health check (spec.health): halted, maybe rolled back.
REASON_HEALTH_CHECK_FAILED: Final = "HealthCheckFailed"
REASON_PULL_SECRET_ERROR: Final = "PullSecretError"
# The pool's pull secret is not sealed to its nodes: the daemons' node-scope admission
# policy is not enforced, so sealing would isolate nothing (policy/nodescope.py).
REASON_SEALING_UNAVAILABLE: Final = "SealingUnavailable"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_TAG_RESOLUTION_ERROR: Final = "TagResolutionError"
# spec.image.verification: the registry could not be asked for the target's signature
# (fail closed: nothing stages until it can).
REASON_SIGNATURE_REGISTRY_ERROR: Final = "SignatureRegistryError"
# spec.image.verification: the target is unsigned, signed by no trusted key, signed for
# another digest, its signature unreadable, or the trusted keys cannot be read.
REASON_SIGNATURE_VERIFICATION_FAILED: Final = "SignatureVerificationFailed"
DEGRADED_PRECEDENCE: Final = (
    REASON_NODE_DEGRADED,
    REASON_NODE_CONFLICT,
    REASON_ROLLOUT_HALTED,
    REASON_HEALTH_CHECK_FAILED,
    REASON_PULL_SECRET_ERROR,
    REASON_SEALING_UNAVAILABLE,
    REASON_INVALID_SPEC,
    REASON_TAG_RESOLUTION_ERROR,
    REASON_SIGNATURE_REGISTRY_ERROR,
    REASON_SIGNATURE_VERIFICATION_FAILED,
)

# BootcNode Idle reasons.
REASON_IDLE: Final = "Idle"
REASON_STAGING: Final = "Staging"
REASON_STAGED: Final = "Staged"
REASON_REBOOTING: Final = "Rebooting"
# BootcNode Degraded reasons.
REASON_ERROR: Final = "Error"
# desiredImageState Booted on a node without the slot + reboot-requested annotations.
REASON_REBOOT_NOT_ALLOWED: Final = "RebootNotAllowed"
# spec.desiredImage fails the CRD's pattern (checked again on the node): not switching.
REASON_INVALID_IMAGE: Final = "InvalidImage"
#: node Degraded: bootc status ran but printed what the daemon cannot read (not JSON,
#: nested too deep, a number too long, an unknown shape); bootc's own failures stay Error
REASON_UNREADABLE_STATUS: Final = "UnreadableStatus"
#: node Degraded: bootc refused to pull the desired image because the host's containers
#: policy (/etc/containers/policy.json) rejects it, or, with the daemon's
#: --enforce-container-sigpolicy, because that policy accepts anything
REASON_CONTAINER_POLICY_REJECTED: Final = "ContainerPolicyRejected"
