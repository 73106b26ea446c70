"""The simulated host's containers policy: may ``bootc switch``/``upgrade`` pull this image?

Real bootc pulls through containers/image (skopeo's image proxy), which evaluates the
host's ``containers-policy.json(5)`` (``ROOT/etc/containers/policy.json``, else
``ROOT/usr/share/containers/policy.json``) when it opens the image, **with or without**
``--enforce-container-sigpolicy``: a ``reject`` or an unmet ``sigstoreSigned`` refuses
the pull either way. What the flag adds (ostree-ext's ``SignatureSource::ContainerPolicy``,
kept in the deployment's origin as ``spec.image.signature: containerPolicy``, so a later
``bootc upgrade`` enforces it too) is a refusal of a policy that accepts anything: no
policy file at all, or a ``default`` that is exactly ``[{"type": "insecureAcceptAnything"}]``
("containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage").

Simulated: the ``docker`` transport's scopes (the exact reference, the repository, its
parent namespaces, ``*.domain`` wildcards, ``""``), else ``default``; every requirement of
the chosen list must accept (containers/image's AND). Requirement types:

- ``insecureAcceptAnything``: accepts;
- ``reject``: "Running image docker://REF is rejected by policy.";
- ``sigstoreSigned`` with ``keyPath``/``keyPaths``/``keyData``/``keyDatas`` (cosign public
  keys): the image's cosign signature (the ``sha256-<hex>.sig`` manifest of the digest the
  reference names at the registry, the index digest for a multi-arch image) is verified
  with ``bootc_operator.registry.signature`` (the operator's own pure verifier, run with
  the interpreter's site-packages for ``cryptography``); ``signedIdentity`` is checked for
  the default ``matchRepoDigestOrExact`` and ``matchRepository`` (the signed repository
  must be the image's). Signatures are looked for only where the host's
  ``containers-registries.d(5)`` says ``use-sigstore-attachments: true`` for the image
  (``ROOT/etc/containers/registries.d/*.yaml``, read as JSON, which is YAML too: the
  ``docker`` scope that names the image most specifically, else ``default-docker``), as
  containers/image looks for them; elsewhere the image counts as unsigned. No
  signature: "A signature was required, but no signature exists"; a payload for
  another digest: "Signature for digest does not match"; none by these keys:
  "cryptographic signature verification failed: ...". Images from the catalog (no
  registry) have no signatures.
- anything else (``signedBy`` GPG, Fulcio/Rekor keyless, ``signedBaseLayer``): the switch
  fails saying the simulation does not model it.

A host without a policy file accepts anything unless the flag is given (the real
containers/image would fail without one, but every simulated host would then need one).
The messages are containers/image's; ``bootc.py`` wraps them in bootc's contexts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hack.fakebootc.imageref import Ref

POLICY_FILES = ("etc/containers/policy.json", "usr/share/containers/policy.json")
REGISTRIES_D = "etc/containers/registries.d"
#: the registries.d file ``set_policy`` writes on both test hosts (``attachments``)
REGISTRIES_D_FILE = "50-bootc-operator-tests.yaml"
#: ``spec.image.signature`` of a deployment switched to with ``--enforce-container-sigpolicy``
CONTAINER_POLICY = "containerPolicy"
INSECURE_ACCEPT_ANYTHING = "insecureAcceptAnything"
INSECURE_DEFAULT = (
    "containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage"
)
NO_POLICY = (
    "Resolving containers policy path: No containers policy.json found; checked "
    "$CONTAINERS_POLICY_JSON, user config dir, and system paths"
)
NOT_SIGNED = "A signature was required, but no signature exists"


class PolicyInsecure(Exception):
    """``--enforce-container-sigpolicy`` and a policy that accepts anything (or none)."""


class PolicyRejected(Exception):
    """The policy refuses the image; the message is containers/image's."""


@dataclass(frozen=True)
class Signatures:
    """What the registry holds for one digest: the ``sha256-<hex>.sig`` manifest's body
    (None: none) and the payload blobs by digest."""

    digest: str
    manifest: bytes | None
    payloads: Mapping[str, bytes] = field(default_factory=dict)


#: fetches the signatures of the image (None: the image has no registry, e.g. the catalog)
SignatureSource = Callable[[], Signatures | None]


