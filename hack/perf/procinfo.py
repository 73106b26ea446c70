"""Reading what processes and the machine cost: /proc, load, Prometheus text.

- :func:`proc_cpu` / :func:`proc_mem`: CPU seconds (user + system) and RSS of a PID;
- :class:`MachineCpu`: the whole machine's busy CPU seconds from ``/proc/stat``,
  so a report can say how much of it went to processes that are not ours
  (other sessions share this machine);
- :func:`machine`: cores, Python, kernel, load average;
- :func:`counters`: sum a Prometheus counter's samples by some of its labels.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` so far; 0.0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_mem(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of ``pid`` in MiB; empty when it is gone."""
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def self_cpu() -> float:
    return proc_cpu(os.getpid())


@dataclass
class MachineCpu:
    """Busy and total CPU seconds of the whole machine (all cores) since boot."""

    busy: float
    total: float

    @classmethod
    def read(cls) -> MachineCpu:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
        values = [int(v) for v in first[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        total = sum(values[:8])  # guest time is already counted in user
        return cls(busy=(total - idle) / CLK_TCK, total=total / CLK_TCK)

    def since(self, earlier: MachineCpu) -> MachineCpu:
        return MachineCpu(self.busy - earlier.busy, self.total - earlier.total)


def loadavg() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model,
        "memory_gib": round(mem_gib, 1),
        "python": sys.version.split()[0],
        "kernel": platform.release(),
        "load_average": [round(x, 2) for x in loadavg()],
    }


def counters(
    text: str, name: str, by: Iterable[str], where: Mapping[str, str] | None = None
) -> dict[tuple[str, ...], float]:
    """Sum counter ``name``'s samples in Prometheus text ``text``, keyed by labels ``by``."""
    keys = tuple(by)
    result: dict[tuple[str, ...], float] = {}
    base = name.removesuffix("_total")
    for family in text_string_to_metric_families(text):
        if family.name != base:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            if where and any(labels.get(k) != v for k, v in where.items()):
                continue
            key = tuple(labels.get(k, "") for k in keys)
            result[key] = result.get(key, 0.0) + sample.value
    return result


def gauge(text: str, name: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None
