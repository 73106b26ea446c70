"""``bootc status`` JSON parsing: a table of documents written from bootc's schema, the
simulated host's own output, garbage inputs, and the mapping into ImageInfo."""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bootc_operator.api.v1alpha1 import BootcNodeStatus
from bootc_operator.api.wire import ImageInfo
from bootc_operator.daemon.bootc_status import (
    BootcStatusError,
    HostStatus,
    image_matches,
    parse_status,
)
from hack.fakebootc import Host, make_host


def digest(c: str) -> str:
    return "sha256:" + c * 64


REPO = "quay.io/example/os"
D_BOOTED, D_STAGED, D_ROLLBACK, D_INDEX = digest("a"), digest("b"), digest("c"), digest("f")


def image_status(ref: str, d: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "image": {"image": ref, "transport": "registry"},
        "version": "42.1",
        "timestamp": "2024-05-01T10:00:00Z",
        "imageDigest": d,
        "architecture": "amd64",
    }
    doc.update(extra)
    return doc


def entry(ref: str, d: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "image": image_status(ref, d),
        "cachedUpdate": None,
        "incompatible": False,
        "pinned": False,
        "softRebootCapable": False,
        "downloadOnly": False,
        "store": "ostreeContainer",
        "ostree": {"checksum": "1" * 64, "deploySerial": 0, "stateroot": "default"},
        "composefs": None,
    }
    doc.update(extra)
    return doc


def host_doc(
    booted: dict[str, Any] | None,
    staged: dict[str, Any] | None = None,
    rollback: dict[str, Any] | None = None,
    **status_extra: Any,
) -> dict[str, Any]:
    spec_src = staged or booted
    return {
        "apiVersion": "org.containers.bootc/v1",
        "kind": "BootcHost",
        "metadata": {"name": "host"},
        "spec": {
            "image": spec_src["image"]["image"] if spec_src and spec_src["image"] else None,
            "bootOrder": "default",
        },
        "status": {
            "staged": staged,
            "booted": booted,
            "rollback": rollback,
            "rollbackQueued": False,
            "type": "bootcHost" if booted and booted["image"] else None,
            **status_extra,
        },
    }