def policy_file(root: Path) -> Path | None:
    for rel in POLICY_FILES:
        path = root / rel
        if path.is_file():
            return path
    return None


def load_policy(root: Path) -> dict[str, Any] | None:
    """The host's policy document; None without a policy file."""
    path = policy_file(root)
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PolicyRejected(f'invalid policy in "{path}": {exc}') from None
    if not isinstance(doc, dict):
        raise PolicyRejected(f'invalid policy in "{path}": not a JSON object')
    return doc


def default_is_insecure(policy: Mapping[str, Any]) -> bool:
    """ostree-ext's check: ``default`` is exactly one ``insecureAcceptAnything``."""
    default = policy.get("default")
    return (
        isinstance(default, list)
        and len(default) == 1
        and isinstance(default[0], dict)
        and default[0].get("type") == INSECURE_ACCEPT_ANYTHING
    )


def docker_scopes(ref: Ref) -> list[str]:
    """The ``docker`` transport scopes that may name ``ref``, most specific first
    (containers/image's ``PolicyConfigurationIdentity`` and ``...Namespaces``, then ``""``)."""
    repo = f"{ref.registry}/{ref.repository}"
    scopes = []
    if ref.digest:
        scopes.append(f"{repo}@{ref.digest}")
    elif ref.tag:
        scopes.append(f"{repo}:{ref.tag}")
    else:
        scopes.append(f"{repo}:latest")
    parts = repo.split("/")
    scopes += ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]
    host_parts = ref.host.split(".")
    scopes += ["*." + ".".join(host_parts[n:]) for n in range(1, len(host_parts))]
    scopes.append("")
    return scopes


def requirements_for(policy: Mapping[str, Any], ref: Ref) -> list[Any]:
    """The requirement list that applies to ``ref`` (the first scope present wins)."""
    transports = policy.get("transports")
    docker = transports.get("docker") if isinstance(transports, dict) else None
    if isinstance(docker, dict):
        for scope in docker_scopes(ref):
            if scope in docker:
                reqs = docker[scope]
                return reqs if isinstance(reqs, list) else []
    default = policy.get("default")
    return default if isinstance(default, list) else []


def registries_d(attachments: Sequence[str]) -> str:
    """A containers-registries.d(5) file whose ``docker`` scopes ``attachments`` (registries,
    repositories) keep sigstore signatures as OCI attachments in the registry (cosign's
    ``sha256-<hex>.sig``). JSON, which is YAML too."""
    scopes = {scope: {"use-sigstore-attachments": True} for scope in attachments}
    return json.dumps({"docker": scopes}, indent=2) + "\n"


def uses_sigstore_attachments(root: Path, ref: Ref) -> bool:
    """Whether the host's registries.d says ``use-sigstore-attachments`` for ``ref``: the
    most specific ``docker`` scope naming it, else ``default-docker`` (containers/image's
    ``registryConfiguration``; its files are merged, a scope given twice is an error)."""
    scopes: dict[str, Any] = {}
    default: Any = None
    folder = root / REGISTRIES_D
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise PolicyRejected(
                f"simulated host: {path} is not JSON (the simulation reads registries.d "
                f"as JSON): {exc}"
            ) from None
        if not isinstance(doc, dict):
            continue
        docker = doc.get("docker")
        if isinstance(docker, dict):
            scopes.update(docker)
        if doc.get("default-docker") is not None:
            default = doc["default-docker"]
    chosen = next((scopes[s] for s in docker_scopes(ref)[:-1] if s in scopes), default)
    return isinstance(chosen, dict) and chosen.get("use-sigstore-attachments") is True


def require_enforceable(policy: Mapping[str, Any] | None) -> None:
    """``--enforce-container-sigpolicy``'s own check, before anything is fetched: raise
    ``PolicyInsecure`` for no policy or one whose default accepts anything."""
    if policy is None:
        raise PolicyInsecure(NO_POLICY)
    if default_is_insecure(policy):
        raise PolicyInsecure(INSECURE_DEFAULT)


