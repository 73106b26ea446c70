"""Image reference parsing table."""

from __future__ import annotations

import re

import pytest

from bootc_operator.api.imageref import (
    DIGEST_REF_PATTERN,
    POOL_REF_PATTERN,
    ImageRef,
    InvalidImageRef,
    desired_image_problem,
    digest_of,
    display_ref,
    parse_image_ref,
    repository_of,
    short_digest,
)

D = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("quay.io/org/os:42", ImageRef("quay.io", "org/os", "42", None)),
        ("quay.io/org/os", ImageRef("quay.io", "org/os", None, None)),
        (f"quay.io/org/os@{D}", ImageRef("quay.io", "org/os", None, D)),
        (f"quay.io/org/os:42@{D}", ImageRef("quay.io", "org/os", "42", D)),
        ("localhost:5000/os:latest", ImageRef("localhost:5000", "os", "latest", None)),
        ("localhost/os", ImageRef("localhost", "os", None, None)),
        ("127.0.0.1:5000/a/b/c:v1.0-rc_1", ImageRef("127.0.0.1:5000", "a/b/c", "v1.0-rc_1", None)),
        ("docker.io/library/fedora:41", ImageRef("docker.io", "library/fedora", "41", None)),
        ("[::1]:5000/os:x", ImageRef("[::1]:5000", "os", "x", None)),
        ("reg.example.com/my__os/a-b.c:t", ImageRef("reg.example.com", "my__os/a-b.c", "t", None)),
    ],
)
def test_parses(text: str, expected: ImageRef) -> None:
    assert parse_image_ref(text) == expected
    assert str(parse_image_ref(text)) == text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("myos:latest", "short name"),
        ("myos", "short name"),
        ("fedora/fedora-bootc:42", "no registry host"),
        ("", "empty"),
        (" quay.io/a/b:c", "whitespace"),
        ("https://quay.io/a/b:c", "URL scheme"),
        ("quay.io/Org/os:1", "invalid repository"),
        ("quay.io/org/os:bad tag", "whitespace"),
        ("quay.io/org/os:-x", "invalid tag"),
        ("quay.io/org/os@sha256:abc", "digest"),
        ("quay.io/org/os@sha256:" + "A" * 64, "lowercase hex"),
        ("quay.io/org/os@md5", "digest"),
        # the BootcNode CRD (and bootc) take only these two algorithms
        ("quay.io/org/os@md5:" + "0" * 32, "only sha256 and sha512"),
        ("quay.io/org/os@sha384:" + "0" * 96, "only sha256 and sha512"),
        ("quay..io/os:1", "invalid registry"),
    ],
)
def test_rejects_with_clear_message(text: str, fragment: str) -> None:
    with pytest.raises(InvalidImageRef, match=fragment):
        parse_image_ref(text)


def test_pool_digests_are_exactly_those_a_bootc_node_accepts() -> None:
    for alg, n in (("sha256", 64), ("sha512", 128), ("md5", 32), ("sha384", 96), ("blake3", 64)):
        ref = f"quay.io/org/os@{alg}:" + "a" * n
        accepted = True
        try:
            parse_image_ref(ref)
        except InvalidImageRef:
            accepted = False
        assert accepted == bool(re.fullmatch(DIGEST_REF_PATTERN, ref)), ref


def test_short_forms_for_printer_columns() -> None:
    assert short_digest(D) == D[7:19] and len(short_digest(D)) == 12
    assert short_digest(None) == ""
    assert display_ref("quay.io/org/os:42") == "quay.io/org/os:42"
    assert display_ref(f"quay.io/org/os@{D}") == f"quay.io/org/os@sha256:{D[7:19]}"
    assert display_ref(f"quay.io/org/os:42@{D}") == f"quay.io/org/os:42@sha256:{D[7:19]}"


def test_helpers() -> None:
    ref = parse_image_ref("quay.io/org/os:42")
    assert ref.with_digest(D) == f"quay.io/org/os@{D}"
    assert ref.reference == "42" and not ref.is_digest
    assert parse_image_ref("quay.io/org/os").reference == "latest"
    assert parse_image_ref(f"quay.io/org/os:1@{D}").reference == D
    assert digest_of(f"quay.io/org/os@{D}") == D
    assert digest_of("quay.io/org/os:1") is None
    assert repository_of(f"quay.io/org/os:1@{D}") == "quay.io/org/os"
    with pytest.raises(InvalidImageRef):
        ref.with_digest("sha256:nothex")


@pytest.mark.parametrize(
    ("image", "why"),
    [
        (f"--apply@{D}", 'begins with "-" (bootc would read it as an option)'),
        (f"--transport=dir@{D}", 'begins with "-"'),
        (f"-quay.io/os@{D}", 'begins with "-"'),
        (f"quay.io/os\x00@{D}", "control character"),
        (f"quay.io/os\x1b[31m@{D}", "control character"),
        (f"quay.io/os@{D}\n", "control character"),
        (f"quay.io/os @{D}", "whitespace"),
        ("quay.io/os:latest", "is not a digest reference"),
        (f"quay.io/OS@{D}", "is not a digest reference"),
        (f"quay.io/os@sha256:{'A' * 64}", "is not a digest reference"),
        (f"dir:/tmp/x@{D}", "is not a digest reference"),
        (f"oci:/tmp/x@{D}", "is not a digest reference"),
        ("", "is not a digest reference"),
    ],
)
def test_desired_image_problem_names_hostile_images(image: str, why: str) -> None:
    problem = desired_image_problem(image)
    assert problem is not None and why in problem
    assert problem.startswith("spec.desiredImage ") and "\x1b" not in problem
    assert "\n" not in problem and "\x00" not in problem


@pytest.mark.parametrize(
    "image",
    [
        f"quay.io/example/os@{D}",
        f"registry.example.com:5000/team/os:42@{D}",
        f"localhost/os@{D}",
        f"[::1]:5000/os@{D}",
        f"quay.io/example/os@sha512:{'b' * 128}",
    ],
)
def test_desired_image_problem_accepts_digest_refs(image: str) -> None:
    assert desired_image_problem(image) is None
    assert re.fullmatch(DIGEST_REF_PATTERN, image)


@pytest.mark.parametrize(
    "ref",
    ["quay.io/example/os:latest", f"localhost:5000/os@{D}", "[::1]:5000/os:1", "myos:latest"],
)
def test_the_pool_pattern_keeps_ordinary_refs(ref: str) -> None:
    """Short names still pass the CRD: the controller explains them in the pool's status."""
    assert re.fullmatch(POOL_REF_PATTERN, ref)


@pytest.mark.parametrize(
    "ref", ["--apply", "-quay.io/os:1", "quay.io/os:1\x07", "quay.io/os :1", "quay.io/os:1\n"]
)
def test_the_pool_pattern_refuses_options_and_control_characters(ref: str) -> None:
    assert not re.fullmatch(POOL_REF_PATTERN, ref)
