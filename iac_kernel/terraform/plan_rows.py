"""The order a reviewer reads a plan in, and every changing row in a compact form.

Order: replacements and deletes first (they destroy data), then updates, then creates;
inside an action, by module and resource type, then by address in natural order
(``old[2]`` before ``old[10]``, ``module.a[3]`` before ``module.a[12]``).

:func:`compact_rows` is the whole plan's rows for the notebook's plan card (one list per
column, strings shared through tables), not HTML: the extension renders only the rows in
view. Attribute diffs ride along as lines, within :data:`DIFF_BYTES`.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iac_kernel.terraform.plan import ResourceChange

#: Review order of actions: what destroys data first.
REVIEW_ORDER = ("replace", "delete", "update", "create", "read", "forget")
DESTROYING = ("replace", "delete")
#: Attribute-diff text carried with the compact rows (the rest: terraform show).
DIFF_BYTES = 256 * 1024
#: Below this much budget no more diffs are worked out.
MIN_DIFF = 64
#: Attribute changes per row in the compact rows, and the length of each value shown.
ROW_CHANGES = 16
VALUE_CHARS = 200
_DIGITS = re.compile(r"(\d+)")
#: Plans whose rows went out, by key (the plan file's sha256): a row whose diff did not
#: fit the card is asked for by its address (:func:`row_diff`). The latest few only.
_SHOWN: OrderedDict[str, dict[str, ResourceChange]] = OrderedDict()
MAX_SHOWN = 8


def natural_key(text: str) -> tuple[Any, ...]:
    """A sort key where runs of digits compare as numbers: ``r[2]`` before ``r[10]``."""
    parts = _DIGITS.split(text)
    # Strings at even positions, numbers at odd ones: tuples always compare like with like.
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def action_rank(action: str) -> int:
    return REVIEW_ORDER.index(action) if action in REVIEW_ORDER else len(REVIEW_ORDER)


def module_of(address: str, type_: str = "", mode: str = "managed") -> str:
    """The module part of an address (``module.a[3].module.b``; ``""`` for the root)."""
    if not type_:  # the last ``module.NAME[KEY]`` step, without the resource's own part
        found = list(re.finditer(r"module\.[^.\[]+(\[[^\]]*\])?", address))
        return address[: found[-1].end()] if found else ""
    own = ("data." if mode == "data" else "") + f"{type_}."
    at = address.rfind(own)
    return address[:at].rstrip(".") if at > 0 else ""


def review_key(action: str, address: str, type_: str = "", mode: str = "managed") -> tuple:
    """Sort key of one row: action, module, type, address (natural order)."""
    module = module_of(address, type_, mode)
    return (action_rank(action), natural_key(module), type_, natural_key(address))


def in_review_order(resources: list[ResourceChange]) -> list[ResourceChange]:
    """Changing resources (no-ops left out) in review order (see the module docstring)."""
    moving = [r for r in resources if r.action != "no-op"]
    return sorted(moving, key=lambda r: review_key(r.action, r.address, r.type, r.mode))


def shown_value(value: Any) -> str:
    if value in ("(sensitive)", "(known after apply)"):
        return str(value)
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def diff_lines(resource: ResourceChange) -> list[str]:
    """The row's attribute changes as lines: ``~ path: before -> after`` (values masked)."""
    lines = []
    for change in resource.changes[:ROW_CHANGES]:
        mark = "  # forces replacement" if change.forces_replace else ""
        if resource.action == "create" or change.before is None:
            lines.append(f"+ {change.path} = {shown_value(change.after)}{mark}")
        elif resource.action == "delete":
            lines.append(f"- {change.path} = {shown_value(change.before)}")
        else:
            before, after = shown_value(change.before), shown_value(change.after)
            lines.append(f"~ {change.path}: {before} -> {after}{mark}")
    if len(resource.changes) > ROW_CHANGES:
        lines.append(f"… {len(resource.changes) - ROW_CHANGES} more attribute changes")
    return lines


def remember(key: str, rows: list[ResourceChange]) -> None:
    """Keep ``rows`` for :func:`row_diff` under ``key`` (the oldest of :data:`MAX_SHOWN` goes)."""
    _SHOWN[key] = {row.address: row for row in rows}
    _SHOWN.move_to_end(key)
    while len(_SHOWN) > MAX_SHOWN:
        _SHOWN.popitem(last=False)


def row_diff(key: str, address: str) -> list[str] | None:
    """One row's attribute changes as lines (values masked as in the plan), or None when
    this process showed no such plan or row."""
    row = _SHOWN.get(key, {}).get(address)
    return None if row is None else diff_lines(row)


def compact_rows(rows: list[ResourceChange], reasons: dict[int, str]) -> dict[str, Any]:
    """Every changing row, in review order, as columns of small numbers and short strings
    (the message a 10,000-row plan costs the browser is what keeps it responsive)::

        {"v": 1, "actions": [action], "groups": [[module, type, prefix]], "whys": [text],
         "action": [index], "group": [index], "name": [str], "why": [index],
         "diff": [str | null], "diffs_left_out": int}

    A row's address is its group's ``prefix`` + its ``name``; its diff is its attribute
    changes as lines joined by newlines (:func:`diff_lines`), ``null`` when it did not fit
    :data:`DIFF_BYTES`. ``rows``: the changing resources in review order
    (:func:`in_review_order`); ``reasons`` maps ``id(resource)`` to its reason in words."""
    actions: dict[str, int] = {}
    groups: dict[tuple[str, str, str], int] = {}
    whys: dict[str, int] = {"": 0}
    columns: dict[str, list[Any]] = {"action": [], "group": [], "name": [], "why": [], "diff": []}
    budget, left_out = DIFF_BYTES, 0
    for resource in rows:
        module = module_of(resource.address, resource.type, resource.mode)
        prefix = _prefix(resource, module)
        columns["action"].append(actions.setdefault(resource.action, len(actions)))
        columns["group"].append(groups.setdefault((module, resource.type, prefix), len(groups)))
        columns["name"].append(resource.address[len(prefix) :])
        columns["why"].append(whys.setdefault(reasons.get(id(resource), ""), len(whys)))
        diff = "\n".join(diff_lines(resource)) if budget > MIN_DIFF else None
        if diff is not None and len(diff) + 4 <= budget:
            columns["diff"].append(diff)
            budget -= len(diff) + 4
        else:
            columns["diff"].append(None)
            left_out += 1
    return {
        "v": 1,
        "actions": list(actions),
        "groups": [list(key) for key in groups],
        "whys": list(whys),
        **columns,
        "diffs_left_out": left_out,
    }


def _prefix(resource: ResourceChange, module: str) -> str:
    """What a row's address shares with its group: ``module.a[3].aws_s3_bucket.``."""
    prefix = (f"{module}." if module else "") + ("data." if resource.mode == "data" else "")
    prefix += f"{resource.type}." if resource.type else ""
    return prefix if resource.address.startswith(prefix) else ""


def expand_rows(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The compact rows back as ``{"action", "address", "module", "type", "why", "diff"}``
    (``diff``: a list of lines, or None)."""
    actions, groups, whys = rows["actions"], rows["groups"], rows["whys"]
    return [
        {
            "action": actions[action],
            "address": groups[group][2] + name,
            "module": groups[group][0],
            "type": groups[group][1],
            "why": whys[why],
            "diff": None if diff is None else (diff.split("\n") if diff else []),
        }
        for action, group, name, why, diff in zip(
            rows["action"], rows["group"], rows["name"], rows["why"], rows["diff"], strict=True
        )
    ]
