"""Label selectors: validation with readable errors and matching against label maps.

Pure functions over wire dicts (``spec.nodeSelector``). Semantics follow
apimachinery's ``metav1.LabelSelectorAsSelector``: matchLabels and
matchExpressions are ANDed; an empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class InvalidSelector(ValueError):
    """A selector the API server would accept as an object but that selects nonsense."""


def validate_label_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _PREFIX.match(prefix)):
        raise InvalidSelector(f'label key "{key}" has an invalid prefix "{prefix}"')
    if not _NAME.match(name):
        raise InvalidSelector(
            f'label key "{key}" is invalid: names are 1-63 alphanumerics, "-", "_" or ".", '
            "starting and ending with an alphanumeric"
        )


def validate_label_value(key: str, value: str) -> None:
    if len(value) > 63 or not _VALUE.match(value):
        raise InvalidSelector(f'label value "{value}" for key "{key}" is invalid')


def validate_selector(selector: Mapping[str, Any] | None) -> None:
    """Raise ``InvalidSelector`` naming the first problem."""
    if not selector:
        return
    for key, value in (selector.get("matchLabels") or {}).items():
        validate_label_key(key)
        validate_label_value(key, value)
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key", ""), req.get("operator", ""), req.get("values") or []
        validate_label_key(key)
        if op not in OPERATORS:
            raise InvalidSelector(f'operator "{op}" for key "{key}" is not one of {OPERATORS}')
        if op in ("In", "NotIn") and not values:
            raise InvalidSelector(f'operator {op} for key "{key}" needs at least one value')
        if op in ("Exists", "DoesNotExist") and values:
            raise InvalidSelector(f'operator {op} for key "{key}" must not have values')
        for value in values:
            validate_label_value(key, value)


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """True when ``labels`` satisfy ``selector`` (assumed valid)."""
    labels = labels or {}
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def is_empty(selector: Mapping[str, Any] | None) -> bool:
    """An empty selector matches every Node: legal, but worth a warning."""
    return not selector or (
        not selector.get("matchLabels") and not selector.get("matchExpressions")
    )
