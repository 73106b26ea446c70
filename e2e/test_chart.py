"""The Helm chart (``manifests/chart/bootc-operator``) through the real helm binary.

Renders (no cluster):
- with default values ``helm template`` renders the objects of ``install.yaml``,
  compared as parsed objects keyed by kind/namespace/name: the two cannot drift;
- with the metrics toggles on, the extra objects are those of the Prometheus
  kit (``kubectl kustomize manifests/prometheus``); the NetworkPolicies follow
  ``networkPolicy.*`` (off: none, nothing else changes);
- every value reaches the objects it is for, and the args it renders are flags
  the real CLI accepts;
- object names follow the release name (or ``fullnameOverride``);
- ``helm lint --strict`` passes; the packaged chart renders the same; bad values
  fail with a message naming the value.

On a real apiserver (etcd + kube-apiserver + kube-controller-manager, no
kubelet, so Pods are created but never run):
- the "Install with Helm" commands of docs/install.md, run as written: after the install
  every object of the render exists, the upgrade's value reaches the Pods the
  new ReplicaSet makes, the uninstall leaves no operator object behind and the
  CRDs stay;
- a release with another name in another namespace: every namespaced object,
  RoleBinding subject and the admission policy's username follow it, its
  ServiceAccounts get their rights (``kubectl auth can-i``) and its policy
  denies its daemon's token that carries no node name.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootc_operator import cli
from bootc_operator.api import constants as c
from bootc_operator.kube import BOOTC_NODES, ApiError
from bootc_operator.kube.rest import patch_object
from hack import userdocs
from hack.installgen import INSTALL_YAML, kustomize
from hack.testenv import ControlPlane, api_client, wait_for
from hack.testenv.controlplane import DEFAULT_CONTROLLERS
from hack.testenv.helm import CHART, Helm, Key, Obj, objects_by_key, resolve_helm
from hack.testenv.kube import token_kubeconfig

ROOT = Path(__file__).resolve().parents[1]
NS = "bootc-operator"
CRDS = {f"{c.POOL_PLURAL}.{c.GROUP}", f"{c.NODE_PLURAL}.{c.GROUP}"}
#: What a release must never leave behind (besides the CRDs, which stay).
KINDS = "deploy,ds,rs,pods,svc,sa,role,rolebinding,pdb,cm,netpol"
CLUSTER_KINDS = (
    "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding"
)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(resolve_helm(), tmp_path_factory.mktemp("helm"))


def install_objects() -> dict[Key, Obj]:
    return objects_by_key(yaml.safe_load_all(INSTALL_YAML.read_text()))


def container(objs: dict[Key, Obj], kind: str, name: str, namespace: str = NS) -> Obj:
    pod = objs[(kind, namespace, name)]["spec"]["template"]["spec"]
    containers: list[Obj] = pod["containers"]
    assert len(containers) == 1
    return containers[0]


def assert_same_objects(got: dict[Key, Obj], want: dict[Key, Obj]) -> None:
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, f"{key} differs:\n{yaml.safe_dump(got[key])}"


# ------------------------------------------------------------------ renders


def test_default_render_is_install_yaml(helm: Helm) -> None:
    """No helm.sh/chart or instance labels are added (Helm itself stamps its
    ownership annotations and managed-by label on the live objects), so the
    render equals install.yaml exactly, not up to a list of ignored fields."""
    assert_same_objects(helm.template(), install_objects())


def test_metrics_toggles_render_the_prometheus_kit(helm: Helm) -> None:
    kit = objects_by_key(yaml.safe_load_all(kustomize(ROOT / "manifests" / "prometheus")))
    on = {"enabled": True}
    values = {"metrics": {"serviceMonitor": on, "prometheusRule": on, "grafanaDashboard": on}}
    got = helm.template(values=values)
    extra = {k: v for k, v in got.items() if k not in install_objects()}
    assert_same_objects(extra, kit)
    # Each toggle alone renders only its own objects.
    for toggle, kinds in (
        # with the scraper's identity (issue 37 §15): its account, token and binding
        ("serviceMonitor", {"ServiceMonitor", "ServiceAccount", "Secret", "ClusterRoleBinding"}),
        ("prometheusRule", {"PrometheusRule"}),
        ("grafanaDashboard", {"ConfigMap"}),
    ):
        one = helm.template(values={"metrics": {toggle: on}})
        assert {k for k in one if k not in install_objects()} == {k for k in kit if k[0] in kinds}


def test_network_policies_follow_their_values(helm: Helm) -> None:
    """Issue 37 item 2: by default only the monitoring namespace reaches the metrics
    ports (install.yaml's NetworkPolicies); its name is a value; off renders none and
    changes nothing else."""
    default = helm.template()
    policies = {k for k in default if k[0] == "NetworkPolicy"}
    assert policies == {
        ("NetworkPolicy", NS, "bootc-operator-controller"),
        ("NetworkPolicy", NS, "bootc-operator-daemon"),
    }
    elsewhere = helm.template(values={"networkPolicy": {"monitoringNamespace": "observability"}})
    for key in policies:
        (metrics, probes) = elsewhere[key]["spec"]["ingress"]
        (source,) = metrics["from"]
        assert source["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "observability"
        }
        assert probes == {"ports": [{"port": "health", "protocol": "TCP"}]}
    off = helm.template(values={"networkPolicy": {"enabled": False}})
    assert_same_objects(off, {k: v for k, v in default.items() if k not in policies})


def test_values_reach_the_objects(helm: Helm) -> None:
    digest = "sha256:" + "b" * 64
    values: dict[str, Any] = {
        "image": {"repository": "quay.io/acme/bootc-operator", "tag": "v9", "digest": digest},
        "imagePullSecrets": [{"name": "acme-pull"}],
        "logLevel": "debug",
        "logFormat": "text",
        "controller": {
            "replicas": 3,
            "leaderElection": {"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s"},
            "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
            "extraArgs": ["--workers=8"],
            "extraEnv": [{"name": "TZ", "value": "UTC"}],
        },
        "daemon": {
            "resources": {"limits": {"memory": "300Mi"}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "bootc"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "enforceContainerSigpolicy": True,
            "extraArgs": ["--poll-interval=60s"],
            "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
        },
        "alertGate": {"prometheusURL": "http://prometheus-operated.monitoring:9090"},
    }
    objs = helm.template(values=values)
    ctl = container(objs, "Deployment", "bootc-operator-controller")
    dmn = container(objs, "DaemonSet", "bootc-operator-daemon")
    for box in (ctl, dmn):
        assert box["image"] == f"quay.io/acme/bootc-operator:v9@{digest}"
        assert {"--log-level=debug", "--log-format=text"} <= set(box["args"])
    assert {
        "--lease-duration=30s",
        "--renew-deadline=20s",
        "--retry-period=4s",
        "--prometheus-url=http://prometheus-operated.monitoring:9090",
    } <= set(ctl["args"])
    assert ctl["args"][-1] == "--workers=8"  # extra args last: they override the chart's
    assert dmn["args"][-1] == "--poll-interval=60s"
    assert ctl["env"][-1] == {"name": "TZ", "value": "UTC"}
    assert dmn["env"][-1] == {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}
    # Helm merges values into the defaults key by key.
    assert ctl["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert dmn["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"memory": "300Mi"},
    }
    deploy = objs[("Deployment", NS, "bootc-operator-controller")]["spec"]
    ds = objs[("DaemonSet", NS, "bootc-operator-daemon")]["spec"]
    assert deploy["replicas"] == 3
    for spec in (deploy, ds):
        assert spec["template"]["spec"]["imagePullSecrets"] == [{"name": "acme-pull"}]
    assert deploy["template"]["spec"]["nodeSelector"] == values["controller"]["nodeSelector"]
    assert deploy["template"]["spec"]["tolerations"] == values["controller"]["tolerations"]
    assert ds["template"]["spec"]["tolerations"] == values["daemon"]["tolerations"]
    # The label the controller puts on pool members stays required.
    assert ds["template"]["spec"]["nodeSelector"] == {
        "bootc.dev.node-restriction.kubernetes.io/managed": "",
        "kubernetes.io/os": "linux",
    }
    # What the chart passes is what the real CLI accepts.
    parser = cli.build_parser()
    parsed = parser.parse_args(ctl["args"])
    assert (parsed.log_level, parsed.lease_duration, parsed.workers) == ("debug", 30.0, 8)
    parsed_dmn = parser.parse_args(dmn["args"])
    assert (parsed_dmn.poll_interval, parsed_dmn.enforce_container_sigpolicy) == (60.0, True)


@pytest.mark.parametrize(
    ("release", "override", "fullname"),
    [
        ("bootc-operator", "", "bootc-operator"),
        ("my-bootc-operator", "", "my-bootc-operator"),
        ("edge", "", "edge-bootc-operator"),
        ("bootc-operator-x", "", "bootc-operator-x-bootc-operator"),
        ("r" * 53, "", "r" * 29 + "-bootc-operator"),
        ("edge", "prod-bootc-operator", "prod-bootc-operator"),
    ],
    ids=["default", "suffix", "other", "infix", "long", "override"],
)
def test_object_names_follow_the_release(
    helm: Helm, release: str, override: str, fullname: str
) -> None:
    values = {"fullnameOverride": override, "namespace": {"create": False}}
    objs = helm.template(release=release, namespace="ops", values=values)
    assert not [k for k in objs if k[0] == "Namespace"]  # namespace.create=false
    for kind, namespace, name in objs:
        if kind != "CustomResourceDefinition":
            assert name.startswith(f"{fullname}-"), (kind, name)
            assert namespace in ("", "ops") or name == f"{fullname}-events", (kind, name)
    args = container(objs, "Deployment", f"{fullname}-controller", "ops")["args"]
    assert f"--leader-election-id={fullname}-controller" in args
    # The alerting rules and the dashboard find the metrics jobs (Service names).
    services = [name for kind, _, name in objs if kind == "Service"]
    assert all(len(name) <= 63 for name in services), services
    kit = (CHART / "files" / "prometheusrule.yaml").read_text()
    kit += (CHART / "files" / "grafana-dashboard.json").read_text().replace('\\"', '"')
    jobs = set(re.findall(r'job=~"([^"]+)"', kit))
    assert jobs
    for pattern in jobs:
        assert [n for n in services if re.fullmatch(pattern, n)], (pattern, services)
    # The kubectl commands the alerts' texts suggest name this release's objects.
    values["metrics"] = {"prometheusRule": {"enabled": True}}
    rule = helm.template(release=release, namespace="ops", values=values)[
        ("PrometheusRule", "ops", fullname)
    ]
    texts = " ".join(
        " ".join(r["annotations"].values()) for g in rule["spec"]["groups"] for r in g["rules"]
    )
    assert re.findall(r"kubectl -n (\S+)", texts) == ["ops"] * 3, texts
    assert f"get ds {fullname}-daemon`" in texts and f"get lease {fullname}-controller " in texts
    assert "bootc-operator-daemon`" not in texts.replace(f"{fullname}-daemon`", "")


def test_metrics_plain_http_and_own_certificate(helm: Helm) -> None:
    """metrics.secure=false: plain HTTP, no review RBAC, ServiceMonitors scrape
    http; metrics.certSecret: the Secret is mounted and named by
    --metrics-cert-path (the default is install.yaml's: HTTPS, self-signed)."""
    parser = cli.build_parser()
    on = {"enabled": True}
    plain = helm.template(values={"metrics": {"secure": False, "serviceMonitor": on}})
    assert not [k for k in plain if "metrics-" in k[2] and k[0].startswith("ClusterRole")]
    for kind, name in (("Deployment", "controller"), ("DaemonSet", "daemon")):
        box = container(plain, kind, f"bootc-operator-{name}")
        assert parser.parse_args(box["args"]).metrics_secure is False
        (endpoint,) = plain[("ServiceMonitor", NS, f"bootc-operator-{name}")]["spec"]["endpoints"]
        assert endpoint["scheme"] == "http"
        assert "authorization" not in endpoint and "tlsConfig" not in endpoint
    assert not [k for k in plain if k[2].endswith("metrics-scraper-token")]  # no token needed
    own = helm.template(values={"metrics": {"certSecret": "bootc-operator-metrics-tls"}})
    for kind, name in (("Deployment", "controller"), ("DaemonSet", "daemon")):
        pod = own[(kind, NS, f"bootc-operator-{name}")]["spec"]["template"]["spec"]
        box = pod["containers"][0]
        parsed = parser.parse_args(box["args"])
        assert parsed.metrics_secure is True
        mount = next(m for m in box["volumeMounts"] if m["name"] == "metrics-cert")
        assert parsed.metrics_cert_path == mount["mountPath"]
        assert mount["readOnly"] is True
        volume = next(v for v in pod["volumes"] if v["name"] == "metrics-cert")
        assert volume["secret"] == {"secretName": "bootc-operator-metrics-tls"}


def test_leader_election_off_renders_no_election_flags(helm: Helm) -> None:
    values = {"controller": {"replicas": 1, "leaderElection": {"enabled": False}}}
    args = container(helm.template(values=values), "Deployment", "bootc-operator-controller")[
        "args"
    ]
    assert not [a for a in args if a.startswith("--leader-elect")]
    assert cli.build_parser().parse_args(args).leader_elect is False


def test_helm_lint_strict(helm: Helm) -> None:
    res = helm.run("lint", "--strict", str(CHART), "--namespace", NS)
    assert "1 chart(s) linted, 0 chart(s) failed" in res.stdout, res.stdout


def test_packaged_chart_renders_the_same(helm: Helm, tmp_path: Path) -> None:
    """``helm package`` keeps crds/ and files/ (what a chart repository serves)."""
    out = helm.run("package", str(CHART), "--destination", str(tmp_path)).stdout
    (archive,) = tmp_path.glob("bootc-operator-*.tgz")
    assert str(archive) in out
    on = {"enabled": True}
    values = {"metrics": {"prometheusRule": on, "grafanaDashboard": on}}
    assert helm.template(values=values, chart=archive) == helm.template(values=values)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # values.schema.json: the offending value's path and what is allowed
        (
            ("--set", "logLevel=verbose"),
            r"at '/logLevel': value must be one of '', 'debug', 'info', 'warning', 'error'",
        ),
        (("--set", "image.digest=sha256:abc"), r"at '/image/digest': 'sha256:abc' does not match"),
        (("--set", "controller.replica=3"), r"at '/controller': additional properties 'replica'"),
        (("--set", "controller.replicas=-1"), r"at '/controller/replicas': minimum: got -1"),
        (
            ("--set", "daemon.extraArgs={poll-interval=60s}"),
            r"at '/daemon/extraArgs/0': 'poll-interval=60s' does not match pattern '\^-'",
        ),
        (
            ("--set", "fullnameOverride=bootc-operator-prod"),
            r"at '/fullnameOverride': 'bootc-operator-prod' does not match pattern",
        ),
        # names are DNS labels / subdomains, labels label keys and values (issue 37 §14)
        (
            ("--set", "metrics.grafanaDashboard.namespace=Monitoring"),
            r"at '/metrics/grafanaDashboard/namespace': 'Monitoring' does not match pattern",
        ),
        (
            ("--set", "imagePullSecrets[0].name=my_secret"),
            r"at '/imagePullSecrets/0/name': .*'my_secret' does not match pattern",
        ),
        (
            ("--set", "metrics.certSecret=tls/cert"),
            r"at '/metrics/certSecret': 'tls/cert' does not match pattern",
        ),
        (
            ("--set", "metrics.serviceMonitor.labels.release=kube prometheus"),
            r"at '/metrics/serviceMonitor/labels/release': 'kube prometheus' does not match",
        ),
        (
            ("--set", "daemon.nodeSelector.-role=os"),
            r"at '/daemon/nodeSelector': additional properties '-role' not allowed",
        ),
        (
            ("--set-string", "networkPolicy.monitoringNamespace=Mon itoring"),
            r"at '/networkPolicy/monitoringNamespace': 'Mon itoring' does not match pattern",
        ),
        # the templates' own checks
        (
            ("--set", "controller.leaderElection.enabled=false"),
            r"controller\.replicas=2 without leader election",
        ),
        (("--namespace", "default"), r'namespace "default": install with --namespace NAME'),
    ],
    ids=[
        "enum",
        "digest",
        "unknown-key",
        "minimum",
        "args",
        "fullname",
        "dashboard-namespace",
        "pull-secret",
        "cert-secret",
        "label-value",
        "label-key",
        "monitoring-namespace",
        "replicas",
        "namespace",
    ],
)
def test_bad_values_fail_with_a_clear_message(
    helm: Helm, args: tuple[str, ...], message: str
) -> None:
    res = helm.run("template", "bootc-operator", str(CHART), "--namespace", NS, *args, check=False)
    assert res.returncode != 0
    assert re.search(message, res.stderr), res.stderr


