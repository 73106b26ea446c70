"""Pull secret evaluation: hash of usable secrets, one clear problem otherwise."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from bootc_operator.reconcilers.watchers.pullsecrets import evaluate_secret, ref_of

REF = ("bootc-operator", "pull")


def secret(value: bytes | None, uid: str = "u-1", rv: str = "100") -> dict[str, Any]:
    data = {} if value is None else {".dockerconfigjson": base64.b64encode(value).decode()}
    return {"metadata": {"name": "pull", "uid": uid, "resourceVersion": rv}, "data": data}


GOOD = json.dumps({"auths": {"r.example.com": {"auth": "dTpw"}}}).encode()


def test_good_secret_hashes_its_version() -> None:
    a = evaluate_secret(REF, secret(GOOD))
    assert a.problem is None and a.hash and len(a.hash) == 32 and a.dockerconfigjson == GOOD
    # a content change is an update: a new resourceVersion, a new hash
    b = evaluate_secret(REF, secret(GOOD.replace(b"dTpw", b"dTpx"), rv="101"))
    assert b.hash != a.hash
    # the same version read again (e.g. by a restarted controller): the same hash
    assert evaluate_secret(REF, secret(GOOD)).hash == a.hash
    # deleted and re-created with the same content: another Secret, another hash
    assert evaluate_secret(REF, secret(GOOD, uid="u-2")).hash != a.hash


def test_the_hash_reveals_nothing_of_the_content() -> None:
    """spec.pullSecretHash is readable cluster-wide: no offline guessing of the password."""
    a = evaluate_secret(REF, secret(GOOD))
    b = evaluate_secret(REF, secret(GOOD.replace(b"dTpw", b"dTpx")))  # same version
    assert a.hash == b.hash, "the hash does not depend on the content"
    for digest in (hashlib.sha256(GOOD).hexdigest(), hashlib.sha512(GOOD).hexdigest()):
        assert a.hash is not None and a.hash not in digest


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        (
            {"auths": {}, "credHelpers": {"r.example.com": "evil"}},
            'has a top-level "credHelpers" key; only "auths" is accepted (a credential '
            "helper would run as root on every node)",
        ),
        ({"auths": {}, "credsStore": "evil"}, '"credsStore" key'),
        ({"auths": {"r.example.com": {"auth": "dTpw"}}, "proxies": {}}, '"proxies" key'),
        ({"auths": {"r.example.com": {"auth": "dTpw", "helper": "x"}}}, 'unknown field "helper"'),
    ],
)
def test_credential_helpers_never_reach_the_nodes(doc: dict[str, Any], fragment: str) -> None:
    state = evaluate_secret(REF, secret(json.dumps(doc).encode()))
    assert state.hash is None and state.dockerconfigjson is None
    assert state.problem is not None and fragment in state.problem
    assert state.problem.startswith('pull secret bootc-operator/pull: ".dockerconfigjson" ')
    assert "evil" not in state.problem


def test_problems_name_the_secret_and_never_its_content() -> None:
    cases = {
        "not found": None,
        'no ".dockerconfigjson" key': secret(None),
        "not valid base64": {"data": {".dockerconfigjson": "%%%"}},
        # issue 27: RecursionError / int-digits ValueError from json.loads escaped
        "is not valid JSON (nested more than 64 levels deep)": secret(
            b'{"auths": {"r.example.com": {"auth": "dTpw", "x": ' + b"[" * 100_000
        ),
        "is not valid JSON (a number has too many digits)": secret(
            b'{"auths": {"r.example.com": {"auth": "dTpw", "x": ' + b"9" * 5000 + b"}}}"
        ),
        'no "auths" object': secret(b'{"registries": {}}'),
    }
    for fragment, obj in cases.items():
        state = evaluate_secret(REF, obj)
        assert state.hash is None and state.problem is not None
        assert fragment in state.problem and "bootc-operator/pull" in state.problem
        assert "dTpw" not in state.problem


def test_ref_of() -> None:
    assert ref_of({"spec": {"pullSecretRef": {"name": "a", "namespace": "b"}}}) == ("b", "a")
    assert ref_of({"spec": {}}) is None
    assert ref_of({"spec": {"pullSecretRef": {"name": "a"}}}) is None


@pytest.mark.parametrize(
    ("auths", "fragment"),
    [
        ({"r.example.com": {"auth": "%%%"}}, '"auth" value for "r.example.com" is not base64'),
        (
            {"r.example.com": {"auth": base64.b64encode(b"usernocolon").decode()}},
            "no colon",
        ),
        ({"r.example.com": "dTpw"}, 'auths entry for "r.example.com" is not a JSON object'),
        ({"r.example.com": {"auth": 42}}, '"auth" value for "r.example.com" is not a string'),
        ({"r.example.com": {"username": ["u"], "password": "p"}}, "are not strings"),
        ({"": {"auth": "dTpw"}}, "empty registry key"),
        # one bad entry among good ones is still a bad secret
        (
            {"good.example.com": {"auth": "dTpw"}, "bad.example.com": {"auth": "%%%"}},
            '"bad.example.com" is not base64',
        ),
    ],
)
def test_malformed_credentials_are_a_problem_whatever_the_ref(
    auths: dict[str, Any], fragment: str
) -> None:
    """The same check as the tag resolver's parser: a digest ref is no excuse."""
    state = evaluate_secret(REF, secret(json.dumps({"auths": auths}).encode()))
    assert state.hash is None and state.dockerconfigjson is None
    assert state.problem is not None
    assert fragment in state.problem
    assert state.problem.startswith("pull secret bootc-operator/pull: ")
    for content in ("usernocolon", "dXNlcm5vY29sb24", "dTpw", "%%%"):
        assert content not in state.problem


def test_entries_without_credentials_are_fine() -> None:
    # credential-helper leftovers: ignored by the parser, so not a problem either
    raw = json.dumps({"auths": {"a.example.com": {}, "b.example.com": {"auth": "dTpw"}}})
    assert evaluate_secret(REF, secret(raw.encode())).problem is None
