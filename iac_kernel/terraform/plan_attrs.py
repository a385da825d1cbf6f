"""Attribute-level changes of one resource: ``before`` and ``after`` flattened to leaf
paths (``tags.env``, ``ingress[0].cidr_blocks[1]``), sensitive and unknown marks kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SENSITIVE = "(sensitive)"
UNKNOWN = "(known after apply)"
#: Attribute changes kept per resource (a huge resource keeps the first ones).
MAX_CHANGES = 200
_MAX_DEPTH = 12


@dataclass
class AttributeChange:
    """One attribute path that changes: ``tags.env``, ``ingress[0].cidr_blocks[1]``."""

    path: str
    before: Any = None
    after: Any = None
    sensitive: bool = False
    unknown: bool = False
    forces_replace: bool = False


def attribute_changes(change: dict[str, Any], replace_paths: set[str]) -> list[AttributeChange]:
    """The leaf attributes whose value differs between ``before`` and ``after``."""
    before = _flatten(change.get("before"), change.get("before_sensitive"), None)
    after = _flatten(
        change.get("after"), change.get("after_sensitive"), change.get("after_unknown")
    )
    out: list[AttributeChange] = []
    for path in sorted(set(before) | set(after)):
        old, old_sensitive, _ = before.get(path, (None, False, False))
        new, new_sensitive, unknown = after.get(path, (None, False, False))
        if old == new and not unknown and old_sensitive == new_sensitive:
            continue
        sensitive = old_sensitive or new_sensitive
        out.append(
            AttributeChange(
                path=path,
                before=SENSITIVE if old_sensitive and old is not None else old,
                after=UNKNOWN if unknown else (SENSITIVE if new_sensitive else new),
                sensitive=sensitive,
                unknown=unknown,
                forces_replace=any(
                    path == p or path.startswith(p + ".") or path.startswith(p + "[")
                    for p in replace_paths
                ),
            )
        )
        if len(out) >= MAX_CHANGES:
            break
    return out


def _flatten(value: Any, sensitive: Any, unknown: Any, prefix: str = "", depth: int = 0):
    """path -> (value, sensitive, unknown) for every leaf of ``value``."""
    leaves: dict[str, tuple[Any, bool, bool]] = {}
    if value is None and isinstance(unknown, dict) and unknown:
        value = {}  # a block that does not exist yet but has unknown members
    if sensitive is True or unknown is True or depth >= _MAX_DEPTH:
        leaves[prefix or "(value)"] = (value, sensitive is True, unknown is True)
        return leaves
    if isinstance(value, dict) and (value or (isinstance(unknown, dict) and unknown)):
        keys = set(value) | (set(unknown) if isinstance(unknown, dict) else set())
        for key in sorted(keys):
            leaves.update(
                _flatten(
                    value.get(key),
                    _child(sensitive, key),
                    _child(unknown, key),
                    f"{prefix}.{key}" if prefix else str(key),
                    depth + 1,
                )
            )
        return leaves
    if isinstance(value, list) and value:
        for index, item in enumerate(value):
            leaves.update(
                _flatten(
                    item,
                    _child(sensitive, index),
                    _child(unknown, index),
                    f"{prefix}[{index}]",
                    depth + 1,
                )
            )
        return leaves
    leaves[prefix or "(value)"] = (value, False, False)
    return leaves


def _child(mask: Any, key: str | int) -> Any:
    if isinstance(mask, dict) and isinstance(key, str):
        return mask.get(key)
    if isinstance(mask, list) and isinstance(key, int) and key < len(mask):
        return mask[key]
    return None
