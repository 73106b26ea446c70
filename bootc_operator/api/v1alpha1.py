"""Pydantic models of ``node.bootc.dev/v1alpha1`` BootcNodePool and BootcNode.

These are the single source of truth for the wire format: ``crdgen`` turns them
into the CRD schemas under ``manifests/crd/``. JSON names are camelCase (as the
Go bootc-operator's); unknown fields are ignored so newer servers do not break
older clients. ``to_wire()`` gives the dict the API server expects.

Annotations used by the CRD generator live in ``json_schema_extra``: Kubernetes
schema extensions (``x-kubernetes-*``), CEL rules, and explicit defaults.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from bootc_operator.api import constants as c
from bootc_operator.api import defaults
from bootc_operator.api.imageref import DIGEST_REF_PATTERN, POOL_REF_PATTERN
from bootc_operator.api.wire import (
    BootAssessmentState,
    DesiredImageState,
    RebootKind,
    RebootPolicy,
)

__all__ = [
    "BootAssessment",
    "BootAssessmentState",
    "DesiredImageState",
    "ImageInfo",
    "RebootKind",
    "RebootPolicy",
    "WireModel",
]


class WireModel(BaseModel):
    """Base: camelCase aliases, python names accepted too, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_enum_values=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict as the API server stores it (absent fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --------------------------------------------------------------------- shared


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(WireModel):
    """Condition contains details for one aspect of the current state of this API Resource."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="type of condition in CamelCase or in foo.example.com/CamelCase.",
    )
    status: ConditionStatus = Field(
        description="status of the condition, one of True, False, Unknown."
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="the .metadata.generation that the condition was set based upon.",
        json_schema_extra={"format": "int64"},
    )
    last_transition_time: dt.datetime = Field(
        description="the last time the condition transitioned from one status to another.",
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="a programmatic CamelCase identifier for the condition's last transition.",
    )
    message: str = Field(
        default="",
        max_length=32768,
        description="a human readable message indicating details about the transition.",
        json_schema_extra={"x-bootc-required": True},
    )


_CONDITIONS_EXTRA: dict[str, JsonValue] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class SecretReference(WireModel):
    """A reference to a Secret of type kubernetes.io/dockerconfigjson."""

    name: str = Field(min_length=1, max_length=253, description="name is the name of the Secret.")
    namespace: str = Field(
        min_length=1, max_length=63, description="namespace is the namespace of the Secret."
    )


class LabelSelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(WireModel):
    """A selector requirement: a key, an operator and values."""

    key: str = Field(description="key is the label key that the selector applies to.")
    operator: LabelSelectorOperator = Field(
        description="operator is one of In, NotIn, Exists and DoesNotExist."
    )
    values: list[str] | None = Field(
        default=None,
        description="values for In and NotIn (non-empty); empty for Exists and DoesNotExist.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class LabelSelector(WireModel):
    """A label query over Nodes; matchLabels and matchExpressions are ANDed."""

    match_labels: dict[str, str] | None = Field(
        default=None, description="matchLabels is a map of {key,value} pairs, ANDed."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None,
        description="matchExpressions is a list of label selector requirements, ANDed.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


# --------------------------------------------------------------------- pool


#: One PEM ``PUBLIC KEY`` block (what ``cosign generate-key-pair`` writes to cosign.pub);
#: the controller parses it and names what is wrong with a key that does not.
PUBLIC_KEY_PEM_PATTERN = (
    r"^\s*-----BEGIN PUBLIC KEY-----[A-Za-z0-9+/=\s]+-----END PUBLIC KEY-----\s*$"
)


class PublicKeySecretReference(WireModel):
    """A key of a Secret holding a cosign public key (PEM)."""

    name: str = Field(min_length=1, max_length=253, description="name is the name of the Secret.")
    namespace: str = Field(
        min_length=1,
        max_length=63,
        description="namespace is the namespace of the Secret; the controller may read "
        "Secrets of its own namespace (bootc-operator) only, unless granted more "
        "(docs/security.md).",
    )
    key: str = Field(
        default=defaults.PUBLIC_KEY_SECRET_KEY,
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description="the Secret's data key holding the PEM; default "
        f'"{defaults.PUBLIC_KEY_SECRET_KEY}" (what '
        "cosign generate-key-pair k8s://NS/NAME writes).",
    )


class ImageVerification(WireModel):
    """Cosign signatures the controller requires before any node stages a digest."""

    public_keys: list[str] | None = Field(
        default=None,
        max_length=16,
        description="cosign public keys (PEM, -----BEGIN PUBLIC KEY-----); a signature "
        "made by any of them verifies.",
        json_schema_extra={
            "items": {"type": "string", "maxLength": 4096, "pattern": PUBLIC_KEY_PEM_PATTERN},
            "x-kubernetes-list-type": "atomic",
        },
    )
    public_key_secret_refs: list[PublicKeySecretReference] | None = Field(
        default=None,
        max_length=16,
        description="Secrets holding cosign public keys (PEM), besides publicKeys.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class ImageSpec(WireModel):
    """The OS image of a pool."""

    ref: str = Field(
        min_length=1,
        max_length=1024,
        description='a tag ("quay.io/example/myos:latest") or digest '
        '("quay.io/example/myos@sha256:...") reference; short names are not accepted.',
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"self.matches(r'{POOL_REF_PATTERN}')",
                    "message": "image.ref must be an image reference like "
                    "quay.io/example/myos:latest: it begins with a letter or digit and "
                    "holds no whitespace or control characters",
                }
            ]
        },
    )
    verification: ImageVerification | None = Field(
        default=None,
        description="require a cosign signature, made by one of these keys, of the exact "
        "digest before any node stages it; an unsigned or wrongly signed digest is not "
        "rolled out (Degraded/SignatureVerificationFailed). Unset: no verification.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "(has(self.publicKeys) ? size(self.publicKeys) : 0) + "
                    "(has(self.publicKeySecretRefs) ? size(self.publicKeySecretRefs) : 0) > 0",
                    "message": "verification needs at least one key: publicKeys or "
                    "publicKeySecretRefs",
                }
            ]
        },
    )


def INT_OR_PERCENT_CEL(field: str, minimum: int = 0) -> list[JsonValue]:
    low = f'"{minimum}%"' if minimum == 0 else '"1%"'
    return [
        {
            "rule": f"type(self) == int ? self >= {minimum} : "
            "string(self).matches('^(100|[1-9]?[0-9])%$')"
            + ("" if minimum == 0 else " && string(self) != '0%'"),
            "message": f"{field} must be an integer >= {minimum} or a percentage from {low} "
            'to "100%" (e.g. 1 or "25%")',
        }
    ]


MAX_UNAVAILABLE_CEL = INT_OR_PERCENT_CEL("maxUnavailable")
MAX_UNHEALTHY_CEL = INT_OR_PERCENT_CEL("maxUnhealthy", minimum=1)


class Weekday(StrEnum):
    MON = "Mon"
    TUE = "Tue"
    WED = "Wed"
    THU = "Thu"
    FRI = "Fri"
    SAT = "Sat"
    SUN = "Sun"


class MaintenanceWindow(WireModel):
    """A recurring time when new reboots may start (nodes already rebooting finish)."""

    days: list[Weekday] | None = Field(
        default=None,
        description="the days the window starts on (Mon..Sun); empty or unset: every day. A "
        "window that crosses midnight belongs to the day it starts.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    start: str = Field(
        pattern=c.WINDOW_START_PATTERN,
        description='the local start time, "HH:MM" (24 h). A time that does not exist that day '
        "(DST spring forward) starts at the next valid instant; one that exists twice (fall "
        "back) at the first.",
    )
    duration: str = Field(
        pattern=c.WINDOW_DURATION_PATTERN,
        min_length=2,
        description='how long the window stays open, in real time: "4h", "90m" or "1h30m" '
        "(1m to 168h).",
    )
    time_zone: str = Field(
        default=defaults.WINDOW_TIME_ZONE,
        min_length=1,
        description='the IANA time zone of start and days, e.g. "Europe/Berlin"; default '
        f"{defaults.WINDOW_TIME_ZONE}.",
    )


class CanarySpec(WireModel):
    """Nodes that try a new target first."""

    nodes: int | str = Field(
        default=defaults.CANARY_NODES,
        description='how many canaries: an integer (>= 1) or a percentage of the pool ("10%", '
        "rounded up, at least 1). Nodes labelled bootc.dev/canary come first, then by name. "
        f"Defaults to {defaults.CANARY_NODES}.",
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": INT_OR_PERCENT_CEL("canary.nodes", minimum=1),
        },
    )
    require_approval: bool | None = Field(
        default=None,
        description="after the canaries pass, wait until spec.rollout.approvedDigest equals "
        "the target digest (UpToDate=False/AwaitingApproval).",
    )


class TopologySpec(WireModel):
    """Failure domains: reboots stay inside one domain until it is done."""

    key: str = Field(
        min_length=1,
        max_length=317,
        pattern=c.LABEL_KEY_PATTERN,
        description="the Node label whose value names a node's domain, e.g. "
        "topology.kubernetes.io/zone. Nodes without it (or with an empty value) form one "
        "domain of their own, updated last.",
    )
    order: list[str] | None = Field(
        default=None,
        max_length=64,
        description="the domains to update first, in this order; the others follow by name. "
        "Unset: every domain by name.",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "items": {"type": "string", "pattern": c.LABEL_VALUE_PATTERN, "maxLength": 63},
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, self.exists_one(y, y == x))",
                    "message": "topology.order must name each domain once",
                }
            ],
        },
    )
    max_unavailable_per_domain: int | str | None = Field(
        default=None,
        description="the most nodes of the current domain rebooting at once: an integer (>= 1) "
        'or a percentage of the domain\'s nodes ("50%", rounded up, at least 1); '
        "maxUnavailable still applies. Unset: maxUnavailable alone.",
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": INT_OR_PERCENT_CEL("maxUnavailablePerDomain", minimum=1),
        },
    )


class OrderBy(StrEnum):
    NAME = "Name"
    OLDEST_BOOT_FIRST = "OldestBootFirst"
    NEWEST_FIRST = "NewestFirst"


class ControlPlaneOrder(StrEnum):
    FIRST = "First"
    LAST = "Last"


class OrderSpec(WireModel):
    """The admin's order of reboots (after the canaries, inside the current domain)."""

    control_plane: ControlPlaneOrder | None = Field(
        default=None,
        description='"First" or "Last": nodes labelled node-role.kubernetes.io/control-plane '
        "before or after every other node. Unset: no difference.",
    )
    by_label: str | None = Field(
        default=None,
        min_length=1,
        max_length=317,
        pattern=c.LABEL_KEY_PATTERN,
        description="a Node label whose values set the order: lower first, numerically when "
        "a value is a number (numbers before words); nodes without it after the others.",
    )
    by: OrderBy = Field(
        default=OrderBy(defaults.ORDER_BY),
        description='among nodes the above leaves equal: "Name"; "OldestBootFirst" (the node '
        'Ready the longest, i.e. booted longest ago, first); "NewestFirst" (the most recently '
        "created Node first). Ties always break by name.",
    )


class DrainTimeoutPolicy(StrEnum):
    HALT = "Halt"
    SKIP = "Skip"
    FORCE = "Force"


class DrainSpec(WireModel):
    """How a slot holder's drain is bounded, and what happens when it runs out of time."""

    timeout_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the longest a node drain may take; when set it wins over "
        "drainTimeoutSeconds; 0 waits indefinitely. Unset: drainTimeoutSeconds.",
        json_schema_extra={"format": "int32"},
    )
    on_timeout: DrainTimeoutPolicy | None = Field(
        default=None,
        description='what a drain past its timeout does: "Halt" keeps the node cordoned in '
        "its slot, keeps evicting and starts no new reboots until it drains (the pool names "
        'the pod and node that block); "Skip" uncordons the node, gives its slot back and '
        "retries it after the other nodes (at most 3 tries, then it is marked drain-blocked); "
        '"Force" deletes the pods left without the Eviction API (PodDisruptionBudgets are '
        "bypassed; a Warning Event per pod) and the node reboots. Unset: as "
        "drainTimeoutSeconds alone does (the node gives its slot back, is uncordoned and "
        "marked drain-blocked until its target changes).",
    )
    grace_period_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the termination grace period given to each evicted (or, with Force, "
        "deleted) pod; unset: the pod's own terminationGracePeriodSeconds. 0 is taken as 1 "
        "(as kubectl delete without --force): a pod is never removed before its kubelet "
        "has stopped it.",
        json_schema_extra={"format": "int32"},
    )
    delete_empty_dir_data: bool | None = Field(
        default=None,
        description="whether pods with emptyDir volumes are evicted (their data is lost), "
        "as kubectl drain --delete-emptydir-data: true evicts them; false never evicts nor "
        "deletes a running one (not even with Force): the drain is blocked by it, the pool "
        "and a DrainBlocked Event name the pod with the reason EmptyDirData, until the pod "
        "goes or this changes. Unset: evicted, as true.",
    )


