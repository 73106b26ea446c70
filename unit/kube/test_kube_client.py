"""The API client: no per-request environment lookups; proxies from the environment once."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootc_operator.kube.client import env_proxy, load_api_client

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


async def test_session_does_not_read_env_and_netrc_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = await load_api_client(path)
    try:
        assert api.rest_client.pool_manager.trust_env is False
        assert api.configuration.proxy is None
    finally:
        await api.close()


async def test_env_proxy_is_resolved_once_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = await load_api_client(path)
    try:
        assert api.configuration.proxy == "http://proxy.example:3128"
    finally:
        await api.close()


def test_env_proxy_honours_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "10.0.0.1,.cluster.local")
    assert env_proxy("https://10.0.0.1:6443") is None
    assert env_proxy("https://api.cluster.local") is None
    assert env_proxy("https://api.example.com") == "http://proxy.example:3128"
    assert env_proxy("http://plain.example.com") is None  # only https_proxy is set
