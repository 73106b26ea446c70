"""What of a pull secret may reach a node's ``/run/ostree/auth.json``.

bootc's image library (containers-image) reads that file as root. Besides
``auths`` it honours ``credHelpers`` and ``credsStore``, which make it run a
``docker-credential-<name>`` program from ``PATH``; so a pull secret must never be
copied to a host as it is. ``host_auth_json(doc)`` (pure) is the one gate, used by
the controller (a pool's ``PullSecretError`` condition) and by the daemon (what it
writes; Degraded with the same reason otherwise):

- the top level must hold exactly ``auths``, an object; any other key (``credHelpers``,
  ``credsStore``, ``HttpHeaders``, ``proxies``, …) is rejected, naming the key, rather
  than dropped: a secret whose credentials live in a helper would otherwise be
  "accepted" and then fail every pull;
- each ``auths`` entry is an object of Docker's ``AuthConfig`` fields (``auth``,
  ``username``, ``password``, ``email``, ``serveraddress``, ``identitytoken``,
  ``registrytoken``); any other field is rejected by name;
- what is written keeps only what containers-image reads from an entry: ``auth``
  (built from ``username``/``password`` when absent) and ``identitytoken``. ``email``,
  ``serveraddress`` and ``registrytoken`` are dropped (containers-image ignores them);
  an entry left empty is dropped;
- the result is re-serialised with sorted keys, so the same credentials give the
  same bytes (the daemon's "file unchanged" check).

Messages name keys and fields, never values.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Final

#: Docker's AuthConfig fields: accepted in an ``auths`` entry.
ENTRY_FIELDS: Final = frozenset(
    {"auth", "username", "password", "email", "serveraddress", "identitytoken", "registrytoken"}
)
#: The fields written to the host (all containers-image reads from an entry).
HOST_FIELDS: Final = ("auth", "identitytoken")
_HELPER_KEYS: Final = frozenset({"credHelpers", "credsStore"})


class HostAuthError(ValueError):
    """Content that must not reach a host; the message names the key, never a value."""


def _name(key: object) -> str:
    return json.dumps(str(key))[:80]


def host_auth_json(doc: Any) -> bytes:
    """The ``{"auths": …}`` bytes to write on a host, or ``HostAuthError`` saying why not."""
    if not isinstance(doc, Mapping):
        raise HostAuthError("is not a JSON object")
    for key in doc:
        if key == "auths":
            continue
        why = (
            "a credential helper would run as root on every node"
            if key in _HELPER_KEYS
            else "it would be handed to bootc on every node"
        )
        raise HostAuthError(f'has a top-level {_name(key)} key; only "auths" is accepted ({why})')
    auths = doc.get("auths")
    if not isinstance(auths, Mapping):
        raise HostAuthError('has no "auths" object')
    out: dict[str, dict[str, str]] = {}
    for registry, entry in auths.items():
        if not isinstance(registry, str) or not registry.strip():
            raise HostAuthError('has an empty registry key in "auths"')
        if not isinstance(entry, Mapping):
            raise HostAuthError(f"has an auths entry for {_name(registry)} that is not an object")
        for field in entry:
            if field not in ENTRY_FIELDS:
                raise HostAuthError(
                    f"has an unknown field {_name(field)} in the auths entry for "
                    f"{_name(registry)} (accepted: {', '.join(sorted(ENTRY_FIELDS))})"
                )
        for field in entry:
            if entry[field] is not None and not isinstance(entry[field], str):
                raise HostAuthError(
                    f"has a {_name(field)} that is not a string in the auths entry for "
                    f"{_name(registry)}"
                )
        kept = {f: entry[f] for f in HOST_FIELDS if entry.get(f)}
        if "auth" not in kept and entry.get("username"):
            pair = f"{entry['username']}:{entry.get('password') or ''}"
            kept["auth"] = base64.b64encode(pair.encode()).decode()
        if kept:
            out[registry] = kept
    return json.dumps({"auths": out}, sort_keys=True, separators=(",", ":")).encode()