def check(
    policy: Mapping[str, Any] | None, ref: Ref, signatures: SignatureSource, *, root: Path
) -> None:
    """Raise ``PolicyRejected`` when the policy refuses ``ref`` (no policy: accepted);
    ``root`` resolves the key paths."""
    if policy is None:
        return
    reqs = requirements_for(policy, ref)
    if not reqs:
        raise PolicyRejected("List of verification policy requirements must not be empty")
    name = f"docker://{ref.registry}/{ref.repository}" + (
        f"@{ref.digest}" if ref.digest else f":{ref.tag or 'latest'}"
    )
    for req in reqs:
        kind = req.get("type") if isinstance(req, dict) else None
        if kind == INSECURE_ACCEPT_ANYTHING:
            continue
        if kind == "reject":
            raise PolicyRejected(f"Running image {name} is rejected by policy.")
        if kind == "sigstoreSigned":
            _check_sigstore(req, ref, signatures, root)
            continue
        raise PolicyRejected(
            f"simulated host: policy requirement type {kind!r} is not simulated "
            "(insecureAcceptAnything, reject and sigstoreSigned with public keys are)"
        )


def _keys_pem(req: Mapping[str, Any], root: Path) -> list[tuple[str, bytes]]:
    found: list[tuple[str, bytes]] = []
    paths = [req["keyPath"]] if isinstance(req.get("keyPath"), str) else []
    paths += [p for p in req.get("keyPaths") or [] if isinstance(p, str)]
    for raw in paths:
        path = root / raw.lstrip("/")
        try:
            found.append((raw, path.read_bytes()))
        except OSError as exc:
            raise PolicyRejected(f"reading key {raw}: {exc.strerror}") from None
    datas = [req["keyData"]] if isinstance(req.get("keyData"), str) else []
    datas += [d for d in req.get("keyDatas") or [] if isinstance(d, str)]
    for n, data in enumerate(datas):
        try:
            found.append((f"keyData {n + 1}", base64.b64decode(data, validate=True)))
        except ValueError:
            raise PolicyRejected(f"keyData {n + 1} is not base64") from None
    if not found:
        raise PolicyRejected(
            "simulated host: sigstoreSigned without keyPath/keyPaths/keyData/keyDatas "
            "(Fulcio/Rekor keyless) is not simulated"
        )
    return found


def _verifier() -> Any:
    """``bootc_operator.registry.signature``; the shims run without site-packages (``-S``),
    and ``cryptography`` lives there."""
    import importlib.util  # noqa: PLC0415

    if importlib.util.find_spec("cryptography") is None:
        import site  # noqa: PLC0415

        site.main()
    from bootc_operator.registry import signature  # noqa: PLC0415

    return signature


def _check_sigstore(
    req: Mapping[str, Any], ref: Ref, signatures: SignatureSource, root: Path
) -> None:
    identity = req.get("signedIdentity") or {"type": "matchRepoDigestOrExact"}
    id_type = identity.get("type") if isinstance(identity, dict) else None
    if id_type not in ("matchRepoDigestOrExact", "matchRepository"):
        raise PolicyRejected(f"simulated host: signedIdentity {id_type!r} is not simulated")
    pems = _keys_pem(req, root)
    found = signatures() if uses_sigstore_attachments(root, ref) else None
    if found is None or found.manifest is None:
        raise PolicyRejected(NOT_SIGNED)
    sig = _verifier()
    try:
        keys = [k for source, pem in pems for k in sig.load_public_keys(pem, source)]
    except sig.InvalidPublicKey as exc:
        raise PolicyRejected(str(exc)) from None
    verdict = sig.verify_signatures(
        ref.name, found.digest, found.manifest, dict(found.payloads), keys
    )
    outcome = sig.Outcome
    if verdict.outcome is outcome.VERIFIED:
        signed = (verdict.identity or "").split("@")[0]
        repo = f"{ref.registry}/{ref.repository}"
        if signed and signed not in (repo, ref.name) and signed.rsplit(":", 1)[0] != repo:
            raise PolicyRejected(f'Signature for identity "{verdict.identity}" is not accepted')
        return
    if verdict.outcome is outcome.NOT_SIGNED:
        raise PolicyRejected(NOT_SIGNED)
    if verdict.outcome is outcome.PAYLOAD_DIGEST_MISMATCH:
        raise PolicyRejected(f"Signature for digest does not match ({verdict.message})")
    if verdict.outcome is outcome.WRONG_KEY:
        raise PolicyRejected(
            "cryptographic signature verification failed: invalid signature when validating "
            f"ASN.1 encoded signature ({verdict.message})"
        )
    raise PolicyRejected(f"None of the signatures were accepted, reasons: {verdict.message}")
