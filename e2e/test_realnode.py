"""The real-node tier: the image built here runs ``install.yaml``'s Deployment and
DaemonSet as real pods on real kubelet + containerd + runc nodes
(``hack.testenv.realnode``) joined to a harness control plane, with their real
ServiceAccounts and Pod-bound tokens, probes, securityContext, Pod Security labels
and admission policy. Only ``e2e/testdata/realnode`` differs from the shipped install.
Each node is a real-bootc host (``hack.realbootc``: the real bootc and libostree on a
real ostree sysroot booted as ``/`` of the node's namespaces), booted into a real
bootc image from the harness registry; containerd and the kubelet are its services.

One rollout end to end on ``real-node`` (the controller runs on ``infra-node``): the
daemon pod nsenters into the host (the node's PID 1) where the real ``bootc switch``
pulls and stages the pool's new image, the controller cordons, evicts a pod under a
PodDisruptionBudget and asks for the reboot (``systemctl reboot`` on the host), the
node reboots (every container killed, ``ostree admin finalize-staged``, the new
deployment booted, containerd and the kubelet started on it), the daemon pod
restarts and reports what the real bootc says is booted, the node is uncordoned and
the pool turns UpToDate. Then what users see (``kubectl get bn``, the Node's boot ID,
logs, Lease, metrics over HTTPS with a reader's token, the node's Event) and the
uninstall in the README's order (pools, then ``kubectl delete -f``). Figures are
printed (``pytest -s``). Needs root; a missing prerequisite fails in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.helpers import run_ok, wait_for
from e2e.hostkit import real_build
from hack.realbootc.build import Build
from hack.realbootc.host import Host, make_host
from hack.realbootc.images import bootc_image, push_bootc_image
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
from hack.testenv.registry import Registry

pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.realbootc,
    pytest.mark.timeout(900),
]
OVERLAY = REPO_ROOT / "e2e" / "testdata" / "realnode" / "kustomization.yaml"
IMAGE = "localhost/bootc-operator:realnode"
NS = "bootc-operator"
OS_REPO = "realnode-os"


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


@dataclass(frozen=True)
class Images:
    """The nodes' OS images: real bootc images in the harness registry, ``repo@digest``."""

    old: str
    new: str

    @staticmethod
    def digest(ref: str) -> str:
        return ref.rsplit("@", 1)[1]


async def push_images(registry: Registry) -> Images:
    refs = []
    for n in (1, 2):
        image = bootc_image(f"realnode-{n}", version=f"{n}.0")
        digest = await push_bootc_image(registry, registry.ref(OS_REPO, f"v{n}"), image)
        refs.append(registry.ref(OS_REPO, digest=digest))
    return Images(*refs)


def make_node(
    cp: ControlPlane, name: str, tmp: Path, booted: str, registry: Registry, build: Build
) -> RealNode[Host]:
    """A node on a real-bootc host booted into ``booted`` (pulled from ``registry``)."""
    host = make_host(tmp / name, booted=booted, insecure_registries=[registry.host], build=build)
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


