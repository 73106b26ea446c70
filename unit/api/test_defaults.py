"""Defaults live once (``api.defaults``): the CRD's equal the models', and the runtime
reads an absent field as the models' default.

Every ``default:`` of the pool CRD's spec is in :data:`RUNTIME` with how the runtime
reads that field when it is absent, so a new default cannot be added to a model
without deciding (and testing) what the controller and ``kubectl bootc`` make of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from bootc_operator.api import defaults
from bootc_operator.api.crdgen import all_crds
from bootc_operator.api.v1alpha1 import (
    BootcNodePoolSpec,
    CanarySpec,
    DisruptionSpec,
    HealthSpec,
    MaintenanceWindow,
    OrderSpec,
    PublicKeySecretReference,
    RolloutSpec,
    WireModel,
)
from bootc_operator.policy.poolspec import PoolPolicy, check_pool
from bootc_operator.policy.windows import parse_windows
from bootc_operator.reconcilers.loops.signatures import collect_keys
from bootc_operator.reconcilers.watchers.pullsecrets import WatchedSecret

DIGEST = "sha256:" + "a" * 64


def policy(rollout: dict[str, Any] | None = None, **spec: Any) -> PoolPolicy:
    body: dict[str, Any] = {
        "nodeSelector": {"matchLabels": {"a": "b"}},
        "image": {"ref": f"quay.io/x/os@{DIGEST}"},
        **({"rollout": rollout} if rollout is not None else {}),
        **spec,
    }
    return check_pool({"metadata": {"name": "p"}, "spec": body})


def crd_defaults(schema: dict[str, Any], path: str = "spec") -> Iterator[tuple[str, Any]]:
    """(path, default) of every ``default:`` in a CRD schema, lists as ``[]``."""
    if "default" in schema:
        yield path, schema["default"]
    for name, sub in (schema.get("properties") or {}).items():
        yield from crd_defaults(sub, f"{path}.{name}")
    if "items" in schema:
        yield from crd_defaults(schema["items"], f"{path}[]")


def pool_spec_schema() -> dict[str, Any]:
    crds = {d["spec"]["names"]["kind"]: d for d in all_crds().values()}
    version = crds["BootcNodePool"]["spec"]["versions"][0]
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def model_default(model: type[BaseModel], field: str) -> Any:
    info = model.model_fields[field]
    value = info.get_default(call_default_factory=True)
    return value.to_wire() if isinstance(value, WireModel) else value


def key_read_without_key() -> str:
    """The data key ``collect_keys`` reads from a key Secret ref that names none."""
    secret = WatchedSecret(secret={"data": {}}, pending=False)
    ref = {"name": "k", "namespace": "ns"}
    problem = collect_keys({"publicKeySecretRefs": [ref]}, lambda _: secret).problem
    prefix = "the key Secret ns/k key "
    assert problem.startswith(prefix), problem
    return problem[len(prefix) :].partition(":")[0]


#: the model of each object-valued default
MODELS: dict[str, type[WireModel]] = {
    "spec.rollout": RolloutSpec,
    "spec.disruption": DisruptionSpec,
}
WINDOW = {"start": "22:00", "duration": "4h"}

#: CRD path -> (the model's default, the runtime's reading of the absent field)
RUNTIME: dict[str, tuple[Any, Callable[[], Any]]] = {
    "spec.rollout": (
        model_default(BootcNodePoolSpec, "rollout"),
        lambda: RolloutSpec.model_validate({}).to_wire(),  # absent reads as {}: below
    ),
    "spec.disruption": (
        model_default(BootcNodePoolSpec, "disruption"),
        lambda: DisruptionSpec.model_validate({}).to_wire(),
    ),
    "spec.rollout.maxUnavailable": (
        model_default(RolloutSpec, "max_unavailable"),
        lambda: policy({}).max_unavailable,
    ),
    "spec.rollout.canary.nodes": (
        model_default(CanarySpec, "nodes"),
        lambda: policy({"canary": {}}).canary_nodes,
    ),
    "spec.rollout.order.by": (
        model_default(OrderSpec, "by"),
        lambda: (policy({"order": {}}).order or pytest.fail("no order")).by,
    ),
    "spec.rollout.maintenanceWindows[].timeZone": (
        model_default(MaintenanceWindow, "time_zone"),
        lambda: parse_windows([WINDOW])[0][0].zone.key,
    ),
    "spec.disruption.rebootPolicy": (
        model_default(DisruptionSpec, "reboot_policy"),
        # unset and RebootOnly read alike: no soft reboots
        lambda: "RebootOnly" if policy().reboot_policy is None else policy().reboot_policy,
    ),
    "spec.health.onFailure": (
        model_default(HealthSpec, "on_failure"),
        lambda: "Rollback" if (policy(health={}).health or pytest.fail("")).rollback else "Halt",
    ),
    "spec.image.verification.publicKeySecretRefs[].key": (
        PublicKeySecretReference(name="k", namespace="ns").key,
        key_read_without_key,
    ),
}


def test_every_crd_default_is_the_models_and_the_runtimes() -> None:
    found = dict(crd_defaults(pool_spec_schema()))
    assert set(found) == set(RUNTIME), "a new CRD default: say how the runtime reads it"
    for path, written in found.items():
        model, runtime = RUNTIME[path]
        # an object's default: the server then fills in its fields' own
        crd = MODELS[path].model_validate(written).to_wire() if path in MODELS else written
        assert crd == model, path
        assert runtime() == model, path


def test_an_absent_section_reads_as_its_default() -> None:
    assert policy() == policy({}) == policy({}, disruption={})
    assert policy() == policy({}, disruption={"rebootPolicy": defaults.REBOOT_POLICY})
    health = policy(health={}).health
    explicit = policy(health={"onFailure": defaults.HEALTH_ON_FAILURE}).health
    assert health == explicit and health is not None


def test_what_unset_means_is_the_documented_value() -> None:
    """No CRD default (the object keeps the field absent, as the Go operator's do): the
    runtime's reading is the value the model's description documents."""
    unhealthy = RolloutSpec.model_fields["max_unhealthy"].description or ""
    assert f"Unset: {defaults.MAX_UNHEALTHY}." in unhealthy
    assert policy().budgets(50).max_unhealthy == defaults.MAX_UNHEALTHY
    timeout = HealthSpec.model_fields["timeout_seconds"].description or ""
    assert f"Unset: {defaults.HEALTH_TIMEOUT_SECONDS}." in timeout
    health = policy(health={}).health
    assert health is not None and health.timeout_seconds == defaults.HEALTH_TIMEOUT_SECONDS
