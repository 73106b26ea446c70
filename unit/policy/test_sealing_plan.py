"""The controller's decision to (re)seal a member's pull secret."""

from __future__ import annotations

from typing import Any

import pytest

from bootc_operator.policy.sealing_plan import SealAction, seal_action

REF = {"name": "pull", "namespace": "bootc-operator"}
OTHER_REF = {"name": "pull-2", "namespace": "bootc-operator"}
H1, H2 = "1" * 32, "2" * 32
K1, K2 = "a" * 32, "b" * 32


def spec(ref: Any = REF, h: str | None = H1, kid: str | None = K1) -> dict[str, Any]:
    out: dict[str, Any] = {"desiredImage": "r/os@sha256:" + "0" * 64}
    if ref is not None:
        out["pullSecretRef"], out["pullSecretHash"] = ref, h
    if kid is not None:
        out["sealedPullSecret"] = {"keyID": kid, "data": "ZGF0YQ=="}
    return out


@pytest.mark.parametrize(
    ("current", "ref", "h", "key", "want"),
    [
        # sealed for this version and this key: nothing to do
        (spec(), REF, H1, K1, SealAction.KEEP),
        # the daemon restarted with a new key: seal again
        (spec(), REF, H1, K2, SealAction.SEAL),
        # the Secret changed (new hash) or another Secret is named: seal the new one
        (spec(), REF, H2, K1, SealAction.SEAL),
        (spec(), OTHER_REF, H1, K1, SealAction.SEAL),
        # not sealed yet (a new member whose daemon just published its key)
        (spec(kid=None), REF, H1, K1, SealAction.SEAL),
        (spec(ref=None, kid=None), REF, H1, K1, SealAction.SEAL),
        # no key published yet: nothing to seal to
        (spec(ref=None, kid=None), REF, H1, None, SealAction.KEEP),
        (spec(kid=None), REF, H2, None, SealAction.KEEP),
        # ... and a blob of another version goes (it would not open with the new hash)
        (spec(), REF, H2, None, SealAction.CLEAR),
        # ... but one of this version stays (the key may come back the same: the
        # controller cannot tell a stale status from a daemon that lost its key)
        (spec(), REF, H1, None, SealAction.KEEP),
        # the pool names no pull secret any more
        (spec(), None, None, K1, SealAction.CLEAR),
        (spec(kid=None), None, None, K1, SealAction.KEEP),
        (spec(ref=None, kid=None), None, None, None, SealAction.KEEP),
        # a malformed blob on the server is replaced
        ({**spec(), "sealedPullSecret": "junk"}, REF, H1, K1, SealAction.SEAL),
    ],
)
def test_seal_action(
    current: dict[str, Any], ref: Any, h: str | None, key: str | None, want: SealAction
) -> None:
    assert seal_action(current, ref, h, key) is want
