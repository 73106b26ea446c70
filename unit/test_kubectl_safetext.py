"""``kubectl bootc``'s cleaning of cluster text before it reaches a terminal (issue 37 §8)."""

from __future__ import annotations

from bootc_operator.kubectl.safetext import clean, clean_obj


def test_c0_and_c1_controls_are_replaced_and_whitespace_becomes_a_space() -> None:
    hostile = "pull failed\x1b]0;owned\x07\x1b[2J\r\nnext\tline\x9b31m\x00\x7f"
    shown = clean(hostile)
    assert shown == "pull failed^[]0;owned^G^[[2J  next line<U+009B>31m^@^?"
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in shown)


def test_clean_text_is_unchanged_and_cleaning_is_idempotent() -> None:
    for text in ("drain of n1 blocked by default/web-0", "déjà vu ✓ 日本", "", "a\u00a0b"):
        assert clean(text) == text
    every = "".join(map(chr, range(0x100)))
    assert clean(clean(every)) == clean(every)


def test_every_string_of_a_document_is_cleaned_keys_included() -> None:
    doc = {
        "metadata": {"name": "n1", "annotations": {"k\x1b": "v\x07"}},
        "status": {"conditions": [{"message": "a\nb", "status": "True"}], "count": 3},
        "items": ("x\x1b", None, True, 1.5),
    }
    assert clean_obj(doc) == {
        "metadata": {"name": "n1", "annotations": {"k^[": "v^G"}},
        "status": {"conditions": [{"message": "a b", "status": "True"}], "count": 3},
        "items": ("x^[", None, True, 1.5),
    }
