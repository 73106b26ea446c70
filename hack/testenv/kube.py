"""Kubernetes API clients for tests and tools: an async client from a kubeconfig, and
a kubeconfig that authenticates with a bearer token (a ServiceAccount's)."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import new_client_from_config


async def api_client(kubeconfig: Path | str) -> ApiClient:
    """A kubernetes_asyncio ``ApiClient`` for ``kubeconfig``'s current context.

    The caller closes it (``await client.close()`` or ``async with``).
    """
    client: ApiClient = await new_client_from_config(
        config_file=str(kubeconfig), persist_config=False
    )
    return client


def token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path, user: str = "token") -> Path:
    """``admin_kubeconfig``'s cluster, authenticating as ``user`` with ``token``; written
    to ``path`` (mode 0600)."""
    doc = yaml.safe_load(admin_kubeconfig.read_text())
    doc["users"] = [{"name": user, "user": {"token": token}}]
    for ctx in doc["contexts"]:
        ctx["context"]["user"] = user
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path
