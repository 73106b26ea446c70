"""The Prometheus Operator kit (``manifests/prometheus``): structure, PromQL, schemas.

- Every PromQL expression of the alerting rules and of the Grafana dashboard
  parses with Prometheus' own parser (``hack/promql-check``, built from the Go
  module proxy and cached), selects only metrics the code exports, uses only
  label values the code sets (pool states, Degraded reasons), and groups only by
  labels those metrics (or the scrape) carry.
- The rules page on the situations a user cares about, each with a severity,
  a ``for`` and a readable summary. ``promtool`` (Debian's prometheus package,
  ``hack/install-promtool.sh``) checks the rules file and runs rule unit tests:
  from synthetic series, each alert fires at the time its ``for`` allows with
  the expected labels and rendered annotations, and not in the look-alike
  situations (a slow but progressing rollout, a paused pool, a leader present).
- The dashboard is well-formed Grafana JSON.
- The kit is accepted by a real kube-apiserver with the monitoring.coreos.com
  CRDs installed from schemas generated from prometheus-operator's published
  API types (``hack/gen-prometheus-crds``), and a malformed object is not.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import bootc_operator.daemon.metrics
import bootc_operator.reconcilers.metrics
import bootc_operator.runtime.events  # noqa: F401 - registers bootc_operator_events_total
from bootc_operator.api import constants as c
from bootc_operator.informers.metrics import informer_metrics
from bootc_operator.policy.poolstatus import MemberState
from bootc_operator.workqueue.metrics import workqueue_metrics
from hack.installgen import kustomize
from hack.testenv import ControlPlane, wait_for
from hack.testenv.kube import token_kubeconfig

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "manifests" / "prometheus"
PROM_CRDS = Path(__file__).parent / "testdata" / "prometheus-operator-crds"
NAMESPACE = "bootc-operator"
SERVICES = ("bootc-operator-controller-metrics", "bootc-operator-daemon-metrics")
# The ServiceMonitors send the token of the kit's own scraping identity, which may
# only read /metrics (scraper.yaml): every node receives it.
SCRAPER = "bootc-operator-metrics-scraper"
SCRAPER_TOKEN = {"name": f"{SCRAPER}-token", "key": "token"}
# Labels the scrape adds (Prometheus, the ServiceMonitors' relabelings).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container", "node"}
# Grafana's template variables, replaced by something valid before parsing.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$pool": ".*"}

Obj = dict[str, Any]


# ------------------------------------------------------------------ what the code exports


def exported_metrics() -> dict[str, set[str]]:
    """Sample name → label names, for every metric the controller and daemon expose."""
    workqueue_metrics()
    informer_metrics()
    names: dict[str, set[str]] = {"up": set()}
    collectors = list(getattr(REGISTRY, "_collector_to_names", {}))
    for collector in collectors:
        labels = set(getattr(collector, "_labelnames", ()))
        describe = getattr(collector, "describe", None)
        families = (describe() if describe else None) or collector.collect()
        for family in families:
            base = family.name
            suffixes = {
                "counter": ("_total", "_created"),
                "histogram": ("_bucket", "_sum", "_count", "_created"),
                "summary": ("", "_sum", "_count", "_created"),
                "info": ("_info",),
            }.get(family.type, ("",))
            for suffix in suffixes:
                extra = {"le"} if suffix == "_bucket" else set()
                names.setdefault(base + suffix, set()).update(labels | extra)
    return names


EXPORTED = exported_metrics()


def test_the_metrics_the_kit_relies_on_are_exported() -> None:
    for name in (
        "bootc_operator_pool_nodes",
        "bootc_operator_pool_up_to_date",
        "bootc_operator_pool_degraded",
        "bootc_operator_drain_blocked",
        "bootc_operator_drain_duration_seconds_bucket",
        "bootc_operator_leader",
        "controller_runtime_reconcile_errors_total",
        "workqueue_depth",
        "bootc_operator_daemon_last_status_refresh_timestamp_seconds",
    ):
        assert name in EXPORTED, name
    assert EXPORTED["bootc_operator_pool_nodes"] == {"pool", "state"}


# ------------------------------------------------------------------ the expressions


def rules() -> list[Obj]:
    doc = yaml.safe_load((KIT / "prometheusrule.yaml").read_text())
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def dashboard() -> Obj:
    dash: Obj = json.loads((KIT / "grafana-dashboard.json").read_text())
    return dash


def dashboard_panels() -> list[Obj]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def expressions() -> dict[str, str]:
    """Where → PromQL, for every rule and every dashboard query (variables substituted)."""
    exprs = {f"rule {r['alert']}": r["expr"] for r in rules()}
    for panel in dashboard_panels():
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            exprs[f"panel {panel['title']!r} {target['refId']}"] = expr
    return exprs


@pytest.fixture(scope="module")
def promql_check() -> Path:
    if shutil.which("go") is None:
        pytest.skip("the Go toolchain is needed to build hack/promql-check")
    res = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-promql-check.sh")],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        timeout=600,
    )
    return Path(res.stdout.strip().splitlines()[-1])


def test_two_checkouts_building_promql_check_at_once_build_it_once(
    promql_check: Path, tmp_path: Path
) -> None:
    # promql_check: Go is there and its build cache is warm, so this costs a link.
    """hack/build-promql-check.sh run twice at once into one empty cache (a scratch
    one): both succeed and print the same complete binary, built once (the other
    invocation waits for the lock, or finds it warm, depending on who is first)."""
    env = {**os.environ, "BOOTC_OPERATOR_CACHE": str(tmp_path)}
    procs = [
        subprocess.Popen(
            ["bash", str(ROOT / "hack" / "build-promql-check.sh")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    paths = {out.strip() for out, _ in results}
    assert len(paths) == 1
    built = Path(paths.pop())
    assert built.parent.parent == tmp_path / "bin"
    assert sum("build-promql-check: building " in err for _, err in results) == 1
    res = subprocess.run(
        [str(built)], input=json.dumps("up") + "\n", capture_output=True, text=True, check=True
    )
    assert json.loads(res.stdout)["selectors"] == [{"metric": "up", "matchers": []}]
    assert sorted(p.name for p in built.parent.iterdir()) == [".lock", "promql-check"]


@pytest.fixture(scope="module")
def parsed(promql_check: Path) -> dict[str, Obj]:
    exprs = expressions()
    res = subprocess.run(
        [str(promql_check)],
        input="".join(json.dumps(e) + "\n" for e in exprs.values()),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(out) == len(exprs)
    return dict(zip(exprs, out, strict=True))


def test_the_parser_rejects_bad_promql(promql_check: Path) -> None:
    res = subprocess.run(
        [str(promql_check)],
        input=json.dumps("sum by (pool (x)") + "\n" + json.dumps("rate(x[5m]) > 1") + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    bad, good = (json.loads(line) for line in res.stdout.splitlines())
    assert "parse error" in bad["error"]
    assert good["selectors"] == [{"metric": "x", "matchers": []}]


def test_every_expression_parses(parsed: dict[str, Obj]) -> None:
    errors = {where: p["error"] for where, p in parsed.items() if "error" in p}
    assert not errors


def _alternatives(matcher: Obj) -> set[str]:
    value = str(matcher["value"])
    return set(value.split("|")) if matcher["type"] in ("=~", "!~") else {value}


def test_expressions_use_only_exported_metrics_labels_and_values(parsed: dict[str, Obj]) -> None:
    states = {s.value for s in MemberState}
    reasons = set(c.DEGRADED_PRECEDENCE)
    problems: list[str] = []
    for where, p in parsed.items():
        if "error" in p:
            continue
        selected_labels: set[str] = set()
        for sel in p.get("selectors", []):
            metric = sel["metric"]
            if metric not in EXPORTED:
                problems.append(f"{where}: {metric} is not exported by the code")
                continue
            labels = EXPORTED[metric] | TARGET_LABELS
            selected_labels |= labels
            for m in sel["matchers"]:
                if m["name"] not in labels:
                    problems.append(f"{where}: {metric} has no label {m['name']}")
                elif m["name"] == "state" and not _alternatives(m) <= states:
                    problems.append(f"{where}: unknown pool node state in {m['value']!r}")
                elif m["name"] == "reason" and not _alternatives(m) <= reasons:
                    problems.append(f"{where}: unknown Degraded reason in {m['value']!r}")
                elif (
                    m["name"] == "job"
                    and m["type"] == "=~"
                    and not any(re.fullmatch(m["value"], s) for s in SERVICES)
                ):
                    problems.append(f"{where}: job {m['value']!r} matches no metrics Service")
        for grouping in p.get("groupings", []):
            for label in grouping:
                if label not in selected_labels:
                    problems.append(f"{where}: groups by {label}, which no selected series has")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ rules


def test_alerts_cover_what_a_user_pages_on() -> None:
    by_name = {r["alert"]: r for r in rules()}
    assert {
        "BootcOperatorRolloutStuck",
        "BootcOperatorNodeDegraded",
        "BootcOperatorDrainBlocked",
        "BootcOperatorRolloutHalted",
        "BootcOperatorDaemonDown",
        "BootcOperatorControllerDown",
        "BootcOperatorNoLeader",
    } <= by_name.keys()
    assert "bootc_operator_pool_up_to_date" in by_name["BootcOperatorRolloutStuck"]["expr"]
    assert by_name["BootcOperatorRolloutStuck"]["for"] == "2h"
    assert 'state="Degraded"' in by_name["BootcOperatorNodeDegraded"]["expr"]
    assert by_name["BootcOperatorNodeDegraded"]["for"] == "15m"
    assert by_name["BootcOperatorDrainBlocked"]["for"] == "30m"
    assert 'reason="RolloutHalted"' in by_name["BootcOperatorRolloutHalted"]["expr"]
    assert "bootc_operator_leader" in by_name["BootcOperatorNoLeader"]["expr"]
    for name, rule in by_name.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        assert name.startswith("BootcOperator")


# ------------------------------------------------------------------ promtool: the rules fire


@pytest.fixture(scope="module")
def promtool() -> Path:
    """Debian's prometheus package's promtool (hack/install-promtool.sh installs it)."""
    res = subprocess.run(
        ["bash", str(ROOT / "hack" / "install-promtool.sh")],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        timeout=600,
    )
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PrometheusRule's groups as a plain Prometheus rules file."""
    doc = yaml.safe_load((KIT / "prometheusrule.yaml").read_text())
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}, sort_keys=False))
    return path


