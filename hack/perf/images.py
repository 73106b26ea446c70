"""The benchmarks' image references: image ``n`` of one repository, by a made-up digest.

Nothing pulls them (the fleet and the hosts are simulated), so ``image(n)`` names
the n-th image of a rollout sequence and ``digest(n)`` is the digest a node reports
when it booted it (``hack.perf.scale``, ``hack.perf.pdbdrain``).
"""

from __future__ import annotations

REPO = "registry.example.com/bench/os"


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def image(n: int) -> str:
    return f"{REPO}@{digest(n)}"
