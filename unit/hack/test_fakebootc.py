"""The simulated bootc host (hack.fakebootc): layout, bootc status/switch/rollback, the
simulated reboot, faults, the sysroot lock, the host tool shims, image resolution
through catalogs and through a registry, and the ``fake-host`` CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyinotify
import pytest

from hack.fakebootc import FAULTS, FakeHostError, Host, make_host, open_host
from hack.fakebootc.boot import DEFAULT_CHECK_UNIT, LABEL, decide_boot
from hack.fakebootc.state import (
    DEFAULT_KERNEL,
    KERNEL_LABEL,
    lock_is_held,
    lock_waiters,
    update_state,
)

# each test has a host of its own, and most of their time is the fake's waiting: parallel
# workers take them one by one (hack/pytest_parallel.py)
pytestmark = pytest.mark.spread

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO = "quay.io/example/os"


def digest(c: str) -> str:
    return "sha256:" + c * 64


D1, D2, D3, D4 = digest("1"), digest("2"), digest("3"), digest("4")


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return make_host(tmp_path / "node", booted=f"{REPO}@{D1}", version="1.0")


def status(host: Host, *flags: str) -> dict[str, Any]:
    done = host.bootc("status", *(flags or ("--format=json", "--format-version=1")))
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def slot_digest(doc: dict[str, Any], slot: str) -> str | None:
    entry = doc["status"][slot]
    return None if entry is None or entry["image"] is None else str(entry["image"]["imageDigest"])


def slots(host: Host) -> tuple[str | None, str | None, str | None]:
    doc = status(host)
    return slot_digest(doc, "booted"), slot_digest(doc, "staged"), slot_digest(doc, "rollback")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll an observable condition (not a sleep standing in for one) with a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def popen(host: Host, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(host.bin_dir / argv[0]), *argv[1:]],
        env=host.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---------------------------------------------------------------- layout and status


def test_make_host_lays_out_a_root(host: Host) -> None:
    root = host.root
    assert (root / "ostree" / "bootc").is_dir()
    assert (root / "run" / "ostree").is_dir()
    assert (root / "sysroot" / "ostree").is_dir()
    assert (root / ".fakebootc" / "state.json").is_file()
    for tool in ("bootc", "nsenter", "systemd-run", "systemctl", "journalctl"):
        assert os.access(host.bin_dir / tool, os.X_OK), tool
    assert host.env({"PATH": "/usr/bin"})["PATH"] == f"{host.bin_dir}:/usr/bin"
    assert host.auth_file == root / "run" / "ostree" / "auth.json"
    with pytest.raises(FakeHostError, match="already a simulated host"):
        make_host(root, booted=f"{REPO}@{D2}")
    again = make_host(root, booted=f"{REPO}@{D2}", force=True)
    assert open_host(root).state() == again.state()
    assert slots(again) == (D2, None, None)


def test_booted_ref_needs_a_digest_or_a_catalog_entry(tmp_path: Path) -> None:
    with pytest.raises(FakeHostError, match="has no digest"):
        make_host(tmp_path / "a", booted=f"{REPO}:latest")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"images": {f"{REPO}:latest": {"digest": D3, "version": "3"}}}))
    host = make_host(tmp_path / "b", booted=f"{REPO}:latest", catalogs=[catalog])
    booted = host.state().booted
    assert booted is not None
    assert (booted.image, booted.digest, booted.version) == (f"{REPO}:latest", D3, "3")


def test_status_json_is_one_canonical_line_with_explicit_nulls(host: Host) -> None:
    done = host.bootc("status", "--format=json", "--format-version=1")
    assert done.returncode == 0
    text = done.stdout
    assert "\n" not in text
    doc = json.loads(text)
    assert text == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert doc["apiVersion"] == "org.containers.bootc/v1"
    assert doc["kind"] == "BootcHost"
    assert doc["metadata"] == {"name": "host"}
    assert doc["spec"] == {
        "bootOrder": "default",
        "image": {"image": f"{REPO}@{D1}", "transport": "registry"},
    }
    assert '"staged":null' in text
    assert '"rollback":null' in text
    assert "otherDeployments" not in text
    assert "signature" not in text
    booted = doc["status"]["booted"]
    assert booted["image"] == {
        "architecture": "amd64",
        "image": {"image": f"{REPO}@{D1}", "transport": "registry"},
        "imageDigest": D1,
        "timestamp": None,
        "version": "1.0",
    }
    assert booted["ostree"]["stateroot"] == "default"
    assert booted["composefs"] is None
    assert booted["cachedUpdate"] is None
    assert doc["status"]["type"] == "bootcHost"


def test_status_formats_and_versions(host: Host) -> None:
    canonical = host.bootc("status", "--format=json", "--format-version=1").stdout
    assert host.bootc("status", "--json").stdout == canonical
    assert host.bootc("status", "--format", "json", "--format-version", "0").stdout == canonical
    yaml = host.bootc("status")  # stdout is a pipe: YAML, as bootc does
    assert yaml.returncode == 0
    assert yaml.stdout.startswith("apiVersion: org.containers.bootc/v1\nkind: BootcHost\n")
    human = host.bootc("status", "--format=humanreadable")
    assert "Booted image: quay.io/example/os@" in human.stdout
    bad = host.bootc("status", "--format=json", "--format-version=2")
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr.strip() == "error: Status: Unsupported format version: 2"
    unknown = host.bootc("frobnicate")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: ")


def test_status_booted_filters_other_slots(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    doc = status(host, "--json", "--booted")
    assert doc["status"]["staged"] is None
    assert slot_digest(doc, "booted") == D1


# ---------------------------------------------------------------- switch


def test_switch_stages_and_signals(host: Host) -> None:
    os.utime(host.paths.ostree_bootc, ns=(0, 0))
    done = host.switch(f"{REPO}@{D2}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"Queued for next boot: {REPO}@{D2}", f"  Digest: {D2}"]
    assert slots(host) == (D1, D2, None)
    assert host.reboot_required == f"bootc: Reboot required for image: {D2}"
    assert host.paths.ostree_bootc.stat().st_mtime_ns > 0
    assert host.reboot_request is None
    assert host.switch_calls() == [["switch", "--", f"{REPO}@{D2}"]]
    doc = status(host)
    assert doc["spec"]["image"]["image"] == f"{REPO}@{D2}"


def test_switch_touch_is_seen_by_inotify_as_in_attrib(host: Host) -> None:
    wm = pyinotify.WatchManager()
    seen: list[str] = []

    class Handler(pyinotify.ProcessEvent):  # type: ignore[misc]
        def process_IN_ATTRIB(self, event: Any) -> None:
            seen.append(event.pathname)

    notifier = pyinotify.Notifier(wm, Handler())
    try:
        wm.add_watch(str(host.paths.ostree_bootc), pyinotify.IN_ATTRIB)
        assert host.switch(f"{REPO}@{D2}").returncode == 0
        assert notifier.check_events(timeout=5000)
        notifier.read_events()
        notifier.process_events()
    finally:
        notifier.stop()
    assert seen == [str(host.paths.ostree_bootc)]


def test_switch_nothing_to_do_exits_zero(host: Host) -> None:
    same = host.switch(f"{REPO}@{D1}")
    assert (same.returncode, same.stdout.strip()) == (0, "Image specification is unchanged.")
    assert slots(host) == (D1, None, None)
    assert host.reboot_required is None
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    again = host.switch(f"{REPO}@{D2}")
    assert (again.returncode, again.stdout.strip()) == (0, "Image specification is unchanged.")
    # tag@digest is canonicalised to name@digest before comparing, as bootc does
    tagged = host.switch(f"{REPO}:v2@{D2}")
    assert tagged.stdout.strip() == "Image specification is unchanged."


def test_switch_back_to_the_booted_image_restages_it(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    back = host.switch(f"{REPO}@{D1}")
    assert back.returncode == 0
    assert back.stdout.startswith(f"Queued for next boot: {REPO}@{D1}")
    doc = status(host)
    assert (slot_digest(doc, "booted"), slot_digest(doc, "staged")) == (D1, D1)
    assert doc["status"]["staged"]["ostree"]["deploySerial"] == 1
    assert (
        doc["status"]["staged"]["ostree"]["checksum"]
        == doc["status"]["booted"]["ostree"]["checksum"]
    )


def test_switch_replaces_a_staged_deployment(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert host.switch(f"{REPO}@{D3}").returncode == 0
    assert slots(host) == (D1, D3, None)


def test_switch_apply_requests_a_reboot(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}", apply=True).returncode == 0
    request = host.reboot_request
    assert request is not None
    assert (request["kind"], request["by"]) == ("reboot", "bootc switch --apply")


def test_switch_stage_delay_holds_the_sysroot_lock(host: Host) -> None:
    host.configure(stage_delay=30.0)
    switch = popen(host, "bootc", "switch", f"{REPO}@{D2}")
    try:
        wait_for(
            lambda: lock_is_held(host.paths.sysroot_lock), "the switch to take the sysroot lock"
        )
        st = popen(host, "bootc", "status", "--json")
        # kill the switch only once status provably sleeps on the lock (not before it
        # reached its lock attempt: then it would never have had to wait)
        wait_for(
            lambda: st.pid in lock_waiters(host.paths.sysroot_lock),
            "bootc status to wait on the sysroot lock",
        )
        assert st.poll() is None
        switch.kill()
        switch.wait(timeout=10)
        out, err = st.communicate(timeout=10)
        assert st.returncode == 0
        assert "Waiting for sysroot lock..." in err
        assert json.loads(out)["status"]["staged"] is None  # killed mid-pull: nothing staged
    finally:
        switch.kill()
        switch.communicate(timeout=10)


def test_status_blocks_until_a_running_switch_finishes(host: Host) -> None:
    host.set_fault("switch-hang")
    switch = popen(host, "bootc", "switch", f"{REPO}@{D2}")
    try:
        wait_for(
            lambda: lock_is_held(host.paths.sysroot_lock), "the switch to take the sysroot lock"
        )
        st = popen(host, "bootc", "status", "--json")
        wait_for(
            lambda: st.pid in lock_waiters(host.paths.sysroot_lock),
            "bootc status to wait on the sysroot lock",
        )
        assert st.poll() is None
        host.clear_faults()  # the "pull" resumes and completes
        assert switch.wait(timeout=10) == 0
        out, _ = st.communicate(timeout=10)
        assert slot_digest(json.loads(out), "staged") == D2  # status saw the finished switch
    finally:
        switch.kill()
        switch.communicate(timeout=10)


# ---------------------------------------------------------------- reboot and rollback


def test_reboot_boots_the_staged_deployment(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}", apply=True).returncode == 0
    host.auth_file.write_text("{}")
    state = host.reboot()
    assert state.boots == 2
    assert slots(host) == (D2, None, D1)
    assert host.reboot_request is None
    assert host.reboot_required is None
    assert not host.auth_file.exists()  # /run is a tmpfs
    assert (host.root / "run" / "ostree").is_dir()
    # the next update prunes the old rollback
    assert host.switch(f"{REPO}@{D3}").returncode == 0
    host.reboot()
    assert slots(host) == (D3, None, D2)


def test_reboot_with_nothing_staged_changes_nothing(host: Host) -> None:
    host.reboot()
    assert slots(host) == (D1, None, None)
    assert host.state().boots == 2


# ---------------------------------------------------------------- soft reboots


def capable(host: Host, slot: str) -> bool:
    return bool(status(host)["status"][slot]["softRebootCapable"])


def soft_reboots_count(host: Host) -> str:
    return host.run("systemctl", "show", "-P", "SoftRebootsCount").stdout.strip()


def test_images_share_the_default_kernel_so_an_update_is_soft_reboot_capable(host: Host) -> None:
    booted = host.state().booted
    assert booted is not None and booted.kernel == DEFAULT_KERNEL
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert capable(host, "staged")
    assert status(host)["status"]["booted"]["softRebootCapable"] is False  # never itself
    host.add_image(f"{REPO}:k2", D3, kernel="6.13.0-sim")
    assert host.switch(f"{REPO}:k2").returncode == 0
    assert not capable(host, "staged"), "another kernel needs a full reboot"
    host.configure(soft_reboot=False)  # a systemd without soft-reboot.target
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert not capable(host, "staged")


def test_the_rollback_deployment_is_capable_when_it_has_the_booted_kernel(host: Host) -> None:
    host.add_image(f"{REPO}:k2", D2, kernel="6.13.0-sim")
    assert host.switch(f"{REPO}:k2").returncode == 0
    host.reboot()
    assert not capable(host, "rollback"), "D1 has the old kernel"
    assert host.switch(f"{REPO}@{D3}").returncode == 0  # D3: the default kernel again
    assert not capable(host, "staged")
    host.add_image(f"{REPO}:k2b", D4, kernel="6.13.0-sim")
    assert host.switch(f"{REPO}:k2b").returncode == 0
    host.reboot()
    assert capable(host, "rollback"), "D2 and D4 ship the same kernel"


def test_switch_apply_soft_reboot_prepares_and_the_reboot_is_soft(host: Host) -> None:
    host.auth_file.write_text("{}")
    boot_id, boots = host.boot_id, host.state().boots
    done = host.bootc("switch", "--apply", "--soft-reboot=auto", f"{REPO}@{D2}")
    assert done.returncode == 0, done.stderr
    assert "Staged deployment is soft-reboot capable, preparing for soft-reboot..." in done.stdout
    request = host.reboot_request
    assert request is not None
    # bootc reboots plainly; systemd soft-reboots because /run/nextroot is set up
    assert (request["kind"], request["by"]) == ("reboot", "bootc switch --apply")
    assert host.next_reboot_kind() == "soft"
    state = host.reboot()
    assert (state.boot_kind, state.boots, slots(host)) == ("soft", boots + 1, (D2, None, D1))
    assert host.boot_id == boot_id, "the kernel keeps running"
    assert (host.soft_reboots, soft_reboots_count(host)) == (1, "1")
    # /run stays mounted and populated across a soft reboot (systemd-soft-reboot.service)
    assert host.auth_file.exists()
    assert host.state().soft_reboot_target is None
    assert host.boot().started >= request["at"], "a soft reboot is a new boot"


def test_a_full_reboot_after_soft_ones_resets_the_count_and_the_boot_id(host: Host) -> None:
    assert host.run("systemctl", "soft-reboot").returncode == 0
    assert host.reboot().boot_kind == "soft"
    boot_id = host.boot_id
    assert soft_reboots_count(host) == "1"
    assert host.run("systemctl", "reboot").returncode == 0
    assert host.next_reboot_kind() == "full"
    assert host.reboot().boot_kind == "full"
    assert host.boot_id != boot_id
    assert soft_reboots_count(host) == "0"
    assert host.run("systemctl", "show", "--property=SoftRebootsCount").stdout == (
        "SoftRebootsCount=0\n"
    )


def test_bare_systemctl_soft_reboot_restarts_userspace_on_the_same_deployment(
    host: Host,
) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert host.run("systemctl", "soft-reboot").returncode == 0
    assert host.reboot().boot_kind == "soft"
    assert slots(host) == (D1, D2, None), "nothing was prepared: same root, still staged"
    host.configure(soft_reboot=False)
    refused = host.run("systemctl", "soft-reboot")
    assert refused.returncode == 5
    assert "Unit soft-reboot.target not found" in refused.stderr
    assert host.reboot_request is None


def test_soft_reboot_required_fails_when_not_capable(host: Host) -> None:
    host.add_image(f"{REPO}:k2", D2, kernel="6.13.0-sim")
    done = host.bootc("switch", "--apply", "--soft-reboot=required", f"{REPO}:k2")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: Switching: Handling staged soft reboot: Handling soft reboot: Soft reboot was "
        "required but staged deployment is not soft-reboot capable"
    )
    assert host.reboot_request is None, "nothing reboots"
    assert slots(host) == (D1, D2, None), "the switch itself staged it"


def test_soft_reboot_auto_falls_back_to_a_full_reboot(host: Host) -> None:
    host.add_image(f"{REPO}:k2", D2, kernel="6.13.0-sim")
    boot_id = host.boot_id
    assert host.auth_file.parent.is_dir()
    host.auth_file.write_text("{}")
    done = host.bootc("switch", "--apply", "--soft-reboot=auto", f"{REPO}:k2")
    assert done.returncode == 0 and "preparing for soft-reboot" not in done.stdout
    assert host.next_reboot_kind() == "full"
    state = host.reboot()
    assert (state.boot_kind, state.booted and state.booted.kernel) == ("full", "6.13.0-sim")
    assert host.boot_id != boot_id and not host.auth_file.exists(), "a new kernel, /run empty"


def test_upgrade_from_downloaded_apply_soft_reboot_required(tagged: Host) -> None:
    assert tagged.upgrade(download_only=True).returncode == 0
    pulled = tagged.pulls()
    done = tagged.bootc("upgrade", "--from-downloaded", "--apply", "--soft-reboot=required")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Staged deployment will now be applied on reboot",
        "Staged deployment is soft-reboot capable, preparing for soft-reboot...",
    ]
    assert tagged.next_reboot_kind() == "soft"
    assert tagged.reboot().boot_kind == "soft"
    assert slots(tagged)[:2] == (D2, None)
    assert tagged.pulls() == pulled, "the apply pulled nothing"


def test_upgrade_from_downloaded_soft_reboot_required_refused_after_unlocking(
    tagged: Host,
) -> None:
    tagged.add_image(f"{REPO}:stable", D3, kernel="6.13.0-sim")
    assert tagged.upgrade(download_only=True).returncode == 0
    done = tagged.bootc("upgrade", "--from-downloaded", "--apply", "--soft-reboot=required")
    assert done.returncode == 1
    assert "Soft reboot was required but staged deployment is not soft-reboot capable" in (
        done.stderr
    )
    assert not download_only(tagged), "bootc unlocked it before looking at the soft reboot"
    assert tagged.reboot_request is None


def test_soft_reboot_without_apply_prepares_the_next_systemctl_reboot(host: Host) -> None:
    assert host.bootc("switch", "--soft-reboot=auto", f"{REPO}@{D2}").returncode == 0
    assert host.reboot_request is None, "no --apply: nothing reboots yet"
    assert host.run("systemctl", "reboot").returncode == 0
    assert host.next_reboot_kind() == "soft"
    # staging something else drops the prepared soft reboot
    assert host.switch(f"{REPO}@{D3}").returncode == 0
    assert host.next_reboot_kind() == "full"
    assert host.reboot().boot_kind == "full"


def test_a_reboot_nobody_requested_is_full(host: Host) -> None:
    assert host.bootc("switch", "--soft-reboot=required", f"{REPO}@{D2}").returncode == 0
    assert host.next_reboot_kind() == "full", "the power button: no systemctl involved"
    assert host.reboot().boot_kind == "full"


def test_rollback_soft_reboot(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    host.reboot()
    done = host.bootc("rollback", "--apply", "--soft-reboot=required")
    assert done.returncode == 0, done.stderr
    assert "Rollback deployment is soft-reboot capable, preparing for soft-reboot..." in (
        done.stdout
    )
    assert host.next_reboot_kind() == "soft"
    assert host.reboot().boot_kind == "soft"
    assert slots(host) == (D1, None, D2)


def test_upgrade_apply_of_an_already_staged_digest_reboots(tagged: Host) -> None:
    assert tagged.upgrade().returncode == 0
    done = tagged.upgrade(apply=True)
    assert done.stdout == "Staged update present, not changed\n"
    request = tagged.reboot_request
    assert request is not None and request["by"] == "bootc upgrade --apply"


def test_a_registry_image_label_names_its_kernel(
    tmp_path: Path, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    labels = {"containers.bootc": "1", KERNEL_LABEL: "6.14.0-sim"}
    reg.add_image("os", "newkernel", {"amd64": {"config": {"Labels": labels}}})
    reg.add_image("os", "sameuser", {"amd64": {"config": {"Labels": {"containers.bootc": "1"}}}})
    host = make_host(tmp_path / "n", booted=f"{REPO}@{D1}")
    assert host.switch(f"{reg.host}/os:newkernel").returncode == 0
    assert not capable(host, "staged")
    assert host.switch(f"{reg.host}/os:sameuser").returncode == 0
    assert capable(host, "staged")


# ---------------------------------------------------------------- download-only (bootc upgrade)


@pytest.fixture
def tagged(tmp_path: Path) -> Host:
    """A host booted from ``REPO:stable`` (D1); the tag has since moved to D2."""
    h = make_host(tmp_path / "tagged", booted=f"{REPO}@{D1}", version="1.0")
    h.add_image(f"{REPO}:stable", D1)
    assert h.switch(f"{REPO}:stable").returncode == 0
    h.reboot()
    h.add_image(f"{REPO}:stable", D2, version="2.0")
    return h


def download_only(host: Host) -> bool:
    return bool(status(host)["status"]["staged"]["downloadOnly"])


def test_upgrade_download_only_stages_without_queueing_for_boot(tagged: Host) -> None:
    done = tagged.upgrade(download_only=True)
    assert done.returncode == 0, done.stderr
    assert slots(tagged)[:2] == (D1, D2)
    assert download_only(tagged)
    # a reboot does not boot it: bootc discards a download-only deployment
    tagged.reboot()
    assert slots(tagged)[:2] == (D1, None)


def test_upgrade_from_downloaded_lets_it_boot(tagged: Host) -> None:
    assert tagged.upgrade(download_only=True).returncode == 0
    done = tagged.upgrade(from_downloaded=True)
    assert (done.returncode, done.stdout) == (
        0,
        "Staged deployment will now be applied on reboot\n",
    )
    assert not download_only(tagged)
    assert tagged.reboot_request is None, "without --apply nothing reboots"
    again = tagged.upgrade(from_downloaded=True)
    assert again.stdout == "Staged deployment is already set to apply on reboot\n"
    tagged.reboot()
    assert slots(tagged)[:2] == (D2, None)


def test_upgrade_from_downloaded_apply_reboots(tagged: Host) -> None:
    assert tagged.upgrade(download_only=True).returncode == 0
    assert tagged.upgrade(from_downloaded=True, apply=True).returncode == 0
    request = tagged.reboot_request
    assert request is not None and request["kind"] == "reboot"


def test_upgrade_download_only_relocks_and_plain_upgrade_unlocks(tagged: Host) -> None:
    assert tagged.upgrade().returncode == 0
    assert not download_only(tagged)
    done = tagged.upgrade(download_only=True)
    assert done.stdout == "Image downloaded, but will not be applied on reboot\n"
    assert download_only(tagged)
    done = tagged.upgrade()
    assert done.stdout == "Staged deployment will now be applied on reboot\n"
    assert not download_only(tagged)
    assert tagged.upgrade().stdout == "Staged update present, not changed\n"


def test_switch_to_a_download_only_image_changes_nothing(tagged: Host) -> None:
    """The spec already names it: bootc says "unchanged", so only --from-downloaded
    (not a re-stage by switch) makes it bootable."""
    assert tagged.upgrade(download_only=True).returncode == 0
    done = tagged.switch(f"{REPO}:stable")
    assert (done.returncode, done.stdout) == (0, "Image specification is unchanged.\n")
    assert download_only(tagged)


def test_upgrade_download_only_flag_conflicts_and_errors(tagged: Host, host: Host) -> None:
    for flags in (("--download-only", "--apply"), ("--download-only", "--check")):
        done = tagged.bootc("upgrade", *flags)
        assert done.returncode == 2 and "cannot be used with" in done.stderr, flags
    done = tagged.bootc("upgrade", "--from-downloaded", "--download-only")
    assert done.returncode == 2 and "cannot be used with" in done.stderr
    done = host.upgrade(from_downloaded=True)
    assert (done.returncode, done.stderr) == (
        1,
        "error: Upgrading: No staged deployment found\n",
    )
    assert status(host)["status"]["booted"]["downloadOnly"] is False


def test_rollback_queues_and_reverts(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    host.reboot()
    assert host.switch(f"{REPO}@{D3}").returncode == 0
    done = host.rollback()
    assert done.returncode == 0
    assert done.stdout.strip() == "Next boot: rollback deployment"
    doc = status(host)
    assert doc["status"]["rollbackQueued"] is True
    assert doc["spec"]["bootOrder"] == "rollback"
    assert doc["status"]["staged"] is None  # a queued rollback drops the staged deployment
    assert host.reboot_required == f"bootc: Reboot required for image: {D1}"
    revert = host.rollback()
    assert revert.stdout.splitlines() == [
        "notice: Reverting queued rollback state",
        "Next boot: current deployment",
    ]
    assert status(host)["status"]["rollbackQueued"] is False
    assert host.rollback().returncode == 0
    host.reboot()
    doc = status(host)
    assert (slot_digest(doc, "booted"), slot_digest(doc, "rollback")) == (D1, D2)
    assert doc["status"]["rollbackQueued"] is False


def test_rollback_without_a_rollback_fails(host: Host) -> None:
    done = host.rollback()
    assert done.returncode == 1
    assert done.stderr.strip() == "error: Rollback: No rollback available"


def test_a_switch_after_a_queued_rollback_boots_first(host: Host) -> None:
    """As the real bootc 1.16: the rollback stays queued in status (``rollbackQueued``,
    ``bootOrder: rollback``), the staged deployment is what the reboot boots, with the
    booted one as the rollback."""
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    host.reboot()
    assert host.rollback().returncode == 0
    assert host.switch(f"{REPO}@{D3}").returncode == 0
    doc = status(host)
    assert doc["status"]["rollbackQueued"] is True
    assert doc["spec"]["bootOrder"] == "rollback"
    assert slot_digest(doc, "staged") == D3
    host.reboot()
    doc = status(host)
    assert (slot_digest(doc, "booted"), slot_digest(doc, "rollback")) == (D3, D2)
    assert doc["status"]["rollbackQueued"] is False


def test_composefs_host(tmp_path: Path) -> None:
    host = make_host(tmp_path / "cfs", booted=f"{REPO}@{D1}", backend="composefs")
    assert not (host.root / "ostree").exists()
    deploy = host.root / "sysroot" / "state" / "deploy"
    assert list(deploy.iterdir()) == []
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert len(list(deploy.iterdir())) == 1
    doc = status(host)
    staged = doc["status"]["staged"]
    assert staged["ostree"] is None
    assert staged["store"] is None
    assert set(staged["composefs"]) == {
        "bootDigest",
        "bootType",
        "bootloader",
        "missingVerityAllowed",
        "verity",
    }


# ---------------------------------------------------------------- faults


def test_fault_switch_fail(host: Host) -> None:
    host.set_fault("switch-fail")
    done = host.switch(f"{REPO}@{D2}")
    assert done.returncode == 1
    assert done.stderr.startswith("error: Switching: Pulling:")
    assert done.stdout == ""
    host.set_fault("switch-fail", message="Switching: Pulling: connection reset by peer")
    done = host.switch(f"{REPO}@{D2}")
    assert done.stderr.strip() == "error: Switching: Pulling: connection reset by peer"
    assert slots(host) == (D1, None, None)
    host.clear_faults()
    assert host.switch(f"{REPO}@{D2}").returncode == 0


def test_fault_switch_hang_until_the_unit_is_stopped(host: Host) -> None:
    host.set_fault("switch-hang")
    unit = "bootc-operator-switch.service"
    run = popen(
        host,
        "systemd-run",
        "--wait",
        "--collect",
        "--unit",
        unit,
        "bootc",
        "switch",
        f"{REPO}@{D2}",
    )
    try:
        wait_for(lambda: host.active_units() == [unit], "the unit to start")
        wait_for(lambda: lock_is_held(host.paths.sysroot_lock), "the switch to take the lock")
        is_active = host.run("systemctl", "is-active", unit)
        assert (is_active.returncode, is_active.stdout.strip()) == (0, "active")
        stop = host.run("systemctl", "stop", unit, timeout=30)
        assert stop.returncode == 0, stop.stderr
        _, err = run.communicate(timeout=10)
        assert run.returncode == 255
        assert "Finished with result: signal" in err
        assert "Main processes terminated with: code=killed, status=15/TERM" in err
    finally:
        run.kill()
        run.communicate(timeout=10)
    assert host.active_units() == []
    assert not lock_is_held(host.paths.sysroot_lock)
    assert slots(host) == (D1, None, None)
    again = host.run("systemctl", "stop", unit)
    assert again.returncode == 5
    assert again.stderr.strip() == f"Failed to stop {unit}: Unit {unit} not loaded."


def test_fault_status_garbage(host: Host) -> None:
    host.set_fault("status-garbage")
    done = host.bootc("status", "--format=json", "--format-version=1")
    assert done.returncode == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stdout)
    host.clear_faults()
    assert slots(host) == (D1, None, None)


def test_fault_status_block(host: Host) -> None:
    host.set_fault("status-block")
    st = popen(host, "bootc", "status", "--json")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            st.wait(timeout=0.5)
        host.set_fault("status-block", False)
        out, _ = st.communicate(timeout=10)
        assert st.returncode == 0
        assert slot_digest(json.loads(out), "booted") == D1
    finally:
        st.kill()
        st.communicate(timeout=10)


def test_fault_incompatible(host: Host) -> None:
    host.set_fault("incompatible")
    doc = status(host)
    booted = doc["status"]["booted"]
    assert (booted["incompatible"], booted["image"]) == (True, None)
    assert doc["status"]["type"] is None
    assert doc["spec"]["image"] is None
    host.clear_faults()
    assert status(host)["status"]["booted"]["incompatible"] is False


def test_fault_not_bootc(host: Host) -> None:
    host.set_fault("not-bootc")
    doc = status(host)
    assert doc["status"] == {
        "booted": None,
        "readOnly": False,
        "rollback": None,
        "rollbackQueued": False,
        "staged": None,
        "type": None,
        "usrOverlay": None,
    }
    assert doc["spec"] == {"bootOrder": "default", "image": None}
    done = host.switch(f"{REPO}@{D2}")
    assert done.returncode == 1
    assert "error: Switching: Initializing storage: System not booted via bootc" in done.stderr


def test_unknown_fault_is_rejected(host: Host) -> None:
    assert "switch-fail" in FAULTS
    with pytest.raises(FakeHostError, match="unknown fault"):
        host.set_fault("disk-full")


# ---------------------------------------------------------------- shims


def test_nsenter_strips_its_options_and_env_drops_container(host: Host) -> None:
    prefix = [
        "nsenter",
        "--target",
        "1",
        "--mount",
        "--pid",
        "--cgroup",
        "--setuid",
        "0",
        "--setgid",
        "0",
    ]
    env = host.env({"PATH": os.environ["PATH"], "container": "podman"})

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=env, capture_output=True, text=True, timeout=30, check=False
        )

    inside = run(*prefix, "--", "bootc", "status", "--json")
    assert json.loads(inside.stdout)["status"]["booted"] is None  # bootc thinks: container
    refused = run(*prefix, "--", "bootc", "switch", f"{REPO}@{D2}")
    assert refused.returncode == 1
    assert "Detected container" in refused.stderr
    on_host = run(*prefix, "--env", "--", "bootc", "status", "--json")
    assert slot_digest(json.loads(on_host.stdout), "booted") == D1
    missing = run("nsenter", "--target", "1", "--", "no-such-tool")
    assert missing.returncode == 127


def test_nsenter_is_cheap_sh_and_hands_unusual_arguments_to_python(host: Host) -> None:
    """The generated nsenter is /bin/sh (a real one costs a millisecond, a Python start
    50); an argument JSON must escape goes through the Python version, same result."""
    assert (host.bin_dir / "nsenter").read_text().startswith("#!/bin/sh\n")
    plain = host.run("nsenter", "--target", "1", "--", "echo", "plain")
    odd = host.run("nsenter", "--target", "1", "--", "echo", 'say "hi"\tback\\slash')
    assert (plain.returncode, plain.stdout) == (0, "plain\n")
    assert (odd.returncode, odd.stdout) == (0, 'say "hi"\tback\\slash\n')
    logged = [c["argv"] for c in host.calls("nsenter")]
    assert logged == [
        ["--target", "1", "--", "echo", "plain"],
        ["--target", "1", "--", "echo", 'say "hi"\tback\\slash'],
    ]
    lonely = host.run("nsenter", "--target", "1")
    assert lonely.returncode == 1 and "no command given" in lonely.stderr


def test_systemd_run_wait_returns_the_unit_exit_code(host: Host) -> None:
    ok = host.run(
        "systemd-run", "--wait", "--collect", "--unit", "u1", "bootc", "switch", f"{REPO}@{D2}"
    )
    assert ok.returncode == 0
    assert ok.stdout == ""  # without --pipe the unit's output goes to the journal
    assert ok.stderr.startswith("Running as unit: u1.service; invocation ID: ")
    assert "Finished with result: success" in ok.stderr
    journal = host.run("journalctl", "-u", "u1", "-o", "cat", "--no-pager")
    assert journal.stdout.splitlines()[0] == f"Queued for next boot: {REPO}@{D2}"
    assert host.journal("u1.service").startswith("Queued for next boot")

    host.set_fault("switch-fail", message="boom")
    failed = host.run(
        "systemd-run",
        "--wait",
        "--collect",
        "--quiet",
        "--unit",
        "u2",
        "bootc",
        "switch",
        f"{REPO}@{D3}",
    )
    assert (failed.returncode, failed.stderr) == (1, "")
    piped = host.run(
        "systemd-run",
        "--wait",
        "--collect",
        "--pipe",
        "--quiet",
        "--unit",
        "u3",
        "bootc",
        "switch",
        f"{REPO}@{D3}",
    )
    assert (piped.returncode, piped.stderr.strip()) == (1, "error: boom")
    assert host.active_units() == []


def test_systemd_run_refuses_a_running_unit_name(host: Host) -> None:
    host.set_fault("switch-hang")
    unit = "busy.service"
    first = popen(host, "systemd-run", "--wait", "--unit", unit, "bootc", "switch", f"{REPO}@{D2}")
    try:
        wait_for(lambda: host.active_units() == [unit], "the first unit to start")
        second = host.run("systemd-run", "--wait", "--unit", unit, "bootc", "status")
        assert second.returncode == 1
        assert "was already loaded or has a fragment file" in second.stderr
    finally:
        host.run("systemctl", "stop", unit, timeout=30)
        first.communicate(timeout=10)
    assert host.run("systemctl", "is-active", unit).returncode == 3


def test_a_failed_unit_without_collect_stays_loaded(host: Host) -> None:
    host.set_fault("switch-fail", message="boom")
    argv = ("systemd-run", "--wait", "--quiet", "--unit", "sw", "bootc", "switch", f"{REPO}@{D2}")
    assert host.run(*argv).returncode == 1
    is_active = host.run("systemctl", "is-active", "sw.service")
    assert (is_active.returncode, is_active.stdout.strip()) == (3, "failed")
    blocked = host.run(*argv)
    assert blocked.returncode == 1
    assert "sw.service was already loaded" in blocked.stderr
    assert host.run("systemctl", "stop", "sw").returncode == 0  # stopping a failed unit: no-op
    assert host.run("systemctl", "is-active", "sw").stdout.strip() == "failed"
    assert host.run("systemctl", "reset-failed", "sw").returncode == 0
    host.clear_faults()
    assert host.run(*argv).returncode == 0
    assert host.run("systemctl", "is-active", "sw").stdout.strip() == "inactive"
    assert slots(host)[1] == D2


def test_systemctl_reboot_is_recorded(host: Host) -> None:
    assert host.run("systemctl", "reboot").returncode == 0
    request = host.reboot_request
    assert request is not None
    assert (request["kind"], request["by"]) == ("reboot", "systemctl reboot")
    host.reboot()
    assert host.reboot_request is None
    assert host.run("systemctl", "frobnicate").returncode == 1


def test_calls_are_logged(host: Host) -> None:
    host.run("nsenter", "--target", "1", "--", "bootc", "status", "--json")
    tools = [c["tool"] for c in host.calls()]
    assert tools == ["nsenter", "bootc"]
    assert host.calls("bootc")[0]["argv"] == ["status", "--json"]


def test_generic_fake_bootc_uses_the_env_root(host: Host) -> None:
    env = {**os.environ, "FAKEBOOTC_ROOT": str(host.root)}
    done = subprocess.run(
        [str(REPO_ROOT / "hack" / "fake-bootc"), "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert slot_digest(json.loads(done.stdout), "booted") == D1
    unset = subprocess.run(
        [str(REPO_ROOT / "hack" / "fake-bootc"), "status"],
        env={k: v for k, v in os.environ.items() if k != "FAKEBOOTC_ROOT"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert unset.returncode == 1
    assert "FAKEBOOTC_ROOT" in unset.stderr


# ---------------------------------------------------------------- catalog resolution


def test_catalog_resolves_tags_with_metadata(host: Host) -> None:
    host.add_image(f"{REPO}:v2", D2, version="2.0", timestamp="2024-05-01T10:00:00Z")
    done = host.switch(f"{REPO}:v2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Queued for next boot: {REPO}:v2",
        "  Version: 2.0",
        f"  Digest: {D2}",
    ]
    staged = status(host)["status"]["staged"]["image"]
    assert staged == {
        "architecture": "amd64",
        "image": {"image": f"{REPO}:v2", "transport": "registry"},
        "imageDigest": D2,
        "timestamp": "2024-05-01T10:00:00Z",
        "version": "2.0",
    }
    # a digest ref naming the catalog entry's digest gets its metadata too
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    assert status(host)["status"]["staged"]["image"]["version"] == "2.0"


def test_unknown_tag_fails_like_a_missing_manifest(host: Host) -> None:
    done = host.switch(f"{REPO}:nope")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: Switching: Pulling: reading manifest nope in quay.io/example/os: manifest unknown"
    )


def test_unknown_digest_accepted_unless_strict(host: Host) -> None:
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    host.configure(accept_any_digest=False)
    done = host.switch(f"{REPO}@{D3}")
    assert done.returncode == 1
    assert "manifest unknown" in done.stderr
    assert slots(host) == (D1, D2, None)


def test_catalog_multi_arch_index_picks_the_host_architecture(tmp_path: Path) -> None:
    catalog = tmp_path / "shared.json"
    manifests = {
        "amd64": {"digest": D2, "version": "2-amd64"},
        "arm64": {"digest": D3, "version": "2-arm64"},
    }
    catalog.write_text(
        json.dumps({"images": {f"{REPO}:v2": {"digest": D4, "manifests": manifests}}})
    )
    amd = make_host(
        tmp_path / "amd", booted=f"{REPO}@{D1}", catalogs=[catalog], accept_any_digest=False
    )
    arm = make_host(
        tmp_path / "arm", booted=f"{REPO}@{D1}", architecture="arm64", accept_any_digest=False
    )
    arm_env = {"FAKEBOOTC_CATALOG": str(catalog)}
    assert amd.switch(f"{REPO}:v2").returncode == 0
    assert slots(amd)[1] == D2
    done = subprocess.run(
        [str(arm.bin_dir / "bootc"), "switch", f"{REPO}@{D4}"],
        env=arm.env({**os.environ, **arm_env}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    staged = status(arm)["status"]["staged"]["image"]
    assert (staged["image"]["image"], staged["imageDigest"], staged["architecture"]) == (
        f"{REPO}@{D4}",
        D3,
        "arm64",
    )
    s390 = make_host(
        tmp_path / "s390", booted=f"{REPO}@{D1}", architecture="s390x", catalogs=[catalog]
    )
    failed = s390.switch(f"{REPO}:v2")
    assert failed.returncode == 1
    assert "no image found in image index for architecture s390x" in failed.stderr


def test_catalog_error_entry(host: Host) -> None:
    host.add_image(f"{REPO}:broken", D2, error="reading blob sha256:x: unexpected EOF")
    done = host.switch(f"{REPO}:broken")
    assert done.stderr.strip() == "error: Switching: Pulling: reading blob sha256:x: unexpected EOF"


# ---------------------------------------------------------------- registry resolution


class FakeRegistry:
    """A minimal OCI distribution endpoint (GET manifests, blobs, a token endpoint) to exercise
    the simulated host's registry client; the real registry is used by the e2e tests."""

    def __init__(
        self, auth: str | None = None, user: str = "joe", password: str = "s3cret"
    ) -> None:
        self.auth, self.user, self.password = auth, user, password
        self.manifests: dict[tuple[str, str], tuple[str, bytes]] = {}
        self.blobs: dict[str, bytes] = {}
        self.token_requests: list[dict[str, str]] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                registry.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_blob(self, data: bytes) -> str:
        d = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[d] = data
        return d

    def add_image(
        self, repo: str, tag: str, archs: dict[str, dict[str, Any]]
    ) -> tuple[str, dict[str, str]]:
        """Push a multi-arch image: returns (index digest, {arch: manifest digest})."""
        per_arch: dict[str, str] = {}
        entries = []
        for arch, config in archs.items():
            config_digest = self.add_blob(
                json.dumps({"architecture": arch, "os": "linux", **config}).encode()
            )
            manifest = json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {
                        "mediaType": "application/vnd.oci.image.config.v1+json",
                        "digest": config_digest,
                        "size": 1,
                    },
                    "layers": [],
                }
            ).encode()
            md = "sha256:" + hashlib.sha256(manifest).hexdigest()
            self.manifests[(repo, md)] = ("application/vnd.oci.image.manifest.v1+json", manifest)
            per_arch[arch] = md
            entries.append(
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": md,
                    "size": len(manifest),
                    "platform": {"os": "linux", "architecture": arch},
                }
            )
        index = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": entries,
            }
        ).encode()
        index_digest = "sha256:" + hashlib.sha256(index).hexdigest()
        for ref in (tag, index_digest):
            self.manifests[(repo, ref)] = ("application/vnd.oci.image.index.v1+json", index)
        return index_digest, per_arch

    def _basic_ok(self, header: str | None) -> bool:
        expected = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return header == f"Basic {expected}"

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        code: int,
        body: bytes,
        ctype: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _error(
        self,
        h: BaseHTTPRequestHandler,
        code: int,
        err: str,
        message: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        body = json.dumps({"errors": [{"code": err, "message": message}]}).encode()
        self._send(h, code, body, "application/json", extra)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        auth = h.headers.get("Authorization")
        if path == "/token":
            query = dict(p.split("=", 1) for p in h.path.split("?", 1)[1].split("&"))
            self.token_requests.append({**query, "authorization": auth or ""})
            if not self._basic_ok(auth):
                self._error(h, 401, "UNAUTHORIZED", "authentication required")
                return
            self._send(h, 200, json.dumps({"token": "tok-123"}).encode(), "application/json")
            return
        if self.auth == "basic" and not self._basic_ok(auth):
            self._error(
                h,
                401,
                "UNAUTHORIZED",
                "authentication required",
                {"WWW-Authenticate": 'Basic realm="fake"'},
            )
            return
        if self.auth == "bearer" and auth != "Bearer tok-123":
            challenge = f'Bearer realm="http://{self.host}/token",service="fake-registry"'
            self._error(
                h, 401, "UNAUTHORIZED", "authentication required", {"WWW-Authenticate": challenge}
            )
            return
        parts = path.split("/")
        # /v2/<repo...>/manifests/<ref>  or  /v2/<repo...>/blobs/<digest>
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] in ("manifests", "blobs"):
            repo, kind, ref = "/".join(parts[2:-2]), parts[-2], parts[-1]
            if kind == "manifests" and (repo, ref) in self.manifests:
                media, body = self.manifests[(repo, ref)]
                self._send(h, 200, body, media)
                return
            if kind == "blobs" and ref in self.blobs:
                self._send(h, 200, self.blobs[ref], "application/octet-stream")
                return
            code = "MANIFEST_UNKNOWN" if kind == "manifests" else "BLOB_UNKNOWN"
            self._error(h, 404, code, "manifest unknown" if kind == "manifests" else "blob unknown")
            return
        self._error(h, 404, "NOT_FOUND", "not found")


