"""Kubernetes API clients for tests and tools: an async client from a kubeconfig."""

from __future__ import annotations

from pathlib import Path

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
