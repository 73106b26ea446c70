"""A loopback TCP forwarder that can cut the network, for partition tests.

``TcpProxy(host, port)`` listens on 127.0.0.1 (``await proxy.start()``, then
``proxy.port``) and pipes every connection to ``host:port`` byte for byte, so
TLS passes through untouched. ``cut()`` drops every open connection and makes
new ones fail at once; ``heal()`` forwards again. Used to hold a client off
the API server while the test changes the world behind its back.
``break_once_after(n)`` aborts the first connection whose answer passes ``n``
bytes (a stream broken half-way), then forwards normally again.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.target_port = port
        self.port = 0
        self.cut_connections = 0
        self._server: asyncio.Server | None = None
        self._cut = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._break_after: int | None = None
        self.broken_connections = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        """Drop all connections; refuse new ones until ``heal()``."""
        self._cut = True
        for w in list(self._writers):
            self.cut_connections += 1
            w.transport.abort()
        self._writers.clear()

    def heal(self) -> None:
        self._cut = False

    def break_once_after(self, nbytes: int) -> None:
        """Abort the first connection that has sent the client more than ``nbytes``."""
        self._break_after = nbytes

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer, downstream=True)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()
            for p in pipes:
                p.cancel()
                self._tasks.discard(p)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, downstream: bool = False
    ) -> None:
        sent = 0
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await src.read(65536):
                limit = self._break_after if downstream else None
                if limit is not None and sent + len(data) > limit:
                    self._break_after = None
                    self.broken_connections += 1
                    dst.write(data[: max(0, limit - sent)])
                    await dst.drain()
                    return  # the caller aborts both sides
                sent += len(data)
                dst.write(data)
                await dst.drain()