INJECTED = 'monitoring\n  labels:\n    injected: "true"'


def test_a_newline_in_a_name_cannot_inject_yaml(helm: Helm, tmp_path: Path) -> None:
    """Issue 37 §14: a dashboard namespace with a newline is refused by the schema,
    naming the value; rendered anyway (no schema), it stays one quoted string."""
    values = {"metrics": {"grafanaDashboard": {"enabled": True, "namespace": INJECTED}}}
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    argv = ["template", "bootc-operator", str(CHART), "--namespace", NS, "--values", str(file)]
    refused = helm.run(*argv, check=False)
    assert refused.returncode != 0, refused.stdout
    pattern = r"at '/metrics/grafanaDashboard/namespace': .* does not match pattern"
    assert re.search(pattern, refused.stderr), refused.stderr
    rendered = helm.run(*argv, "--skip-schema-validation")
    (dashboard,) = (
        d
        for d in yaml.safe_load_all(rendered.stdout)
        if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-grafana-dashboard")
    )
    assert dashboard["metadata"]["namespace"] == INJECTED
    assert "injected" not in dashboard["metadata"]["labels"], dashboard["metadata"]


# ------------------------------------------------------------------ a real apiserver


@pytest.fixture(scope="module")
def cluster(helm: Helm) -> Iterator[tuple[ControlPlane, Helm]]:
    # A control plane of its own: the chart installs the CRDs (from crds/), which
    # the shared one already has. The workload controllers turn the Deployment
    # into ReplicaSets and Pods (which no kubelet runs).
    controllers = (*DEFAULT_CONTROLLERS, "deployment-controller", "replicaset-controller")
    with ControlPlane(crd_dir=None, controllers=controllers) as cp:
        yield cp, Helm(helm.binary, cp.state_dir / "helm", cp.kubeconfig)


