"""Shared Kubernetes API access for the controller and the daemon.

- :mod:`.resources` — :class:`Resource`, the (group, version, plural, namespaced)
  descriptor that addresses any kind, core or custom, plus the kinds this
  project uses (``NODES``, ``PODS``, ``SECRETS``, ``BOOTC_NODE_POOLS`` …).
- :mod:`.client` — :func:`load_api_client`: kubeconfig or in-cluster config
  into a ``kubernetes_asyncio`` ``ApiClient``.
- :mod:`.rest` — raw JSON requests that return plain dicts (no model
  deserialization): :func:`request_json`, :func:`request_bytes`,
  :func:`open_stream` for watches, thin verbs (:func:`get_object`,
  :func:`list_objects`, :func:`create_object`, :func:`patch_object`,
  :func:`delete_object`) and :class:`ApiError`.
"""

from bootc_operator.kube.client import load_api_client
from bootc_operator.kube.resources import (
    BOOTC_NODE_POOLS,
    BOOTC_NODES,
    EVENTS,
    LEASES,
    NODES,
    PODS,
    SECRETS,
    Resource,
)
from bootc_operator.kube.rest import (
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

__all__ = [
    "BOOTC_NODES",
    "BOOTC_NODE_POOLS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "SECRETS",
    "ApiError",
    "Obj",
    "Resource",
    "create_object",
    "delete_object",
    "get_object",
    "list_objects",
    "load_api_client",
    "open_stream",
    "patch_object",
    "request_bytes",
    "request_json",
]
