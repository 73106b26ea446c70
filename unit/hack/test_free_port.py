"""The test kit's ``free_port``: a port is handed out once per process, outside the
kernel's ephemeral range, and never to two processes at once (parallel workers)."""

from __future__ import annotations

import socket
import subprocess
import sys

from hack.testenv.controlplane import _ephemeral_range, claim_name, claim_port, free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    with socket.socket() as s:  # and each was free when handed out
        s.bind(("127.0.0.1", ports[-1]))


def test_free_ports_avoid_the_kernels_ephemeral_range() -> None:
    """Ports bind(0) and outgoing connections use are never handed out (where the range
    leaves room below it), so no other process can take one before the child binds it."""
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    if low - 10000 >= 1000:
        assert all(10000 <= p < low for p in ports), (low, high, ports)
    with socket.socket() as s:  # an outgoing-style bind(0) never returns one of them
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] not in ports


def test_a_port_another_process_claimed_is_not_handed_out_until_it_lets_go() -> None:
    port = free_port()
    assert not claim_port(port), "this process holds its own claim"
    theirs = free_port() + 1  # not handed out here
    holder = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.bind(chr(0) + sys.argv[1]); print('held', flush=True); sys.stdin.read()\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", holder, claim_name(theirs).lstrip("\0")],  # argv: no NUL
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline() == "held\n"
        assert not claim_port(theirs), "claimed by the other process"
    finally:
        other.communicate(timeout=30)
    assert claim_port(theirs), "free once its claimant exited"
