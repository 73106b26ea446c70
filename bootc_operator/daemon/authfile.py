"""The pull secret on the host: ``HOSTROOT/run/ostree/auth.json``.

bootc (through ostree / containers-image) reads registry credentials from the first
of ``/run/ostree/auth.json``, ``/etc/ostree/auth.json`` and ``/usr/lib/ostree/auth.json``
that exists. The daemon writes the pool's credentials to the ``/run`` one, so they
win over whatever the image or the admin put in ``/etc`` and ``/usr/lib`` (those files
are never touched), and vanish at reboot (``/run`` is a tmpfs): the daemon writes the
file again when it starts.

- ``auth_content(content)`` (the bytes of a ``.dockerconfigjson``, as the daemon
  unseals them from its BootcNode's ``spec.sealedPullSecret``) and
  ``docker_config(secret)`` (the same from a Secret object of type
  ``kubernetes.io/dockerconfigjson``): what to write: only its ``auths``, re-serialised by
  ``registry.hostauth.host_auth_json`` (a ``credHelpers`` or ``credsStore`` key would
  make bootc run a program as root); ``PullSecretError`` otherwise, with a message
  that never contains the secret's content.
- ``write_auth_file(host_root, content)``: atomically (a temporary file in the same
  directory, fsynced, renamed over the target), mode 0600; a no-op returning False
  when the file already holds exactly these bytes with that mode.
- ``remove_auth_file(host_root)``: when the BootcNode no longer names a secret, and
  only when the file is **ours**: its sha256 is one the daemon recorded in
  ``run/ostree/.bootc-operator-auth.sha256`` (``OWNER_RECORD``) when it wrote it. A
  file the admin (or anyone else) put there is left alone ("foreign"). The record
  sits in the same tmpfs, so it vanishes with the file at reboot; it survives daemon
  restarts. It is written before the file (holding the digests of the previous and
  the new content, then only the new one), so a daemon killed in between never
  leaves a file of ours unrecorded.

Small synchronous file operations on a local tmpfs; callers on the event loop may
call them directly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from bootc_operator import safejson
from bootc_operator.registry.hostauth import HostAuthError, host_auth_json

AUTH_FILE: Final = Path("run/ostree/auth.json")
OWNER_RECORD: Final = Path("run/ostree/.bootc-operator-auth.sha256")
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
    return auth_content(content)


def auth_content(content: bytes) -> bytes:
    """What to write for the bytes of a ``.dockerconfigjson`` (e.g. unsealed from
    ``spec.sealedPullSecret``): only its ``auths``, re-serialised."""
    try:
        doc = safejson.loads(content)
    except safejson.JSONInputError as exc:
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} is not a JSON object")
    if "auths" in doc and not isinstance(doc["auths"], dict):
        raise PullSecretError(f'{DOCKER_CONFIG_KEY} has an "auths" field that is not an object')
    try:
        return host_auth_json(doc)
    except HostAuthError as exc:
        raise PullSecretError(f"{DOCKER_CONFIG_KEY} {exc}") from None


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _recorded(host_root: Path) -> set[str]:
    try:
        return set((host_root / OWNER_RECORD).read_text("ascii").split())
    except (OSError, UnicodeDecodeError):
        return set()


def _replace(path: Path, content: bytes) -> None:
    """Atomically make ``path`` hold ``content`` (mode 0600): temp file, fsync, rename."""
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


def _record(host_root: Path, digests: set[str]) -> None:
    _replace(host_root / OWNER_RECORD, "".join(f"{d}\n" for d in sorted(digests)).encode())


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
    new = _digest(content)
    recorded = _recorded(host_root)
    if _unchanged(path, content) and new in recorded:
        return False
    # recorded first: a file of ours is never on disk without its digest in the record
    _record(host_root, recorded | {new})
    _replace(path, content)
    _record(host_root, {new})
    return True


def remove_auth_file(host_root: Path) -> Literal["removed", "absent", "foreign"]:
    """Remove the file if the daemon wrote it: "removed"; "absent" when there is none;
    "foreign" when its content is not what the daemon wrote (it stays)."""
    path = auth_path(host_root)
    record = host_root / OWNER_RECORD
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        return "absent"
    if _digest(content) not in _recorded(host_root):
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        return "foreign"
    path.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    return "removed"