async def test_install_and_one_rollout_on_real_nodes(
    cp: ControlPlane, registry: Registry, tmp_path: Path
) -> None:
    """infra-node runs the controller (a node draining the controller's own pod would
    wait for it forever), real-node is the pool's bootc host."""
    build = real_build()
    images = await push_images(registry)
    old, new = images.old, images.new
    with contextlib.ExitStack() as stack:
        started = time.monotonic()
        infra = stack.enter_context(make_node(cp, "infra-node", tmp_path, old, registry, build))
        await wait_for(
            lambda: node_ready(cp, infra.name), 120, "infra-node Ready", ignore=(AssertionError,)
        )
        print(f"\ninfra-node: host made, booted and Ready: {time.monotonic() - started:.1f} s")
        install = tmp_path / "install" / "install.yaml"
        install.parent.mkdir()
        install.write_text(render_install(cp, install.parent))
        started = time.monotonic()
        kubectl(cp, "apply", "--server-side", "-f", str(install))
        kubectl(cp, "-n", NS, "wait", "--for=condition=Ready", "pod", "--all", "--timeout=180s")
        print(f"apply to the controller pod Ready: {time.monotonic() - started:.1f} s")

        node = stack.enter_context(make_node(cp, "real-node", tmp_path, old, registry, build))
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
            stdin=json.dumps(pool_body("realnode", {"pool": "realnode"}, old)),
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
        # what the real bootc reports, through the daemon pod, as kubectl shows it
        assert booted_digest(cp, node.name) == images.digest(old)
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
        boot_id = node_boot_id(cp, node.name)
        # the kubelet reads the booted deployment's /etc/os-release
        assert node_os_image(cp, node.name) == "realbootc realnode-1"
        assert boot_id == node.host.boot_id, "the kubelet reports the host's boot"
        deployment = node.host.booted_deployment()

        # The rollout: the real bootc stages, cordon, drain (the victim evicted),
        # systemctl reboot, the host reboots into the new deployment, uncordon.
        started = time.monotonic()
        kubectl(
            cp,
            "patch",
            "bootcnodepool",
            "realnode",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"image": {"ref": new}}}),
        )
        await wait_for(lambda: node.host.reboot_request, 180, "a reboot request on real-node")
        requested = time.monotonic() - started
        assert node_unschedulable(cp, node.name)
        assert "victim" not in kubectl(cp, "get", "pods", "-o", "name")
        staged = node.host.status()["status"]["staged"]
        assert staged["image"]["imageDigest"] == images.digest(new), staged
        assert node.host.switch_calls() == [["switch", "--", new]]
        steps = [("the patch to the reboot request", requested)]
        await step(steps, "the host's reboot, its services started", asyncio.to_thread(node.reboot))
        await step(
            steps,
            "the kubelet reports the new boot",
            wait_for(
                lambda: node_boot_id(cp, node.name) == node.host.boot_id,
                120,
                "the Node's bootID the host's new one",
            ),
        )
        await step(
            steps,
            "the daemon reports the new booted image",
            wait_for(
                lambda: booted_digest(cp, node.name) == images.digest(new),
                180,
                "the BootcNode's booted digest the new one",
            ),
        )
        await step(
            steps,
            "the pool UpToDate",
            wait_for(
                lambda: pool_up_to_date(cp, new),
                240,
                "pool UpToDate on the new image",
                ignore=(AssertionError,),
            ),
        )
        print(f"rollout on the real-bootc node: {time.monotonic() - started:.1f} s")
        for what, seconds in steps:
            print(f"  {what}: {seconds:.1f} s")
        assert not node_unschedulable(cp, node.name)
        # as a user sees it: the booted digest the real bootc reports, the Node's new boot
        assert booted_digest(cp, node.name) == images.digest(new)
        assert rollback_digest(cp, node.name) == images.digest(old)
        table = kubectl(cp, "get", "bn", node.name)
        assert short(images.digest(new)) in table and "Idle" in table, table
        status = node.host.status()["status"]
        assert status["booted"]["image"]["imageDigest"] == images.digest(new)
        assert status["rollback"]["image"]["imageDigest"] == images.digest(old)
        assert node.host.booted_deployment() != deployment, "a new ostree deployment is /"
        assert node.host.boot_id != boot_id, "a full reboot is a new boot"
        assert node_os_image(cp, node.name) == "realbootc realnode-2", "the kubelet runs on v2"
        await wait_for(
            lambda: pod_ready_again(cp, daemon_pod(cp, node.name)),
            120,
            "the daemon pod restarted and Ready",
            ignore=(AssertionError,),
        )
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
            status_code, text = scrape(url, token)
            assert status_code == 200 and "bootc_operator" in text, (status_code, text[:500])

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


def daemon_rss_kib(node: RealNode[Host]) -> int:
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


async def step(steps: list[tuple[str, float]], what: str, done: Awaitable[object]) -> None:
    """Await ``done``; record how long it took as ``what``."""
    started = time.monotonic()
    await done
    steps.append((what, time.monotonic() - started))


def pod_ready_again(cp: ControlPlane, pod: str) -> bool:
    """The pod's containers restarted (a reboot) and it is Ready."""
    doc = json.loads(kubectl(cp, "-n", NS, "get", "pod", pod, "-o", "json"))
    status = doc.get("status") or {}
    ready = {c["type"]: c["status"] for c in status.get("conditions") or ()}.get("Ready")
    restarts = sum(s.get("restartCount", 0) for s in status.get("containerStatuses") or ())
    return ready == "True" and restarts >= 1


def bn_field(cp: ControlPlane, node: str, path: str) -> str:
    return kubectl(cp, "get", "bn", node, "-o", f"jsonpath={{{path}}}")


def booted_digest(cp: ControlPlane, node: str) -> str:
    return bn_field(cp, node, ".status.booted.imageDigest")


def rollback_digest(cp: ControlPlane, node: str) -> str:
    return bn_field(cp, node, ".status.rollback.imageDigest")


def short(digest: str) -> str:
    return digest.split(":", 1)[1][:12]


def node_boot_id(cp: ControlPlane, name: str) -> str:
    return kubectl(cp, "get", "node", name, "-o", "jsonpath={.status.nodeInfo.bootID}")


def node_os_image(cp: ControlPlane, name: str) -> str:
    return kubectl(cp, "get", "node", name, "-o", "jsonpath={.status.nodeInfo.osImage}")


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