def test_promtool_checks_the_rules(promtool: Path, rules_file: Path) -> None:
    res = subprocess.run(
        [str(promtool), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(rules())} rules found" in res.stdout


CTL = 'job="bootc-operator-controller-metrics", pod="ctl-0"'
DMN = 'job="bootc-operator-daemon-metrics"'


def _render(template: str, labels: dict[str, str], value: str) -> str:
    """Prometheus' alert templating, for the only constructs the rules use."""
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), template)
    out = out.replace("{{ $value }}", value)
    assert "{{" not in out, f"template construct not handled here: {template}"
    return out


# (name, input series → values, [(eval time, alert, [(labels, $value)])])
AlertCase = tuple[str, dict[str, str], list[tuple[str, str, list[tuple[dict[str, str], str]]]]]
P = {"pool": "workers"}
ALERT_CASES: list[AlertCase] = [
    (
        "rollout stuck: a slot held, no node finishes",
        {
            f'bootc_operator_reboot_slots_in_use{{{CTL}, pool="workers"}}': "1x200",
            f'bootc_operator_pool_up_to_date{{{CTL}, pool="workers"}}': "0x200",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="UpToDate"}}': "3x200",
        },
        [
            ("1h50m", "BootcOperatorRolloutStuck", []),
            ("2h10m", "BootcOperatorRolloutStuck", [(P, "1")]),
        ],
    ),
    (
        "slow but progressing rollout: a node finishes every 50 minutes",
        {
            f'bootc_operator_reboot_slots_in_use{{{CTL}, pool="workers"}}': "1x200",
            f'bootc_operator_pool_up_to_date{{{CTL}, pool="workers"}}': "0x200",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="UpToDate"}}': (
                "3x49 4x49 5x49 6x49 7x49"
            ),
        },
        [("3h", "BootcOperatorRolloutStuck", [])],
    ),
    (
        "paused pool: nodes sit Staged without a slot",
        {
            f'bootc_operator_reboot_slots_in_use{{{CTL}, pool="workers"}}': "0x200",
            f'bootc_operator_pool_up_to_date{{{CTL}, pool="workers"}}': "0x200",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="Staged"}}': "3x200",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="Staging"}}': "0x200",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="UpToDate"}}': "0x200",
        },
        [("3h", "BootcOperatorRolloutStuck", [])],
    ),
    (
        "degraded nodes, blocked drain, halted rollout",
        {
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="Degraded"}}': "2x60",
            f'bootc_operator_drain_blocked{{{CTL}, pool="workers"}}': "1x60",
            f'bootc_operator_pool_degraded{{{CTL}, pool="workers", reason="RolloutHalted"}}': (
                "1x60"
            ),
            # every reason that applies is 1: NodeDegraded under RolloutHalted too
            f'bootc_operator_pool_degraded{{{CTL}, pool="workers", reason="NodeDegraded"}}': (
                "1x60"
            ),
        },
        [
            ("14m", "BootcOperatorNodeDegraded", []),
            ("16m", "BootcOperatorNodeDegraded", [(P, "2")]),
            ("29m", "BootcOperatorDrainBlocked", []),
            ("31m", "BootcOperatorDrainBlocked", [(P, "1")]),
            ("6m", "BootcOperatorRolloutHalted", [(P, "1")]),
            ("30m", "BootcOperatorPoolDegraded", []),
        ],
    ),
    (
        "pool degraded by a tag resolution error",
        {
            f'bootc_operator_pool_degraded{{{CTL}, pool="workers", reason="TagResolutionError"}}': (
                "1x30"
            ),
        },
        [
            (
                "16m",
                "BootcOperatorPoolDegraded",
                [({**P, "reason": "TagResolutionError"}, "1")],
            )
        ],
    ),
    (
        "controller replicas down, then none scraped at all",
        {f'up{{{CTL}, instance="10.0.0.1:8080"}}': "0x30"},
        [
            ("9m", "BootcOperatorControllerDown", []),
            ("11m", "BootcOperatorControllerDown", [({}, "1")]),
        ],
    ),
    (
        "no controller at all",
        {"some_other_metric": "1x30"},
        [("11m", "BootcOperatorControllerDown", [({}, "1")])],
    ),
    (
        "no leader / a leader",
        {
            f'bootc_operator_leader{{{CTL}, instance="a"}}': "0x10 1x20",
            f'bootc_operator_leader{{{CTL}, instance="b"}}': "0x30",
        },
        [
            ("6m", "BootcOperatorNoLeader", [({}, "0")]),
            ("20m", "BootcOperatorNoLeader", []),
        ],
    ),
    (
        "reconcile errors for an hour",
        {f'controller_runtime_reconcile_errors_total{{{CTL}, controller="rollout"}}': "0+1x90"},
        [
            ("50m", "BootcOperatorReconcileErrors", []),
            ("70m", "BootcOperatorReconcileErrors", [({"controller": "rollout"}, "1")]),
        ],
    ),
    (
        "a daemon down; fewer daemons than managed nodes",
        {
            f'up{{{DMN}, node="n1", namespace="bootc-operator", pod="d-1"}}': "0x40",
            f'up{{{DMN}, node="n2", namespace="bootc-operator", pod="d-2"}}': "1x40",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="UpToDate"}}': "2x40",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="Staging"}}': "1x40",
        },
        [
            ("14m", "BootcOperatorDaemonDown", []),
            (
                "16m",
                "BootcOperatorDaemonDown",
                [
                    (
                        {
                            "job": "bootc-operator-daemon-metrics",
                            "node": "n1",
                            "namespace": "bootc-operator",
                            "pod": "d-1",
                        },
                        "0",
                    )
                ],
            ),
            ("31m", "BootcOperatorDaemonsMissing", [({}, "3")]),
        ],
    ),
    (
        "every managed node has a daemon",
        {
            f'up{{{DMN}, node="n1", pod="d-1"}}': "1x40",
            f'bootc_operator_pool_nodes{{{CTL}, pool="workers", state="UpToDate"}}': "1x40",
        },
        [("35m", "BootcOperatorDaemonsMissing", [])],
    ),
    (
        "bootc status not read for over two hours",
        {
            f'bootc_operator_daemon_last_status_refresh_timestamp_seconds{{{DMN}, node="n1"}}': (
                "0x160"
            ),
        },
        [
            ("2h", "BootcOperatorDaemonStatusStale", []),
            (
                "2h20m",
                "BootcOperatorDaemonStatusStale",
                [({"job": "bootc-operator-daemon-metrics", "node": "n1"}, "8400")],
            ),
        ],
    ),
]


