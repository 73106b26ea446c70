"""placement_plan: the managed labels a Node should carry."""

from __future__ import annotations

from bootc_operator.api import constants as c
from bootc_operator.policy.placement_plan import managed_label_patch, wants_look

M, LEGACY = c.MANAGED_LABEL, c.LEGACY_MANAGED_LABEL


def test_the_managed_label_cannot_be_set_by_a_kubelet() -> None:
    # NodeRestriction forbids kubelets the node-restriction.kubernetes.io domain
    # and its subdomains.
    prefix = M.split("/")[0]
    assert prefix.endswith(".node-restriction.kubernetes.io")
    assert LEGACY == "bootc.dev/managed"


def test_managed_label_patch() -> None:
    assert managed_label_patch({}, True) == {M: "", LEGACY: ""}
    assert managed_label_patch({M: "", LEGACY: ""}, True) == {}
    assert managed_label_patch({M: "x", LEGACY: ""}, True) == {M: ""}
    assert managed_label_patch({M: ""}, True) == {LEGACY: ""}  # an upgrade from before
    assert managed_label_patch({LEGACY: ""}, True) == {M: ""}  # taken over from Go
    assert managed_label_patch({M: "", LEGACY: ""}, False) == {M: None, LEGACY: None}
    assert managed_label_patch({LEGACY: ""}, False) == {LEGACY: None}
    assert managed_label_patch({}, False) == {}
    assert managed_label_patch({"other": "1"}, False) == {}


def test_wants_look() -> None:
    def node(**labels: str) -> dict[str, object]:
        return {"metadata": {"name": "n", "labels": labels}}

    labelled = {"metadata": {"name": "n", "labels": {M: ""}}}
    assert wants_look(labelled, has_bootc_node=False)
    assert not wants_look(labelled, has_bootc_node=True)
    # A pool selects it: membership is about to create its BootcNode, or is
    # handing it from one pool to another.
    assert not wants_look(labelled, has_bootc_node=False, selected=True)
    assert wants_look({"metadata": {"labels": {LEGACY: ""}}}, has_bootc_node=False)
    assert not wants_look(node(other="1"), has_bootc_node=False)
    assert not wants_look({"metadata": {}}, has_bootc_node=False)
    assert not wants_look(None, has_bootc_node=False)