def canonical(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


FULL = host_doc(
    entry(f"{REPO}@{D_BOOTED}", D_BOOTED),
    staged=entry(f"{REPO}@{D_STAGED}", D_STAGED, softRebootCapable=True),
    rollback=entry(f"{REPO}@{D_ROLLBACK}", D_ROLLBACK),
)


def _minimal_entry(ref: str, d: str) -> dict[str, Any]:
    """Only the fields old bootc always wrote; every optional one absent."""
    return {
        "image": {"image": {"image": ref, "transport": "registry"}, "imageDigest": d},
        "incompatible": False,
        "pinned": False,
        "ostree": {"checksum": "2" * 64, "deploySerial": 1},
    }


def _null_entry(ref: str, d: str) -> dict[str, Any]:
    """Every optional field an explicit null."""
    return {
        "image": {
            "image": {"image": ref, "transport": None, "signature": None},
            "version": None,
            "timestamp": None,
            "imageDigest": d,
            "architecture": None,
        },
        "cachedUpdate": None,
        "incompatible": None,
        "pinned": None,
        "softRebootCapable": None,
        "downloadOnly": None,
        "store": None,
        "ostree": None,
        "composefs": None,
    }


def _with_signature(signature: Any) -> dict[str, Any]:
    doc = copy.deepcopy(FULL)
    doc["status"]["booted"]["image"]["image"]["signature"] = signature
    doc["spec"]["image"]["signature"] = signature
    return doc


def _composefs_entry(ref: str, d: str) -> dict[str, Any]:
    return entry(
        ref,
        d,
        ostree=None,
        store=None,
        composefs={
            "verity": "9" * 128,
            "bootType": "bls",
            "bootloader": "systemd",
            "bootDigest": "8" * 64,
            "missingVerityAllowed": False,
        },
    )


def _future_fields() -> dict[str, Any]:
    doc = copy.deepcopy(FULL)
    doc["newTopLevel"] = {"x": 1}
    doc["metadata"]["labels"] = {"a": "b"}
    doc["spec"]["newSpecField"] = True
    doc["status"]["usrOverlay"] = {"accessMode": "readOnly", "persistence": "transient"}
    doc["status"]["storage"] = {"unified": "disabled", "ostreeComposefsBound": False}
    doc["status"]["booted"]["futureFlag"] = "yes"
    doc["status"]["booted"]["image"]["futureImageField"] = [1, 2]
    doc["status"]["booted"]["ostree"]["futureOstreeField"] = 3
    return doc


def _other_deployments() -> dict[str, Any]:
    doc = copy.deepcopy(FULL)
    doc["status"]["otherDeployments"] = [entry(f"{REPO}@{digest('d')}", digest("d"), pinned=True)]
    return doc


def _v1alpha1() -> dict[str, Any]:
    doc = host_doc(entry(f"{REPO}:latest", D_BOOTED))
    doc["apiVersion"] = "org.containers.bootc/v1alpha1"
    doc["status"]["isContainer"] = False
    del doc["status"]["rollbackQueued"]
    del doc["status"]["type"]
    return doc


def _rollback_queued() -> dict[str, Any]:
    doc = host_doc(
        entry(f"{REPO}@{D_BOOTED}", D_BOOTED), rollback=entry(f"{REPO}@{D_ROLLBACK}", D_ROLLBACK)
    )
    doc["spec"]["bootOrder"] = "rollback"
    doc["status"]["rollbackQueued"] = True
    return doc


# (id, text, expected booted/staged/rollback digests, expected unmanageable-reason fragment)
VALID: list[tuple[str, str, tuple[str | None, str | None, str | None], str | None]] = [
    ("canonical-v1", canonical(FULL), (D_BOOTED, D_STAGED, D_ROLLBACK), None),
    (
        "pretty-with-newline",
        json.dumps(FULL, indent=2) + "\n",
        (D_BOOTED, D_STAGED, D_ROLLBACK),
        None,
    ),
    (
        "booted-only",
        canonical(host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED))),
        (D_BOOTED, None, None),
        None,
    ),
    (
        "optionals-absent",
        canonical(
            {
                "apiVersion": "org.containers.bootc/v1",
                "kind": "BootcHost",
                "status": {"booted": _minimal_entry(f"{REPO}@{D_BOOTED}", D_BOOTED)},
            }
        ),
        (D_BOOTED, None, None),
        None,
    ),
    (
        "optionals-null",
        canonical(
            {
                "apiVersion": "org.containers.bootc/v1",
                "kind": "BootcHost",
                "metadata": None,
                "spec": None,
                "status": {
                    "staged": None,
                    "booted": _null_entry(f"{REPO}@{D_BOOTED}", D_BOOTED),
                    "rollback": None,
                    "otherDeployments": None,
                    "rollbackQueued": None,
                    "type": None,
                },
            }
        ),
        (D_BOOTED, None, None),
        None,
    ),
    (
        "signature-string-insecure",
        canonical(_with_signature("insecure")),
        (D_BOOTED, D_STAGED, D_ROLLBACK),
        None,
    ),
    (
        "signature-string-policy",
        canonical(_with_signature("containerPolicy")),
        (D_BOOTED, D_STAGED, D_ROLLBACK),
        None,
    ),
    (
        "signature-object",
        canonical(_with_signature({"ostreeRemote": "fedora"})),
        (D_BOOTED, D_STAGED, D_ROLLBACK),
        None,
    ),
    ("other-deployments", canonical(_other_deployments()), (D_BOOTED, D_STAGED, D_ROLLBACK), None),
    (
        "composefs",
        canonical(
            host_doc(
                _composefs_entry(f"{REPO}@{D_BOOTED}", D_BOOTED),
                staged=_composefs_entry(f"{REPO}@{D_STAGED}", D_STAGED),
            )
        ),
        (D_BOOTED, D_STAGED, None),
        None,
    ),
    ("unknown-future-fields", canonical(_future_fields()), (D_BOOTED, D_STAGED, D_ROLLBACK), None),
    ("v1alpha1", canonical(_v1alpha1()), (D_BOOTED, None, None), None),
    ("rollback-queued", canonical(_rollback_queued()), (D_BOOTED, None, D_ROLLBACK), None),
    (
        "not-bootc-booted-null",
        canonical(
            {
                "apiVersion": "org.containers.bootc/v1",
                "kind": "BootcHost",
                "metadata": {"name": "host"},
                "spec": {"image": None, "bootOrder": "default"},
                "status": {
                    "staged": None,
                    "booted": None,
                    "rollback": None,
                    "rollbackQueued": False,
                    "type": None,
                },
            }
        ),
        (None, None, None),
        "status.booted is null",
    ),
    (
        "not-bootc-status-null",
        '{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":null}',
        (None, None, None),
        "status.booted is null",
    ),
    (
        "not-bootc-status-absent",
        '{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost"}',
        (None, None, None),
        "status.booted is null",
    ),
    (
        "incompatible-layered",
        canonical(
            host_doc(
                entry("", "", image=None, incompatible=True, store=None),
                rollback=entry(f"{REPO}@{D_ROLLBACK}", D_ROLLBACK),
            )
        ),
        (None, None, D_ROLLBACK),
        "rpm-ostree",
    ),
    (
        "incompatible-staged",
        canonical(
            host_doc(
                entry(f"{REPO}@{D_BOOTED}", D_BOOTED),
                staged=entry("", "", image=None, incompatible=True),
            )
        ),
        (D_BOOTED, None, None),
        "staged deployment has local rpm-ostree",
    ),
    (
        "plain-ostree-not-container",
        canonical(host_doc(entry("", "", image=None))),
        (None, None, None),
        "not a container image",
    ),
]


