"""Reading the operator's ``/metrics`` as a Prometheus on a cluster would: HTTPS and a token.

Both components serve ``/metrics`` over HTTPS (a self-signed certificate by
default) to bearer tokens allowed ``get`` on it (``manifests/rbac/metrics.yaml``).
What a scraper needs, one way for the e2e tier, the simulation and its Prometheus:

- ``reader_token(kubectl, namespace, name)``: a ServiceAccount ``name`` in
  ``namespace`` bound to the ClusterRole ``bootc-operator-metrics-reader`` (which
  must be installed: ``manifests/rbac``), and a token of it (TokenRequest, one day);
  ``account_token(kubectl, namespace, name)`` the same without the binding (a
  token the API server authenticates but that may not read metrics);
  ``kubectl`` is a ``ControlPlane.kubectl``;
- ``scrape(url, token)``: one GET, the status and body (``urllib``, the
  self-signed certificate accepted, as the ServiceMonitors' ``insecureSkipVerify``
  does); ``await fetch(url, token)`` the same from a test's event loop.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Final

READER_ROLE: Final = "bootc-operator-metrics-reader"
TOKEN_DURATION: Final = "24h"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def account_token(kubectl: Kubectl, namespace: str, name: str) -> str:
    """A token of ServiceAccount ``namespace/name`` (created, with the namespace, if missing)."""
    kubectl("create", "namespace", namespace, check=False)
    kubectl("-n", namespace, "create", "serviceaccount", name, check=False)
    res = kubectl("-n", namespace, "create", "token", name, f"--duration={TOKEN_DURATION}")
    return str(res.stdout).strip()


def reader_token(kubectl: Kubectl, namespace: str, name: str) -> str:
    """A token of ServiceAccount ``namespace/name``, bound to the metrics-reader ClusterRole."""
    token = account_token(kubectl, namespace, name)
    kubectl(
        "create",
        "clusterrolebinding",
        f"{name}-{namespace}-metrics-reader",
        f"--clusterrole={READER_ROLE}",
        f"--serviceaccount={namespace}:{name}",
        check=False,
    )
    return token


def insecure_tls() -> ssl.SSLContext:
    """A client context that accepts the components' self-signed certificates."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def scrape(url: str, token: str | None = None, timeout: float = 10.0) -> tuple[int, str]:
    """GET ``url`` with ``token`` as Bearer (if any): (HTTP status, body)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    context = insecure_tls() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


async def fetch(url: str, token: str | None = None) -> tuple[int, str]:
    """``scrape`` from an event loop (in a thread)."""
    return await asyncio.to_thread(scrape, url, token)
