"""The probe and metrics server (bootc_operator.runtime.httpserver): what an address
means, and that one without a host answers on IPv4 and IPv6; metrics over HTTPS
behind the request check (a stub here; the real TokenReview and
SubjectAccessReview: e2e/test_metrics_auth.py), probes plain; the certificate
self-signed, or mounted and reloaded when it changes."""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from bootc_operator.runtime.httpserver import BindError, ProbeServer, parse_bind_address
from bootc_operator.runtime.metricsauth import UNAUTHENTICATED, Verdict, bearer_token
from bootc_operator.runtime.process import serve
from bootc_operator.runtime.selfsigned import generate
from bootc_operator.runtime.servingcert import mounted, self_signed


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


# ------------------------------------------------------------------ HTTPS and the guard


def client_tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def get_tls(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, ssl=client_tls(), headers=headers) as resp,
    ):
        return resp.status, await resp.text()


async def only_good(header: str | None) -> Verdict:
    token = bearer_token(header)
    if token is None:
        return UNAUTHENTICATED
    return Verdict(200, "") if token == "good" else Verdict(403, "Forbidden\n")


async def test_metrics_over_https_behind_the_check_and_probes_plain() -> None:
    server = ProbeServer(ready=lambda: True, metrics_tls=await self_signed(), authorize=only_good)
    await server.start(metrics_addr="127.0.0.1:0", probe_addr="127.0.0.1:0")
    try:
        metrics = f"https://127.0.0.1:{server.ports['metrics']}/metrics"
        assert (await get_tls(metrics))[0] == 401
        assert (await get_tls(metrics, "bad"))[0] == 403
        status, text = await get_tls(metrics, "good")
        assert status == 200 and "python_info" in text
        with pytest.raises(aiohttp.ClientError):
            await get(f"http://127.0.0.1:{server.ports['metrics']}/metrics")
        assert await get(f"http://127.0.0.1:{server.ports['probes']}/healthz") == (200, "ok\n")
    finally:
        await server.stop()


async def test_https_metrics_and_plain_probes_cannot_share_a_port() -> None:
    server = ProbeServer(ready=lambda: True, metrics_tls=await self_signed())
    with pytest.raises(BindError, match="two ports"):
        await server.start(metrics_addr="127.0.0.1:18080", probe_addr="127.0.0.1:18080")


def peer_cert(port: int) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port)) as raw,
        client_tls().wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der
    return der


def write_pair(directory: Path) -> bytes:
    key_pem, cert_pem = generate(["localhost"])
    (directory / "tls.key").write_bytes(key_pem)
    (directory / "tls.crt").write_bytes(cert_pem)
    return ssl.PEM_cert_to_DER_cert(cert_pem.decode())


async def test_a_mounted_certificate_is_served_and_reloaded_when_it_changes(
    tmp_path: Path,
) -> None:
    first = write_pair(tmp_path)
    server = ProbeServer(
        ready=lambda: True, metrics_tls=mounted(tmp_path / "tls.crt", tmp_path / "tls.key")
    )
    await server.start(metrics_addr="127.0.0.1:0", probe_addr="0")
    try:
        port = server.ports["metrics"]
        assert await asyncio.to_thread(peer_cert, port) == first
        (tmp_path / "tls.crt").write_text("half-written")
        assert await asyncio.to_thread(peer_cert, port) == first, "a broken pair keeps the old"
        second = write_pair(tmp_path)
        assert await asyncio.to_thread(peer_cert, port) == second
    finally:
        await server.stop()


async def test_a_certificate_that_does_not_load_is_one_error_line_and_exit_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = argparse.Namespace(
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="0",
        metrics_secure=True,
        metrics_cert_path=str(tmp_path),
        metrics_cert_name="tls.crt",
        metrics_cert_key="tls.key",
    )

    async def work(stop: asyncio.Event) -> int:
        await stop.wait()  # the failed metrics listener stops the work
        return 0

    code = await serve(args, work, ready=lambda: True, api=object())  # type: ignore[arg-type]
    assert code == 1
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line.startswith(f"--metrics-cert-path: cannot load {tmp_path}/tls.crt"), line


async def test_https_metrics_and_plain_probes_on_one_port_exit_1_before_the_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    args = argparse.Namespace(
        metrics_bind_address="127.0.0.1:18081",
        health_probe_bind_address="127.0.0.1:18081",
        metrics_secure=True,
    )

    async def work(_stop: asyncio.Event) -> int:
        raise AssertionError("the work never starts")

    assert await serve(args, work, ready=lambda: True) == 1
    assert "need two ports" in caplog.text


def test_a_self_signed_certificate_leaves_cryptography_out_of_the_process() -> None:
    """cryptography costs a process ~11 MiB for good; the daemon's budget is 45 MiB
    (the certificate is made by a child process). A fresh interpreter, as this one
    has it."""
    code = (
        "import asyncio, sys\n"
        "import bootc_operator.runtime.process\n"
        "from bootc_operator.runtime.servingcert import self_signed\n"
        "assert 'cryptography' not in sys.modules, 'imported before: nothing to test'\n"
        "ctx = asyncio.run(self_signed())\n"
        "assert ctx.cert_store_stats() is not None\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography')\n"
        "assert not bad, bad[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
