"""The test kit's ``free_port``: a port is handed out once per process."""

from __future__ import annotations

import socket

from hack.testenv.controlplane import free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    with socket.socket() as s:  # and each was free when handed out
        s.bind(("127.0.0.1", ports[-1]))
