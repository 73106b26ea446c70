"""A real signer for the tests: cosign, as ``hack/build-cosign.sh`` builds and caches it.

Owns making real cosign signatures of images in the kit's registry
(``hack.testenv.registry``), so the operator's verification
(``bootc_operator/registry/signature.py``) is tested against what the real tool
writes, not against the project's own idea of it. (Debian's podman 4.3 and skopeo
1.9 have the flags, but their containers/image is built without sigstore: "creating
signature: Debian-local change: sigstore disabled".)

``resolve_cosign`` finds the binary (``$BOOTC_OPERATOR_COSIGN`` when ``hack/test.sh``
exported it, else the script is run: a stat when warm). ``Cosign(binary, home)`` runs
it with its own ``HOME``, Docker config and TUF directories under ``home`` (nothing
of the user's is read or written), never talking to a transparency log
(``--tlog-upload=false``):

    cosign = Cosign(resolve_cosign(), tmp_path / "cosign")
    key = cosign.generate_key_pair("release")     # key.public: cosign.pub's PEM
    cosign.sign(registry, registry.ref("os", digest=digest), key)

``sign`` speaks to the registry as the kit's clients do: plain HTTP for an open
registry, its CA and credentials (in cosign's Docker config) for a private one.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hack.testenv.controlplane import cached_tool
from hack.testenv.registry import Registry

COSIGN_ENV = "BOOTC_OPERATOR_COSIGN"
#: seconds for one cosign command against a loopback registry
TIMEOUT = 120.0


def resolve_cosign() -> Path:
    """The cached cosign binary (built on first use; minutes when the cache is cold)."""
    return cached_tool(COSIGN_ENV, "build-cosign.sh")


@dataclass(frozen=True)
class KeyPair:
    """A cosign key pair on disk: the encrypted private key, its password, the public PEM."""

    name: str
    private_key: Path
    public_key: Path
    password: str

    @property
    def public(self) -> str:
        """The public key's PEM (what a pool's verification lists)."""
        return self.public_key.read_text()


class Cosign:
    """cosign with private state under ``home`` (see the module docstring)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home
        for sub in ("home", "docker", "tuf", "keys"):
            (home / sub).mkdir(parents=True, exist_ok=True)

    def _env(self, password: str = "") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGN_", "SIGSTORE_"))}
        env.update(
            HOME=str(self.home / "home"),
            DOCKER_CONFIG=str(self.home / "docker"),
            TUF_ROOT=str(self.home / "tuf"),
            COSIGN_PASSWORD=password,
            COSIGN_YES="true",
        )
        return env

    def run(self, *args: str, password: str = "", cwd: Path | None = None) -> str:
        """cosign's stdout; ``RuntimeError`` with its output when it fails."""
        res = subprocess.run(
            [str(self.binary), *args],
            env=self._env(password),
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=TIMEOUT,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"cosign {args[0]} failed ({res.returncode}):\n"
                f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
            )
        return res.stdout

    def generate_key_pair(self, name: str, *, keep_password: bool = False) -> KeyPair:
        """A new ECDSA P-256 key pair (``cosign generate-key-pair``), password-protected;
        ``keep_password``: the password is also written beside it (mode 0600), so
        ``load_key_pair`` finds the pair again (the simulation's long-lived key)."""
        password = secrets.token_hex(8)
        prefix = self.home / "keys" / name
        self.run("generate-key-pair", f"--output-key-prefix={prefix}", password=password)
        if keep_password:
            path = prefix.with_suffix(".password")
            path.touch(mode=0o600)
            path.write_text(password)
        return KeyPair(name, prefix.with_suffix(".key"), prefix.with_suffix(".pub"), password)

    def registry_flags(self, registry: Registry | None) -> list[str]:
        """How cosign reaches ``registry``: plain HTTP (also None: an open loopback
        registry known by address only, the simulation's), or TLS with its CA.
        Credentials go to cosign's Docker config (``login``), not on the command line."""
        if registry is not None and registry.tls:
            return [f"--registry-cacert={registry.ca_file}"]
        return ["--allow-http-registry", "--allow-insecure-registry"]

    def load_key_pair(self, name: str) -> KeyPair | None:
        """The key pair ``name`` made by ``generate_key_pair(name, keep_password=True)``."""
        prefix = self.home / "keys" / name
        password = prefix.with_suffix(".password")
        if not password.exists():
            return None
        return KeyPair(
            name, prefix.with_suffix(".key"), prefix.with_suffix(".pub"), password.read_text()
        )

    def login(self, registry: Registry) -> None:
        """Put ``registry``'s credentials in cosign's Docker config (``config.json``)."""
        path = self.home / "docker" / "config.json"
        config = json.loads(path.read_text()) if path.exists() else {"auths": {}}
        config["auths"].update(json.loads(registry.dockerconfigjson())["auths"])
        path.write_text(json.dumps(config))
        path.chmod(0o600)

    def sign(self, registry: Registry | None, ref: str, key: KeyPair) -> None:
        """Sign ``ref`` (``host/repo@sha256:…``) with ``key``: cosign pushes
        ``sha256-<hex>.sig`` to the same repository (appending to one already there).
        ``registry`` None: an open plain-HTTP registry (see ``registry_flags``)."""
        if registry is not None and registry.auth is not None:
            self.login(registry)
        self.run(
            "sign",
            f"--key={key.private_key}",
            "--tlog-upload=false",
            *self.registry_flags(registry),
            ref,
            password=key.password,
        )
