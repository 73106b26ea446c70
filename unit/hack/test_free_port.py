"""The test kit's ``free_port``: a port is handed out once per process, outside the
kernel's ephemeral range."""

from __future__ import annotations

import socket

from hack.testenv.controlplane import _ephemeral_range, free_port


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