@pytest.mark.parametrize(
    ("text", "digests", "reason"), [v[1:] for v in VALID], ids=[v[0] for v in VALID]
)
def test_parses_every_variant(
    text: str, digests: tuple[str | None, str | None, str | None], reason: str | None
) -> None:
    host = parse_status(text)
    images = host.images()
    got = tuple(
        i.image_digest if i else None for i in (images.booted, images.staged, images.rollback)
    )
    assert got == digests
    if reason is None:
        assert host.unmanageable_reason() is None
        assert host.is_bootc_host
    else:
        assert reason in (host.unmanageable_reason() or "")
    # whatever the variant, what the daemon writes fits BootcNode.status: the API
    # model accepts it and writes back exactly the deployments it was given
    wire = host.images().to_wire()
    status = BootcNodeStatus.model_validate(wire)
    assert status.to_wire() == {k: v for k, v in wire.items() if v is not None}


def test_full_mapping_into_image_info() -> None:
    host = parse_status(canonical(FULL))
    fields = host.images()
    assert fields.booted == ImageInfo(
        image=f"{REPO}@{D_BOOTED}",
        image_digest=D_BOOTED,
        version="42.1",
        timestamp=dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC),
        architecture="amd64",
        soft_reboot_capable=False,
        incompatible=False,
    )
    staged = fields.staged
    assert staged is not None
    assert staged.soft_reboot_capable is True
    assert host.images().to_wire()["staged"] == {
        "image": f"{REPO}@{D_STAGED}",
        "imageDigest": D_STAGED,
        "version": "42.1",
        "timestamp": "2024-05-01T10:00:00Z",
        "architecture": "amd64",
        "softRebootCapable": True,
        "incompatible": False,
    }


def test_absent_deployments_are_explicit_nulls_for_a_merge_patch() -> None:
    wire = (
        parse_status(canonical(host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED)))).images().to_wire()
    )
    assert wire["staged"] is None
    assert wire["rollback"] is None
    assert wire["booted"] is not None


def test_a_queued_rollback_is_reported_as_what_boots_next() -> None:
    queued = parse_status(canonical(_rollback_queued()))
    assert queued.images().staged is None  # bootc's own view, which decisions use
    reported = queued.reported_images()
    assert reported.staged is not None and reported.staged.image_digest == D_ROLLBACK
    assert reported.rollback == queued.images().rollback
    not_queued = _rollback_queued()
    not_queued["status"]["rollbackQueued"] = False
    assert parse_status(canonical(not_queued)).reported_images().staged is None


def test_null_flags_read_as_false_and_absent_fields_as_unknown() -> None:
    doc = json.loads(VALID[4][1])
    host = parse_status(json.dumps(doc))
    booted = host.booted
    assert booted is not None
    assert (booted.incompatible, booted.pinned, booted.soft_reboot_capable) == (False, False, False)
    assert booted.backend is None
    assert booted.image is not None
    assert booted.image.image.transport == "registry"
    info = booted.image_info()
    assert info is not None
    assert (info.version, info.timestamp, info.architecture) == (None, None, None)
    assert host.spec.boot_order == "default"
    assert host.status.other_deployments == []


