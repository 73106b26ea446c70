"""The ``daemon`` mode's flags and how they become the agent's configuration."""

from __future__ import annotations

from pathlib import Path

from bootc_operator.cli import DEFAULT_HOST_EXEC, build_parser
from bootc_operator.daemon.agent import Config
from bootc_operator.daemon.decide import RetryPolicy


def test_daemon_defaults() -> None:
    args = build_parser().parse_args(["daemon", "--node-name", "n1"])
    assert args.host_exec == DEFAULT_HOST_EXEC
    assert args.host_root == "/proc/1/root"
    assert (args.poll_interval, args.bootc_timeout, args.stage_timeout) == (300.0, 120.0, 3600.0)
    assert (args.backoff_initial, args.backoff_max) == (10.0, 300.0)
    assert (args.metrics_bind_address, args.health_probe_bind_address) == (":8090", ":8091")
    assert args.enforce_container_sigpolicy is False
    config = Config.from_args(args)
    assert config == Config("n1", Path("/proc/1/root"), 300.0, RetryPolicy(10.0, 300.0))


def test_daemon_flags() -> None:
    args = build_parser().parse_args(
        [
            "daemon",
            "--node-name",
            "n2",
            "--host-root",
            "/tmp/host",
            "--poll-interval",
            "1h",
            "--backoff-initial",
            "500ms",
            "--backoff-max",
            "2s",
            "--enforce-container-sigpolicy",
        ]
    )
    assert args.enforce_container_sigpolicy is True
    assert Config.from_args(args) == Config("n2", Path("/tmp/host"), 3600.0, RetryPolicy(0.5, 2.0))
