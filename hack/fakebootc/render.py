"""The ``bootc status`` document of a simulated host, in bootc's output formats.

``host_document(state)`` builds the ``org.containers.bootc/v1`` ``BootcHost`` object
the way bootc's serde types serialise it: every ``Option`` field present with an
explicit ``null``; ``signature`` omitted when there is none (``bootc switch``
without ``--enforce-container-sigpolicy``); ``otherDeployments`` omitted when empty;
``metadata`` just ``{"name": "host"}``. ``spec.image`` is the staged deployment's
image, else the booted one's; ``spec.bootOrder`` is ``rollback`` while a rollback is
queued; ``status.type`` is ``bootcHost`` only when the booted entry has an image.
``softRebootCapable`` is computed per entry as bootc does for every deployment (staged
and rollback alike): true when it has the booted deployment's kernel
(``State.soft_reboot_capable``); never for the booted entry itself.

Sharp edges reproduced on purpose: an ``incompatible`` deployment (rpm-ostree local
layering) has ``image: null`` (bootc cannot describe it) so such a host reports
``type: null``; a host that is not bootc (or a ``bootc`` run with ``container`` in
its environment) prints the all-null default document (``booted: null``);
composefs-backed entries have ``ostree: null`` and a ``composefs`` object.

``canonical_json`` is RFC 8785-style (sorted keys, no whitespace, UTF-8, no trailing
newline) as bootc's ``--format=json`` writes it. ``to_yaml`` and ``human_readable``
cover the other formats well enough for a person looking at a simulated host.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hack.fakebootc.state import Deployment, State

API_VERSION = "org.containers.bootc/v1"
KIND = "BootcHost"


def default_document() -> dict[str, Any]:
    """What bootc prints on a system it does not manage (``Host::default()``)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "host"},
        "spec": {"bootOrder": "default", "image": None},
        "status": {
            "booted": None,
            "readOnly": False,
            "rollback": None,
            "rollbackQueued": False,
            "staged": None,
            "type": None,
            "usrOverlay": None,
        },
    }


def _image_reference(dep: Deployment) -> dict[str, Any]:
    ref: dict[str, Any] = {"image": dep.image, "transport": dep.transport}
    if dep.signature is not None:
        ref["signature"] = dep.signature
    return ref


def _entry(dep: Deployment, *, backend: str, capable: bool, incompatible: bool) -> dict[str, Any]:
    image: dict[str, Any] | None = None
    if not incompatible:
        image = {
            "architecture": dep.architecture,
            "image": _image_reference(dep),
            "imageDigest": dep.digest,
            "timestamp": dep.timestamp,
            "version": dep.version,
        }
    entry: dict[str, Any] = {
        "cachedUpdate": None,
        "composefs": None,
        "downloadOnly": dep.download_only,
        "image": image,
        "incompatible": incompatible,
        "ostree": None,
        "pinned": dep.pinned,
        "softRebootCapable": capable,
        "store": None,
    }
    if backend == "composefs":
        verity = hashlib.sha512(f"{dep.checksum}.{dep.deploy_serial}".encode()).hexdigest()
        entry["composefs"] = {
            "bootDigest": hashlib.sha256(dep.digest.encode()).hexdigest(),
            "bootType": "bls",
            "bootloader": "grub",
            "missingVerityAllowed": False,
            "verity": verity,
        }
    else:
        entry["store"] = "ostreeContainer"
        entry["ostree"] = {
            "checksum": dep.checksum,
            "deploySerial": dep.deploy_serial,
            "stateroot": dep.stateroot,
        }
    return entry


def host_document(state: State, *, in_container: bool = False) -> dict[str, Any]:
    """The full v1 status document of ``state`` (faults ``not_bootc``/``incompatible`` applied)."""
    if state.faults.not_bootc or in_container or state.booted is None:
        return default_document()
    backend = state.config.backend
    booted_incompatible = state.booted.incompatible or state.faults.incompatible

    def other(dep: Deployment | None) -> dict[str, Any] | None:
        if dep is None:
            return None
        capable = not booted_incompatible and state.soft_reboot_capable(dep)
        return _entry(dep, backend=backend, capable=capable, incompatible=dep.incompatible)

    staged, rollback = other(state.staged), other(state.rollback)
    booted = _entry(state.booted, backend=backend, capable=False, incompatible=booted_incompatible)
    spec_source = staged if staged is not None else booted
    spec_image = spec_source["image"]["image"] if spec_source["image"] else None
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "host"},
        "spec": {
            "bootOrder": "rollback" if state.rollback_queued else "default",
            "image": spec_image,
        },
        "status": {
            "booted": booted,
            # the physical root is not read-only media; no `bootc usr-overlay` active
            "readOnly": False,
            "rollback": rollback,
            "rollbackQueued": state.rollback_queued,
            "staged": staged,
            "type": "bootcHost" if booted["image"] is not None else None,
            "usrOverlay": None,
        },
    }


def canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    plain = text and not any(c in text for c in ":#{}[],&*?|<>=!%@`'\"\n") and text.strip() == text
    if plain and text.lower() not in ("null", "true", "false", "~", "yes", "no"):
        try:
            float(text)
        except ValueError:
            return text
    return json.dumps(text)


def to_yaml(doc: Any, indent: int = 0) -> str:
    """Block-style YAML of plain JSON data (what bootc prints when stdout is not a tty)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if (isinstance(value, dict) and value) or (isinstance(value, list) and value):
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(value, indent + 1))
            else:
                empty = (
                    "{}" if isinstance(value, dict) else "[]" if isinstance(value, list) else None
                )
                lines.append(f"{pad}{key}: {empty or _yaml_scalar(value)}")
    elif isinstance(doc, list):
        for item in doc:
            body = to_yaml(item, indent + 1).lstrip()
            lines.append(f"{pad}- {body}")
    else:
        lines.append(f"{pad}{_yaml_scalar(doc)}")
    return "\n".join(lines)


def human_readable(doc: dict[str, Any]) -> str:
    """A short rendering in the spirit of ``bootc status`` on a terminal."""
    status = doc.get("status") or {}
    if status.get("booted") is None:
        return "System is not deployed via bootc."
    out: list[str] = []
    for slot, title in (
        ("staged", "  Staged image"),
        ("booted", "● Booted image"),
        ("rollback", "  Rollback image"),
    ):
        entry = status.get(slot)
        if entry is None:
            continue
        if out:
            out.append("")
        image = entry.get("image")
        if image is None:
            out.append(
                f"{title.replace('image', 'ostree')}: (not a container image; "
                f"incompatible={str(entry.get('incompatible')).lower()})"
            )
            continue
        out.append(f"{title}: {image['image']['image']}")
        out.append(f"{'Digest':>{len(title)}}: {image['imageDigest']} ({image['architecture']})")
        if image.get("version"):
            out.append(f"{'Version':>{len(title)}}: {image['version']}")
    if status.get("rollbackQueued"):
        out.append("")
        out.append("Rollback queued for next boot.")
    return "\n".join(out)
