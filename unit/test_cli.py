"""The command line: modes, flags with defaults, durations, booleans, log formats.

Every ``bootc-operator`` command the user documentation (README.md, docs/) shows, and the
manifests' args, must parse.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from pathlib import Path

import pytest
import yaml

from bootc_operator.cli import BoolFlag, build_parser, parse_bool, parse_duration
from bootc_operator.logs import JSONFormatter, TextFormatter, setup_logging
from hack import userdocs


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300.0), ("15s", 15.0), ("250ms", 0.25), ("2h", 7200.0), ("7", 7.0)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "-1s", "1d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("mode", "flags"),
    [
        (
            "controller",
            [
                "--leader-elect",
                "--metrics-bind-address",
                "--health-probe-bind-address",
                "--tag-resolution-interval",
                "--kubeconfig",
                "--log-format",
                "--lease-duration",
            ],
        ),
        (
            "daemon",
            [
                "--node-name",
                "--host-exec",
                "--host-root",
                "--poll-interval",
                "--kubeconfig",
                "--log-format",
            ],
        ),
    ],
)
def test_each_mode_help_lists_flags_with_defaults(
    mode: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([mode, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in flags:
        assert flag in out
    assert "(default:" in out


def test_controller_defaults() -> None:
    args = build_parser().parse_args(["controller"])
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)
    assert args.tag_resolution_interval == 300.0
    assert args.leader_elect is False


def test_bad_flag_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["controller", "--tag-resolution-interval", "soon"])
    assert exc.value.code == 2
    assert "invalid duration 'soon'" in capsys.readouterr().err


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("rollout", logging.INFO, "f", 1, "slot taken %s", ("x",), None)
    for k, v in extra.items():
        setattr(record, k, v)
    return record


def test_json_log_lines_carry_context() -> None:
    doc = json.loads(JSONFormatter().format(_record(pool="p", node="n")))
    assert doc["msg"] == "slot taken x" and doc["pool"] == "p" and doc["node"] == "n"
    assert doc["level"] == "info" and doc["logger"] == "rollout"


def test_text_log_lines_carry_context() -> None:
    line = TextFormatter().format(_record(pool="p"))
    assert line.endswith("INFO rollout: slot taken x pool=p")


def test_unknown_log_format_rejected() -> None:
    with pytest.raises(ValueError, match="unknown log format"):
        setup_logging("xml")


# ------------------------------------------------------------------ boolean flags and the README

REPO = Path(__file__).resolve().parents[1]
SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1"})
#: words after which the next word is a command (`sudo bootc-operator ...`)
COMMAND_START = SHELL_OPERATORS | {"sudo", "exec", "env", "nohup", "time"}


def _mode_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def _boolean_flags() -> list[tuple[str, str, str]]:
    """(mode, flag, dest) of every boolean flag of both modes."""
    found = []
    for mode, sub in _mode_parsers().items():
        for action in sub._actions:
            if isinstance(action, BoolFlag):
                found.append((mode, action.option_strings[0], action.dest))
    return found


def test_every_boolean_flag_is_a_boolflag() -> None:
    # store_true / BooleanOptionalAction reject "--flag=false"; every boolean must use BoolFlag.
    for mode, sub in _mode_parsers().items():
        for action in sub._actions:
            assert not isinstance(
                action,
                argparse._StoreTrueAction
                | argparse._StoreFalseAction
                | argparse.BooleanOptionalAction,
            ), f"{mode} {action.option_strings}: use action=BoolFlag"
    assert ("controller", "--leader-elect", "leader_elect") in _boolean_flags()


@pytest.mark.parametrize(("mode", "flag", "dest"), _boolean_flags())
@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("{flag}", True),
        ("{flag}=true", True),
        ("{flag}=false", False),
        ("{flag}=True", True),
        ("{flag}=FALSE", False),
        ("{flag}=1", True),
        ("{flag}=0", False),
        ("{flag}=t", True),
        ("{flag}=f", False),
        ("--no-{name}", False),
    ],
)
def test_boolean_flag_spellings(
    mode: str, flag: str, dest: str, spelling: str, expected: bool
) -> None:
    extra = ["--node-name", "n"] if mode == "daemon" else []
    arg = spelling.format(flag=flag, name=flag.removeprefix("--"))
    assert getattr(build_parser().parse_args([mode, *extra, arg]), dest) is expected
    # the last spelling wins, as with pflag
    opposite = f"{flag}={'false' if expected else 'true'}"
    assert getattr(build_parser().parse_args([mode, *extra, opposite, arg]), dest) is expected


@pytest.mark.parametrize(("mode", "flag", "dest"), _boolean_flags())
@pytest.mark.parametrize("bad", ["{flag}=maybe", "{flag}=", "--no-{name}=true"])
def test_bad_boolean_value_exits_2_with_one_line(
    mode: str, flag: str, dest: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arg = bad.format(flag=flag, name=flag.removeprefix("--"))
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([mode, arg])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert flag in err and f"bootc-operator {mode}: error:" in err


def test_parse_bool_rejects_other_words() -> None:
    for word in ("yes", "on", "maybe", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="use true or false"):
            parse_bool(word)


def test_help_shows_boolean_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller", "--help"])
    assert "--leader-elect[=true|false], --no-leader-elect" in capsys.readouterr().out


def readme_commands(text: str) -> list[list[str]]:
    """The arguments of every ``bootc-operator`` command in the shell blocks of ``text``.

    Continuation lines are joined (``userdocs.shell_commands``) and shell comments
    dropped; a command ends at a shell operator or the end of its line.
    """
    commands: list[list[str]] = []
    for line in userdocs.shell_commands(text):
        words = shlex.split(line, comments=True)
        for i, word in enumerate(words):
            # in command position only: `helm uninstall bootc-operator` names a release
            if Path(word).name != "bootc-operator" or (i and words[i - 1] not in COMMAND_START):
                continue
            args = []
            for w in words[i + 1 :]:
                if w in SHELL_OPERATORS:
                    break
                args.append(w)
            commands.append(args)
    return commands


def test_readme_command_extraction() -> None:
    sample = (
        "text `bootc-operator nothing`\n```sh\n"
        "x/bootc-operator controller --a=1 \\\n    --b 2   # comment\n"
        "bootc-operator daemon --c | tee log\n"
        "helm uninstall bootc-operator --namespace bootc-operator\n```\n"
    )
    assert readme_commands(sample) == [["controller", "--a=1", "--b", "2"], ["daemon", "--c"]]


def test_every_readme_command_parses() -> None:
    commands = readme_commands(userdocs.text())
    # The guide runs both modes by hand; an empty list would make this test vacuous.
    assert {args[0] for args in commands if args} >= {"controller", "daemon"}
    for args in commands:
        try:
            parsed = build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"documented command `bootc-operator {shlex.join(args)}` exits {exc.code}")
        if "--leader-elect=false" in args:
            assert parsed.leader_elect is False


@pytest.mark.parametrize(
    ("manifest", "mode"),
    [("controller/deployment.yaml", "controller"), ("daemon/daemonset.yaml", "daemon")],
)
def test_manifest_args_parse(manifest: str, mode: str) -> None:
    doc = yaml.safe_load((REPO / "manifests" / manifest).read_text())
    containers = doc["spec"]["template"]["spec"]["containers"]
    args = next(c["args"] for c in containers if c.get("args"))
    assert args[0] == mode
    extra = ["--node-name", "n"] if mode == "daemon" else []
    parsed = build_parser().parse_args([*args, *extra])
    if mode == "controller":
        assert parsed.leader_elect is True
