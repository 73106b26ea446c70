"""The pool ``hack/sim`` and ``hack/demo`` create from a pool file and policy flags
(``hack.simlib.policy``), and the demo's default story staying what it was."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest

from hack.simlib.demo import demo_pool, rollout_story
from hack.simlib.policy import (
    PolicyError,
    add_pool_arguments,
    describe_rollout,
    int_or_percent,
    parse_window,
    pool_manifest,
    wants_pool,
)

IMAGE = "127.0.0.1:5000/bootc/os:v1@sha256:" + "1" * 64
# Monday 2026-11-23 15:16:40 UTC (16:16:40 in Berlin)
NOW = dt.datetime(2026, 11, 23, 15, 16, 40, tzinfo=dt.UTC)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_pool_arguments(parser)
    return parser.parse_args(list(argv))


def test_no_option_means_no_pool_and_the_demo_default_story() -> None:
    args = parse()
    assert not wants_pool(args)
    pool = pool_manifest(args, image=IMAGE, defaults={"maxUnavailable": 2})
    assert pool["metadata"] == {"name": "workers"}
    assert pool["spec"] == {
        "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
        "image": {"ref": IMAGE},
        "rollout": {"maxUnavailable": 2},
    }
    assert rollout_story(pool["spec"]["rollout"], 2) == (
        "stage everywhere, then cordon, drain, reboot, uncordon, 2 at a time"
    )
    assert "rollout" not in pool_manifest(args, image=IMAGE)["spec"], "the CRD's defaults"


def test_flags_set_the_rollout_fields() -> None:
    args = parse(
        "--max-unavailable=25%",
        "--max-unhealthy=1",
        "--stage-ahead=2",
        "--maintenance-window=Mon-Wed,Fri 22:00 4h Europe/Berlin",
        "--maintenance-window=10:00 90m",
    )
    assert wants_pool(args)
    rollout = pool_manifest(args, image=IMAGE, now=NOW)["spec"]["rollout"]
    assert rollout == {
        "maxUnavailable": "25%",
        "maxUnhealthy": 1,
        "stageAhead": 2,
        "maintenanceWindows": [
            {
                "days": ["Mon", "Tue", "Wed", "Fri"],
                "start": "22:00",
                "duration": "4h",
                "timeZone": "Europe/Berlin",
            },
            {"start": "10:00", "duration": "90m", "timeZone": "UTC"},
        ],
    }
    assert describe_rollout(rollout) == (
        "maxUnavailable 25%, maxUnhealthy 1, stageAhead 2, maintenance windows "
        "Mon,Tue,Wed,Fri 22:00 4h Europe/Berlin; every day 10:00 90m UTC"
    )
    assert rollout_story(rollout, 1) == (
        "stage 2 ahead of the reboots, then cordon, drain, reboot, uncordon, 1 at a time, "
        "new reboots only inside a maintenance window"
    )


def test_topology_flags_set_zone_by_zone() -> None:
    args = parse("--topology-key=topology.kubernetes.io/zone", "--topology-order=zone-c, zone-a")
    assert wants_pool(args)
    rollout = pool_manifest(args, image=IMAGE)["spec"]["rollout"]
    assert rollout == {
        "topology": {"key": "topology.kubernetes.io/zone", "order": ["zone-c", "zone-a"]}
    }
    assert describe_rollout(rollout) == (
        "maxUnavailable 1, zone by zone by topology.kubernetes.io/zone, zone-c then zone-a first"
    )
    with pytest.raises(PolicyError, match="need --topology-key"):
        pool_manifest(parse("--topology-order=a"), image=IMAGE)
    with pytest.raises(PolicyError, match="need --topology-key"):
        pool_manifest(parse("--max-unavailable-per-domain=1"), image=IMAGE)
    args = parse("--topology-key=k", "--max-unavailable-per-domain=50%")
    assert pool_manifest(args, image=IMAGE)["spec"]["rollout"] == {
        "topology": {"key": "k", "maxUnavailablePerDomain": "50%"}
    }


def test_order_flags_set_the_admins_order() -> None:
    args = parse("--order-by-label=example.com/rack", "--control-plane=Last")
    assert wants_pool(args)
    rollout = pool_manifest(args, image=IMAGE)["spec"]["rollout"]
    assert rollout == {"order": {"byLabel": "example.com/rack", "controlPlane": "Last"}}
    assert describe_rollout(rollout) == (
        "maxUnavailable 1, order byLabel example.com/rack, controlPlane Last"
    )
    assert pool_manifest(parse("--order-by=NewestFirst"), image=IMAGE)["spec"]["rollout"] == {
        "order": {"by": "NewestFirst"}
    }


def test_drain_flags_set_the_drain_policy_over_the_files(tmp_path: Path) -> None:
    args = parse("--drain-timeout=30", "--drain-on-timeout=Skip")
    assert wants_pool(args)
    rollout = pool_manifest(args, image=IMAGE)["spec"]["rollout"]
    assert rollout == {"drain": {"timeoutSeconds": 30, "onTimeout": "Skip"}}
    assert describe_rollout(rollout) == "maxUnavailable 1, drain timeout 30s then Skip"
    file = tmp_path / "pool.yaml"
    file.write_text("spec:\n  rollout:\n    drain: {timeoutSeconds: 5, gracePeriodSeconds: 1}\n")
    args = parse(f"--pool-file={file}", "--drain-on-timeout=Force")
    drain = pool_manifest(args, image=IMAGE)["spec"]["rollout"]["drain"]
    assert drain == {"timeoutSeconds": 5, "gracePeriodSeconds": 1, "onTimeout": "Force"}
    with pytest.raises(SystemExit):
        parse("--drain-on-timeout=Drop")


def test_the_emptydir_flag_sets_delete_emptydir_data_true_or_false() -> None:
    for text, value in (("true", True), ("false", False)):
        args = parse(f"--drain-delete-emptydir-data={text}")
        assert wants_pool(args)
        rollout = pool_manifest(args, image=IMAGE)["spec"]["rollout"]
        assert rollout == {"drain": {"deleteEmptyDirData": value}}
        assert describe_rollout(rollout) == f"maxUnavailable 1, drain deleteEmptyDirData {text}"
    with pytest.raises(SystemExit):
        parse("--drain-delete-emptydir-data=yes")


def test_a_pool_file_is_filled_in_and_flags_beat_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "apiVersion: node.bootc.dev/v1alpha1\n"
        "kind: BootcNodePool\n"
        "metadata: {name: edge, labels: {team: a}}\n"
        "spec:\n"
        "  rollout: {maxUnavailable: 3, stageAhead: 1, paused: true}\n"
        "  disruption: {rebootPolicy: AllowSoftReboot}\n"
    )
    pool = pool_manifest(parse(f"--pool-file={path}", "--stage-ahead=4"), image=IMAGE)
    assert pool["metadata"] == {"name": "edge", "labels": {"team": "a"}}
    spec = pool["spec"]
    assert spec["image"] == {"ref": IMAGE}
    assert spec["nodeSelector"] == {"matchLabels": {"node-role.kubernetes.io/worker": ""}}
    assert spec["rollout"] == {"maxUnavailable": 3, "stageAhead": 4, "paused": True}
    assert spec["disruption"] == {"rebootPolicy": "AllowSoftReboot"}

    path.write_text("spec: {image: {ref: quay.io/x/os:1}, nodeSelector: {matchLabels: {a: b}}}\n")
    spec = pool_manifest(parse(f"--pool-file={path}"), image=IMAGE)["spec"]
    assert spec["image"] == {"ref": "quay.io/x/os:1"}, "the file's image is kept"
    assert spec["nodeSelector"] == {"matchLabels": {"a": "b"}}


def test_a_bad_pool_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text("kind: Deployment\n")
    with pytest.raises(PolicyError, match="does not hold one BootcNodePool"):
        pool_manifest(parse(f"--pool-file={path}"), image=IMAGE)
    with pytest.raises(PolicyError, match="cannot read"):
        pool_manifest(parse(f"--pool-file={tmp_path / 'missing.yaml'}"), image=IMAGE)


def test_window_days_ranges_and_relative_starts() -> None:
    assert parse_window("sat-mon 23:30 1h", NOW)["days"] == ["Sat", "Sun", "Mon"]
    assert parse_window("Tue,Tue 01:00 1h", NOW)["days"] == ["Tue"]
    # 15:16:40 + 1m = 15:17:40, rounded up to the next whole minute; in the window's zone
    assert parse_window("+1m 2m", NOW) == {"start": "15:18", "duration": "2m", "timeZone": "UTC"}
    assert parse_window("+1h30m 2m Europe/Berlin", NOW)["start"] == "17:47"
    assert parse_window("Mon +0m 5m", NOW.replace(second=0))["start"] == "15:16"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty"),
        ("22:00", "expected"),
        ("Mon 22:00 4h UTC extra", "expected"),
        ("Mox 22:00 4h", "not a day"),
        ("22:00 4h Mars/Olympus", "timeZone"),
        ("+1m 2m Mars/Olympus", "unknown time zone"),
        ("+soon 2m", r"not \+DURATION"),
        ("25:00 4h", "start"),
        ("22:00 4d", "duration"),
    ],
)
def test_bad_windows_name_the_problem(text: str, error: str) -> None:
    with pytest.raises(PolicyError, match=error):
        parse_window(text, NOW)


def test_int_or_percent() -> None:
    assert int_or_percent("2") == 2
    assert int_or_percent(" 25% ") == "25%"
    for bad in ("-1", "1.5", "x%", "%"):
        with pytest.raises(argparse.ArgumentTypeError):
            int_or_percent(bad)


def test_the_demo_rolls_out_its_own_image(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text("spec: {image: {ref: quay.io/x/os:1}, rollout: {stageAhead: 1}}\n")
    pool = demo_pool(parse(f"--pool-file={path}"), IMAGE)
    assert pool["spec"]["image"] == {"ref": IMAGE}
    assert pool["spec"]["rollout"] == {"maxUnavailable": 2, "stageAhead": 1}
    assert demo_pool(parse("--max-unavailable=1"), IMAGE)["spec"]["rollout"] == {
        "maxUnavailable": 1
    }
