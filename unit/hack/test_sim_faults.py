"""``hack/sim fault``: the fault records, the command line, and the one-line refusals."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from bootc_operator.policy.autoscaler import leaving
from hack import userdocs
from hack.simlib import cli, demo, faults
from hack.simlib.common import SimConfig, SimInfo
from hack.simlib.faults import Fault, FaultError
from hack.simlib.policy import PolicyError, check_alert_gate, describe_rollout, pool_manifest
from hack.simlib.sim import AttachedSim

NODES = ["worker-1", "worker-2", "worker-3"]


def sim_info(tmp_path: Path, **changes: object) -> SimInfo:
    info = SimInfo(
        state_dir=str(tmp_path),
        config=SimConfig(),
        owner=os.getpid(),
        nodes=list(NODES),
        registry="127.0.0.1:1",
        ready=True,
    )
    for key, value in changes.items():
        setattr(info, key, value)
    info.save()
    return info


def test_a_fault_of_the_same_kind_and_target_replaces_the_old_one() -> None:
    first = Fault(faults.BOOT_FAIL, "worker-1", {"unit": "a.service"}, "t1")
    other = Fault(faults.BOOT_FAIL, "worker-2", {}, "t1")
    again = Fault(faults.BOOT_FAIL, "worker-1", {"unit": "b.service"}, "t2")
    assert faults.with_fault([first, other], again) == [other, again]


def test_the_record_round_trips_and_ignores_what_is_not_a_fault() -> None:
    active = [
        Fault(faults.ALERT, "Storm", {"labels": {"severity": "critical"}}, "t"),
        Fault(faults.REGISTRY_DOWN, "", {}, "t"),
    ]
    assert faults.parse_faults(faults.dump_faults(active)) == active
    assert faults.parse_faults({"faults": ["junk", {"kind": "not-ready", "target": "w"}]}) == [
        Fault(faults.NOT_READY, "w")
    ]
    assert faults.parse_faults(None) == [] and faults.parse_faults([1]) == []


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([], (None, None)),
        (["not-ready"], ("not-ready", None)),
        (["drain-block", "worker-2"], ("drain-block", "worker-2")),
        (["worker-2"], (None, "worker-2")),
        (["alert", "Storm"], ("alert", "Storm")),
    ],
)
def test_clear_takes_a_kind_a_target_both_or_nothing(
    words: list[str], expected: tuple[str | None, str | None]
) -> None:
    assert faults.parse_clear(words) == expected


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["reboot-storm", "worker-1"], "unknown fault kind 'reboot-storm'; known: not-ready"),
        (["registry-down", "worker-1"], "registry-down has no target (got worker-1)"),
        (["a", "b", "c"], "at most KIND and TARGET"),
    ],
)
def test_clear_refuses_what_it_cannot_mean(words: list[str], message: str) -> None:
    with pytest.raises(FaultError, match=re.escape(message)):
        faults.parse_clear(words)


def test_matching_selects_by_kind_and_target() -> None:
    a = Fault(faults.NOT_READY, "worker-1")
    b = Fault(faults.DRAIN_BLOCK, "worker-1")
    c = Fault(faults.NOT_READY, "worker-2")
    assert faults.matching([a, b, c], None, None) == [a, b, c]
    assert faults.matching([a, b, c], faults.NOT_READY, None) == [a, c]
    assert faults.matching([a, b, c], None, "worker-1") == [a, b]
    assert faults.matching([a, b, c], faults.NOT_READY, "worker-2") == [c]
    assert faults.not_ready_nodes([a, b, c]) == {"worker-1", "worker-2"}
    assert not faults.registry_down([a, b, c])
    assert faults.registry_down([a, Fault(faults.REGISTRY_DOWN)])


def test_a_drain_block_is_a_pod_on_the_node_that_its_budget_forbids_evicting() -> None:
    pod, budget = faults.drain_block_manifests("worker-2")
    assert pod["kind"] == "Pod" and pod["spec"]["nodeName"] == "worker-2"
    assert budget["kind"] == "PodDisruptionBudget"
    assert budget["spec"]["minAvailable"] == 1, "an integer: the Pod has no controller"
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["name"] == budget["metadata"]["name"] == "sim-drain-block-worker-2"


def test_the_autoscaler_fault_is_the_taint_the_controller_reads_as_leaving() -> None:
    args = faults.autoscaler_taint("worker-3", 1764107000.7)
    assert args[:3] == ["taint", "node", "worker-3"] and args[-1] == "--overwrite"
    key, rest = args[3].split("=", 1)
    value, effect = rest.split(":", 1)
    assert (key, value, effect) == ("ToBeDeletedByClusterAutoscaler", "1764107000", "NoSchedule")
    node = {"spec": {"taints": [{"key": key, "value": value, "effect": effect}]}}
    assert leaving(node) == "being removed by the cluster autoscaler (taint " + key + ")"
    assert faults.autoscaler_untaint("worker-3") == [
        "taint",
        "node",
        "worker-3",
        f"{key}:{effect}-",
    ]
    described = Fault(faults.AUTOSCALER, "worker-3", since="T").describe()
    assert described.startswith("autoscaler worker-3: the Node carries the " + key), described
    assert faults.parse_clear(["autoscaler", "worker-3"]) == ("autoscaler", "worker-3")


def test_the_alert_rules_fire_every_alert_fault_with_its_labels() -> None:
    assert faults.alert_rules([Fault(faults.NOT_READY, "worker-1")]) is None
    rules = faults.alert_rules(
        [
            Fault(faults.ALERT, "Zeta", {"labels": {"severity": "critical"}}),
            Fault(faults.ALERT, "Alpha", {}),
        ]
    )
    assert rules == {
        "groups": [
            {
                "name": "sim-faults",
                "rules": [
                    {"alert": "Alpha", "expr": "vector(1)"},
                    {"alert": "Zeta", "expr": "vector(1)", "labels": {"severity": "critical"}},
                ],
            }
        ]
    }


def test_the_watch_rereads_the_file_only_when_it_changed(tmp_path: Path) -> None:
    watch = faults.FaultWatch(tmp_path)
    assert watch.read() == []
    faults.update(tmp_path, lambda fs: faults.with_fault(fs, Fault(faults.NOT_READY, "worker-1")))
    assert faults.not_ready_nodes(watch.read()) == {"worker-1"}
    faults.update(tmp_path, lambda fs: [])
    assert watch.read() == []
    assert faults.load(tmp_path) == []


def test_each_fault_kind_parses_and_names_its_target() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["fault", "boot-fail", "worker-2", "--unit", "x.service"])
    assert (args.fault, args.target, args.unit) == ("boot-fail", "worker-2", "x.service")
    args = parser.parse_args(["fault", "alert", "--label", "team=os"])
    assert (args.fault, args.target, args.label) == ("alert", "SimulatedIncident", ["team=os"])
    args = parser.parse_args(["fault", "autoscaler", "worker-3"])
    assert (args.fault, args.target) == ("autoscaler", "worker-3")
    args = parser.parse_args(["fault", "registry-down"])
    assert args.fault == "registry-down" and not hasattr(args, "target")
    args = parser.parse_args(["fault", "clear", "not-ready", "worker-1", "--dir", "/x"])
    assert (args.what, args.dir) == (["not-ready", "worker-1"], Path("/x"))
    with pytest.raises(SystemExit):  # a node fault needs its node
        parser.parse_args(["fault", "not-ready"])


def test_a_fault_says_in_one_line_why_it_cannot_apply(tmp_path: Path) -> None:
    sim = AttachedSim(sim_info(tmp_path))
    with pytest.raises(FaultError, match=r"no node 'worker-9' in this simulation \(nodes: "):
        faults.apply(sim, Fault(faults.NOT_READY, "worker-9"))
    with pytest.raises(FaultError, match=r"runs no Prometheus.*hack/sim up --prometheus"):
        faults.apply(sim, Fault(faults.ALERT, "Storm"))
    no_registry = AttachedSim(sim_info(tmp_path, registry=""))
    with pytest.raises(FaultError, match="has no registry"):
        faults.apply(no_registry, Fault(faults.REGISTRY_DOWN))
    stopped = AttachedSim(sim_info(tmp_path, ready=False))
    with pytest.raises(FaultError, match="is not running"):
        faults.apply(stopped, Fault(faults.DRAIN_BLOCK, "worker-1"))
    assert faults.load(tmp_path) == [], "nothing recorded for a refused fault"


def test_the_command_fails_with_one_line_without_a_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--dir", str(tmp_path / "none"), "fault", "not-ready", "worker-1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sim: error: no simulation in") and "\n" not in err


def test_blocking_alert_flags_become_the_pools_blocking_alerts() -> None:
    args = cli.build_parser().parse_args(
        ["pool", "--blocking-alert", 'severity="critical"', "--blocking-alert", 'alertname="X"']
    )
    rollout = pool_manifest(args, image="r/os@sha256:" + "a" * 64)["spec"]["rollout"]
    assert rollout["blockingAlerts"] == ['severity="critical"', 'alertname="X"']
    assert 'blocking alerts severity="critical" or alertname="X"' in describe_rollout(rollout)


def test_blocking_alerts_need_the_simulations_prometheus() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["up", '--blocking-alert=severity="critical"'])
    with pytest.raises(PolicyError, match="hack/sim up --prometheus"):
        check_alert_gate(args, prometheus=False)
    check_alert_gate(parser.parse_args(["up", "--prometheus", '--blocking-alert=a="b"']), True)
    check_alert_gate(parser.parse_args(["up"]), prometheus=False)


def test_the_demo_has_no_blocking_alert_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        demo.main(['--blocking-alert=a="b"'])
    assert "unrecognized arguments: --blocking-alert" in capsys.readouterr().err


def readme_sim_commands(text: str) -> list[list[str]]:
    """The arguments of every ``hack/sim`` command in the shell blocks of ``text``
    (also inside ``$(...)``; up to a shell operator or a comment)."""
    commands: list[list[str]] = []
    for line in userdocs.shell_commands(text):
        for match in re.finditer(r"(\$\()?\bhack/sim (.*)", line):
            rest = match.group(2)
            if match.group(1):  # "$(hack/sim up ...)"
                rest = rest.split(")", 1)[0]
            lexer = shlex.shlex(rest, posix=True, punctuation_chars=";&|()")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            args = []
            for word in lexer:
                if word and set(word) <= set(";&|()"):
                    break
                args.append(word)
            commands.append(args)
    return commands


def test_every_documented_hack_sim_command_parses() -> None:
    commands = readme_sim_commands(userdocs.text())
    for args in commands:
        try:
            cli.build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"documented command `hack/sim {shlex.join(args)}` exits {exc.code}")
    shown = {args[1] for args in commands if args[:1] == ["fault"] and len(args) > 1}
    assert shown >= {*faults.KINDS, "list", "clear"}, "every fault is shown"


def test_precondition_flags_set_preconditions_and_need_prometheus() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(
        ["up", "--precondition=db=up == 1", "--precondition", "capacity=sum(x) > 2"]
    )
    rollout = pool_manifest(args, image="r/os@sha256:" + "a" * 64)["spec"]["rollout"]
    assert rollout["preconditions"] == [
        {"name": "db", "expr": "up == 1"},
        {"name": "capacity", "expr": "sum(x) > 2"},
    ]
    assert "preconditions db, capacity" in describe_rollout(rollout)
    with pytest.raises(PolicyError, match="--precondition needs a Prometheus"):
        check_alert_gate(args, prometheus=False)
    check_alert_gate(args, prometheus=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--precondition=noexpr"])
