"""A real Prometheus server on loopback: Debian's ``prometheus`` (2.42), for tests and the sim.

Owns running the Prometheus process of the e2e tier and of ``hack/sim up
--prometheus``, and what it is fed: scrape targets, rule files, and a small
``/metrics`` endpoint a test controls.

``Prometheus(tmpdir, targets={job: [Target("127.0.0.1:PORT", {"pod": ...})]},
rules={"kit": render_rules(for_scale=1/60)})`` writes ``tmpdir/prometheus.yml``
(scrape and evaluation interval 1 s), one file-based service discovery file per
job (``tmpdir/targets/JOB.json``: each target with its own labels, e.g. the
``pod``/``node`` a ServiceMonitor would add; ``scrape={job: {...}}`` adds settings
to a job's scrape config, e.g. ``bearer_https(token_file)`` for the operator's
HTTPS metrics with a ServiceAccount token) and one rules file per name
(``tmpdir/rules/NAME.yml``); ``start()`` runs ``prometheus`` on
``127.0.0.1:<free port>`` (TSDB in ``tmpdir/data``, ``--web.enable-lifecycle``
for reloads; ``env`` added to its environment) as a child in its own session
(``hack.testenv.procs.spawn``, killed with the harness even on ``kill -9``) and
returns once ``/-/ready`` answers.

While it runs:

- ``set_targets(job, targets)`` replaces a job's targets (Prometheus notices the
  rewritten discovery file by itself; its scrape manager applies target changes
  every 5 s, so a new target's first sample comes 5-6 s later; a new job rewrites
  the configuration and reloads);
- ``set_rules(name, doc)`` / ``remove_rules(name)`` add, replace or drop a rules
  file and reload (``POST /-/reload`` returns once the rules are loaded, so
  ``rules()`` shows them at once; what they *evaluate to* comes with the group's
  next evaluation: wait for that, ``wait_evaluated(rules)``);
- ``await fire(alert, labels)`` / ``await resolve(alert)`` are the shortest way to
  an alert that fires or stops on demand (a rule ``vector(1)`` with no ``for``).
  They return only once Prometheus reports the change both ways an alert consumer
  sees it: ``/api/v1/alerts`` lists the alert firing (or not at all) and the
  ``ALERTS`` series an alert gate queries has it (or not). The reload alone is not
  enough: a new rule fires from its group's first evaluation after it, up to an
  interval later (more on a loaded machine), and a removed rule's ``ALERTS`` series
  ends with the next evaluation; a test that went on at once would race it.
  ``AssertionError`` naming the alert after ``timeout`` seconds;
- ``query(promql)``, ``alerts()`` / ``firing()``, ``rules()``, ``targets()``,
  ``label_values(label, match)``: the HTTP API, parsed (``PrometheusClient(url)``
  offers the same for a server someone else started, e.g. a simulation's).

``render_rules(path, for_scale=...)`` turns the kit's PrometheusRule
(``manifests/prometheus/prometheusrule.yaml``) into a plain rules file: its
``spec.groups``, with every ``for`` multiplied by ``for_scale``. Tests use
``1/60`` ("minutes become seconds": a ``for: 30m`` fires after 30 s, a ``for:
15m`` ignores a daemon down for a few seconds of a simulated reboot); the
expressions, range windows included, are unchanged.

``Gauges()`` is a tiny loopback ``/metrics`` endpoint (prometheus_client) whose
gauges a test sets: scrape it as a job and a rule on one of its gauges fires and
resolves when the test says, through the whole scrape → evaluate → alert path.

The binary is ``$BOOTC_OPERATOR_PROMETHEUS_BIN``, else ``prometheus`` on PATH, else
``/usr/bin/prometheus``; when none exists ``hack/install-prometheus.sh`` is run once
(it needs root, as in CI).

    with Prometheus(tmp_path / "prom", targets={"app": [Target(addr)]}) as prom:
        await wait_for(lambda: prom.query("up == 1"), 10, "a scrape")
        await prom.fire("Maintenance", {"severity": "critical"})
        prom.firing("Maintenance")       # [{"labels": {...}, "state": "firing", ...}]
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from wsgiref.simple_server import WSGIServer

import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from bootc_operator.gates.alerts import describe_alert
from hack.testenv.controlplane import free_port
from hack.testenv.procs import Component, ServerComponent, StartupError, spawn
from hack.testenv.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "hack" / "install-prometheus.sh"
RULE_KIT = REPO_ROOT / "manifests" / "prometheus" / "prometheusrule.yaml"
BIN_ENV = "BOOTC_OPERATOR_PROMETHEUS_BIN"
DEFAULT_BIN = "/usr/bin/prometheus"
START_TIMEOUT = 30.0
#: the jobs the kit's ServiceMonitors produce (the metrics Services' names); the rules
#: and the dashboard select the operator's series by them
CONTROLLER_JOB = "bootc-operator-controller-metrics"
DAEMON_JOB = "bootc-operator-daemon-metrics"
#: the rule group ``fire`` writes its alerts to
FIRED_GROUP = "fired-by-test"
#: seconds ``fire`` / ``resolve`` wait for Prometheus to report the change (one
#: evaluation interval, 1 s, when the machine is idle)
ALERT_TIMEOUT = 30.0

Doc = dict[str, Any]
Sample = tuple[dict[str, str], float]


class PrometheusError(RuntimeError):
    """The Prometheus HTTP API refused a request or answered with an error."""


def find_binary(*, install: bool = True) -> str:
    """The prometheus binary; runs ``hack/install-prometheus.sh`` once if it is missing."""
    for candidate in (os.environ.get(BIN_ENV), shutil.which("prometheus"), DEFAULT_BIN):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    if install and INSTALL_SCRIPT.exists():
        result = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, check=False
        )
        if result.returncode == 0:
            return find_binary(install=False)
        raise StartupError(f"hack/install-prometheus.sh failed:\n{result.stderr[-2000:]}")
    raise StartupError(f"prometheus not found (set ${BIN_ENV} or run hack/install-prometheus.sh)")


# ------------------------------------------------------------------ durations and rules

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (``1h30m``, ``15m``, ``500ms``)."""
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNITS[u] for n, u in parts)


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for ``seconds`` (rounded to milliseconds)."""
    ms = round(seconds * 1000)
    if ms <= 0:
        return "0s"
    out = ""
    for unit in ("h", "m", "s", "ms"):
        size = round(_UNITS[unit] * 1000)
        if ms >= size:
            out += f"{ms // size}{unit}"
            ms %= size
    return out


def render_rules(path: Path = RULE_KIT, *, for_scale: float = 1.0) -> Doc:
    """The PrometheusRule at ``path`` as a plain Prometheus rules file (``{"groups": ...}``),
    every rule's ``for`` multiplied by ``for_scale`` (expressions untouched)."""
    doc = yaml.safe_load(path.read_text())
    groups: list[Doc] = []
    for group in doc["spec"]["groups"]:
        rules = []
        for original in group["rules"]:
            rule = dict(original)
            if "for" in rule and for_scale != 1.0:
                rule["for"] = format_duration(parse_duration(rule["for"]) * for_scale)
            rules.append(rule)
        groups.append({**group, "rules": rules})
    return {"groups": groups}