def test_alerts_fire_when_they_should_and_not_otherwise(promtool: Path, rules_file: Path) -> None:
    """promtool's rule unit tests: synthetic series in, exactly the expected alerts out
    (labels and rendered annotations), at the times their ``for`` allows."""
    by_name = {r["alert"]: r for r in rules()}
    tests = []
    for name, series, checks in ALERT_CASES:
        alert_tests = []
        for at, alert, expected in checks:
            rule = by_name[alert]
            exp = [
                {
                    "exp_labels": {**labels, **rule["labels"]},
                    "exp_annotations": {
                        k: _render(v, labels, value) for k, v in rule["annotations"].items()
                    },
                }
                for labels, value in expected
            ]
            alert_tests.append({"eval_time": at, "alertname": alert, "exp_alerts": exp})
        tests.append(
            {
                "name": name,
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": alert_tests,
            }
        )
    covered = {alert for _, _, checks in ALERT_CASES for _, alert, exp in checks if exp}
    assert covered == set(by_name), f"alerts never seen firing: {set(by_name) - covered}"
    test_file = rules_file.parent / "alerts_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": tests},
            sort_keys=False,
        )
    )
    res = subprocess.run(
        [str(promtool), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


# ------------------------------------------------------------------ dashboard


def test_dashboard_is_well_formed() -> None:
    dash = dashboard()
    assert dash["uid"] == "bootc-operator" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    pool_query = variables["pool"]["definition"]
    assert pool_query == "label_values(bootc_operator_pool_up_to_date, pool)"
    assert "pool" in EXPORTED["bootc_operator_pool_up_to_date"]
    for panel in dash["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
    titles = " / ".join(p["title"] for p in dash["panels"]).lower()
    for topic in ("progress", "nodes by state", "drain duration", "reconcile errors", "workqueue"):
        assert topic in titles, topic


# ------------------------------------------------------------------ on the apiserver


@pytest.fixture(scope="module")
def kit_yaml(control_plane: ControlPlane) -> Iterator[str]:
    control_plane.install_crds(sorted(PROM_CRDS.glob("*.yaml")))
    control_plane.kubectl(
        "create", "namespace", NAMESPACE, check=False
    )  # may exist: other tests use it
    yield kustomize(KIT, control_plane.bin_dir / "kubectl")


def test_kit_renders_the_expected_objects(kit_yaml: str) -> None:
    docs = [d for d in yaml.safe_load_all(kit_yaml) if d]
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [
        ("ClusterRoleBinding", SCRAPER),
        ("ConfigMap", "bootc-operator-grafana-dashboard"),
        ("PrometheusRule", "bootc-operator"),
        ("Secret", f"{SCRAPER}-token"),
        ("ServiceAccount", SCRAPER),
        ("ServiceMonitor", "bootc-operator-controller"),
        ("ServiceMonitor", "bootc-operator-daemon"),
    ]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["bootc-operator.json"]) == dashboard()
    # The ServiceMonitors select the metrics Services of the install.
    install = ROOT / "manifests" / "install.yaml"
    services = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all(install.read_text())
        if d and d["kind"] == "Service"
    }
    assert set(services) == set(SERVICES)
    for sm in (d for d in docs if d["kind"] == "ServiceMonitor"):
        matched = [
            s
            for s in services.values()
            if sm["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
        ]
        assert len(matched) == 1, sm["metadata"]["name"]
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        assert {e["port"] for e in sm["spec"]["endpoints"]} <= ports
        # /metrics is HTTPS with a token allowed to read it (manifests/rbac/metrics.yaml).
        for endpoint in sm["spec"]["endpoints"]:
            assert endpoint["scheme"] == "https", sm["metadata"]["name"]
            assert endpoint["authorization"] == {"type": "Bearer", "credentials": SCRAPER_TOKEN}
            assert "bearerTokenFile" not in endpoint  # not Prometheus' own token
            assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


async def test_kit_passes_server_side_dry_run(control_plane: ControlPlane, kit_yaml: str) -> None:
    res = await asyncio.to_thread(
        control_plane.kubectl, "apply", "--dry-run=server", "-f", "-", input=kit_yaml
    )
    assert res.stdout.count("(server dry run)") == 7, res.stdout


async def test_the_token_sent_to_every_node_reads_metrics_and_nothing_else(
    control_plane: ControlPlane, kit_yaml: str, tmp_path: Path
) -> None:
    """Issue 37 §15: every daemon Pod is a scrape target, so the ServiceMonitors' token
    reaches every node. The kit's scraper identity, applied as is (its token filled
    in by kube-controller-manager), may get /metrics and nothing else."""
    docs = [d for d in yaml.safe_load_all(kit_yaml) if d]
    identity = [d for d in docs if d["kind"] in ("ServiceAccount", "Secret", "ClusterRoleBinding")]
    assert len(identity) == 3, [d["kind"] for d in docs]
    reader = (ROOT / "manifests" / "rbac" / "metrics.yaml").read_text()
    body = reader + "\n---\n" + "\n---\n".join(json.dumps(d) for d in identity)
    cp = control_plane
    await asyncio.to_thread(cp.kubectl, "apply", "-f", "-", input=body)
    try:

        def token() -> str | None:
            out = cp.kubectl(
                "-n", NAMESPACE, "get", "secret", f"{SCRAPER}-token", "-o",
                "jsonpath={.data.token}",
            ).stdout  # fmt: skip
            return base64.b64decode(out).decode() if out else None

        value = await wait_for(lambda: asyncio.to_thread(token), 60, "the scraper's token")
        assert value is not None
        kubeconfig = token_kubeconfig(cp.kubeconfig, value, tmp_path / "scraper.kubeconfig")

        def can(*what: str) -> str:
            res = cp.kubectl("--kubeconfig", str(kubeconfig), "auth", "can-i", *what, check=False)
            return res.stdout.strip()

        assert await asyncio.to_thread(can, "get", "/metrics") == "yes"
        for what in (
            ("list", "pods", "--all-namespaces"),
            ("get", "nodes"),
            ("get", "secrets", "-n", NAMESPACE),
            ("list", "endpoints", "--all-namespaces"),
            ("get", "/logs"),
            ("create", "tokenreviews.authentication.k8s.io"),
        ):
            assert await asyncio.to_thread(can, *what) == "no", what
    finally:
        await asyncio.to_thread(
            cp.kubectl, "delete", "--ignore-not-found", "-f", "-", input=body, check=False
        )


async def test_malformed_monitoring_objects_are_rejected(
    control_plane: ControlPlane, kit_yaml: str
) -> None:
    """The installed schemas are enforced (so the dry-run above means something)."""
    docs = [d for d in yaml.safe_load_all(kit_yaml) if d]
    sm = next(d for d in docs if d["kind"] == "ServiceMonitor")
    sm["spec"]["endpoints"][0]["interval"] = "every minute"  # not a duration
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["for"] = "two hours"
    for bad, field in ((sm, "interval"), (rule, "for")):
        res = await asyncio.to_thread(
            control_plane.kubectl,
            "apply",
            "--dry-run=server",
            "-f",
            "-",
            input=json.dumps(bad),
            check=False,
        )
        assert res.returncode != 0, bad["kind"]
        assert field in res.stderr, res.stderr
