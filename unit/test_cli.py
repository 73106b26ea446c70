"""The command line: modes, flags with defaults, duration parsing, log formats."""

from __future__ import annotations

import argparse
import json
import logging

import pytest

from bootc_operator.cli import build_parser, parse_duration
from bootc_operator.logs import JSONFormatter, TextFormatter, setup_logging


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
