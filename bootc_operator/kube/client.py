"""Load API access configuration into a ``kubernetes_asyncio`` ``ApiClient``.

``load_api_client(kubeconfig)``: a kubeconfig file when a path is given, the
in-cluster service account when it is empty and we run in a Pod, else the
default kubeconfig (``$KUBECONFIG`` / ``~/.kube/config``). The caller owns the
client and must ``await client.close()``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import load_incluster_config, load_kube_config

# Watches hold a connection each for their whole life; leave room for requests.
DEFAULT_MAX_CONNECTIONS = 100


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(
        os.environ.get("KUBERNETES_SERVICE_PORT")
    )


async def load_api_client(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> ApiClient:
    """A new ``ApiClient`` for ``kubeconfig`` (see the module docstring for the fallbacks)."""
    cfg = Configuration()
    if kubeconfig:
        await load_kube_config(
            config_file=str(kubeconfig),
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    elif _in_cluster():
        load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        await load_kube_config(context=context, client_configuration=cfg, persist_config=False)
    cfg.connection_pool_maxsize = max_connections
    return ApiClient(configuration=cfg)
