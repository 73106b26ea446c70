"""hack.perf.daemons.startup_figures: spawn -> first status write of each new life."""

from __future__ import annotations

from hack.perf.daemons import startup_figures
from hack.perf.observer import BnFacts

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def facts(booted: str) -> BnFacts:
    return BnFacts(True, True, False, "Booted", B, None, booted, None)


def test_the_first_write_of_the_new_booted_image_after_each_spawn() -> None:
    log = [
        (1.0, "n1", facts(A)),  # the first life's writes
        (12.0, "n1", facts(B)),  # n1's new life: 2.0 s after its spawn at 10.0
        (13.0, "n1", facts(B)),  # later writes do not count
        (20.5, "n2", facts(B)),  # n2: 0.5 s
        (21.0, "n3", facts(B)),  # n3 was spawned before the rollout: not a new life
        (31.0, "n4", facts(A)),  # n4 never wrote B
    ]
    spawned = {"n1": 10.0, "n2": 20.0, "n3": 0.5, "n4": 30.0}
    got = startup_figures(log, spawned, since=5.0, booted=B)
    assert got == {"n": 2, "median": 1.25, "max": 2.0}
    assert startup_figures([], spawned, since=5.0, booted=B) == {"n": 0}
