"""What the kit's simulated kubelets write (hack.testenv.kubelet): the Pod readiness
a kubelet's status sync restores after the node-lifecycle controller marked a Pod
NotReady."""

from __future__ import annotations

from typing import Any

from hack.testenv.kubelet import pod_ready_again


def pod(
    ready: str, containers_ready: str = "True", phase: str = "Running", **meta: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "default", **meta},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": ready},
                {"type": "ContainersReady", "status": containers_ready},
            ],
        },
    }


def test_a_running_pod_marked_not_ready_with_ready_containers_gets_ready_back() -> None:
    patch = pod_ready_again(pod("False"))
    assert patch is not None
    (cond,) = patch["status"]["conditions"]
    assert (cond["type"], cond["status"]) == ("Ready", "True")
    assert cond["lastTransitionTime"].endswith("Z")


def test_pods_that_are_ready_starting_or_going_are_left_alone() -> None:
    assert pod_ready_again(pod("True")) is None
    # containers not ready: kwok (the container runtime) has not started them
    assert pod_ready_again(pod("False", containers_ready="False")) is None
    assert pod_ready_again(pod("False", phase="Pending")) is None
    assert pod_ready_again(pod("False", phase="Succeeded")) is None
    assert pod_ready_again(pod("False", deletionTimestamp="2026-01-01T00:00:00Z")) is None
    assert pod_ready_again({"metadata": {"name": "new"}}) is None
