"""kube.lite's pure parts: kubeconfig / in-cluster parsing, token reloading (fake clock),
query encoding, and the daemon's import graph free of kubernetes_asyncio."""

from __future__ import annotations

import base64
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootc_operator.kube.lite import (
    Access,
    ConfigError,
    TokenSource,
    _query_string,
    default_kubeconfig,
    in_cluster_access,
    load_access,
    parse_kubeconfig,
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster or {"server": "https://k:6443/"}},
            {"name": "other", "cluster": {"server": "https://other:6443"}},
        ],
        "users": [{"name": "u", "user": user}, {"name": "nobody", "user": {}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "side", "context": {"cluster": "other", "user": "nobody"}},
        ],
        "current-context": "main",
    }


# ---------------------------------------------------------------- kubeconfig


def test_data_fields_are_decoded() -> None:
    doc = kubeconfig(
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
        {"server": "https://k:6443/", "certificate-authority-data": b64("CA PEM")},
    )
    got = parse_kubeconfig(doc, base_dir=Path("/cfg"))
    assert got == Access(
        server="https://k:6443",
        ca_data="CA PEM",
        client_cert_data=b"CERT",
        client_key_data=b"KEY",
    )


def test_relative_files_are_relative_to_the_kubeconfig() -> None:
    doc = kubeconfig(
        {"client-certificate": "tls.crt", "client-key": "/abs/tls.key", "tokenFile": "tok"},
        {"server": "https://k", "certificate-authority": "ca.crt", "tls-server-name": "api"},
    )
    got = parse_kubeconfig(doc, base_dir=Path("/cfg"))
    assert (got.ca_file, got.client_cert_file, got.client_key_file, got.token_file) == (
        "/cfg/ca.crt",
        "/cfg/tls.crt",
        "/abs/tls.key",
        "/cfg/tok",
    )
    assert got.tls_server_name == "api"


def test_a_static_token_wins_over_a_token_file() -> None:
    got = parse_kubeconfig(kubeconfig({"token": "t", "tokenFile": "f"}), base_dir=Path("/"))
    assert (got.token, got.token_file) == ("t", None)


def test_the_named_context_is_used() -> None:
    got = parse_kubeconfig(kubeconfig({"token": "t"}), base_dir=Path("/"), context="side")
    assert (got.server, got.token) == ("https://other:6443", None)


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        ({"exec": {"command": "x"}}, None, "user field exec is not supported"),
        ({"auth-provider": {}}, None, "user field auth-provider is not supported"),
        ({"username": "a", "password": "b"}, None, "user field password, username"),
        ({"client-certificate-data": b64("C")}, None, "needs both a certificate and a key"),
        ({}, "nope", "no context named 'nope'"),
        ({"client-key-data": "not base64!"}, None, "client-key-data is not base64"),
    ],
)
def test_what_is_unsupported_is_one_clear_error(
    user: dict[str, Any], context: str | None, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_kubeconfig(kubeconfig(user), base_dir=Path("/"), context=context, where="kc")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_an_unsupported_cluster_field_is_named() -> None:
    doc = kubeconfig({}, {"server": "https://k", "certificate-authority-daat": "x"})
    with pytest.raises(ConfigError, match="cluster field certificate-authority-daat"):
        parse_kubeconfig(doc, base_dir=Path("/"))


def test_load_access_reads_a_file_and_names_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump(kubeconfig({"tokenFile": "token"})))
    assert load_access(path).token_file == str(tmp_path / "token")
    with pytest.raises(ConfigError, match="No such file"):
        load_access(tmp_path / "missing")
    path.write_text("a: [")
    with pytest.raises(ConfigError, match="not YAML"):
        load_access(path)


# ---------------------------------------------------------------- in-cluster