def documented_helm_commands() -> list[str]:
    """The shell lines of the "Install with Helm" code block of docs/install.md (the
    README's Helm lines are lines of it: unit/test_docs.py)."""
    section = userdocs.section((ROOT / "docs" / "install.md").read_text(), "Install with Helm")
    block = next((b for b in userdocs.blocks(section) if b.language == "sh"), None)
    assert block, "no sh block under ## Install with Helm"
    return [line for line in block.body.splitlines() if line.strip()]


def live(cp: ControlPlane, key: Key) -> Obj | None:
    kind, namespace, name = key
    args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
    if namespace:
        args += ["-n", namespace]
    out = cp.kubectl(*args).stdout
    return json.loads(out) if out.strip() else None


def controller_pods_with(cp: ControlPlane, arg: str) -> list[str]:
    """The live (not deleting) controller Pods whose container has ARG."""
    out = cp.kubectl(
        "get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=controller", "-o", "json"
    ).stdout
    return [
        p["metadata"]["name"]
        for p in json.loads(out)["items"]
        if arg in p["spec"]["containers"][0]["args"] and not p["metadata"].get("deletionTimestamp")
    ]


def assert_nothing_left(cp: ControlPlane, namespaces: list[str]) -> bool:
    """Operator objects still on the server (by the chart's name label), and the
    namespaces (a Namespace goes once kube-controller-manager has emptied it)."""
    sel = "app.kubernetes.io/name=bootc-operator"
    names = cp.kubectl("get", CLUSTER_KINDS, "-l", sel, "-o", "name").stdout.split()
    for ns in namespaces:
        names += cp.kubectl("get", KINDS, "-n", ns, "-l", sel, "-o", "name").stdout.split()
    present = cp.kubectl("get", "namespaces", "-o", "name").stdout.split()
    names += [n for n in present if n.split("/", 1)[1] in namespaces and n != "namespace/default"]
    assert names == [], "left behind"
    return True


