"""The metrics endpoint's TLS certificate: mounted files, or a self-signed one made at start.

- ``mounted(cert_file, key_file)``: an ``ssl.SSLContext`` serving those PEM files
  (a Secret mounted by cert-manager, say). A rotated certificate is picked up
  without a restart: every TLS handshake compares the files' mtime and size
  with what was loaded (one ``stat`` each) and, when they changed, loads them
  into a fresh context for this and later connections. A pair that does not
  load (half-written, key and certificate not matching) keeps the previous one,
  with a log line.
- ``await self_signed()``: a context with a new self-signed certificate (EC P-256,
  one year, for ``localhost``, this host's name, 127.0.0.1 and ::1), made by a
  short child process (``python -m bootc_operator.runtime.selfsigned``). The
  ``cryptography`` package it takes costs a process about 11 MiB of RSS for
  good (x509 and a key made); the daemon runs on every node with a 45 MiB
  budget, so the certificate does not make it import that. The key goes from
  the child's stdout into an anonymous in-memory file (``memfd``) that OpenSSL
  reads: it never touches a disk, and the read-only root filesystem needs no
  scratch space.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import sys
from pathlib import Path
from typing import Final

log = logging.getLogger("http.cert")

GENERATE_TIMEOUT: Final = 60.0


def _context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for p in paths:
        st = p.stat()
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


class MountedCert:
    """A context over a certificate and key on disk, reloaded when they change."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamp = _stamp(cert_file, key_file)
        self._current = self._load()
        # The listening socket keeps this context; each handshake may hand the
        # connection the newest one (``_current``).
        self.context = _context()
        self.context.load_cert_chain(cert_file, key_file)
        self.context.sni_callback = self._on_hello

    def _load(self) -> ssl.SSLContext:
        ctx = _context()
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def _on_hello(self, conn: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        try:
            stamp = _stamp(self.cert_file, self.key_file)
            if stamp != self._stamp:
                self._current = self._load()
                self._stamp = stamp
                log.info("metrics certificate reloaded from %s", self.cert_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning(
                "metrics certificate %s changed but does not load (keeping the previous): %s",
                self.cert_file,
                exc,
            )
            # Remember the failed stamp: one line per change, not per handshake.
            with contextlib.suppress(OSError):
                self._stamp = _stamp(self.cert_file, self.key_file)
        conn.context = self._current


def mounted(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server context for the PEM files (reloaded on change; see the module docstring).

    Raises ``OSError`` / ``ssl.SSLError`` when they cannot be read or do not match.
    """
    return MountedCert(cert_file, key_file).context


async def self_signed() -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate (see the module docstring)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bootc_operator.runtime.selfsigned",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), GENERATE_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(
            f"generating the self-signed metrics certificate took over {GENERATE_TIMEOUT:.0f}s"
        ) from None
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"generating the self-signed metrics certificate failed: {detail[0]}")
    fd = os.memfd_create("metrics-cert", os.MFD_CLOEXEC)
    try:
        os.write(fd, out)
        ctx = _context()
        ctx.load_cert_chain(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    return ctx
