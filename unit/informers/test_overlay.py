"""Read-your-writes overlay."""

from __future__ import annotations

from typing import Any

from bootc_operator.informers.overlay import Overlay


def obj(rv: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "resourceVersion": rv}, **extra}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_write_shadows_older_cache_until_it_catches_up() -> None:
    o = Overlay()
    o.wrote("x", obj("10", v="new"))
    assert o.read("x", obj("9", v="old")) == obj("10", v="new")
    assert o.read("x", None) == obj("10", v="new")  # create not yet seen
    assert o.read("x", obj("10", v="new")) == obj("10", v="new")
    assert len(o) == 0
    assert o.read("x", obj("9", v="old")) == obj("9", v="old")  # entry dropped


def test_newer_cache_wins() -> None:
    o = Overlay()
    o.wrote("x", obj("10"))
    assert o.read("x", obj("12", v="later")) == obj("12", v="later")


def test_delete_tombstone_until_cache_drops_it() -> None:
    o = Overlay()
    o.deleted("x", "10")
    assert o.read("x", obj("10")) is None
    assert o.read("x", None) is None and len(o) == 0
    o.deleted("x", "10")
    assert o.read("x", obj("15", v="recreated")) == obj("15", v="recreated")


def test_entries_expire_and_bad_versions_never_hide_the_cache() -> None:
    clock = Clock()
    o = Overlay(ttl=5, clock=clock)
    o.wrote("x", obj("10"))
    clock.t = 6
    assert o.read("x", obj("9")) == obj("9")
    o.wrote("y", obj("not-a-number"))
    assert len(o) == 0
    o.wrote("z", obj("3"))
    assert o.read("z", obj("opaque")) == obj("opaque")
