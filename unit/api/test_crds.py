"""The committed CRDs are exactly what the generator produces, and structurally sound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bootc_operator.api.crdgen import all_crds, render

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crd"


def test_committed_crds_are_fresh() -> None:
    for name, doc in all_crds().items():
        path = CRD_DIR / name
        assert path.exists(), f"{path} missing: run hack/gen-crds"
        assert path.read_text() == render(doc), f"{path} is stale: run hack/gen-crds"


def _walk(schema: dict[str, Any], path: str = "") -> list[str]:
    """Structural-schema violations: missing types, $ref, nullable unions."""
    problems = []
    if "$ref" in schema or "$defs" in schema:
        problems.append(f"{path}: $ref")
    if "anyOf" in schema and not schema.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: anyOf")
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: no type")
    for key, sub in schema.get("properties", {}).items():
        problems += _walk(sub, f"{path}.{key}")
    if "items" in schema:
        problems += _walk(schema["items"], f"{path}[]")
    return problems


def test_schemas_are_structural_and_carry_the_api_contract() -> None:
    crds = {d["spec"]["names"]["kind"]: d for d in all_crds().values()}
    for kind, doc in crds.items():
        version = doc["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        assert _walk(schema) == [], kind
        assert doc["spec"]["scope"] == "Cluster"
        assert doc["spec"]["group"] == "node.bootc.dev"
        assert version["subresources"] == {"status": {}}
        assert doc["spec"]["names"]["categories"] == ["bootc"]
        conds = schema["properties"]["status"]["properties"]["conditions"]
        assert conds["x-kubernetes-list-type"] == "map"
        assert conds["x-kubernetes-list-map-keys"] == ["type"]
    pool = crds["BootcNodePool"]
    assert pool["spec"]["names"]["shortNames"] == ["bnp"]
    spec = pool["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    mu = spec["properties"]["rollout"]["properties"]["maxUnavailable"]
    assert mu["x-kubernetes-int-or-string"] is True and mu["default"] == 1
    assert mu["x-kubernetes-validations"]
    policy = spec["properties"]["disruption"]["properties"]["rebootPolicy"]
    assert policy["enum"] == ["RebootOnly", "AllowSoftReboot"]
    assert policy["default"] == "RebootOnly"
    assert sorted(spec["required"]) == ["image", "nodeSelector"]
    node = crds["BootcNode"]
    assert node["spec"]["names"]["shortNames"] == ["bn"]
    nspec = node["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert nspec["properties"]["desiredImageState"]["enum"] == ["Staged", "Booted"]
    assert nspec["properties"]["desiredImage"]["x-kubernetes-validations"]
    columns = [c["name"] for c in pool["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert {"Image", "Nodes", "Updated", "Updating", "Degraded", "UpToDate", "Age"} <= set(columns)


def test_committed_files_parse_as_single_yaml_documents() -> None:
    for path in CRD_DIR.glob("*.yaml"):
        if path.name == "kustomization.yaml":  # lists the CRDs for kustomize (manifests/)
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1 and docs[0]["kind"] == "CustomResourceDefinition"
