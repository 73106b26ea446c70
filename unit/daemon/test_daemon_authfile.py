"""The pull secret on the host: reading ``.dockerconfigjson`` from a Secret and writing
``HOSTROOT/run/ostree/auth.json`` atomically with mode 0600, and removing it."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from bootc_operator.daemon.authfile import (
    OWNER_RECORD,
    PullSecretError,
    auth_path,
    docker_config,
    remove_auth_file,
    write_auth_file,
)

CONFIG = json.dumps({"auths": {"quay.io": {"auth": base64.b64encode(b"u:hunter2").decode()}}})


def secret(
    data: dict[str, str] | None, stype: str = "kubernetes.io/dockerconfigjson"
) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": stype, "data": data}


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_docker_config_decodes_the_secret() -> None:
    written = docker_config(secret({".dockerconfigjson": b64(CONFIG)}))
    assert json.loads(written) == json.loads(CONFIG)
    assert written == json.dumps(json.loads(CONFIG), separators=(",", ":")).encode()


def test_docker_config_writes_only_what_containers_image_reads_from_auths() -> None:
    doc = {
        "auths": {
            "quay.io": {
                "username": "u",
                "password": "hunter2",
                "email": "u@example.com",
                "auth": b64("u:hunter2"),
            },
            "registry.example.com:5000/team": {"username": "bot", "password": "pw"},
            "ghcr.io": {"identitytoken": "tok", "serveraddress": "ghcr.io"},
            "empty.example.com": {"email": "x@example.com"},
        }
    }
    written = json.loads(docker_config(secret({".dockerconfigjson": b64(json.dumps(doc))})))
    assert written == {
        "auths": {
            "quay.io": {"auth": b64("u:hunter2")},
            "registry.example.com:5000/team": {"auth": b64("bot:pw")},
            "ghcr.io": {"identitytoken": "tok"},
        }
    }


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (
            {"auths": {}, "credHelpers": {"quay.io": "evil"}},
            '"credHelpers" key; only "auths" is accepted (a credential helper would run',
        ),
        ({"auths": {}, "credsStore": "evil"}, '"credsStore" key'),
        ({"auths": {}, "HttpHeaders": {"X": "hunter2"}}, '"HttpHeaders" key'),
        ({"credHelpers": {"quay.io": "evil"}}, '"credHelpers" key'),
        ({"quay.io": {"auth": b64("u:hunter2")}}, '"quay.io" key'),
        ({"auths": {"quay.io": {"helper": "hunter2"}}}, 'unknown field "helper"'),
        ({"auths": {"quay.io": {"auth": 5}}}, '"auth" that is not a string'),
        ({"auths": {"quay.io": "hunter2"}}, "is not an object"),
    ],
)
def test_credential_helpers_and_unknown_keys_are_refused(doc: dict[str, Any], why: str) -> None:
    with pytest.raises(PullSecretError) as exc:
        docker_config(secret({".dockerconfigjson": b64(json.dumps(doc))}))
    assert why in str(exc.value)
    assert "hunter2" not in str(exc.value) and "evil" not in str(exc.value)


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (secret(None, "Opaque"), "has no .dockerconfigjson key (type Opaque"),
        (secret({"other": b64("x")}), "has no .dockerconfigjson key"),
        (secret({".dockerconfigjson": "%%% hunter2 %%%"}), "is not valid base64"),
        (secret({".dockerconfigjson": b64("hunter2 {")}), "is not valid JSON"),
        (secret({".dockerconfigjson": b64(b"\xff\xfe hunter2")}), "is not valid JSON"),
        (secret({".dockerconfigjson": b64('["hunter2"]')}), "is not a JSON object"),
        # issue 27: RecursionError / int-digits ValueError from json.loads escaped
        (
            secret({".dockerconfigjson": b64('{"hunter2": ' + "[" * 100_000)}),
            "is not valid JSON (nested more than 64 levels deep)",
        ),
        (
            secret({".dockerconfigjson": b64('{"hunter2": ' + "9" * 5000 + "}")}),
            "is not valid JSON (a number has too many digits)",
        ),
        (secret({".dockerconfigjson": b64('{"auths": "hunter2"}')}), '"auths" field'),
    ],
)
def test_unusable_secrets_are_named_without_their_content(obj: dict[str, Any], why: str) -> None:
    with pytest.raises(PullSecretError) as exc:
        docker_config(obj)
    assert why in str(exc.value)
    assert "hunter2" not in str(exc.value)


def test_write_creates_the_file_0600(tmp_path: Path) -> None:
    assert write_auth_file(tmp_path, CONFIG.encode()) is True
    path = tmp_path / "run" / "ostree" / "auth.json"
    assert auth_path(tmp_path) == path
    assert path.read_bytes() == CONFIG.encode()
    assert mode(path) == 0o600


def test_write_is_a_no_op_when_unchanged(tmp_path: Path) -> None:
    write_auth_file(tmp_path, CONFIG.encode())
    inode = auth_path(tmp_path).stat().st_ino
    assert write_auth_file(tmp_path, CONFIG.encode()) is False
    assert auth_path(tmp_path).stat().st_ino == inode


def test_rewrite_replaces_the_file_atomically(tmp_path: Path) -> None:
    write_auth_file(tmp_path, b'{"auths": {}}')
    path = auth_path(tmp_path)
    reader = path.open("rb")  # a reader of the old file keeps seeing it whole
    old_inode = path.stat().st_ino
    assert write_auth_file(tmp_path, CONFIG.encode()) is True
    assert path.stat().st_ino != old_inode, "replaced by a rename, not rewritten in place"
    assert reader.read() == b'{"auths": {}}'
    reader.close()
    assert path.read_bytes() == CONFIG.encode() and mode(path) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == OURS, "no temp files left"


def test_a_file_with_loose_permissions_is_rewritten_0600(tmp_path: Path) -> None:
    path = auth_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(CONFIG.encode())
    path.chmod(0o644)
    assert write_auth_file(tmp_path, CONFIG.encode()) is True
    assert mode(path) == 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_auth_file(tmp_path, b'{"auths": {}}')

    def broken_fsync(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        write_auth_file(tmp_path, CONFIG.encode())
    path = auth_path(tmp_path)
    assert path.read_bytes() == b'{"auths": {}}'
    assert sorted(p.name for p in path.parent.iterdir()) == OURS
    monkeypatch.undo()
    assert remove_auth_file(tmp_path) == "removed", "the old file is still known as ours"


def test_remove(tmp_path: Path) -> None:
    assert remove_auth_file(tmp_path) == "absent"
    write_auth_file(tmp_path, CONFIG.encode())
    assert remove_auth_file(tmp_path) == "removed"
    assert not auth_path(tmp_path).exists()
    assert list(auth_path(tmp_path).parent.iterdir()) == []


def admin_file(root: Path, content: bytes) -> Path:
    path = auth_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_an_auth_file_the_daemon_did_not_write_is_never_removed(tmp_path: Path) -> None:
    # e.g. written by the admin, or left from a previous boot's daemon before a record
    path = admin_file(tmp_path, b'{"auths": {"admin.example.com": {"auth": "YTpi"}}}')
    assert remove_auth_file(tmp_path) == "foreign"
    assert path.read_bytes() == b'{"auths": {"admin.example.com": {"auth": "YTpi"}}}'


def test_an_auth_file_the_admin_replaced_after_ours_is_not_removed(tmp_path: Path) -> None:
    write_auth_file(tmp_path, CONFIG.encode())
    path = admin_file(tmp_path, b'{"auths": {}}')
    assert remove_auth_file(tmp_path) == "foreign"
    assert path.read_bytes() == b'{"auths": {}}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["auth.json"], "record dropped"


def test_an_identical_file_not_written_by_us_is_adopted_on_write(tmp_path: Path) -> None:
    admin_file(tmp_path, CONFIG.encode()).chmod(0o600)
    assert write_auth_file(tmp_path, CONFIG.encode()) is True, "recorded as ours now"
    assert remove_auth_file(tmp_path) == "removed"


def test_ownership_survives_a_daemon_restart(tmp_path: Path) -> None:
    # the record is a file next to auth.json, not process memory
    write_auth_file(tmp_path, CONFIG.encode())
    assert write_auth_file(tmp_path, CONFIG.encode()) is False
    assert (tmp_path / OWNER_RECORD).read_text().split() == [
        hashlib.sha256(CONFIG.encode()).hexdigest()
    ]
    assert remove_auth_file(tmp_path) == "removed"


def test_etc_and_usr_lib_credentials_are_never_touched(tmp_path: Path) -> None:
    for where in ("etc/ostree", "usr/lib/ostree"):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "auth.json").write_text("{}")
    write_auth_file(tmp_path, CONFIG.encode())
    remove_auth_file(tmp_path)
    for where in ("etc/ostree", "usr/lib/ostree"):
        assert (tmp_path / where / "auth.json").read_text() == "{}"
    assert list((tmp_path / "run" / "ostree").iterdir()) == []


OURS = sorted(["auth.json", OWNER_RECORD.name])
