"""Load API access configuration into a ``kubernetes_asyncio`` ``ApiClient``.

``load_api_client(kubeconfig)``: a kubeconfig file when a path is given, the
in-cluster service account when it is empty and we run in a Pod, else the
default kubeconfig (``$KUBECONFIG`` / ``~/.kube/config``). The caller owns the
client and must ``await client.close()``.

Every request says which process sent it: ``user_agent()``,
``bootc-operator/VERSION (POD; pid N)`` (``$POD_NAME``, else the host name), so
an apiserver audit log tells two controller replicas apart.

kubernetes_asyncio is imported through ``kube.slim``: its ~1,000 generated API
and model classes are never loaded (the requests' bodies are plain dicts).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from bootc_operator import __version__
from bootc_operator.kube.lite import DEFAULT_MAX_CONNECTIONS, env_proxy
from bootc_operator.kube.slim import (
    ApiClient,
    Configuration,
    load_incluster_config,
    load_kube_config,
)

__all__ = ["DEFAULT_MAX_CONNECTIONS", "env_proxy", "load_api_client", "user_agent"]


def user_agent() -> str:
    """``bootc-operator/VERSION (POD; pid N)``: this process, as the apiserver sees it."""
    who = os.environ.get("POD_NAME") or socket.gethostname()
    return f"bootc-operator/{__version__} ({who}; pid {os.getpid()})"


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
    if not cfg.proxy:
        cfg.proxy = env_proxy(cfg.host)
    api = ApiClient(configuration=cfg)
    api.user_agent = user_agent()
    _no_per_request_env_lookups(api)
    return api


def _no_per_request_env_lookups(api: ApiClient) -> None:
    """Stop aiohttp from reading the environment and ``~/.netrc`` on every request.

    kubernetes_asyncio opens its session with ``trust_env=True``, so aiohttp looks
    up proxy variables and ``~/.netrc`` credentials for *each* request, in the
    default thread pool (two thread hops per request). That more than doubled
    the client's CPU per request and queued requests behind the small thread
    pool (docs/performance.md has the figures). The
    environment does not change while we run: ``load_api_client`` resolves the
    proxy once (``env_proxy``) and kubeconfig credentials never come from netrc.
    """
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False