def test_in_cluster_access_from_the_environment() -> None:
    sa = Path("/sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_access(env, sa) == Access(
        server="https://10.0.0.1:443", ca_file="/sa/ca.crt", token_file="/sa/token"
    )
    v6 = in_cluster_access({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, sa)
    assert v6 is not None and v6.server == "https://[fd00::1]:443"
    assert in_cluster_access({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, sa) is None


def test_in_cluster_is_used_without_a_kubeconfig_and_needs_its_files(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    (tmp_path / "token").write_text("tok")
    with pytest.raises(ConfigError, match=r"ca\.crt is missing"):
        load_access(None, env=env, sa_dir=tmp_path)
    (tmp_path / "ca.crt").write_text("pem")
    assert load_access("", env=env, sa_dir=tmp_path).token_file == str(tmp_path / "token")


def test_the_default_kubeconfig() -> None:
    assert default_kubeconfig({"KUBECONFIG": "/a/kc", "HOME": "/h"}) == Path("/a/kc")
    assert default_kubeconfig({"HOME": "/h"}) == Path("/h/.kube/config")
    with pytest.raises(ConfigError, match="lists 2 files"):
        default_kubeconfig({"KUBECONFIG": "/a:/b"})


# ---------------------------------------------------------------- tokens


class Files:
    def __init__(self, text: str) -> None:
        self.text: str | None = text
        self.reads = 0

    def read(self, _path: str) -> str:
        self.reads += 1
        if self.text is None:
            raise FileNotFoundError(2, "No such file or directory")
        return self.text


def test_the_token_is_re_read_once_a_minute_old() -> None:
    now = [100.0]
    files = Files("a\n")
    tokens = TokenSource("/t", clock=lambda: now[0], read=files.read)
    assert (tokens.token(), files.reads) == ("a", 1)
    files.text = "b"
    now[0] = 159.9
    assert (tokens.token(), files.reads) == ("a", 1), "younger than a minute: not re-read"
    now[0] = 160.0
    assert (tokens.token(), files.reads) == ("b", 2)
    now[0] = 200.0
    assert (tokens.token(), files.reads) == ("b", 2), "the period restarts at each read"


def test_reload_says_whether_the_token_changed() -> None:
    now = [0.0]
    files = Files("a")
    tokens = TokenSource("/t", clock=lambda: now[0], read=files.read)
    assert tokens.reload() is False, "same token: a retry would not help"
    files.text = "b"
    assert tokens.reload() is True
    assert tokens.token() == "b"
    files.text = ""
    assert tokens.reload() is False and tokens.token() == "b", "an empty file is no token"


def test_a_failed_re_read_keeps_the_token_in_hand() -> None:
    now = [0.0]
    files = Files("a")
    tokens = TokenSource("/t", clock=lambda: now[0], read=files.read)
    files.text = None
    now[0] = 61.0
    assert tokens.token() == "a"
    assert tokens.reload() is False


def test_the_first_read_must_succeed() -> None:
    files = Files("a")
    files.text = None
    with pytest.raises(ConfigError, match="token file /t: No such file"):
        TokenSource("/t", read=files.read)


# ---------------------------------------------------------------- wire


def test_query_strings_are_encoded_like_kubernetes_asyncio() -> None:
    query = [("continue", "eyJ+/="), ("labelSelector", "a in (b,c)"), ("watch", "true")]
    encoded = _query_string(query)
    assert "continue=eyJ%2B%2F%3D" in encoded, "a + in a continue token must survive"
    assert urllib.parse.parse_qsl(encoded) == query
    assert _query_string(None) == ""


def test_the_daemon_does_not_import_kubernetes_asyncio() -> None:
    """The daemon's modules and ``bootc-operator daemon --help`` stay clear of the
    generated models (~70 MiB, ~0.8 s), of the pool models (``api.v1alpha1``: the
    daemon needs ``api.wire`` only), of pydantic (~9 MiB with its compiled core) and of
    cryptography (~10 MiB; imported once a pull secret is named);
    a fresh interpreter, as this one has them."""
    code = (
        "import sys\n"
        "import bootc_operator.cli, bootc_operator.daemon.agent, bootc_operator.kube\n"
        "import bootc_operator.informers, bootc_operator.kube.lite\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes_asyncio')\n"
        "assert not bad, bad[:5]\n"
        "assert 'bootc_operator.api.v1alpha1' not in sys.modules\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core'))\n"
        "assert not bad, bad[:5]\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography')\n"
        "assert not bad, ('cryptography before a pull secret is named', bad[:5])\n"
        "from bootc_operator.kube import load_api_client\n"
        "assert 'kubernetes_asyncio.client' in sys.modules, 'the lazy export still works'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