@pytest.mark.parametrize(
    ("signature", "policy"),
    [
        ("insecure", "insecure"),
        ("containerPolicy", "containerPolicy"),
        ({"ostreeRemote": "fedora"}, "ostreeRemote:fedora"),
        (None, None),
    ],
)
def test_signature_forms(signature: Any, policy: str | None) -> None:
    host = parse_status(canonical(_with_signature(signature)))
    assert host.booted is not None
    assert host.booted.image is not None
    assert host.booted.image.image.signature_policy == policy
    assert host.spec.image is not None
    assert host.spec.image.signature == signature


def test_tag_ref_keeps_the_tag_and_puts_the_digest_in_image_digest() -> None:
    host = parse_status(canonical(host_doc(entry(f"{REPO}:stable", D_BOOTED))))
    info = host.images().booted
    assert info is not None
    assert (info.image, info.image_digest) == (f"{REPO}:stable", D_BOOTED)


def test_index_digest_ref_is_kept_next_to_the_per_arch_digest() -> None:
    host = parse_status(canonical(host_doc(entry(f"{REPO}@{D_INDEX}", D_BOOTED))))
    info = host.images().booted
    assert info is not None
    assert (info.image, info.image_digest) == (f"{REPO}@{D_INDEX}", D_BOOTED)
    assert image_matches(info, f"{REPO}@{D_INDEX}")
    assert image_matches(info, f"{REPO}@{D_BOOTED}")


def test_non_registry_transport_is_prefixed() -> None:
    doc = host_doc(entry("/var/mnt/osupdate", D_BOOTED))
    doc["status"]["booted"]["image"]["image"]["transport"] = "oci"
    info = parse_status(canonical(doc)).images().booted
    assert info is not None
    assert info.image == "oci:/var/mnt/osupdate"


def test_composefs_entries() -> None:
    host = parse_status(canonical(host_doc(_composefs_entry(f"{REPO}@{D_BOOTED}", D_BOOTED))))
    assert host.booted is not None
    assert host.booted.backend == "composefs"
    assert host.booted.ostree is None
    assert host.booted.composefs is not None
    assert host.booted.composefs.boot_type == "bls"


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2023-10-14T19:22:15.42Z", dt.datetime(2023, 10, 14, 19, 22, 15, 420000, tzinfo=dt.UTC)),
        ("2023-09-30T19:22:16+02:00", dt.datetime(2023, 9, 30, 17, 22, 16, tzinfo=dt.UTC)),
        ("not a time", None),
        (None, None),
    ],
)
def test_timestamps(timestamp: str | None, expected: dt.datetime | None) -> None:
    doc = host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED))
    doc["status"]["booted"]["image"]["timestamp"] = timestamp
    info = parse_status(canonical(doc)).images().booted
    assert info is not None
    assert info.timestamp == expected


def test_rollback_queued_and_other_deployments() -> None:
    host = parse_status(canonical(_rollback_queued()))
    assert host.status.rollback_queued
    assert host.spec.boot_order == "rollback"
    other = parse_status(canonical(_other_deployments())).status.other_deployments
    assert [e.pinned for e in other] == [True]


def test_bytes_input() -> None:
    assert parse_status(canonical(FULL).encode()).is_bootc_host