def alert_rule(alert: str, expr: str, labels: Mapping[str, str] | None = None) -> Doc:
    """One alerting rule that fires as soon as ``expr`` has a result (no ``for``)."""
    rule: Doc = {"alert": alert, "expr": expr}
    if labels:
        rule["labels"] = dict(labels)
    return rule


# ------------------------------------------------------------------ the server


class PrometheusClient:
    """The HTTP API of a Prometheus at ``url`` (``http://host:port``), parsed."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def ready(self) -> bool:
        """``/-/ready`` answers 200 (the TSDB is open, the rules are loaded)."""
        try:
            return self._request("GET", "/-/ready", timeout=2.0)[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    def reload(self) -> None:
        """Re-read the configuration and the rule files (``--web.enable-lifecycle``);
        returns once they are applied."""
        status, body = self._request("POST", "/-/reload", timeout=30.0)
        if status != 200:
            raise PrometheusError(f"reload failed ({status}): {body.decode(errors='replace')}")

    def _request(
        self, method: str, path: str, params: Mapping[str, str] | None = None, timeout: float = 10
    ) -> tuple[int, bytes]:
        url = self.url + path
        data = None
        if params is not None:
            encoded = urllib.parse.urlencode(params)
            if method == "GET":
                url += "?" + encoded
            else:
                data = encoded.encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """``data`` of a ``/api/v1/...`` answer; raises ``PrometheusError`` on an error."""
        method = "POST" if params else "GET"
        status, body = self._request(method, f"/api/v1/{path}", params)
        try:
            doc = json.loads(body)
        except ValueError:
            raise PrometheusError(f"/api/v1/{path}: {status} {body[:500]!r}") from None
        if doc.get("status") != "success":
            raise PrometheusError(
                f"/api/v1/{path} {dict(params or {})}: {doc.get('errorType')}: {doc.get('error')}"
            )
        return doc["data"]

    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """An instant query: (labels, value) per series (one unlabelled sample for a
        scalar). Values may be NaN or infinite."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", params)
        if data["resultType"] in ("scalar", "string"):
            return [({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise PrometheusError(f"{promql}: a {data['resultType']}, not an instant vector")
        return [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]

    def value(self, promql: str) -> float | None:
        """The single value of ``promql`` (None when it returns nothing)."""
        samples = self.query(promql)
        if len(samples) > 1:
            raise PrometheusError(f"{promql}: {len(samples)} series, expected at most one")
        return samples[0][1] if samples else None

    def alerts(self) -> list[Doc]:
        """Every active alert (pending or firing): labels, annotations, state, activeAt."""
        alerts: list[Doc] = self.api("alerts")["alerts"]
        return alerts

    def firing(self, alertname: str | None = None) -> list[Doc]:
        """The firing alerts (of ``alertname``)."""
        return [
            a
            for a in self.alerts()
            if a["state"] == "firing"
            and (alertname is None or a["labels"].get("alertname") == alertname)
        ]

    def _alerts_series(self, alert: str, state: str = "") -> list[dict[str, str]]:
        """The labels of the ``ALERTS`` series of ``alert`` (in ``state``) a query sees."""
        matchers = f'alertname="{alert}"' + (f',alertstate="{state}"' if state else "")
        return [labels for labels, _ in self.query(f"ALERTS{{{matchers}}}")]

    def reported_firing(self, want: Mapping[str, str]) -> Doc | None:
        """The alert with exactly the labels ``want`` (``alertname`` among them), if both
        ``/api/v1/alerts`` and the ``ALERTS`` series report it firing."""
        alert, name = want["alertname"], describe_alert(want)
        listed = [a for a in self.firing(alert) if a["labels"] == dict(want)]
        series = [s for s in self._alerts_series(alert, "firing") if describe_alert(s) == name]
        return listed[0] if listed and series else None

    def reported_gone(self, alert: str) -> bool:
        """Neither ``/api/v1/alerts`` nor the ``ALERTS`` series has ``alert`` any more."""
        listed = [a for a in self.alerts() if a["labels"].get("alertname") == alert]
        return not listed and not self._alerts_series(alert)

    def rules(self) -> list[Doc]:
        """The loaded rule groups, each with its rules' state and health."""
        groups: list[Doc] = self.api("rules")["groups"]
        return groups

    def targets(self) -> list[Doc]:
        """The active scrape targets: labels, scrapeUrl, health (up/down/unknown)."""
        active: list[Doc] = self.api("targets")["activeTargets"]
        return active

    def label_values(self, label: str, match: str | None = None) -> list[str]:
        """Values of ``label`` (on series matching ``match``): Grafana's ``label_values``."""
        path = f"label/{urllib.parse.quote(label)}/values"
        if match:
            path += "?" + urllib.parse.urlencode({"match[]": match})
        values: list[str] = self.api(path)
        return values


@dataclass(frozen=True)
class Target:
    """One scrape target: ``host:port`` and the labels its series get (besides ``job``
    and ``instance``), e.g. the ``pod``/``node`` a ServiceMonitor's relabelings add."""

    address: str
    labels: Mapping[str, str] = field(default_factory=dict)


def bearer_https(token_file: Path) -> Doc:
    """A job's scrape settings for the operator's /metrics as installed: HTTPS (its
    self-signed certificate accepted, like the ServiceMonitors' insecureSkipVerify)
    and the bearer token in ``token_file`` (re-read by Prometheus on every scrape)."""
    return {
        "scheme": "https",
        "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
        "tls_config": {"insecure_skip_verify": True},
    }


class Prometheus(PrometheusClient, ServerComponent):
    """One prometheus process on 127.0.0.1 (see the module docstring)."""

    NAME = "prometheus"
    STOP_GRACE = 10.0  # the TSDB is written on the way out

    def __init__(
        self,
        tmpdir: Path,
        *,
        targets: Mapping[str, Sequence[Target]] | None = None,
        rules: Mapping[str, Doc] | None = None,
        interval: str = "1s",
        binary: str | None = None,
        die_with_parent: bool = True,
        env: Mapping[str, str] | None = None,
        scrape: Mapping[str, Doc] | None = None,
    ) -> None:
        self.dir = Path(tmpdir)
        self.scrape = dict(scrape or {})
        self.env = dict(env or {})
        self.interval = interval
        self.binary = binary
        self.die_with_parent = die_with_parent
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        super().__init__(f"http://{self.host}")
        self.config_path = self.dir / "prometheus.yml"
        self.log_path = self.dir / "prometheus.log"
        self.targets_dir = self.dir / "targets"
        self.rules_dir = self.dir / "rules"
        for d in (self.dir, self.targets_dir, self.rules_dir, self.dir / "data"):
            d.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, list[Target]] = {}
        self._fired: dict[str, Doc] = {}
        for job, job_targets in (targets or {}).items():
            self._write_targets(job, job_targets)
        for name, doc in (rules or {}).items():
            self._write_rules(name, doc)
        self._write_config()

    # ------------------------------------------------------------ files

    def _write_config(self) -> None:
        scrape_configs = [
            {
                "job_name": job,
                "scrape_interval": self.interval,
                "scrape_timeout": self.interval,
                "file_sd_configs": [
                    {"files": [str(self._targets_file(job))], "refresh_interval": "5s"}
                ],
                **self.scrape.get(job, {}),
            }
            for job in sorted(self._jobs)
        ]
        config = {
            "global": {
                "scrape_interval": self.interval,
                "evaluation_interval": self.interval,
            },
            "rule_files": [str(self.rules_dir / "*.yml")],
            "scrape_configs": scrape_configs,
        }
        _replace(self.config_path, yaml.safe_dump(config, sort_keys=False))

    def _targets_file(self, job: str) -> Path:
        return self.targets_dir / f"{job}.json"

    def _write_targets(self, job: str, targets: Sequence[Target]) -> None:
        self._jobs[job] = list(targets)
        groups = [{"targets": [t.address], "labels": dict(t.labels)} for t in targets]
        _replace(self._targets_file(job), json.dumps(groups, indent=1, sort_keys=True))

    def _write_rules(self, name: str, doc: Doc) -> None:
        _replace(self.rules_dir / f"{name}.yml", yaml.safe_dump(doc, sort_keys=False))

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start the process (if not running) and wait until it is ready."""
        if self.running:
            return self
        binary = self.binary or find_binary()
        self._stop_at_exit()
        argv = [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address={self.host}",
            f"--web.external-url={self.url}",
            "--web.enable-lifecycle",
            "--log.level=info",
        ]
        self.process = spawn(
            "prometheus",
            argv,
            self.log_path,
            env={**os.environ, **self.env},
            die_with_parent=self.die_with_parent,
        )
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until ``/-/ready`` answers 200 (the TSDB is open, rules are loaded)."""
        self._wait_until(self.ready, timeout, f"was not ready on {self.url}")

    # ------------------------------------------------------------ what it scrapes, evaluates

    def set_targets(self, job: str, targets: Sequence[Target]) -> None:
        """Replace ``job``'s targets (a new job is added to the configuration)."""
        new_job = job not in self._jobs
        self._write_targets(job, targets)
        if new_job:
            self._write_config()
            if self.running:
                self.reload()

    def jobs(self) -> dict[str, list[Target]]:
        """job → the targets last given for it."""
        return {job: list(targets) for job, targets in self._jobs.items()}

    def set_rules(self, name: str, doc: Doc) -> None:
        """Write rules file ``name`` (a ``{"groups": [...]}`` document) and reload."""
        self._write_rules(name, doc)
        if self.running:
            self.reload()

    def wait_evaluated(self, rules: Collection[str], timeout: float = ALERT_TIMEOUT) -> None:
        """Block until each rule named in ``rules`` was evaluated (its health no longer
        "unknown"): a reload returns once they are loaded, an evaluation later."""

        def evaluated() -> bool:
            health = {r["name"]: r["health"] for g in self.rules() for r in g["rules"]}
            return all(health.get(name, "unknown") != "unknown" for name in rules)

        self._wait_until(evaluated, timeout, f"did not evaluate {', '.join(sorted(rules))}")

    def remove_rules(self, name: str) -> None:
        (self.rules_dir / f"{name}.yml").unlink(missing_ok=True)
        if self.running:
            self.reload()

    async def fire(
        self,
        alert: str,
        labels: Mapping[str, str] | None = None,
        *,
        timeout: float = ALERT_TIMEOUT,  # noqa: ASYNC109 (a polling deadline)
    ) -> Doc:
        """Make ``alert`` (with ``labels``) fire; returns it (as ``/api/v1/alerts``
        lists it) once Prometheus reports it firing (see the module docstring)."""
        self._fired[alert] = alert_rule(alert, "vector(1)", labels)
        await asyncio.to_thread(self._write_fired)
        want = {"alertname": alert, **(labels or {})}
        found: Doc | None = await wait_for(
            lambda: asyncio.to_thread(self.reported_firing, want),
            timeout,
            f"{describe_alert(want)} firing in Prometheus' /api/v1/alerts and ALERTS series",
        )
        assert found is not None
        return found

    async def resolve(
        self,
        alert: str,
        *,
        timeout: float = ALERT_TIMEOUT,  # noqa: ASYNC109 (a polling deadline)
    ) -> None:
        """Stop an alert ``fire`` started; returns once Prometheus reports it gone
        (see the module docstring)."""
        self._fired.pop(alert, None)
        await asyncio.to_thread(self._write_fired)
        await wait_for(
            lambda: asyncio.to_thread(self.reported_gone, alert),
            timeout,
            f"{alert} gone from Prometheus' /api/v1/alerts and ALERTS series",
        )

    def _write_fired(self) -> None:
        rules = [self._fired[name] for name in sorted(self._fired)]
        if rules:
            self.set_rules(FIRED_GROUP, {"groups": [{"name": FIRED_GROUP, "rules": rules}]})
        else:
            self.remove_rules(FIRED_GROUP)


def _replace(path: Path, text: str) -> None:
    """Write ``path`` atomically (Prometheus may read it at any moment)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def finite(samples: Sequence[Sample]) -> list[Sample]:
    """The samples whose value is a number (not NaN nor ±Inf)."""
    return [(labels, v) for labels, v in samples if math.isfinite(v)]


# ------------------------------------------------------------------ a /metrics of the test's own


class Gauges(Component):
    """A loopback ``/metrics`` endpoint serving gauges the test sets (see the docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._gauges: dict[str, Gauge] = {}
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Self:
        if self._server is None:
            self._server, self._thread = start_http_server(
                0, addr="127.0.0.1", registry=self.registry
            )
            self.port = int(self._server.server_port)
        return self

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        """Set gauge ``name`` (created on first use with these label names) to ``value``."""
        labels = dict(labels or {})
        gauge = self._gauges.get(name)
        if gauge is None:
            gauge = Gauge(name, f"set by the test: {name}", sorted(labels), registry=self.registry)
            self._gauges[name] = gauge
        (gauge.labels(**labels) if labels else gauge).set(value)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
