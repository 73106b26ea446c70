"""The probe and metrics server's bind addresses (bootc_operator.runtime.httpserver):
what an address means, and that one without a host answers on IPv4 and IPv6."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from bootc_operator.runtime.httpserver import ProbeServer, parse_bind_address


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        (":8080", ("", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:8081", ("::1", 8081)),
        ("[::]:8081", ("::", 8081)),
        ("0", None),
        ("", None),
    ],
)
def test_bind_addresses(addr: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(addr) == expected


@pytest.mark.parametrize(
    ("addr", "message"),
    [
        ("localhost", "HOST:PORT"),
        (":http", "HOST:PORT"),
        (":65536", "HOST:PORT"),
        ("::1:8080", "in brackets"),
        ("[::1:8080", "in brackets"),
    ],
)
def test_bad_bind_address(addr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_bind_address(addr)


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_an_address_without_host_answers_on_ipv4_and_ipv6_on_one_port() -> None:
    """``":PORT"`` is every interface, both families: an IPv6-only cluster's kubelet
    probes the Pod's IPv6 address (the old ``0.0.0.0`` refused it: a restart loop)."""
    server = ProbeServer(ready=lambda: True)
    await server.start(metrics_addr="0", probe_addr=":0")
    try:
        port = server.ports["probes"]
        assert await get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        if not has_ipv6_loopback():
            pytest.skip("this machine has no IPv6 loopback (::1): only IPv4 could be checked")
        assert await get(f"http://[::1]:{port}/readyz") == (200, "ok\n")
    finally:
        await server.stop()


async def test_a_host_is_taken_literally() -> None:
    server = ProbeServer(ready=lambda: True)
    await server.start(metrics_addr="0", probe_addr="127.0.0.1:0")
    try:
        port = server.ports["probes"]
        assert await get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        if has_ipv6_loopback():
            with pytest.raises(aiohttp.ClientConnectionError):
                await get(f"http://[::1]:{port}/healthz")
    finally:
        await server.stop()
