"""A plan as text: the compact table the model reads, one address's detail, the question.

Replacements and deletes come first everywhere (review order: :mod:`.plan_rows`). Values
are already masked in the :class:`~.plan.Plan` (by path); callers mask by value as well.
"""

from __future__ import annotations

import json
from typing import Any

from iac_kernel.terraform.plan import Plan, reason_text, summary_line
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
VALUE_CHARS = 120


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


def show_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, str) and value not in ("(sensitive)", "(known after apply)"):
        text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


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
    for change in resource.changes:
        mark = " # forces replacement" if change.forces_replace else ""
        if resource.action == "create" or (change.before is None and not drift):
            lines.append(f"  + {change.path} = {show_value(change.after)}{mark}")
        elif resource.action == "delete":
            lines.append(f"  - {change.path} = {show_value(change.before)}")
        else:
            lines.append(
                f"  ~ {change.path}: {show_value(change.before)} -> {show_value(change.after)}"
                f"{mark}"
            )
    checks = [c for c in plan.checks if c.get("address") == address]
    for check in checks:
        lines.append(f"Policy: {check.get('check_id')} {check.get('name')}")
    return "\n".join(lines)


def question_text(plan: Plan) -> str:
    """The apply question's body: summary, plan identity, replacements and deletes first,
    failed checks."""
    lines = [summary_line(plan), identity(plan)]
    rows = plan.changed
    for resource in rows[:30]:
        reason = reason_text(resource)
        lines.append(
            f"{SYMBOLS.get(resource.action, '?')} {resource.action} "
            + printable(resource.address)
            + (f" ({printable(reason)})" if reason else "")
        )
    if len(rows) > 30:
        lines.append(f"… and {len(rows) - 30} more")
    if plan.checks:
        lines.append(f"Failed policy checks (checkov): {len(plan.checks)}")
        for check in plan.checks[:20]:
            shown = f"{check.get('address')}: {check.get('check_id')} {check.get('name')}"
            lines.append(f"  ✗ {printable(shown)}")
    return "\n".join(line for line in lines if line)
