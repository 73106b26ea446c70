"""A real OCI registry on loopback for tests: Debian's ``docker-registry`` (distribution v2).

Owns running the registry process of the e2e tier. ``Registry(tmpdir)`` writes a
``config.yml`` under ``tmpdir`` (filesystem storage in ``tmpdir/storage``, listening
on ``127.0.0.1:<free port>``), optionally with htpasswd authentication
(``auth=("user", "pass")``, a bcrypt hash as the registry requires) and TLS
(``tls=True``: a fresh CA and a serving certificate for 127.0.0.1/::1/localhost,
from :func:`hack.testenv.certs.generate_serving_pki`; ``ca_file`` is the CA to
trust). It runs as a child in its own session (``hack.testenv.procs.spawn``,
killed with the harness even on ``kill -9``), and ``start()`` returns once
``/v2/`` answers (200, or 401 when authentication is on).

``stop()``/``start()`` simulate an outage: the port and the stored images stay,
so the same references work again after ``start()``. (Only a first start that
finds its port taken by someone else moves to another port.) Use as a context manager
(or call ``close()``); an ``atexit`` hook stops it in any case.

The binary is ``$BOOTC_OPERATOR_REGISTRY_BIN``, else ``docker-registry`` on PATH,
else ``/usr/bin/docker-registry``; when none exists ``hack/install-registry.sh``
is run once (it needs root, as in CI).

    with Registry(tmp_path / "reg", auth=("alice", "s3cret"), tls=True) as reg:
        reg.ref("os", "v1")            # "127.0.0.1:41234/os:v1"
        reg.dockerconfigjson()         # credentials for it, as a pull secret holds
        reg.options()                  # RegistryOptions trusting its CA
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Self

import bcrypt
import yaml

from bootc_operator.registry import RegistryOptions
from hack.testenv.certs import ServingPki, generate_serving_pki
from hack.testenv.controlplane import free_port
from hack.testenv.procs import ServerComponent, StartupError, spawn

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "hack" / "install-registry.sh"
BIN_ENV = "BOOTC_OPERATOR_REGISTRY_BIN"
DEFAULT_BIN = "/usr/bin/docker-registry"
START_TIMEOUT = 30.0
#: before the first successful start the port may still change (it was taken meanwhile)
_PORT_ATTEMPTS = 3
#: Environment variables the registry would read as configuration overrides.
_ENV_PREFIXES = ("REGISTRY_", "OTEL_")


def find_binary(*, install: bool = True) -> str:
    """The docker-registry binary; runs ``hack/install-registry.sh`` once if it is missing."""
    for candidate in (os.environ.get(BIN_ENV), shutil.which("docker-registry"), DEFAULT_BIN):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    if install and INSTALL_SCRIPT.exists():
        result = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, check=False
        )
        if result.returncode == 0:
            return find_binary(install=False)
        raise StartupError(f"hack/install-registry.sh failed:\n{result.stderr[-2000:]}")
    raise StartupError(
        f"docker-registry not found (set ${BIN_ENV} or run hack/install-registry.sh)"
    )


def htpasswd_line(username: str, password: str) -> str:
    """One htpasswd entry with a bcrypt hash (the only kind the registry accepts)."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return f"{username}:{hashed}"


