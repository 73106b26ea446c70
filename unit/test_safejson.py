"""``safejson.loads``: every way JSON from outside can fail ends in ``JSONInputError``."""

from __future__ import annotations

import pytest

from bootc_operator.safejson import JSONInputError, depth, loads


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("[" * 100_000, "nested more than 64 levels deep"),  # RecursionError inside json
        ('{"a":' * 65 + "1" + "}" * 65, "nested more than 64 levels deep"),
        ("1" * 4301, "a number has too many digits"),  # ValueError, not JSONDecodeError
        (b"\xff\xfe[", "not UTF-8 text"),
        ("{nope", "Expecting property name enclosed in double quotes at line 1 column 2"),
        ('"\x01"', "Invalid control character at line 1 column 2"),
    ],
    ids=["recursion", "too-deep", "digits", "not-utf8", "syntax", "control-char"],
)
def test_every_failure_is_one_error(data: str | bytes, reason: str) -> None:
    with pytest.raises(JSONInputError) as info:
        loads(data)
    assert info.value.reason == str(info.value) == reason
    assert isinstance(info.value, ValueError)


def test_usable_documents_load() -> None:
    assert loads('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert loads('{"a":' * 64 + "1" + "}" * 64) is not None  # exactly the limit
    assert loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(JSONInputError):
        loads("[[[1]]]", max_depth=2)


def test_depth() -> None:
    assert depth(1, 5) == 0
    assert depth([], 5) == 1
    assert depth({"a": [1, {"b": []}]}, 5) == 4
    assert depth([[[[[[]]]]]], 2) == 3  # stops counting past the limit