async def test_documented_install_upgrade_uninstall(cluster: tuple[ControlPlane, Helm]) -> None:
    cp, helm = cluster
    commands = documented_helm_commands()
    steps = [
        next(i for i, line in enumerate(commands) if f"helm {verb} " in line)
        for verb in ("install", "upgrade", "uninstall")
    ]
    assert steps == sorted(steps), commands
    env = {
        **helm.env,
        "PATH": f"{helm.binary.parent}:{cp.bin_dir}:{os.environ['PATH']}",
    }

    def run(line: str) -> None:
        res = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", line],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert res.returncode == 0, f"{line}\n{res.stdout}{res.stderr}"

    rendered = helm.template()
    for i, line in enumerate(commands):
        await asyncio.to_thread(run, line)
        if i == steps[0]:
            # Every object of the render (= install.yaml) is on the server.
            missing = [k for k in rendered if await asyncio.to_thread(live, cp, k) is None]
            assert missing == []
            assert helm.run("status", "bootc-operator", "-n", NS).stdout.count("deployed") == 1
        elif i == steps[1]:
            upgraded = [w for w in shlex.split(line) if w.startswith("logLevel=")]
            flag = "--log-level=" + upgraded[0].split("=", 1)[1]

            # The Deployment's new ReplicaSet makes Pods whose spec carries the value.
            assert await wait_for(
                functools.partial(controller_pods_with, cp, flag),
                60,
                f"controller Pods with {flag}",
            )
            ds = await asyncio.to_thread(live, cp, ("DaemonSet", NS, "bootc-operator-daemon"))
            assert ds is not None
            assert flag in ds["spec"]["template"]["spec"]["containers"][0]["args"]

    # Uninstalled: nothing of the operator is left (the namespace goes with it
    # once kube-controller-manager has emptied it); the CRDs stay.
    await wait_for(
        lambda: assert_nothing_left(cp, [NS, "default"]),
        120,
        "no operator objects left",
        ignore=(AssertionError,),
    )
    crds = cp.kubectl("get", "crd", "-o", "name").stdout.split()
    assert {f"customresourcedefinition.apiextensions.k8s.io/{n}" for n in CRDS} <= set(crds)