GARBAGE: list[tuple[str, str, str]] = [
    ("empty", "", "printed nothing"),
    ("whitespace", "  \n\t ", "printed nothing"),
    ("not-json", "Error: could not connect", "not JSON"),
    ("truncated", canonical(FULL)[:120], "not JSON"),
    ("control-chars", "\x1b[31mboom\x00", "not JSON"),
    ("list", "[]", "not an object"),
    ("null", "null", "not an object"),
    ("number", "42", "not an object"),
    ("string", '"BootcHost"', "not an object"),
    ("yaml", "apiVersion: org.containers.bootc/v1\nkind: BootcHost\n", "not JSON"),
    ("wrong-kind", '{"apiVersion":"org.containers.bootc/v1","kind":"Host"}', "kind is 'Host'"),
    ("wrong-api", '{"apiVersion":"v1","kind":"BootcHost"}', "apiVersion is 'v1'"),
    ("no-kind", '{"apiVersion":"org.containers.bootc/v1"}', "kind: Field required"),
    (
        "entry-not-object",
        '{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"booted":"yes"}}',
        "status.booted",
    ),
    (
        "missing-image-digest",
        canonical(
            host_doc({"image": {"image": {"image": "x", "transport": "registry"}}, "ostree": None})
        ),
        "status.booted.image.imageDigest: Field required",
    ),
    (
        "flag-not-bool",
        canonical(host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED, incompatible="maybe"))),
        "status.booted.incompatible",
    ),
    ("long-garbage", "x" * 10_000, "not JSON"),
    # issue 27: json.loads' own RecursionError / int-digits ValueError escaped
    ("deep-nesting", "[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
    (
        "nesting-below-recursion-limit",
        '{"status":' * 500 + "null" + "}" * 500,
        "nested more than 64 levels deep",
    ),
    ("huge-integer", '{"serial": ' + "9" * 5000 + "}", "a number has too many digits"),
    # found by unit/daemon/test_daemon_parser_fuzz.py: the value was quoted whole (90,000 chars)
    (
        "long-api-version",
        '{"apiVersion": "' + "x" * 90_000 + '", "kind": "BootcHost"}',
        "apiVersion: apiVersion is 'xxx",
    ),
    (
        "huge-integer-in-entry",
        canonical(host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED))).replace(
            "{", '{"x": ' + "1" * 4301 + ", ", 1
        ),
        "a number has too many digits",
    ),
]


@pytest.mark.parametrize(
    ("text", "fragment"), [g[1:] for g in GARBAGE], ids=[g[0] for g in GARBAGE]
)
def test_garbage_raises_one_readable_line(text: str, fragment: str) -> None:
    with pytest.raises(BootcStatusError) as info:
        parse_status(text)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("bootc status")
    assert "\n" not in message
    assert len(message) < 400
    if text.strip():
        assert "output starts: " in message


@pytest.mark.parametrize(
    ("image", "d", "desired", "expected"),
    [
        (f"{REPO}@{D_BOOTED}", D_BOOTED, f"{REPO}@{D_BOOTED}", True),
        (f"{REPO}@{D_INDEX}", D_BOOTED, f"{REPO}@{D_INDEX}", True),
        (f"{REPO}:latest", D_BOOTED, f"{REPO}@{D_BOOTED}", True),
        (f"{REPO}@{D_BOOTED}", D_BOOTED, f"{REPO}@{D_STAGED}", False),
        (f"{REPO}@{D_BOOTED}", D_BOOTED, f"quay.io/other/os@{D_BOOTED}", False),
        ("localhost:5000/os:1", D_BOOTED, f"localhost:5000/os@{D_BOOTED}", True),
        (f"{REPO}@{D_BOOTED}", D_BOOTED, f"{REPO}:latest", False),
    ],
)
def test_image_matches(image: str, d: str, desired: str, expected: bool) -> None:
    info = ImageInfo(image=image, image_digest=d)
    assert image_matches(info, desired) is expected


def test_image_matches_nothing_when_absent() -> None:
    assert not image_matches(None, f"{REPO}@{D_BOOTED}")


# ---------------------------------------------------------------- the simulated host's output


