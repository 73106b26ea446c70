"""Shared Kubernetes API access for the controller and the daemon.

- :mod:`.resources` — :class:`Resource`, the (group, version, plural, namespaced)
  descriptor that addresses any kind, core or custom, plus the kinds this
  project uses (``NODES``, ``PODS``, ``SECRETS``, ``BOOTC_NODE_POOLS`` …).
- :mod:`.client` — :func:`load_api_client`: kubeconfig or in-cluster config
  into a ``kubernetes_asyncio`` ``ApiClient`` (the controller). Exported lazily:
  importing this package does not import ``kubernetes_asyncio`` (~70 MiB of
  generated models the daemon never uses).
- :mod:`.lite` — :func:`load_lite_client`: the same configuration into a small
  aiohttp :class:`LiteClient` (the daemon), with token-file reloading.
- :mod:`.rest` — raw JSON requests over any :class:`Api` client that return plain
  dicts (no model deserialization): :func:`request_json`, :func:`request_bytes`,
  :func:`open_stream` for watches, thin verbs (:func:`get_object`,
  :func:`list_objects`, :func:`create_object`, :func:`patch_object`,
  :func:`delete_object`) and :class:`ApiError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bootc_operator.kube.lite import ConfigError, LiteClient, load_lite_client
from bootc_operator.kube.resources import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    EVENTS,
    LEASES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    Resource,
)
from bootc_operator.kube.rest import (
    Api,
    ApiError,
    Obj,
    create_object,
    delete_object,
    get_object,
    list_objects,
    open_stream,
    patch_object,
    request_bytes,
    request_json,
)

if TYPE_CHECKING:
    from bootc_operator.kube.client import load_api_client


def __getattr__(name: str) -> Any:
    # load_api_client imports kubernetes_asyncio: only when someone asks for it.
    if name == "load_api_client":
        from bootc_operator.kube.client import load_api_client  # noqa: PLC0415

        return load_api_client
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BOOTC_NODES",
    "BOOTC_NODE_POOLS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "SECRETS",
    "Api",
    "ApiError",
    "ConfigError",
    "LiteClient",
    "Obj",
    "Resource",
    "create_object",
    "delete_object",
    "get_object",
    "list_objects",
    "load_api_client",
    "load_lite_client",
    "open_stream",
    "patch_object",
    "request_bytes",
    "request_json",
]
