"""Generate the CustomResourceDefinitions from the pydantic models.

One source of truth: the models in ``v1alpha1`` carry types, descriptions,
enums, bounds, defaults and Kubernetes extensions; this module rewrites
pydantic's JSON schema into a *structural* OpenAPI v3 schema (no ``$ref``, no
``anyOf`` except for int-or-string, no nulls) and wraps it in a CRD with
printer columns, short names and categories.

``python -m bootc_operator.api.crdgen [--check] OUTDIR`` writes (or checks)
``OUTDIR/node.bootc.dev_<plural>.yaml``; ``hack/gen-crds`` calls it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from bootc_operator.api import constants as c
from bootc_operator.api.v1alpha1 import BootcNode, BootcNodePool

_DROP_KEYS = frozenset({"title"})
_BOOTC_REQUIRED = "x-bootc-required"


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Return a structural copy of ``schema`` with refs inlined and nullables collapsed."""
    out = {k: v for k, v in schema.items() if k not in _DROP_KEYS}

    if "$ref" in out:
        target = defs[out.pop("$ref").rsplit("/", 1)[-1]]
        # Keys beside a $ref (description, default, extensions) override the target's.
        return _resolve({**target, **out}, defs)

    if "anyOf" in out:
        options = [o for o in out.pop("anyOf") if o.get("type") != "null"]
        if out.get("default", "x") is None:
            del out["default"]
        if len(options) == 1:
            return _resolve({**options[0], **out}, defs)
        types = sorted(o.get("type", "") for o in options)
        if types == ["integer", "string"]:
            out["x-kubernetes-int-or-string"] = True
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            return out
        raise ValueError(f"cannot express union {options!r} structurally")

    if out.get("default", "x") is None:
        del out["default"]

    kind = out.get("type")
    if kind == "object" and "properties" in out:
        required = list(out.get("required", []))
        props = {}
        for name, prop in out["properties"].items():
            if prop.get(_BOOTC_REQUIRED):
                required.append(name)
            props[name] = _resolve({k: v for k, v in prop.items() if k != _BOOTC_REQUIRED}, defs)
        out["properties"] = props
        if required:
            out["required"] = sorted(set(required))
        out.pop("additionalProperties", None)
    elif kind == "object" and isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _resolve(out["additionalProperties"], defs)
    elif kind == "array":
        out["items"] = _resolve(out["items"], defs)
    elif "enum" in out and "type" not in out:
        out["type"] = "string"
    if "const" in out:
        # apiVersion/kind: the server fills them; the schema only needs the type.
        out.pop("const")
        out.pop("default", None)
        out.pop("enum", None)
    return out


def _schema_for(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True)
    defs = raw.pop("$defs", {})
    schema = _resolve(raw, defs)
    props = schema["properties"]
    props["metadata"] = {"type": "object"}
    props["apiVersion"] = {"type": "string", "description": "APIVersion of this object."}
    props["kind"] = {"type": "string", "description": "Kind of this object."}
    schema["required"] = ["spec"]
    # The API server fills this in until the first status write, in every answer (the
    # create's too): kstatus (Flux) then reads generation 1, observed 0, InProgress,
    # where an object without a status would be Current at once (api/kstatus.py).
    props["status"]["default"] = {"observedGeneration": 0}
    return schema


def _condition_column(cond: str, field: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "jsonPath": f'.status.conditions[?(@.type=="{cond}")].{field}',
    }


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

POOL_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Image", "type": "string", "jsonPath": ".status.imageShort"},
    {"name": "Target", "type": "string", "jsonPath": ".status.targetShort", "priority": 1},
    {"name": "Domain", "type": "string", "jsonPath": ".status.currentDomain", "priority": 1},
    {"name": "Nodes", "type": "integer", "jsonPath": ".status.nodeCount"},
    {"name": "Updated", "type": "integer", "jsonPath": ".status.updatedCount"},
    {"name": "Updating", "type": "integer", "jsonPath": ".status.updatingCount"},
    {"name": "Degraded", "type": "integer", "jsonPath": ".status.degradedCount"},
    _condition_column(c.COND_UP_TO_DATE, "status", "UpToDate"),
    _condition_column(c.COND_UP_TO_DATE, "message", "Progress") | {"priority": 1},
    _AGE,
]

# Label keys contain dots; the server's JSONPath takes them escaped.
_DESIRED_LABEL_PATH = ".metadata.labels." + c.DESIRED_DIGEST_LABEL.replace(".", "\\.")

NODE_COLUMNS: list[dict[str, Any]] = [
    {"name": "Pool", "type": "string", "jsonPath": ".metadata.ownerReferences[0].name"},
    {"name": "Desired", "type": "string", "jsonPath": _DESIRED_LABEL_PATH},
    {"name": "Booted", "type": "string", "jsonPath": ".status.bootedShort"},
    _condition_column(c.COND_IDLE, "reason", "State"),
    _condition_column(c.COND_DEGRADED, "status", "Degraded"),
    {"name": "Want", "type": "string", "jsonPath": ".spec.desiredImageState", "priority": 1},
    {"name": "Image", "type": "string", "jsonPath": ".spec.desiredImage", "priority": 1},
    _condition_column(c.COND_DEGRADED, "message", "Message") | {"priority": 1},
    _AGE,
]


def crd(
    model: type[BaseModel], kind: str, plural: str, short: str, columns: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{c.GROUP}"},
        "spec": {
            "group": c.GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["bootc"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": c.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": _schema_for(model)},
                }
            ],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name → CRD document, for every kind of the API."""
    return {
        f"{c.GROUP}_{c.POOL_PLURAL}.yaml": crd(
            BootcNodePool, c.POOL_KIND, c.POOL_PLURAL, "bnp", POOL_COLUMNS
        ),
        f"{c.GROUP}_{c.NODE_PLURAL}.yaml": crd(
            BootcNode, c.NODE_KIND, c.NODE_PLURAL, "bn", NODE_COLUMNS
        ),
    }


HEADER = "# Generated by hack/gen-crds from bootc_operator/api/v1alpha1.py. Do not edit.\n"


def render(doc: dict[str, Any]) -> str:
    return HEADER + "---\n" + yaml.safe_dump(doc, sort_keys=True, width=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--check", action="store_true", help="fail if files are stale")
    args = parser.parse_args(argv)
    stale = []
    for name, doc in all_crds().items():
        path = args.outdir / name
        text = render(doc)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"stale CRDs (run hack/gen-crds): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
