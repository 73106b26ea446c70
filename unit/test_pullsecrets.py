"""Pull secret evaluation: hash of usable secrets, one clear problem otherwise."""

from __future__ import annotations

import base64
import json
from typing import Any

from bootc_operator.reconcilers.pullsecrets import evaluate_secret, ref_of

REF = ("bootc-operator", "pull")


def secret(value: bytes | None) -> dict[str, Any]:
    data = {} if value is None else {".dockerconfigjson": base64.b64encode(value).decode()}
    return {"metadata": {"name": "pull"}, "data": data}


GOOD = json.dumps({"auths": {"r.example.com": {"auth": "dTpw"}}}).encode()


def test_good_secret_hashes_content() -> None:
    a = evaluate_secret(REF, secret(GOOD))
    assert a.problem is None and a.hash and len(a.hash) == 32 and a.dockerconfigjson == GOOD
    b = evaluate_secret(REF, secret(GOOD.replace(b"dTpw", b"dTpx")))
    assert b.hash != a.hash
    assert evaluate_secret(REF, secret(GOOD)).hash == a.hash


def test_problems_name_the_secret_and_never_its_content() -> None:
    cases = {
        "not found": None,
        'no ".dockerconfigjson" key': secret(None),
        "not valid base64 JSON": {"data": {".dockerconfigjson": "%%%"}},
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
