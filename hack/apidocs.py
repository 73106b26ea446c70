"""docs/api.md, the field reference, rendered from the CRDs in manifests/crd.

Every field of both kinds, its type, default and allowed values, and the description
the CRD carries (which comes from the pydantic models, so the reference says what
``kubectl explain`` says). ``hack/gen-crds`` writes it after the CRDs;
``python -m hack.apidocs --check`` and a unit test fail when it is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from hack.generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "manifests" / "crd"
API_DOC = ROOT / "docs" / "api.md"

HEADER = """\
# API reference

[README](../README.md) · [the user guide](../README.md#the-user-guide)

Generated from `manifests/crd` by `hack/gen-crds` (`python -m hack.apidocs`); do not
edit. The same descriptions are what `kubectl explain bootcnodepool.spec.rollout`
prints. What the fields do together: [How a rollout works](rollout.md),
[Rollout policies](policies.md), [Health gate](health.md),
[Observing a rollout](observing.md).
"""


def _type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = str(schema.get("type", ""))
    if kind == "array":
        return "[]" + _type(schema.get("items", {}))
    if kind == "object" and "additionalProperties" in schema:
        return "map[string]" + _type(schema["additionalProperties"])
    return kind


def _notes(schema: dict[str, Any]) -> str:
    notes = []
    if "enum" in schema:
        notes.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    if "default" in schema and schema["default"] not in ({}, []):
        notes.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(notes)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(schema: dict[str, Any], path: str, required: set[str]) -> list[str]:
    rows = []
    for name, child in (schema.get("properties") or {}).items():
        field = f"{path}.{name}"
        description = child.get("description", "")
        notes = _notes(child)
        if notes:
            description = f"{description} ({notes})" if description else notes
        mark = " (required)" if name in required else ""
        rows.append(f"| `{field}`{mark} | {_type(child)} | {_cell(description)} |")
        inner = child.get("items", child) if child.get("type") == "array" else child
        suffix = "[]" if child.get("type") == "array" else ""
        rows += _rows(inner, field + suffix, set(inner.get("required", [])))
    return rows


def render_kind(crd: dict[str, Any]) -> str:
    """One kind's section: its printer columns, then a table per top-level field."""
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    group = crd["spec"]["group"]
    schema = version["schema"]["openAPIV3Schema"]
    short = ", ".join(f"`{s}`" for s in names.get("shortNames", []))
    lines = [
        f"## {names['kind']}",
        "",
        f"`{group}/{version['name']}`, {crd['spec']['scope']}; `kubectl get {names['plural']}`"
        + (f" (short: {short})" if short else "")
        + ".",
    ]
    if schema.get("description"):
        lines += ["", _cell(schema["description"])]
    columns = version.get("additionalPrinterColumns", [])
    if columns:
        lines += ["", "| column | from |", "|---|---|"]
        for column in columns:
            wide = " (`-o wide`)" if column.get("priority", 0) > 0 else ""
            lines.append(f"| {column['name']}{wide} | `{column['jsonPath']}` |")
    for top in ("spec", "status"):
        part = schema["properties"].get(top)
        if part is None:
            continue
        lines += ["", f"### {names['kind']} {top}", ""]
        if part.get("description"):
            lines += [_cell(part["description"]), ""]
        lines += ["| field | type | description |", "|---|---|---|"]
        lines += _rows(part, top, set(part.get("required", [])))
    return "\n".join(lines) + "\n"


def render(crds: list[dict[str, Any]]) -> str:
    """docs/api.md for CRDS (pools first, then by kind)."""
    ordered = sorted(crds, key=lambda c: (c["spec"]["names"]["kind"] != "BootcNodePool", c))
    return HEADER + "".join("\n" + render_kind(c) for c in ordered)


def committed_crds() -> list[dict[str, Any]]:
    return [
        yaml.safe_load(path.read_text())
        for path in sorted(CRD_DIR.glob("*.yaml"))
        if path.name != "kustomization.yaml"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.apidocs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when docs/api.md is stale")
    args = parser.parse_args(argv)
    text = render(committed_crds())
    return write_or_check(API_DOC, text, check=args.check, regenerate="hack/gen-crds")


if __name__ == "__main__":
    sys.exit(main())
