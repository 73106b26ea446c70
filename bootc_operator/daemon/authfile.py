"""The pull secret on the host: ``HOSTROOT/run/ostree/auth.json``.

bootc (through ostree / containers-image) reads registry credentials from the first
of ``/run/ostree/auth.json``, ``/etc/ostree/auth.json`` and ``/usr/lib/ostree/auth.json``
that exists. The daemon writes the pool's credentials to the ``/run`` one, so they
win over whatever the image or the admin put in ``/etc`` and ``/usr/lib`` (those files
are never touched), and vanish at reboot (``/run`` is a tmpfs): the daemon writes the
file again when it starts.

- ``docker_config(secret)``: the bytes of a Secret's ``.dockerconfigjson`` (type
  ``kubernetes.io/dockerconfigjson``), checked to be a JSON object; ``PullSecretError``
  otherwise, with a message that never contains the secret's content.
- ``write_auth_file(host_root, content)``: atomically (a temporary file in the same
  directory, fsynced, renamed over the target), mode 0600; a no-op returning False
  when the file already holds exactly these bytes with that mode.
- ``remove_auth_file(host_root)``: when the BootcNode no longer names a secret.

Small synchronous file operations on a local tmpfs; callers on the event loop may
call them directly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from bootc_operator import safejson

AUTH_FILE: Final = Path("run/ostree/auth.json")
DOCKER_CONFIG_KEY: Final = ".dockerconfigjson"
MODE: Final = 0o600


class PullSecretError(Exception):
    """The Secret cannot be used; the message is safe to log (no secret content)."""


def auth_path(host_root: Path) -> Path:
    return host_root / AUTH_FILE


def docker_config(secret: Mapping[str, Any]) -> bytes:
    """The decoded ``.dockerconfigjson`` of a Secret object (wire dict)."""
    data = secret.get("data") or {}
    encoded = data.get(DOCKER_CONFIG_KEY) if isinstance(data, Mapping) else None
    if not isinstance(encoded, str):
        stype = secret.get("type") or "Opaque"
        raise PullSecretError(
            f"has no {DOCKER_CONFIG_KEY} key (type {stype}; a kubernetes.io/dockerconfigjson "
            "Secret is expected)"
        )
    try:
        content = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} is not valid base64") from None
    try:
        doc = safejson.loads(content)
    except safejson.JSONInputError as exc:
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} is not a JSON object")
    if "auths" in doc and not isinstance(doc["auths"], dict):
        raise PullSecretError(f'{DOCKER_CONFIG_KEY} has an "auths" field that is not an object')
    return content


def _unchanged(path: Path, content: bytes) -> bool:
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != MODE:
            return False
        return path.read_bytes() == content
    except OSError:
        return False


def write_auth_file(host_root: Path, content: bytes) -> bool:
    """Atomically make ``HOSTROOT/run/ostree/auth.json`` hold ``content`` (mode 0600).

    Returns False when it already did. Raises ``OSError`` when it cannot.
    """
    path = auth_path(host_root)
    if _unchanged(path, content):
        return False
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), MODE)
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    return True


def remove_auth_file(host_root: Path) -> bool:
    """Remove the file; True when there was one."""
    try:
        auth_path(host_root).unlink()
    except FileNotFoundError:
        return False
    return True