def dockerconfigjson(registry: str, username: str, password: str) -> bytes:
    """A ``.dockerconfigjson`` holding ``username``/``password`` for ``registry``."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {registry: {"auth": auth}}}).encode()


class Registry(ServerComponent):
    """One docker-registry process on 127.0.0.1 (see the module docstring)."""

    NAME = "docker-registry"

    def __init__(
        self,
        tmpdir: Path,
        *,
        auth: tuple[str, str] | None = None,
        tls: bool = False,
        binary: str | None = None,
    ) -> None:
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.auth = auth
        self.tls = tls
        self.binary = binary
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.config_path = self.dir / "config.yml"
        self.log_path = self.dir / "registry.log"
        self.pki: ServingPki | None = None
        self._started = False
        self._write_config()

    # ------------------------------------------------------------------ facts

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def ca_file(self) -> Path | None:
        """The CA that signed the serving certificate (TLS registries only)."""
        return self.pki.ca.cert if self.pki is not None else None

    @property
    def username(self) -> str | None:
        return self.auth[0] if self.auth else None

    @property
    def password(self) -> str | None:
        return self.auth[1] if self.auth else None

    def ref(self, repository: str, tag: str | None = None, digest: str | None = None) -> str:
        """``127.0.0.1:PORT/repository[:tag][@digest]``."""
        text = f"{self.host}/{repository}"
        if tag:
            text += f":{tag}"
        if digest:
            text += f"@{digest}"
        return text

    def dockerconfigjson(self, username: str | None = None, password: str | None = None) -> bytes:
        """Pull-secret content for this registry (its own credentials unless overridden)."""
        user = username if username is not None else self.username
        pw = password if password is not None else self.password
        if user is None or pw is None:
            raise ValueError("this registry has no credentials; pass username and password")
        return dockerconfigjson(self.host, user, pw)

    def options(self, **overrides: Any) -> RegistryOptions:
        """Client options that work for this registry: its CA trusted (TLS) or listed
        as insecure (plain HTTP)."""
        base: dict[str, Any] = {"timeout": 10.0, "connect_timeout": 5.0}
        if self.tls:
            base["ca_file"] = str(self.ca_file)
        else:
            base["insecure_registries"] = frozenset({self.host})
        base.update(overrides)
        return RegistryOptions(**base)

    # ------------------------------------------------------------------ config

    def _write_config(self) -> None:
        storage = self.dir / "storage"
        storage.mkdir(exist_ok=True)
        http: dict[str, Any] = {
            "addr": self.host,
            "secret": secrets.token_hex(16),
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        }
        if self.tls:
            if self.pki is None:
                self.pki = generate_serving_pki(self.dir / "pki", "bootc-test-registry")
            http["tls"] = {
                "certificate": str(self.pki.server.cert),
                "key": str(self.pki.server.key),
            }
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            "storage": {
                "filesystem": {"rootdirectory": str(storage)},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": http,
        }
        if self.auth is not None:
            htpasswd = self.dir / "htpasswd"
            htpasswd.write_text(htpasswd_line(*self.auth) + "\n")
            config["auth"] = {"htpasswd": {"realm": "bootc-test-registry", "path": str(htpasswd)}}
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=True))

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start the process (if not running) and wait until ``/v2/`` answers."""
        if self.running:
            return self
        binary = self.binary or find_binary()
        env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
        self._stop_at_exit()
        for attempt in range(_PORT_ATTEMPTS):
            self.process = spawn(
                "docker-registry", [binary, "serve", str(self.config_path)], self.log_path, env=env
            )
            try:
                self._wait_ready(timeout)
            except StartupError:
                self.stop()
                lost_port = "address already in use" in self.tail(5)
                if self._started or not lost_port or attempt == _PORT_ATTEMPTS - 1:
                    raise
                # another process took the free port between choosing and binding it
                self.port = free_port()
                self.host = f"127.0.0.1:{self.port}"
                self._write_config()
                continue
            except BaseException:
                self.stop()
                raise
            break
        self._started = True
        return self

    def _ping(self, context: ssl.SSLContext | None) -> bool:
        request = urllib.request.Request(f"{self.url}/v2/")
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(request, timeout=2.0) as resp:
                return int(resp.status) == 200
        except urllib.error.HTTPError as exc:
            return exc.code == 401
        except (urllib.error.URLError, OSError):
            return False

    def _wait_ready(self, timeout: float) -> None:
        context = None
        if self.ca_file is not None:
            context = ssl.create_default_context(cafile=str(self.ca_file))
        self._wait_until(lambda: self._ping(context), timeout, f"did not answer on {self.url}/v2/")