class Precondition(WireModel):
    """A PromQL query that must return a non-empty result before any new reboot starts."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=c.QUERY_NAME_PATTERN,
        description="names the precondition in the pool's status and Events (a DNS label, "
        "unique in the list).",
    )
    expr: str = Field(
        min_length=1,
        max_length=4096,
        description="a PromQL instant query; the precondition holds while its result is "
        "non-empty, e.g. ceph_health_status == 0.",
    )


_QUERY_LIST_EXTRA: dict[str, JsonValue] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
    "maxItems": 32,
}


class RolloutSpec(WireModel):
    """How updates roll out across the pool's nodes."""

    max_unavailable: int | str = Field(
        default=defaults.MAX_UNAVAILABLE,
        description="the most nodes rebooting at once: an integer (1) or a percentage of the "
        f'pool ("25%", rounded up). Defaults to {defaults.MAX_UNAVAILABLE}.',
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": MAX_UNAVAILABLE_CEL,
        },
    )
    paused: bool | None = Field(
        default=None,
        description="paused stops new reboots; staging already under way completes.",
    )
    drain_timeout_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the longest a node drain may take; 0 or unset waits indefinitely.",
        json_schema_extra={"format": "int32"},
    )
    drain: DrainSpec | None = Field(
        default=None,
        description="the drain's timeout, what happens past it (onTimeout), the pods' grace "
        "period and whether pods with emptyDir data are evicted; unset: drainTimeoutSeconds "
        "alone.",
    )
    reboot_timeout_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the longest a node may take to boot the desired image after its reboot "
        "was requested before the pool reports it; unset waits indefinitely.",
        json_schema_extra={"format": "int32"},
    )
    max_unhealthy: int | str | None = Field(
        default=None,
        description="how many unhealthy slot holders (degraded, or not back in time) halt the "
        'rollout: an integer (>= 1) or a percentage of the pool ("10%", rounded up, at least '
        f"1). Unset: {defaults.MAX_UNHEALTHY}.",
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": MAX_UNHEALTHY_CEL,
        },
    )
    stage_ahead: int | str | None = Field(
        default=None,
        description="how many nodes beyond the reboot slot holders may be told to stage the "
        'new image at once: an integer or a percentage of the pool ("20%", rounded up); 0 or '
        '"0%" means as many as maxUnavailable. Unset: every node stages at once.',
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": INT_OR_PERCENT_CEL("stageAhead"),
        },
    )
    maintenance_windows: list[MaintenanceWindow] | None = Field(
        default=None,
        description="when new reboots may start; unset or empty: any time. Staging is never "
        "restricted, and a node that started its reboot inside a window finishes after it "
        "closes.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    blocking_alerts: list[str] | None = Field(
        default=None,
        description="no new reboots while a Prometheus alert matching any entry fires (nodes "
        'already rebooting finish). An entry is PromQL label matchers, ANDed: alertname=~"Node.*", '
        'severity="critical". Needs the controller\'s --prometheus-url; when Prometheus cannot '
        "be queried no new reboots start either (fail closed).",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "items": {"type": "string", "pattern": c.ALERT_MATCHERS_PATTERN, "maxLength": 1024},
        },
    )
    preconditions: list[Precondition] | None = Field(
        default=None,
        description="no new reboots while any of these PromQL queries returns an empty "
        "result (nodes already rebooting finish), e.g. Ceph reporting HEALTH_OK. Needs the "
        "controller's --prometheus-url; when Prometheus cannot be queried, or a query fails, "
        "no new reboots start either (fail closed). The pool names the failing precondition "
        "(UpToDate=False/PreconditionNotMet).",
        json_schema_extra=_QUERY_LIST_EXTRA,
    )
    canary: CanarySpec | None = Field(
        default=None,
        description="canary nodes update first, alone, and must pass the health gate before "
        "any other node takes a reboot slot; unset: no canaries.",
    )
    order: OrderSpec | None = Field(
        default=None,
        description="the order in which nodes take reboot slots (canaries still first). "
        "Unset: nodes already cordoned first, then the one staged longest, then by name.",
    )
    topology: TopologySpec | None = Field(
        default=None,
        description="zone by zone: reboot slots stay inside one failure domain (the value of a "
        "Node label) until every node there is updated, then move to the next domain; "
        "maxUnavailable applies inside the domain, stageAhead may stage across domains. "
        "Unset: slots go to any node.",
    )
    approved_digest: str | None = Field(
        default=None,
        pattern=r"^sha(256:[a-f0-9]{64}|512:[a-f0-9]{128})$",
        description="with canary.requireApproval, the rollout continues past the canaries only "
        "while this equals status.targetDigest (sha256:...); approving one digest never "
        "approves another.",
    )


