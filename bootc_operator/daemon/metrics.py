"""The node agent's Prometheus metrics (served on ``--metrics-bind-address`` /metrics).

- ``bootc_operator_daemon_bootc_command_duration_seconds{command}``: every host command
  the daemon runs (``status``, ``switch``, ``stop``, ``apply`` = ``bootc upgrade
  --from-downloaded``, ``rollback``, ``reboot``, ``assess`` = the ``systemctl`` reads
  of the boot assessment), timed out or not;
- ``bootc_operator_daemon_bootc_command_failures_total{command}``: non-zero exits,
  timeouts, commands that could not be started and ``status`` output that is unusable;
- ``bootc_operator_daemon_last_status_refresh_timestamp_seconds``: when ``bootc status``
  was last read and parsed successfully (Unix time);
- ``bootc_operator_daemon_stage_attempts_total``: switches started.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

COMMANDS: Final = ("status", "switch", "stop", "apply", "rollback", "reboot", "assess")

COMMAND_DURATION: Final = Histogram(
    "bootc_operator_daemon_bootc_command_duration_seconds",
    "Duration of host commands run by the daemon (bootc status, the switch unit, ...)",
    ["command"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
COMMAND_FAILURES: Final = Counter(
    "bootc_operator_daemon_bootc_command_failures_total",
    "Host commands that failed, timed out or printed unusable output",
    ["command"],
)
LAST_STATUS_REFRESH: Final = Gauge(
    "bootc_operator_daemon_last_status_refresh_timestamp_seconds",
    "Unix time of the last successful bootc status read",
)
STAGE_ATTEMPTS: Final = Counter(
    "bootc_operator_daemon_stage_attempts_total",
    "bootc switch runs started to stage a desired image",
)

for _command in COMMANDS:  # export zeros from the start, so rates work at once
    COMMAND_DURATION.labels(_command)
    COMMAND_FAILURES.labels(_command)