def _status_text(host: Host, *flags: str) -> str:
    """Run bootc status the way the daemon does: through the nsenter prefix."""
    argv = [
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
        "--env",
        "--",
        "bootc",
        "status",
        *flags,
    ]
    done = subprocess.run(
        argv, env=host.env(), capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return make_host(tmp_path / "node", booted=f"{REPO}@{D_BOOTED}", version="1.0")


def test_fake_host_output_round_trip(host: Host) -> None:
    v1 = ("--format=json", "--format-version=1")
    parsed = parse_status(_status_text(host, *v1))
    assert parsed.images().booted == ImageInfo(
        image=f"{REPO}@{D_BOOTED}",
        image_digest=D_BOOTED,
        version="1.0",
        architecture="amd64",
        soft_reboot_capable=False,
        incompatible=False,
    )
    assert parsed.images().staged is None

    assert host.switch(f"{REPO}@{D_STAGED}").returncode == 0
    staged = parse_status(_status_text(host, *v1)).images()
    assert staged.staged is not None
    assert staged.staged.image_digest == D_STAGED
    assert parse_status(_status_text(host, "--json")) == parse_status(_status_text(host, *v1))

    host.reboot()
    after = parse_status(_status_text(host, *v1)).images()
    assert (
        after.booted and after.booted.image_digest,
        after.rollback and after.rollback.image_digest,
    ) == (
        D_STAGED,
        D_BOOTED,
    )


def test_download_only_is_read_from_the_staged_entry(host: Host) -> None:
    """``downloadOnly`` lives on the deployment entry (``status.staged.downloadOnly``);
    the fake host's ``bootc upgrade --download-only`` sets it, ``--from-downloaded``
    clears it."""
    real = parse_status(json.dumps(host_doc(entry(REPO, D_BOOTED), entry(REPO, D_STAGED))))
    assert real.staged is not None and not real.staged.download_only
    locked = entry(REPO, D_STAGED, downloadOnly=True)
    parsed = parse_status(json.dumps(host_doc(entry(REPO, D_BOOTED), locked)))
    assert parsed.staged is not None and parsed.staged.download_only

    v1 = ("--format=json", "--format-version=1")
    host.add_image(f"{REPO}:stable", D_BOOTED)
    assert host.switch(f"{REPO}:stable").returncode == 0
    host.reboot()
    host.add_image(f"{REPO}:stable", D_STAGED)
    assert host.upgrade(download_only=True).returncode == 0
    staged = parse_status(_status_text(host, *v1)).staged
    assert staged is not None and staged.download_only and staged.image_digest == D_STAGED
    assert host.upgrade(from_downloaded=True).returncode == 0
    staged = parse_status(_status_text(host, *v1)).staged
    assert staged is not None and not staged.download_only


def test_fake_host_faults_parse_as_the_daemon_must_see_them(host: Host) -> None:
    v1 = ("--format=json", "--format-version=1")
    host.set_fault("incompatible")
    parsed = parse_status(_status_text(host, *v1))
    assert parsed.images().booted is None
    assert parsed.incompatible
    assert "rpm-ostree" in (parsed.unmanageable_reason() or "")
    host.clear_faults()

    host.set_fault("not-bootc")
    parsed = parse_status(_status_text(host, *v1))
    assert not parsed.is_bootc_host
    assert "status.booted is null" in (parsed.unmanageable_reason() or "")
    host.clear_faults()

    host.set_fault("status-garbage")
    with pytest.raises(BootcStatusError, match="not JSON"):
        parse_status(_status_text(host, *v1))


def test_fake_composefs_host_output(tmp_path: Path) -> None:
    host = make_host(tmp_path / "cfs", booted=f"{REPO}@{D_BOOTED}", backend="composefs")
    assert host.switch(f"{REPO}@{D_STAGED}").returncode == 0
    parsed = parse_status(_status_text(host, "--format=json", "--format-version=1"))
    assert parsed.booted is not None
    assert parsed.booted.backend == "composefs"
    assert parsed.booted.ostree is None
    assert parsed.unmanageable_reason() is None
    assert isinstance(parsed, HostStatus)


@pytest.mark.parametrize("serial", ["--5", "x", 1.5, [1]])
def test_a_deploy_serial_that_is_not_an_integer_is_one_readable_line(serial: object) -> None:
    doc = host_doc(entry(f"{REPO}@{D_BOOTED}", D_BOOTED))
    doc["status"]["booted"]["ostree"]["deploySerial"] = serial
    with pytest.raises(BootcStatusError, match=r"status\.booted\.ostree\.deploySerial"):
        parse_status(json.dumps(doc))


# ------------------------------------------------------------------ the real bootc's output
#
# unit/fixtures/bootc-real/: ``bootc status --format=json --format-version=1`` of the real
# bootc 1.16.9 on a real ostree sysroot, one file per state (``python -m
# hack.realbootc.capture``; its commands.txt says how each state was reached).

REAL = Path(__file__).parents[1] / "fixtures" / "bootc-real"
REAL_STATES = sorted(p.stem for p in REAL.glob("*.json"))


def real_text(name: str) -> str:
    return (REAL / f"{name}.json").read_text()


def test_the_real_captures_are_all_there() -> None:
    assert REAL_STATES == [
        "booted-only",
        "cached-update",
        "download-only",
        "not-booted-by-ostree",
        "rollback-present",
        "rollback-queued",
        "rollback-queued-then-staged",
        "staged-another-kernel",
        "staged-container-policy",
        "staged-soft-reboot-capable",
    ]


@pytest.mark.parametrize("name", REAL_STATES)
def test_real_output_is_one_canonical_line_and_parses(name: str) -> None:
    text = real_text(name)
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert not text.endswith("\n")
    parsed = parse_status(text)
    assert parsed.api_version == "org.containers.bootc/v1"
    assert (parsed.unmanageable_reason() is None) == (name != "not-booted-by-ostree")


def test_real_states_read_as_the_daemon_must_see_them() -> None:
    booted_only = parse_status(real_text("booted-only")).images()
    assert booted_only.booted is not None
    assert (booted_only.booted.version, booted_only.booted.architecture) == ("1.0", "amd64")
    assert booted_only.staged is None and booted_only.rollback is None

    capable = parse_status(real_text("staged-soft-reboot-capable"))
    assert capable.staged is not None and capable.staged.soft_reboot_capable
    other_kernel = parse_status(real_text("staged-another-kernel"))
    assert other_kernel.staged is not None and not other_kernel.staged.soft_reboot_capable

    queued = parse_status(real_text("rollback-queued"))
    assert queued.rollback_queued and queued.status.staged is None
    assert queued.spec.boot_order == "rollback"
    assert queued.reported_images().staged == queued.images().rollback

    then_staged = parse_status(real_text("rollback-queued-then-staged"))
    assert then_staged.rollback_queued, "bootc keeps saying so until the reboot"
    assert then_staged.reported_images().staged == then_staged.images().staged

    cached = parse_status(real_text("cached-update"))
    assert cached.booted is not None and cached.booted.cached_update is not None
    assert cached.booted.cached_update.image_digest.startswith("sha256:")

    download_only = parse_status(real_text("download-only"))
    assert download_only.staged is not None and download_only.staged.download_only

    signed = parse_status(real_text("staged-container-policy"))
    assert signed.spec.image is not None
    assert signed.spec.image.signature_policy == "containerPolicy"
    assert signed.staged is not None and signed.staged.image is not None
    assert signed.staged.image.image.signature == "containerPolicy"

    not_booted = parse_status(real_text("not-booted-by-ostree"))
    assert not not_booted.is_bootc_host
    assert "status.booted is null" in (not_booted.unmanageable_reason() or "")


def _shape(value: Any, path: str = "") -> set[tuple[str, str]]:
    """Every leaf of a document: its path and JSON type (values ignored)."""
    if isinstance(value, dict):
        return {leaf for k, v in value.items() for leaf in _shape(v, f"{path}.{k}")}
    kind = "null" if value is None else type(value).__name__
    return {(path, kind)}


def test_the_fake_prints_the_real_documents_shape(tmp_path: Path) -> None:
    """The fake host (``hack.fakebootc``) prints the same fields with the same types as
    the real bootc, in the states both reach the same way (values differ: digests,
    checksums)."""
    when = "2024-01-01T00:00:00Z"
    fake = make_host(tmp_path / "node", booted=f"{REPO}@{D_BOOTED}", version="1.0", timestamp=when)
    fake.add_image(f"{REPO}@{D_STAGED}", D_STAGED, version="2.0", timestamp=when)
    fake.add_image(f"{REPO}@{D_ROLLBACK}", D_ROLLBACK, version="3.0", timestamp=when)

    def same(name: str) -> None:
        assert _shape(fake.status()) == _shape(json.loads(real_text(name))), name

    same("booted-only")
    assert fake.switch(f"{REPO}@{D_STAGED}").returncode == 0
    same("staged-soft-reboot-capable")
    fake.reboot()
    same("rollback-present")
    assert fake.rollback().returncode == 0
    same("rollback-queued")
    assert fake.switch(f"{REPO}@{D_ROLLBACK}").returncode == 0
    same("rollback-queued-then-staged")
    fake.set_fault("not-bootc")
    same("not-booted-by-ostree")
