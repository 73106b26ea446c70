"""The node agent's Prometheus metrics (served on ``--metrics-bind-address`` /metrics).

- ``bootc_operator_daemon_bootc_command_duration_seconds{command}``: every host command
  the daemon runs (``status``, ``switch``, ``stop``, ``apply`` = ``bootc upgrade
  --from-downloaded``, ``rollback``, ``reboot``, ``soft-reboot`` = ``bootc upgrade
  --from-downloaded --apply --soft-reboot=required``, ``assess`` = the ``systemctl``
  reads of the boot assessment), timed out or not;
- ``bootc_operator_daemon_bootc_command_failures_total{command}``: non-zero exits,
  timeouts, commands that could not be started and ``status`` output that is unusable;
- ``bootc_operator_daemon_last_status_refresh_timestamp_seconds``: when ``bootc status``
  was last read and parsed successfully (Unix time);
- ``bootc_operator_daemon_stage_attempts_total``: switches started;
- ``bootc_operator_daemon_reboots_total{kind}``: reboots into an update the daemon asked
  for, ``kind`` ``soft`` (userspace only) or ``full``, as ``status.lastRebootKind``
  said. Counted by the daemon that starts *after* the reboot, when it finds the status
  it left (``Idle=False/Rebooting``) and a new booted deployment: the rebooting
  process dies with its counters, long before a scrape would see them.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

COMMANDS: Final = (
    "status",
    "switch",
    "stop",
    "apply",
    "rollback",
    "reboot",
    "soft-reboot",
    "assess",
)
REBOOT_KINDS: Final = ("soft", "full")

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

REBOOTS: Final = Counter(
    "bootc_operator_daemon_reboots_total",
    "Reboots into an update the daemon asked for, by kind (soft: userspace only; full), "
    "counted after the reboot",
    ["kind"],
)

for _command in COMMANDS:  # export zeros from the start, so rates work at once
    COMMAND_DURATION.labels(_command)
    COMMAND_FAILURES.labels(_command)
for _kind in REBOOT_KINDS:
    REBOOTS.labels(_kind)
