"""The real-node tier: the image built here runs ``install.yaml``'s Deployment and
DaemonSet as real pods on real kubelet + containerd + runc nodes
(``hack.testenv.realnode``) joined to a harness control plane, with their real
ServiceAccounts and Pod-bound tokens, probes, securityContext, Pod Security labels
and admission policy. Only ``e2e/testdata/realnode`` differs from the shipped install.

One rollout end to end on ``real-node`` (the controller runs on ``infra-node``): the
daemon pod nsenters into the simulated host (the node's PID 1) and stages, the
controller cordons, evicts a pod under a PodDisruptionBudget and asks for the
reboot, the node reboots (every container killed, the staged image booted, the
node started again), the daemon pod restarts, the node is uncordoned and the pool
turns UpToDate. Then what users see (logs, Lease, metrics over HTTPS with a
reader's token, the node's Event) and
the uninstall in the README's order (pools, then ``kubectl delete -f``). Figures are
printed (``pytest -s``). Needs root; a missing prerequisite fails in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import run_ok, wait_for
from hack.fakebootc.host import make_host
from hack.testenv import certs
from hack.testenv.controlplane import DEFAULT_CONTROLLERS, REPO_ROOT, ControlPlane
from hack.testenv.metricsreader import reader_token, scrape
from hack.testenv.pools import pool_body
from hack.testenv.realnode import (
    NODE_CONTROLLERS,
    PAUSE_IMAGE,
    RealNode,
    install_prerequisites,
    missing_prerequisites,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
OVERLAY = REPO_ROOT / "e2e" / "testdata" / "realnode" / "kustomization.yaml"
IMAGE = "localhost/bootc-operator:realnode"
NS = "bootc-operator"
OS = "quay.io/example/os"
OLD = f"{OS}@sha256:" + "1" * 64
NEW = f"{OS}@sha256:" + "2" * 64


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    """A control plane that real nodes join (node controllers, NodeRestriction, a
    client certificate for the kubelets), and the image built for them."""
    install_prerequisites()
    plane = ControlPlane(controllers=DEFAULT_CONTROLLERS + NODE_CONTROLLERS, scheduler=True)
    missing = missing_prerequisites(plane.bin_dir)
    if missing:
        plane.close()
        pytest.fail(f"the real-node tier needs: {', '.join(missing)}", pytrace=False)
    pair = certs.issue_client(plane.pki, "kube-apiserver-kubelet-client", ("system:masters",))
    plane.apiserver_extra_args += (
        f"--kubelet-client-certificate={pair.cert}",
        f"--kubelet-client-key={pair.key}",
        "--kubelet-preferred-address-types=InternalIP",
    )
    run_ok(
        "bash", REPO_ROOT / "hack" / "build-image.sh", env={**os.environ, "IMG": IMAGE}, timeout=900
    )
    with plane:
        yield plane


def make_node(cp: ControlPlane, name: str, tmp: Path) -> RealNode:
    host = make_host(tmp / name, booted=f"{OS}@sha256:" + "1" * 64)
    cache = Path(os.environ.get("BOOTC_OPERATOR_CACHE", Path.home() / ".cache/bootc-operator"))
    return RealNode(cp, host, name=name, images=[IMAGE], cache=cache / "realnode")


def kubectl(cp: ControlPlane, *args: str, stdin: str | None = None) -> str:
    res = subprocess.run(
        [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(cp.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert res.returncode == 0, f"kubectl {' '.join(args)}: {res.stderr}"
    return res.stdout


def render_install(cp: ControlPlane, directory: Path) -> str:
    port = cp.server.rsplit(":", 1)[1]
    text = (
        OVERLAY.read_text()
        .replace("DEFAULT", os.path.relpath(REPO_ROOT / "manifests" / "default", directory))
        .replace("IMAGE_NAME", IMAGE.rsplit(":", 1)[0])
        .replace("IMAGE_TAG", IMAGE.rsplit(":", 1)[1])
        .replace("API_PORT", port)
    )
    (directory / "kustomization.yaml").write_text(text)
    return kubectl(cp, "kustomize", str(directory))


async def test_install_and_one_rollout_on_real_nodes(cp: ControlPlane, tmp_path: Path) -> None:
    """infra-node runs the controller (a node draining the controller's own pod would
    wait for it forever), real-node is the pool's bootc host."""
    with contextlib.ExitStack() as stack:
        infra = stack.enter_context(make_node(cp, "infra-node", tmp_path))
        await wait_for(
            lambda: node_ready(cp, infra.name), 120, "infra-node Ready", ignore=(AssertionError,)
        )
        install = tmp_path / "install" / "install.yaml"
        install.parent.mkdir()
        install.write_text(render_install(cp, install.parent))
        started = time.monotonic()
        kubectl(cp, "apply", "--server-side", "-f", str(install))
        kubectl(cp, "-n", NS, "wait", "--for=condition=Ready", "pod", "--all", "--timeout=180s")
        print(f"\napply to the controller pod Ready: {time.monotonic() - started:.1f} s")

        node = stack.enter_context(make_node(cp, "real-node", tmp_path))
        await wait_for(
            lambda: node_ready(cp, node.name), 120, "real-node Ready", ignore=(AssertionError,)
        )
        kubectl(cp, "label", "node", node.name, "pool=realnode")
        # A workload with a PodDisruptionBudget that allows its eviction.
        kubectl(cp, "apply", "-f", "-", stdin=json.dumps(victim(node.name)))
        kubectl(cp, "wait", "--for=condition=Ready", "pod/victim", "--timeout=120s")
        kubectl(
            cp,
            "apply",
            "-f",
            "-",
            stdin=json.dumps(pool_body("realnode", {"pool": "realnode"}, OLD)),
        )
        started = time.monotonic()
        await wait_for(
            lambda: daemon_pod(cp, node.name),
            120,
            "the daemon pod on real-node",
            ignore=(AssertionError,),
        )
        kubectl(
            cp,
            "-n",
            NS,
            "wait",
            "--for=condition=Ready",
            "pod",
            "-l",
            "app.kubernetes.io/component=daemon",
            "--timeout=180s",
        )
        print(f"daemon pod Ready after the pool: {time.monotonic() - started:.1f} s")
        await wait_for(
            lambda: pool_up_to_date(cp),
            120,
            "pool UpToDate on the booted image",
            ignore=(AssertionError,),
        )
        daemon = daemon_pod(cp, node.name)
        print(f"daemon RSS in its container: {daemon_rss_kib(node) / 1024:.1f} MiB")
        logs = kubectl(cp, "-n", NS, "logs", daemon)
        assert "BootcNode cache synced" in logs
        # bound to the node's own address only: another run's real-node tier on this
        # machine binds the same ports on its own node address
        assert f"serving metrics on {node.node_ip}:8090 (HTTPS)" in logs
        assert f"serving probes on {node.node_ip}:8091" in logs
        controller_logs = kubectl(
            cp, "-n", NS, "logs", "-l", "app.kubernetes.io/component=controller", "--tail=-1"
        )
        assert f"serving metrics on {infra.node_ip}:8080 (HTTPS)" in controller_logs

        # The rollout: stage, cordon, drain (the victim evicted), reboot, uncordon.
        started = time.monotonic()
        kubectl(
            cp,
            "patch",
            "bootcnodepool",
            "realnode",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"image": {"ref": NEW}}}),
        )
        await wait_for(lambda: node.host.reboot_request, 180, "a reboot request on real-node")
        assert node_unschedulable(cp, node.name)
        assert "victim" not in kubectl(cp, "get", "pods", "-o", "name")
        node.reboot()
        await wait_for(
            lambda: pool_up_to_date(cp, NEW),
            240,
            "pool UpToDate on the new image",
            ignore=(AssertionError,),
        )
        print(f"rollout on the real node: {time.monotonic() - started:.1f} s")
        assert not node_unschedulable(cp, node.name)
        restarted = json.loads(
            kubectl(cp, "-n", NS, "get", "pod", daemon_pod(cp, node.name), "-o", "json")
        )
        assert restarted["status"]["containerStatuses"][0]["restartCount"] >= 1
        assert NEW.split("@")[1] in json.dumps(node.host.status()["status"]["booted"])
        described = kubectl(cp, "describe", "node", node.name)
        assert "bootc" in described.split("Events:", 1)[1]

        # What users see: the Lease held by the controller pod, both pods' metrics.
        controller = kubectl(
            cp, "-n", NS, "get", "pod", "-l", "app.kubernetes.io/component=controller", "-o", "name"
        )
        lease = json.loads(
            kubectl(cp, "-n", NS, "get", "lease", "bootc-operator-controller", "-o", "json")
        )
        assert lease["spec"]["holderIdentity"].startswith(controller.strip().split("/")[1])
        # HTTPS with a token allowed to read them (the install's RBAC reviews it).
        token = reader_token(cp.kubectl, "monitoring", "prometheus")
        for address in (f"{infra.node_ip}:8080", f"{node.node_ip}:8090"):
            url = f"https://{address}/metrics"
            assert scrape(url)[0] == 401
            status, text = scrape(url, token)
            assert status == 200 and "bootc_operator" in text, (status, text[:500])

        # Uninstall in the README's order: the pools first, while the controller runs
        # (it releases their nodes and removes its finalizer), then the install. The
        # install deleted with a pool present can hang: the controller may be gone
        # before the pool's finalizer is removed.
        kubectl(cp, "delete", "bootcnodepools", "--all", "--wait", "--timeout=120s")
        kubectl(cp, "delete", "-f", str(install), "--timeout=120s")
        assert "bootc-operator" not in kubectl(cp, "get", "ns", "-o", "name")
        assert not node_unschedulable(cp, node.name)
        labels = kubectl(cp, "get", "node", node.name, "-o", "jsonpath={.metadata.labels}")
        print(f"real-node's labels after the uninstall: {labels}")