@pytest.fixture
def registry_factory() -> Iterator[Callable[..., FakeRegistry]]:
    made: list[FakeRegistry] = []

    def make(auth: str | None = None) -> FakeRegistry:
        reg = FakeRegistry(auth)
        made.append(reg)
        return reg

    yield make
    for reg in made:
        reg.close()


CONFIGS = {
    "amd64": {
        "created": "2024-06-01T12:00:00.123456789Z",
        "config": {"Labels": {"org.opencontainers.image.version": "9.1", "containers.bootc": "1"}},
    },
    "arm64": {"created": "2024-06-01T12:00:00Z", "config": {"Labels": {"version": "9.1-arm"}}},
}


def test_registry_index_resolves_to_the_per_arch_digest(
    tmp_path: Path, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    index, per_arch = reg.add_image("os", "v9", CONFIGS)
    amd = make_host(tmp_path / "amd", booted=f"{REPO}@{D1}")
    assert amd.switch(f"{reg.host}/os:v9").returncode == 0
    image = status(amd)["status"]["staged"]["image"]
    assert image == {
        "architecture": "amd64",
        "image": {"image": f"{reg.host}/os:v9", "transport": "registry"},
        "imageDigest": per_arch["amd64"],
        "timestamp": "2024-06-01T12:00:00.123456Z",
        "version": "9.1",
    }
    arm = make_host(tmp_path / "arm", booted=f"{REPO}@{D1}", architecture="arm64")
    done = arm.switch(f"{reg.host}/os@{index}")
    assert done.returncode == 0, done.stderr
    image = status(arm)["status"]["staged"]["image"]
    assert (
        image["image"]["image"],
        image["imageDigest"],
        image["version"],
        image["timestamp"],
    ) == (
        f"{reg.host}/os@{index}",
        per_arch["arm64"],
        "9.1-arm",
        "2024-06-01T12:00:00Z",
    )


def test_an_answering_registry_is_the_authority(
    host: Host, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    reg.add_image("os", "v9", CONFIGS)
    host.add_image(
        f"{reg.host}/os:gone", D2
    )  # the catalog is not consulted when the registry answers
    for ref, reference in ((f"{reg.host}/os:gone", "gone"), (f"{reg.host}/os@{D3}", D3)):
        done = host.switch(ref)
        assert done.returncode == 1
        expected = f"reading manifest {reference} in {reg.host}/os: manifest unknown"
        assert done.stderr.strip() == f"error: Switching: Pulling: {expected}"


def test_registry_basic_auth_from_the_host_auth_file(
    host: Host, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory(auth="basic")
    _, per_arch = reg.add_image("private/os", "v9", CONFIGS)
    ref = f"{reg.host}/private/os:v9"
    anonymous = host.switch(ref)
    assert anonymous.returncode == 1
    assert "unauthorized: authentication required" in anonymous.stderr

    def auth(user: str, password: str, key: str) -> None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        host.auth_file.write_text(json.dumps({"auths": {key: {"auth": token}}}))

    auth("joe", "wrong", reg.host)
    assert "unauthorized" in host.switch(ref).stderr
    auth("joe", "s3cret", reg.host)
    done = host.switch(ref)
    assert done.returncode == 0, done.stderr
    assert slots(host)[1] == per_arch["amd64"]
    # a more specific key (host/repo) wins over the host key
    host.reboot()
    host.auth_file.write_text(
        json.dumps(
            {
                "auths": {
                    reg.host: {"auth": base64.b64encode(b"joe:wrong").decode()},
                    f"{reg.host}/private": {"username": "joe", "password": "s3cret"},
                }
            }
        )
    )
    assert host.switch(f"{reg.host}/private/os@{per_arch['amd64']}").returncode == 0


def test_registry_bearer_token_flow(
    host: Host, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory(auth="bearer")
    _, per_arch = reg.add_image("os", "v9", CONFIGS)
    host.auth_file.write_text(
        json.dumps({"auths": {reg.host: {"auth": base64.b64encode(b"joe:s3cret").decode()}}})
    )
    done = host.switch(f"{reg.host}/os:v9")
    assert done.returncode == 0, done.stderr
    assert slots(host)[1] == per_arch["amd64"]
    first = reg.token_requests[0]
    assert (first["service"], first["scope"]) == ("fake-registry", "repository%3Aos%3Apull")
    assert first["authorization"].startswith("Basic ")


def test_invalid_auth_file_fails_the_pull(
    host: Host, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    reg.add_image("os", "v9", CONFIGS)
    host.auth_file.write_text("{not json")
    done = host.switch(f"{reg.host}/os:v9")
    assert done.returncode == 1
    assert "parsing auth file" in done.stderr


def test_a_registry_image_label_decides_its_boots(
    tmp_path: Path, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    labels = {"containers.bootc": "1", LABEL: "fail:app-check.service"}
    _, per_arch = reg.add_image("os", "bad", {"amd64": {"config": {"Labels": labels}}})
    # every host that boots the image fails the same way: the fleet-wide "bad image"
    for name in ("a", "b"):
        host = make_host(tmp_path / name, booted=f"{REPO}@{D1}")
        assert host.switch(f"{reg.host}/os:bad").returncode == 0
        assert host.pulls() == [f"{reg.host}/os:bad"]
        host.reboot()
        boot = host.boot()
        assert (boot.outcome, boot.unit, boot.digest) == (
            "fail",
            "app-check.service",
            per_arch["amd64"],
        )


def test_unreachable_registry_falls_back_to_the_catalog(
    host: Host, registry_factory: Callable[..., FakeRegistry]
) -> None:
    reg = registry_factory()
    dead = reg.host
    reg.close()
    host.add_image(f"{dead}/os:v9", D3, version="from-catalog")
    assert host.switch(f"{dead}/os:v9").returncode == 0
    assert status(host)["status"]["staged"]["image"]["version"] == "from-catalog"
    assert host.switch(f"{dead}/os@{D4}").returncode == 0  # accept_any_digest
    host.configure(accept_any_digest=False)
    done = host.switch(f"{dead}/os@{D2}")
    assert done.returncode == 1
    assert f"pinging container registry {dead}" in done.stderr


# ---------------------------------------------------------------- boot assessment


def systemctl(host: Host, *args: str) -> tuple[int, str]:
    done = host.run("systemctl", *args)
    return done.returncode, done.stdout.strip()


def assessed(host: Host) -> tuple[str, str, str]:
    """(is-active boot-complete.target, is-system-running, failed units), as the daemon reads."""
    target = systemctl(host, "is-active", "boot-complete.target")[1]
    system = systemctl(host, "is-system-running")[1]
    failed = systemctl(host, "list-units", "--failed", "--plain", "--no-legend", "--no-pager")[1]
    return target, system, failed


def test_a_boot_completes_by_default(host: Host) -> None:
    assert host.boot().outcome == "complete"
    assert systemctl(host, "is-active", "boot-complete.target") == (0, "active")
    assert systemctl(host, "is-system-running") == (0, "running")
    assert assessed(host) == ("active", "running", "")
    legend = host.run("systemctl", "--failed").stdout
    assert legend.splitlines()[0].split() == ["UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION"]
    assert "0 loaded units listed." in legend


def test_boot_complete_delay_starts_then_completes(host: Host) -> None:
    host.configure(boot_complete_delay=3600.0)
    host.reboot()
    assert assessed(host) == ("inactive", "starting", "")
    assert systemctl(host, "is-system-running")[0] == 1
    # the delay passes: move the boot's start an hour back (no clock to wait on)
    update_state(
        host.paths,
        lambda s: setattr(s, "boot", replace(s.current_boot(), started=time.time() - 3600.0)),
    )
    assert assessed(host) == ("active", "running", "")
    assert systemctl(host, "is-system-running")[0] == 0


def test_boot_fail_fault_fails_the_next_boot_naming_the_unit(host: Host) -> None:
    host.set_fault("boot-fail")
    assert assessed(host)[0] == "active", "a fault changes the next boot, not this one"
    host.reboot()
    assert assessed(host) == (
        "inactive",
        "degraded",
        "greenboot-healthcheck.service loaded failed failed Simulated boot check (fakebootc)",
    )
    assert systemctl(host, "is-active", "greenboot-healthcheck.service") == (3, "failed")
    assert host.run("systemctl", "--failed").stdout.count("● greenboot-healthcheck") == 1
    boot = host.boot()
    assert (boot.outcome, boot.unit, boot.source) == ("fail", DEFAULT_CHECK_UNIT, "fault")
    host.set_fault("boot-fail", False)
    host.reboot()
    assert assessed(host) == ("active", "running", "")


def test_boot_hang_fault_never_completes(host: Host) -> None:
    host.configure(boot_complete_delay=0.0)
    host.set_fault("boot-hang", message="slow-check.service")
    host.reboot()
    assert assessed(host) == ("inactive", "starting", "")
    assert systemctl(host, "is-active", "slow-check.service") == (3, "activating")
    assert host.boot().outcome == "hang"


def test_boot_faults_scoped_to_a_digest(host: Host) -> None:
    host.set_fault("boot-fail", message="app-check.service", digest=D2)
    assert host.switch(f"{REPO}@{D2}").returncode == 0
    host.reboot()
    assert assessed(host)[1:] == (
        "degraded",
        "app-check.service loaded failed failed Simulated boot check (fakebootc)",
    )
    assert host.boot().source == f"fault:{D2}"
    # back on D1 (a rollback: no pull), the fault does not apply
    pulls = host.pulls()
    assert host.rollback().returncode == 0
    host.reboot()
    assert slots(host) == (D1, None, D2)
    assert host.pulls() == pulls, "a rollback pulls nothing"
    assert assessed(host) == ("active", "running", "")
    # a scope can be dropped alone; off without a digest drops every scope
    host.set_fault("boot-hang", digest=D3)
    host.set_fault("boot-fail", False, digest=D2)
    assert (host.state().faults.boot_fail, host.state().faults.boot_hang) == (
        {},
        {D3: DEFAULT_CHECK_UNIT},
    )
    host.set_fault("boot-hang", False)
    assert host.state().faults.active() == []
    with pytest.raises(FakeHostError, match="takes no digest"):
        host.set_fault("switch-fail", digest=D2)


def test_the_scope_matches_the_digest_the_ref_names(tmp_path: Path) -> None:
    # a multi-arch index: the ref names the index digest, imageDigest is per-arch
    boot = decide_boot(
        image=f"{REPO}@{D4}", digest=D2, label=None, fail={D4: "x.service"}, hang={}, delay=0, now=1
    )
    assert (boot.outcome, boot.unit) == ("fail", "x.service")
    # fail before hang, a digest before "*", the label last
    both = decide_boot(
        image=f"{REPO}@{D2}",
        digest=D2,
        label="complete",
        fail={"*": "a.service"},
        hang={D2: "b.service"},
        delay=0,
        now=1,
    )
    assert (both.outcome, both.unit) == ("hang", "b.service")
    labelled = decide_boot(
        image=f"{REPO}:v2", digest=D2, label="fail", fail={}, hang={}, delay=0.5, now=1
    )
    assert (labelled.outcome, labelled.unit, labelled.source) == (
        "fail",
        DEFAULT_CHECK_UNIT,
        "label",
    )
    assert (labelled.system_state(1.2), labelled.unit_state(DEFAULT_CHECK_UNIT, 1.2)) == (
        "starting",
        "activating",
    )
    assert (labelled.system_state(1.5), labelled.failed_units(1.5)) == (
        "degraded",
        [DEFAULT_CHECK_UNIT],
    )
    garbage = decide_boot(
        image=f"{REPO}:v2", digest=D2, label="meh", fail={}, hang={}, delay=0, now=1
    )
    assert garbage.outcome == "complete"


def test_a_catalog_image_carries_its_boot_assessment(host: Host) -> None:
    host.add_image(f"{REPO}:bad", D3, boot_assessment="hang:app-ready.service")
    assert host.switch(f"{REPO}:bad").returncode == 0
    assert host.pulls() == [f"{REPO}:bad"]
    host.reboot()
    boot = host.boot()
    assert (boot.outcome, boot.unit, boot.source) == ("hang", "app-ready.service", "label")
    assert assessed(host)[:2] == ("inactive", "starting")
    with pytest.raises(FakeHostError, match="expected complete, fail"):
        host.add_image(f"{REPO}:worse", D4, boot_assessment="explode")


def test_a_failed_transient_unit_degrades_the_system(host: Host) -> None:
    done = host.run("systemd-run", "--wait", "--unit", "oops", "false")
    assert done.returncode == 1
    target, system, failed = assessed(host)
    assert (target, system) == ("active", "degraded")
    assert failed.split()[:4] == ["oops.service", "loaded", "failed", "failed"]


def test_the_boot_record_survives_an_old_state_file(host: Host) -> None:
    doc = json.loads(host.paths.state.read_text())
    doc.pop("boot")
    doc["faults"].pop("boot_fail")
    host.paths.state.write_text(json.dumps(doc))
    assert host.boot().outcome == "complete"
    assert assessed(host) == ("active", "running", "")


# ---------------------------------------------------------------- the fake-host CLI


def fake_host(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hack.fakebootc", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "cli-node"
    init = fake_host(
        "init", str(root), "--booted", f"{REPO}@{D1}", "--version", "1", "--arch", "arm64"
    )
    assert init.returncode == 0, init.stderr
    host = open_host(root)
    assert host.state().config.architecture == "arm64"
    assert fake_host("init", str(root), "--booted", f"{REPO}@{D1}").returncode == 1

    assert (
        fake_host("image", str(root), f"{REPO}:v2", "--digest", D2, "--version", "2").returncode
        == 0
    )
    assert host.switch(f"{REPO}:v2").returncode == 0
    shown = json.loads(fake_host("show", str(root)).stdout)
    assert shown["status"]["status"]["staged"]["image"]["version"] == "2"
    assert shown["rebootRequired"] == f"bootc: Reboot required for image: {D2}"

    reboot = fake_host("reboot", str(root))
    assert reboot.returncode == 0
    assert slots(host) == (D2, None, D1)

    assert fake_host("fault", str(root), "switch-fail", "--message", "nope").returncode == 0
    assert host.state().faults.switch_fail == "nope"
    assert fake_host("fault", str(root), "incompatible").returncode == 0
    assert json.loads(fake_host("show", str(root)).stdout)["faults"] == [
        "switch_fail",
        "incompatible",
    ]
    assert fake_host("fault", str(root), "incompatible", "--off").returncode == 0
    assert fake_host("fault", str(root), "clear").returncode == 0
    assert host.state().faults.active() == []
    fail = fake_host("fault", str(root), "boot-fail", "--message", "x.service", "--digest", D2)
    assert fail.returncode == 0, fail.stderr
    assert host.state().faults.boot_fail == {D2: "x.service"}
    assert fake_host("reboot", str(root)).returncode == 0  # still on D2: its boots fail
    assert json.loads(fake_host("show", str(root)).stdout)["boot"]["outcome"] == "fail"
    assert fake_host("fault", str(root), "clear").returncode == 0
    assert (
        fake_host("image", str(root), "x", "--digest", D3, "--boot-assessment", "no").returncode
        == 1
    )

    config = fake_host(
        "config",
        str(root),
        "--stage-delay",
        "0.5",
        "--strict-catalog",
        "--boot-complete-delay",
        "1",
        "--no-soft-reboot",
    )
    assert config.returncode == 0
    assert (host.state().config.stage_delay, host.state().config.accept_any_digest) == (0.5, False)
    assert host.state().config.boot_complete_delay == 1.0
    assert host.state().config.soft_reboot is False

    kernel = fake_host("image", str(root), f"{REPO}:k", "--digest", D4, "--kernel", "7.0-sim")
    assert kernel.returncode == 0, kernel.stderr
    assert host.state().soft_reboots == 0
    shown = json.loads(fake_host("show", str(root)).stdout)
    assert (shown["bootKind"], shown["softReboots"], shown["bootId"]) == (
        "full",
        0,
        host.boot_id,
    )
    other = tmp_path / "cli-other"
    made = fake_host(
        "init", str(other), "--booted", f"{REPO}@{D1}", "--kernel", "5.14-sim", "--no-soft-reboot"
    )
    assert made.returncode == 0, made.stderr
    state = open_host(other).state()
    assert (state.booted and state.booted.kernel, state.config.soft_reboot) == ("5.14-sim", False)

    env = fake_host("env", str(root)).stdout
    assert f"export FAKEBOOTC_ROOT={host.root}" in env
    missing = fake_host("show", str(tmp_path / "nothing"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("fake-host: error: ")
    assert "\n" not in missing.stderr.strip()


def test_switch_takes_the_image_after_a_double_dash_like_bootcs_clap_parser(host: Host) -> None:
    """``bootc switch -- IMAGE`` (how the daemon calls it): the image, never an option."""
    done = host.bootc("switch", "--", f"{REPO}@{D2}")
    assert done.returncode == 0, done.stderr
    assert slots(host) == (D1, D2, None)
    assert host.reboot_request is None
