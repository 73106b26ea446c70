"""Small helpers every e2e module may use (one of each; fixtures are in ``e2e/conftest.py``).

- ``unique_name``: a DNS-1123 name unique within the session;
- ``wait_for`` (re-exported from ``hack.testenv.waiting``): poll with a deadline;
- ``digest(n)`` / ``image(n)``: distinct, well-formed digests and refs of a fake repository;
- ``condition(obj, type)``: an object's status condition of that type (``{}`` if none);
- ``UNWRITTEN_STATUS``: the status the API server shows before anyone wrote one (the
  CRDs' default: kstatus reads "generation not observed yet");
- ``ensure_namespace(api, name)``: create a namespace unless it exists;
- ``push(registry, ref, image)``: push an image (or one made from a content string) to
  a kit registry (``hack.testenv.registry``), logging in when it has auth;
- ``run_ok(*argv)``: run a command, assert it succeeded (its output in the message),
  return its stdout.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootc_operator.kube import ApiError
from bootc_operator.kube.rest import request_json
from bootc_operator.registry import RegistryClient
from hack.testenv.push import Image, make_image, push_image
from hack.testenv.registry import Registry
from hack.testenv.waiting import wait_for

__all__ = [
    "REPO",
    "UNWRITTEN_STATUS",
    "condition",
    "digest",
    "ensure_namespace",
    "image",
    "push",
    "run_ok",
    "unique_name",
    "wait_for",
]

REPO = "registry.example.com/os"
UNWRITTEN_STATUS = {"observedGeneration": 0}


def unique_name(prefix: str) -> str:
    """A DNS-1123 name unique within the session (``prefix-1a2b3c4d``)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def digest(n: int) -> str:
    """The ``n``-th fake digest (``sha256:00…0n``)."""
    return "sha256:" + f"{n:064x}"


def image(n: int) -> str:
    """``registry.example.com/os@`` the ``n``-th fake digest."""
    return f"{REPO}@{digest(n)}"


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    """A copy of ``obj``'s status condition of type ``ctype``; ``{}`` when it has none."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


async def ensure_namespace(api: ApiClient, name: str) -> None:
    """Create namespace ``name``; one that exists already is fine."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        await request_json(api, "POST", "/api/v1/namespaces", body=body)
    except ApiError as err:
        if err.status != 409:
            raise


async def push(registry: Registry, ref: str, content: Image | str, **make: Any) -> str:
    """Push ``content`` (an ``Image``, or ``make_image(content, **make)`` for a string) as
    ``ref``; returns the manifest digest."""
    image = make_image(content, **make) if isinstance(content, str) else content
    creds = registry.dockerconfigjson() if registry.auth else None
    async with RegistryClient(registry.options()) as client:
        return await push_image(client, ref, image, dockerconfigjson=creds)


def run_ok(
    *argv: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> str:
    """ARGV's stdout; an assertion error with its exit code and output if it failed."""
    res = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert res.returncode == 0, f"{argv} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout
