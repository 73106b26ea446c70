"""How client-side API request counters name a request (as kube-apiserver's metrics do)."""

from __future__ import annotations

import pytest

from bootc_operator.kube.rest import request_kind


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", [], ("LIST", "nodes")),
        ("GET", "/api/v1/nodes", [("watch", "true")], ("WATCH", "nodes")),
        ("GET", "/api/v1/nodes/n1", [], ("GET", "nodes")),
        ("PATCH", "/api/v1/nodes/n1/status", [], ("PATCH", "nodes/status")),
        ("GET", "/api/v1/namespaces/default/pods", [], ("LIST", "pods")),
        ("GET", "/api/v1/pods", [("fieldSelector", "spec.nodeName=n")], ("LIST", "pods")),
        ("POST", "/api/v1/namespaces/ns/pods/p/eviction", [], ("POST", "pods/eviction")),
        ("GET", "/api/v1/namespaces", [], ("LIST", "namespaces")),
        ("GET", "/api/v1/namespaces/ns", [], ("GET", "namespaces")),
        ("POST", "/apis/node.bootc.dev/v1alpha1/bootcnodes", [], ("POST", "bootcnodes")),
        (
            "PATCH",
            "/apis/node.bootc.dev/v1alpha1/bootcnodepools/p/status",
            [],
            ("PATCH", "bootcnodepools/status"),
        ),
        (
            "DELETE",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
            [],
            ("DELETE", "leases"),
        ),
        ("GET", "/metrics", [], ("GET", "")),
        ("GET", "/apis", [], ("GET", "")),
    ],
)
def test_request_kind(
    method: str, path: str, query: list[tuple[str, str]], expected: tuple[str, str]
) -> None:
    assert request_kind(method, path, query) == expected