class DisruptionSpec(WireModel):
    """How nodes are disrupted during updates."""

    reboot_policy: RebootPolicy = Field(
        default=RebootPolicy(defaults.REBOOT_POLICY),
        description='"RebootOnly" always reboots fully; "AllowSoftReboot" restarts userspace '
        "only when the update supports it.",
    )


class HealthFailurePolicy(StrEnum):
    HALT = "Halt"
    ROLLBACK = "Rollback"


class HealthPods(WireModel):
    """Pods that must be Ready on an updated node."""

    selector: LabelSelector = Field(
        description="selects the pods (e.g. the CNI's and the workload's DaemonSet pods); at "
        "least one must run on the node and every one must be Ready.",
        json_schema_extra={"x-kubernetes-map-type": "atomic"},
    )
    namespaces: list[str] | None = Field(
        default=None,
        description="the namespaces to look in; unset or empty: all.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class HealthQuery(WireModel):
    """A PromQL query an updated node must satisfy, e.g. its storage daemon being up."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=c.QUERY_NAME_PATTERN,
        description="names the query in the node's health-check note, the pool's status and "
        "Events (a DNS label, unique in the list).",
    )
    expr: str = Field(
        min_length=1,
        max_length=4096,
        description="a PromQL instant query; $node is replaced by the node's name, escaped "
        'for a quoted label value: up{job="node-exporter",node="$node"} == 1. It passes '
        "while its result is non-empty.",
    )
    for_: str | None = Field(
        default=None,
        alias="for",
        pattern=c.QUERY_FOR_PATTERN,
        min_length=2,
        description='how long the result must stay non-empty without a gap: "30s", "5m", '
        '"1m30s". Unset or "0s": one non-empty answer passes.',
    )


class HealthSpec(WireModel):
    """The checks an updated node must pass before its reboot slot is released."""

    min_ready_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the Node must have been Ready continuously this long.",
        json_schema_extra={"format": "int32"},
    )
    boot_complete: bool | None = Field(
        default=None,
        description="the host must reach systemd's boot-complete.target (Automatic Boot "
        "Assessment, greenboot-style checks), as reported by the daemon.",
    )
    pods: HealthPods | None = Field(default=None, description="pods that must be Ready.")
    queries: list[HealthQuery] | None = Field(
        default=None,
        description="PromQL queries that must each return a non-empty result, continuously "
        "for their 'for', asked every --alert-check-interval. Needs the controller's "
        "--prometheus-url; an unanswered or failing query counts as not passing.",
        json_schema_extra=_QUERY_LIST_EXTRA,
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        description="counted from the reboot request; a node still not healthy then has "
        f"failed. Unset: {defaults.HEALTH_TIMEOUT_SECONDS}.",
        json_schema_extra={"format": "int32"},
    )
    on_failure: HealthFailurePolicy = Field(
        default=HealthFailurePolicy(defaults.HEALTH_ON_FAILURE),
        description='"Halt": the node keeps its slot and no new slots are taken; "Rollback": '
        "the node boots its previous deployment again (bootc rollback), is released and is "
        "not offered that digest again until the target changes. Either way the pool is "
        "Degraded/HealthCheckFailed.",
    )


class BootcNodePoolSpec(WireModel):
    """The desired state of a pool."""

    node_selector: LabelSelector = Field(
        description="selects the pool's Nodes; a Node belongs to at most one pool.",
        json_schema_extra={"x-kubernetes-map-type": "atomic"},
    )
    image: ImageSpec = Field(description="the desired OS image.")
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec,
        description="how updates are rolled out.",
        json_schema_extra={"default": {}},
    )
    disruption: DisruptionSpec = Field(
        default_factory=DisruptionSpec,
        description="how nodes are disrupted.",
        json_schema_extra={"default": {}},
    )
    pull_secret_ref: SecretReference | None = Field(
        default=None, description="a dockerconfigjson Secret with credentials for the image."
    )
    health: HealthSpec | None = Field(
        default=None,
        description="checks an updated node must pass before it counts as updated; unset: "
        "Ready and running the target is enough.",
    )


class PoolPhase(StrEnum):
    PENDING = c.PHASE_PENDING
    PROGRESSING = c.PHASE_PROGRESSING
    PAUSED = c.PHASE_PAUSED
    BLOCKED = c.PHASE_BLOCKED
    HALTED = c.PHASE_HALTED
    AWAITING_WINDOW = c.PHASE_AWAITING_WINDOW
    AWAITING_APPROVAL = c.PHASE_AWAITING_APPROVAL
    DEGRADED = c.PHASE_DEGRADED
    UP_TO_DATE = c.PHASE_UP_TO_DATE


class BootcNodePoolStatus(WireModel):
    """The observed state of a pool, written by the controller."""

    observed_generation: int | None = Field(
        default=None,
        description="the pool generation this status is based on.",
        json_schema_extra={"format": "int64"},
    )
    target_digest: str | None = Field(
        default=None, description="the digest being rolled out (resolved from a tag if needed)."
    )
    deployed_digest: str | None = Field(
        default=None, description="the last digest fully rolled out to every node."
    )
    update_available: bool | None = Field(
        default=None, description="true when targetDigest differs from deployedDigest."
    )
    next_tag_resolution_time: dt.datetime | None = Field(
        default=None, description="when a tag ref is next resolved; tag refs only."
    )
    next_signature_check_time: dt.datetime | None = Field(
        default=None,
        description="with spec.image.verification, while the digest's signature is refused "
        "or cannot be checked: when the controller checks it again (a few seconds after the "
        "first refusal, doubling up to a minute).",
    )
    next_maintenance_window: dt.datetime | None = Field(
        default=None,
        description="when the next maintenance window opens, while the rollout waits for one.",
    )
    node_count: int | None = Field(
        default=None, description="nodes in the pool.", json_schema_extra={"format": "int32"}
    )
    updated_count: int | None = Field(
        default=None,
        description="nodes running the target digest.",
        json_schema_extra={"format": "int32"},
    )
    updating_count: int | None = Field(
        default=None,
        description="nodes staging, staged or rebooting.",
        json_schema_extra={"format": "int32"},
    )
    degraded_count: int | None = Field(
        default=None, description="degraded nodes.", json_schema_extra={"format": "int32"}
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description='"UpToDate" and "Degraded"; kstatus\'s "Ready" (true exactly when '
        '"UpToDate" is), and "Reconciling" or "Stalled" while true (Flux reads them).',
        json_schema_extra=_CONDITIONS_EXTRA,
    )
    phase: PoolPhase | None = Field(
        default=None,
        description="the rollout's phase in one word, from the two conditions (kubectl get).",
    )
    image_short: str | None = Field(
        default=None,
        description="spec.image.ref as written, a digest cut to 12 hex digits (kubectl get).",
    )
    target_short: str | None = Field(
        default=None, description="the first 12 hex digits of targetDigest (kubectl get -o wide)."
    )
    current_domain: str | None = Field(
        default=None,
        description="with spec.rollout.topology, the failure domain whose nodes may take reboot "
        'slots now; "(unlabelled)" for the nodes without the topology label (kubectl get -o '
        "wide). Unset when no node is left to update.",
    )


class ObjectMeta(WireModel):
    """The parts of metav1.ObjectMeta the operator reads; everything else is kept as-is."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None
    deletion_timestamp: dt.datetime | None = None
    creation_timestamp: dt.datetime | None = None


class BootcNodePool(WireModel):
    """A group of nodes and the OS image they should run."""

    api_version: Literal["node.bootc.dev/v1alpha1"] = "node.bootc.dev/v1alpha1"
    kind: Literal["BootcNodePool"] = "BootcNodePool"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: BootcNodePoolSpec
    status: BootcNodePoolStatus | None = None


# --------------------------------------------------------------------- node


class SealedPullSecret(WireModel):
    """The pool's pull secret encrypted to one node's ``status.sealingKey`` (HPKE, RFC
    9180: X25519, HKDF-SHA256, ChaCha20-Poly1305; see ``bootc_operator.sealing``)."""

    key_id: str = Field(
        alias="keyID",
        min_length=1,
        max_length=64,
        description="the id of the node key it is sealed to (hex of the first 16 bytes of "
        "the SHA-256 of status.sealingKey).",
    )
    data: str = Field(
        min_length=1,
        # a Secret holds at most 1 MiB: base64 of that plus HPKE's 48 bytes
        max_length=1_400_000,
        description="base64 of the HPKE encapsulated key and ciphertext; opens only with "
        "the node's private key, for this node's name and pullSecretHash.",
    )


class BootcNodeSpec(WireModel):
    """The desired state of a node, written by the controller."""

    desired_image: str = Field(
        min_length=1,
        max_length=1024,
        description="the image the node should run, as a digest reference (repo@sha256:...).",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"self.matches(r'{DIGEST_REF_PATTERN}')",
                    "message": "desiredImage must be a digest reference like "
                    "registry.example.com/os@sha256:<64 hex digits> (no leading '-', "
                    "no whitespace or control characters)",
                }
            ]
        },
    )
    desired_image_state: DesiredImageState = Field(
        description='"Staged": stage without rebooting; '
        '"Booted": apply the staged image and reboot.'
    )
    pull_secret_ref: SecretReference | None = Field(
        default=None, description="credentials for the image, copied from the pool."
    )
    pull_secret_hash: str | None = Field(
        default=None,
        description="hash of the pull secret's uid and resourceVersion (never of its "
        "content); a change means re-fetch.",
    )
    sealed_pull_secret: SealedPullSecret | None = Field(
        default=None,
        description="the pull secret's .dockerconfigjson sealed to this node's "
        "status.sealingKey by the controller: daemons read no Secrets, and a node can open "
        "only its own.",
    )
    reboot_policy: RebootPolicy | None = Field(
        default=None,
        description="the pool's spec.disruption.rebootPolicy, copied by the controller: with "
        '"AllowSoftReboot" the daemon soft-reboots (userspace only) when the staged deployment '
        "is softRebootCapable; unset: RebootOnly.",
    )


