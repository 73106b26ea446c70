"""The project's own container registry client (OCI distribution / Docker Registry v2).

Owns everything the operator asks registries: resolving an image tag to a
manifest digest (and an index to its per-platform digests), with credentials
from a pull secret's dockerconfigjson. Modules:

- ``client``: ``RegistryClient`` / ``resolve_digest``, ``RegistryOptions`` (TLS, CA
  bundle, insecure registries, timeouts): transport and resolution;
- ``auth``: authentication: ``WWW-Authenticate`` parsing, Basic and Bearer answers,
  the token cache, the no-credentials / rejected errors;
- ``credentials``: dockerconfigjson parsing and host matching (``DockerConfig``);
- ``manifest``: media types, digests, ``Resolved``;
- ``signature``: cosign signatures of a digest (``sha256-<hex>.sig``) and their
  verification against trusted public keys, pure (``RegistryClient.signature``
  fetches the documents);
- ``types``: ``Target`` and ``Reply``, shared by ``client`` and ``auth``;
- ``errors``: one exception class per failure kind, messages free of secrets;

    async with RegistryClient(RegistryOptions(ca_file="/etc/pki/ca.pem")) as client:
        resolved = await client.resolve("quay.io/org/os:stable", dockerconfigjson=secret)
        resolved.digest, resolved.media_type, resolved.manifests
"""

from bootc_operator.registry.auth import Challenge, parse_www_authenticate
from bootc_operator.registry.client import (
    RegistryClient,
    RegistryOptions,
    make_target,
    resolve_digest,
)
from bootc_operator.registry.credentials import (
    Credentials,
    DockerConfig,
    parse_docker_config,
)
from bootc_operator.registry.errors import (
    CredentialsRejected,
    InvalidDockerConfig,
    InvalidReference,
    MalformedResponse,
    ManifestNotFound,
    NoCredentials,
    RegistryAuthError,
    RegistryError,
    RegistryHTTPError,
    RegistryTimeout,
    RegistryTLSError,
    RegistryUnreachable,
)
from bootc_operator.registry.manifest import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
    Platform,
    PlatformManifest,
    Resolved,
)
from bootc_operator.registry.types import Reply, Target

__all__ = [
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "Challenge",
    "Credentials",
    "CredentialsRejected",
    "DockerConfig",
    "InvalidDockerConfig",
    "InvalidReference",
    "MalformedResponse",
    "ManifestNotFound",
    "NoCredentials",
    "Platform",
    "PlatformManifest",
    "RegistryAuthError",
    "RegistryClient",
    "RegistryError",
    "RegistryHTTPError",
    "RegistryOptions",
    "RegistryTLSError",
    "RegistryTimeout",
    "RegistryUnreachable",
    "Reply",
    "Resolved",
    "Target",
    "make_target",
    "parse_docker_config",
    "parse_www_authenticate",
    "resolve_digest",
]