async def test_another_release_name_and_namespace(cluster: tuple[ControlPlane, Helm]) -> None:
    cp, helm = cluster
    ns, release = "ops-bootc", "edge"
    cp.kubectl("create", "namespace", ns)
    helm.run("install", release, str(CHART), "--namespace", ns, "--take-ownership")
    try:
        rendered = helm.template(release=release, namespace=ns)
        for key in rendered:
            kind, namespace, name = key
            if kind in ("CustomResourceDefinition", "Namespace"):
                continue
            assert name.startswith("edge-bootc-operator"), key
            if namespace:
                # Events about cluster-scoped objects live in "default".
                assert namespace == ns or name == "edge-bootc-operator-events", key
            server = await asyncio.to_thread(live, cp, key)
            assert server is not None, key
            assert server["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == ns
            for subject in server.get("subjects", []):
                assert subject["namespace"] == ns, key
        policy = live(
            cp, ("ValidatingAdmissionPolicy", "", "edge-bootc-operator-daemon-node-scope")
        )
        assert policy is not None
        (cond,) = policy["spec"]["matchConditions"]
        assert "'system:serviceaccount:ops-bootc:edge-bootc-operator-daemon'" in cond["expression"]
        dep = live(cp, ("Deployment", ns, "edge-bootc-operator-controller"))
        assert dep is not None
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--leader-election-id=edge-bootc-operator-controller" in args
        role = live(cp, ("Role", ns, "edge-bootc-operator-leader-election"))
        assert role is not None
        assert role["rules"][1]["resourceNames"] == ["edge-bootc-operator-controller"]
        # The RBAC and the admission policy work for the release's ServiceAccounts.
        ctl_user = f"system:serviceaccount:{ns}:edge-bootc-operator-controller"
        dmn_user = f"system:serviceaccount:{ns}:edge-bootc-operator-daemon"
        for user, verb, what, where in (
            (ctl_user, "update", "leases/edge-bootc-operator-controller", ns),
            (ctl_user, "list", "secrets", ns),
            (ctl_user, "create", "events", "default"),
            (dmn_user, "watch", f"{c.NODE_PLURAL}.{c.GROUP}", ""),
        ):
            can = cp.kubectl("auth", "can-i", verb, what, "-n", where or "default", "--as", user)
            assert can.stdout.strip() == "yes", (user, verb, what)
        node = {
            "apiVersion": c.API_VERSION,
            "kind": c.NODE_KIND,
            "metadata": {"name": "worker-1"},
            "spec": {
                "desiredImage": "quay.io/example/os@sha256:" + "a" * 64,
                "desiredImageState": "Staged",
            },
        }
        cp.kubectl("create", "-f", "-", input=json.dumps(node))
        # A daemon token not bound to a Pod carries no node name: the release's
        # policy matches the daemon and denies it (RBAC alone would allow the patch).
        token = cp.kubectl("create", "token", "edge-bootc-operator-daemon", "-n", ns).stdout
        path = cp.state_dir / "edge.kubeconfig"
        kubeconfig = token_kubeconfig(cp.kubeconfig, token.strip(), path)
        async with await api_client(kubeconfig) as daemon:
            with pytest.raises(ApiError) as denied:
                await patch_object(
                    daemon,
                    BOOTC_NODES,
                    "worker-1",
                    {"status": {"observedGeneration": 1}},
                    subresource="status",
                )
        assert denied.value.status == 403
        assert "edge-bootc-operator-daemon-node-scope" in str(denied.value)
        assert "token carries no node name" in str(denied.value)
        cp.kubectl("delete", f"{c.NODE_PLURAL}.{c.GROUP}", "worker-1")
        # Adopted from `kubectl create namespace` and labelled for the daemon.
        ns_obj = live(cp, ("Namespace", "", ns))
        assert ns_obj is not None
        assert ns_obj["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    finally:
        helm.run("uninstall", release, "--namespace", ns)
    await wait_for(
        lambda: assert_nothing_left(cp, [ns, "default"]),
        120,
        "no operator objects left",
        ignore=(AssertionError,),
    )