def daemon_rss_kib(node: RealNode) -> int:
    """VmRSS of the daemon process of this node (its pod's NODE_NAME)."""
    mark = f"NODE_NAME={node.name}".encode()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                proc.name.isdigit()
                and b"daemon" in (proc / "cmdline").read_bytes()
                and mark in (proc / "environ").read_bytes().split(b"\0")
            ):
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
    raise AssertionError("no daemon process of this node")


def node_ready(cp: ControlPlane, name: str) -> bool:
    out = kubectl(
        cp, "get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
    )
    return out == "True"


def node_unschedulable(cp: ControlPlane, name: str) -> bool:
    return kubectl(cp, "get", "node", name, "-o", "jsonpath={.spec.unschedulable}") == "true"


def daemon_pod(cp: ControlPlane, node: str) -> str:
    out = kubectl(
        cp,
        "-n",
        NS,
        "get",
        "pod",
        "-l",
        "app.kubernetes.io/component=daemon",
        "--field-selector",
        f"spec.nodeName={node}",
        "-o",
        "name",
    )
    assert out.strip(), "no daemon pod yet"
    return out.strip().split("/")[1]


def pool_up_to_date(cp: ControlPlane, image: str | None = None) -> bool:
    pool = json.loads(kubectl(cp, "get", "bootcnodepool", "realnode", "-o", "json"))
    conds = {c["type"]: c["status"] for c in pool.get("status", {}).get("conditions", [])}
    if conds.get("UpToDate") != "True":
        return False
    return image is None or pool["spec"]["image"]["ref"] == image


def victim(node: str) -> dict[str, object]:
    labels = {"app": "victim"}
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "victim", "namespace": "default", "labels": labels},
                "spec": {
                    "nodeName": node,
                    "hostNetwork": True,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}
                    ],
                },
            },
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "victim", "namespace": "default"},
                "spec": {"minAvailable": 0, "selector": {"matchLabels": labels}},
            },
        ],
    }
