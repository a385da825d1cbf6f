"""A plan shown: the compact table the model reads, one address's detail, the apply
question, and every changing row in a compact form for the notebook's plan card.

Replacements and deletes come first everywhere (review order: :attr:`.plan.Plan.changed`).
Values are already masked in the :class:`~.plan.Plan` (by path); callers mask by value
as well.

:func:`card_rows` is the whole plan's rows for the plan card (one list per column,
strings shared through tables), not HTML: the extension renders only the rows in view.
Attribute diffs ride along as lines, within :data:`DIFF_BYTES`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from iac_kernel.terraform.plan import (
    Plan,
    ResourceChange,
    action_rank,
    module_of,
    reason_text,
    summary_line,
)
from iac_kernel.textsafe import printable

SYMBOLS = {
    "delete": "-",
    "replace": "-/+",
    "create": "+",
    "update": "~",
    "read": "<=",
    "forget": ".",
    "no-op": " ",
}
#: Resource rows in the model's table before it says "and N more".
MAX_ROWS = 60
#: Longest value shown in the model's detail, and in a card row's diff.
VALUE_CHARS = 120
ROW_VALUE_CHARS = 200
#: Attribute-diff text carried with the card's rows (the rest: terraform show).
DIFF_BYTES = 256 * 1024
#: Below this much budget no more diffs are worked out.
MIN_DIFF = 64
#: Attribute changes per row in the card's rows.
ROW_CHANGES = 16
#: Failed checks' ids the apply question names (its count says how many failed).
QUESTION_CHECK_IDS = 5
#: Plans whose rows went out, by key (the plan file's sha256): a row whose diff did not
#: fit the card is asked for by its address (:func:`row_diff`). The latest few only.
_SHOWN: OrderedDict[str, dict[str, ResourceChange]] = OrderedDict()
MAX_SHOWN = 8


def identity(plan: Plan) -> str:
    if plan.file is None:
        return ""
    f = plan.file
    return f"Plan file: {f.path} (sha256 {f.short_hash}, {f.size:,} bytes, {f.time})"


def model_text(plan: Plan, limit: int = MAX_ROWS) -> str:
    """The compact summary: summary line, a table by action, outputs, drift, checks."""
    lines = [summary_line(plan)]
    if plan.file is not None:
        lines.append(identity(plan))
    for error in plan.errors:
        lines.append(f"Error: {error}")
    rows = plan.changed
    if rows:
        lines += ["", "| action | address | why |", "|---|---|---|"]
        for resource in rows[:limit]:
            lines.append(
                f"| {SYMBOLS.get(resource.action, '?')} {resource.action} "
                f"| {resource.address} | {reason_text(resource)} |"
            )
        if len(rows) > limit:
            lines.append(f"| … | {len(rows) - limit} more | |")
    outputs = [o for o in plan.outputs if o.action != "no-op"]
    if outputs:
        lines += ["", "Outputs: " + ", ".join(f"{o.name} ({o.action})" for o in outputs)]
    if plan.drift:
        lines += ["", f"Drift: {len(plan.drift)} resource(s) changed outside Terraform:"]
        for resource in plan.drift[:limit]:
            paths = ", ".join(c.path for c in resource.changes[:8])
            lines.append(f"- {resource.address} ({resource.action}){': ' + paths if paths else ''}")
    lines += checks_lines(plan)
    if rows or plan.drift:
        lines += ["", "Ask terraform_plan_detail for one address's attribute changes."]
    return "\n".join(lines)


def checks_lines(plan: Plan) -> list[str]:
    if plan.checks:
        lines = ["", f"Policy (checkov): {len(plan.checks)} failed check(s):"]
        for check in plan.checks[:40]:
            lines.append(f"- {check.get('address')}: {check.get('check_id')} {check.get('name')}")
        return lines
    if plan.checks_note:
        return ["", f"Policy (checkov): {plan.checks_note}"]
    return []


def show_value(value: Any, chars: int = VALUE_CHARS) -> str:
    """A value as JSON (the masks as they are), cut to ``chars``."""
    if value in ("(sensitive)", "(known after apply)"):
        return str(value)
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def change_lines(
    resource: ResourceChange,
    limit: int | None = None,
    chars: int = VALUE_CHARS,
    drift: bool = False,
) -> list[str]:
    """The resource's attribute changes as lines: ``~ path: before -> after`` (values
    masked), the first ``limit`` of them."""
    lines = []
    for change in resource.changes[:limit]:
        mark = "  # forces replacement" if change.forces_replace else ""
        if resource.action == "create" or (change.before is None and not drift):
            lines.append(f"+ {change.path} = {show_value(change.after, chars)}{mark}")
        elif resource.action == "delete":
            lines.append(f"- {change.path} = {show_value(change.before, chars)}")
        else:
            before, after = show_value(change.before, chars), show_value(change.after, chars)
            lines.append(f"~ {change.path}: {before} -> {after}{mark}")
    if limit is not None and len(resource.changes) > limit:
        lines.append(f"… {len(resource.changes) - limit} more attribute changes")
    return lines


def detail_text(plan: Plan, address: str) -> str:
    """One address: action, reason, and each attribute change ``before -> after``."""
    resource = plan.resource(address)
    if resource is None:
        known = ", ".join(r.address for r in plan.changed[:20]) or "(no resource changes)"
        return f"{address} is not in the plan. Changing addresses: {known}"
    drift = resource in plan.drift
    head = f"{SYMBOLS.get(resource.action, '?')} {resource.address}: {resource.action}"
    lines = [head + (" (changed outside Terraform)" if drift else "")]
    reason = reason_text(resource)
    if reason:
        lines.append(f"Reason: {reason}")
    if not resource.changes:
        lines.append("(no attribute changes)")
    lines += [f"  {line}" for line in change_lines(resource, drift=drift)]
    checks = [c for c in plan.checks if c.get("address") == address]
    for check in checks:
        lines.append(f"Policy: {check.get('check_id')} {check.get('name')}")
    return "\n".join(lines)


def question_text(plan: Plan) -> str:
    """The apply question's body: summary, plan identity, the counts by action (review
    order) and the failed checks' count. No rows: the plan card's table carries every row,
    so the question (and its typed confirmation) stays on the first screen at any size."""
    lines = [summary_line(plan), printable(identity(plan))]
    counts = {a: n for a, n in plan.counts.items() if a != "no-op" and n}
    if counts:
        by_action = " · ".join(f"{counts[a]} {a}" for a in sorted(counts, key=action_rank))
        where = f"{plan.program} show" + (f" {printable(plan.file.path)}" if plan.file else "")
        lines.append(f"Changes: {by_action}; each one is in the plan table (or `{where}`).")
    if plan.checks:
        ids = sorted({printable(str(c.get("check_id"))) for c in plan.checks})
        shown = ", ".join(ids[:QUESTION_CHECK_IDS]) + (
            ", …" if len(ids) > QUESTION_CHECK_IDS else ""
        )
        lines.append(f"Failed policy checks (checkov): {len(plan.checks)} ({shown}).")
    return "\n".join(line for line in lines if line)


def card_rows(plan: Plan) -> dict[str, Any]:
    """Every changing row, in review order, as columns of small numbers and short strings
    (the message a 10,000-row plan costs the browser is what keeps it responsive)::

        {"v": 1, "actions": [action], "groups": [[module, type, prefix]], "whys": [text],
         "action": [index], "group": [index], "name": [str], "why": [index],
         "diff": [str | null], "diffs_left_out": int, "key": sha256}

    A row's address is its group's ``prefix`` + its ``name``; its diff is its attribute
    changes as lines joined by newlines (:func:`change_lines`), ``null`` when it did not
    fit :data:`DIFF_BYTES`; such a row's diff is one :func:`row_diff` away by ``key``
    (the plan file's sha256, when the plan has a file)."""
    rows = plan.changed
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
        columns["why"].append(whys.setdefault(reason_text(resource), len(whys)))
        diff = None
        if budget > MIN_DIFF:
            diff = "\n".join(change_lines(resource, ROW_CHANGES, ROW_VALUE_CHARS))
        if diff is not None and len(diff) + 4 <= budget:
            columns["diff"].append(diff)
            budget -= len(diff) + 4
        else:
            columns["diff"].append(None)
            left_out += 1
    out = {
        "v": 1,
        "actions": list(actions),
        "groups": [list(key) for key in groups],
        "whys": list(whys),
        **columns,
        "diffs_left_out": left_out,
    }
    if plan.file is not None:
        _SHOWN[plan.file.sha256] = {row.address: row for row in rows}
        _SHOWN.move_to_end(plan.file.sha256)
        while len(_SHOWN) > MAX_SHOWN:
            _SHOWN.popitem(last=False)
        out["key"] = plan.file.sha256
    return out


def row_diff(key: str, address: str) -> list[str] | None:
    """One row's attribute changes as lines (values masked as in the plan), or None when
    this process showed no such plan or row."""
    row = _SHOWN.get(key, {}).get(address)
    return None if row is None else change_lines(row, ROW_CHANGES, ROW_VALUE_CHARS)


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