class ImageInfo(WireModel):
    """One deployment of a host: an image and what bootc knows of it.

    The daemon writes it from ``wire.ImageInfo`` (the same fields, without pydantic)."""

    image: str = Field(description="the full image reference (repo@sha256:...).")
    image_digest: str = Field(description="the per-architecture manifest digest (sha256:...).")
    version: str | None = Field(default=None, description="the image version, if any.")
    timestamp: dt.datetime | None = Field(default=None, description="the image build time.")
    architecture: str | None = Field(default=None, description='e.g. "amd64".')
    soft_reboot_capable: bool | None = Field(
        default=None, description="a userspace-only restart can apply this deployment."
    )
    incompatible: bool | None = Field(
        default=None, description="local mutations (rpm-ostree layering) bootc cannot manage."
    )


class BootAssessment(WireModel):
    """Whether the current boot reached systemd's boot-complete.target.

    The daemon writes it from ``wire.BootAssessment`` (the same fields, without pydantic)."""

    state: BootAssessmentState = Field(
        description='"Pending": not yet; "Complete": reached; "Failed": the boot finished '
        'without reaching it (a required check failed); "Unknown": could not be read.'
    )
    message: str | None = Field(default=None, description="details, e.g. the failed units.")


class BootcNodeStatus(WireModel):
    """The observed state of a node, written by the daemon."""

    observed_generation: int | None = Field(
        default=None,
        description="the BootcNode generation this status is based on.",
        json_schema_extra={"format": "int64"},
    )
    booted: ImageInfo | None = Field(default=None, description="the booted deployment.")
    staged: ImageInfo | None = Field(
        default=None, description="the deployment staged for next boot."
    )
    rollback: ImageInfo | None = Field(default=None, description="the rollback deployment.")
    booted_short: str | None = Field(
        default=None,
        description="the first 12 hex digits of the booted image's digest as the pool targets "
        "it (the digest of the reference bootc switched to, else imageDigest); kubectl get.",
    )
    boot_assessment: BootAssessment | None = Field(
        default=None, description="the current boot's assessment (boot-complete.target)."
    )
    last_reboot_kind: RebootKind | None = Field(
        default=None,
        description='how the daemon last rebooted the node into an update: "Soft" (userspace '
        'only, systemctl soft-reboot) or "Full"; written with Idle=False/Rebooting.',
    )
    sealing_key: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9+/]{43}=$",
        description="the daemon's X25519 public key (base64 of the raw 32 bytes), made when "
        "the spec first names a pull secret; the controller seals the pull secret to it. "
        "The private key is in the daemon's memory only: a restarted daemon publishes a "
        "new one.",
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description='"Idle" and "Degraded"; kstatus\'s "Ready", and "Reconciling" or '
        '"Stalled" while true (Flux reads them).',
        json_schema_extra=_CONDITIONS_EXTRA,
    )


class BootcNode(WireModel):
    """One managed node; named after its Node. The controller writes spec, the daemon status."""

    api_version: Literal["node.bootc.dev/v1alpha1"] = "node.bootc.dev/v1alpha1"
    kind: Literal["BootcNode"] = "BootcNode"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: BootcNodeSpec
    status: BootcNodeStatus | None = None
