"""Plan cards: a Terraform / OpenTofu plan (or drift check) shown as a reviewable card.

A tool result whose ``raw_output`` carries ``"plan"`` (``Plan.to_dict()`` of
:mod:`iac_kernel.terraform.plan`: ``terraform_plan``, a bash ``plan -out``) gets a card
under its tool card, as a mime bundle with three forms:

* ``application/vnd.iac-kernel.plan+json``: ``{"version": 1, "callId", "sessionId",
  "plan": {...}}`` for the JupyterLab renderer (labextension/src/plan.ts);
* ``text/html``: the summary line, the plan file's identity (path, short hash, time),
  a table grouped by action with deletes and replaces first and highlighted, each row's
  attribute diff in a ``<details>``, output changes, drift, failed policy checks;
* ``text/plain``: the same as lines.

Values arrive masked (``(sensitive)``); everything is escaped.
"""

from __future__ import annotations

import html
import json
from typing import Any

from iac_kernel.kernel import theme
from iac_kernel.terraform.summary import SYMBOLS

PLAN_MIME = "application/vnd.iac-kernel.plan+json"
PLAN_VERSION = 1
ORDER = ("delete", "replace", "create", "update", "read", "forget")
#: Each action's row tint and the colour of its action word (see :mod:`.theme`: the rest
#: of the row keeps the page's text colour, readable in light and dark themes).
COLORS = {
    "delete": (theme.RED_TINT, theme.RED),
    "replace": (theme.ORANGE_TINT, theme.ORANGE),
    "create": (theme.GREEN_TINT, theme.GREEN),
    "update": (theme.YELLOW_TINT, theme.ORANGE),
    "read": (theme.BLUE_TINT, theme.BLUE),
    "forget": (theme.GREY_TINT, theme.GREY),
}
DANGER = ("delete", "replace")
MAX_ROWS = 200
#: Rows per page of the HTML table (each page a ``<details>``; the first one open).
PAGE_ROWS = 50
VALUE_CHARS = 200


def plan_of(raw_output: Any) -> dict[str, Any] | None:
    """The structured plan a tool result carries, if any."""
    if isinstance(raw_output, dict) and isinstance(raw_output.get("plan"), dict):
        return raw_output["plan"]
    return None


def bundle(plan: dict[str, Any], call_id: str = "", session_id: str = "") -> dict[str, Any]:
    """The mime bundle of one plan card."""
    return {
        "text/plain": render_plain(plan),
        "text/html": render_html(plan),
        PLAN_MIME: {
            "version": PLAN_VERSION,
            "callId": call_id,
            "sessionId": session_id,
            "plan": plan,
        },
    }


def title(plan: dict[str, Any]) -> str:
    return str(plan.get("summary") or "Plan")


def identity(plan: dict[str, Any]) -> str:
    file = plan.get("file") or {}
    if not file:
        return ""
    return f"{file.get('path')} · sha256 {file.get('short_hash')} · {file.get('time')}"


def grouped(plan: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Changing resources by action, deletes and replaces first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for resource in plan.get("resources") or []:
        action = resource.get("action", "")
        if action != "no-op":
            groups.setdefault(action, []).append(resource)
    keys = [a for a in ORDER if a in groups] + sorted(a for a in groups if a not in ORDER)
    return [(a, sorted(groups[a], key=lambda r: r.get("address", ""))) for a in keys]


def _value(value: Any) -> str:
    if value in ("(sensitive)", "(known after apply)"):
        return str(value)
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def change_line(resource: dict[str, Any], change: dict[str, Any]) -> str:
    mark = "  # forces replacement" if change.get("forces_replace") else ""
    if resource.get("action") == "create" or change.get("before") is None:
        return f"+ {change['path']} = {_value(change.get('after'))}{mark}"
    if resource.get("action") == "delete":
        return f"- {change['path']} = {_value(change.get('before'))}"
    return (
        f"~ {change['path']}: {_value(change.get('before'))} -> {_value(change.get('after'))}{mark}"
    )


def more_note(plan: dict[str, Any]) -> str:
    """What a bounded plan (``Plan.to_dict``) leaves out, in words ("" if nothing)."""
    total = plan.get("rows_total")
    shown = len([r for r in plan.get("resources") or [] if r.get("action") != "no-op"])
    if not plan.get("truncated") or not isinstance(total, int):
        return ""
    return (
        f"Showing {shown} of {total} changing resources (deletes and replaces first); "
        "ask terraform_plan_detail for any other address."
    )


def render_plain(plan: dict[str, Any]) -> str:
    lines = [title(plan)]
    if identity(plan):
        lines.append(f"plan file: {identity(plan)}")
    groups = plan.get("groups") or []
    if len(groups) > 1 or plan.get("truncated"):
        lines += [f"  {g['count']:>7} {g['action']} {g['type']}" for g in groups]
    if more_note(plan):
        lines.append(more_note(plan))
    for error in plan.get("errors") or []:
        lines.append(f"error: {error}")
    for action, resources in grouped(plan):
        lines.append(f"{action} ({len(resources)}):")
        for resource in resources[:MAX_ROWS]:
            reason = resource.get("why") or resource.get("reason") or ""
            lines.append(
                f"  {SYMBOLS.get(action, '?')} {resource['address']}"
                + (f"  ({reason})" if reason else "")
            )
    outputs = [o for o in plan.get("outputs") or [] if o.get("action") != "no-op"]
    if outputs:
        lines.append("outputs: " + ", ".join(f"{o['name']} ({o['action']})" for o in outputs))
    drift = plan.get("drift") or []
    if drift:
        lines.append(f"drift: {len(drift)} resource(s) changed outside Terraform")
        lines += [f"  ~ {r['address']} ({r.get('action')})" for r in drift[:MAX_ROWS]]
    checks = plan.get("checks") or []
    if checks:
        lines.append(f"policy: {len(checks)} failed check(s)")
        lines += [f"  ✗ {c.get('address')}: {c.get('check_id')} {c.get('name')}" for c in checks]
    elif plan.get("checks_note"):
        lines.append(f"policy: {plan['checks_note']}")
    return "\n".join(lines)


def _row_html(action: str, resource: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    esc = html.escape
    bg, fg = COLORS.get(action, COLORS["forget"])
    why = resource.get("why")
    if why is None:  # a payload from before "why" existed
        replace = resource.get("replace_paths") or []
        why = (resource.get("reason") or "").replace("_", " ")
        why += f" · forces replacement: {', '.join(replace)}" if replace else ""
    diff = "\n".join(change_line(resource, c) for c in resource.get("changes") or [])
    failed = [c for c in checks if c.get("address") == resource.get("address")]
    flags = "".join(
        f' <span class="iac-plan-check" style="color:{theme.RED}">✗ {esc(str(c.get("check_id")))}'
        "</span>"
        for c in failed
    )
    weight = "font-weight:600;" if action in DANGER else ""
    return (
        f'<tr class="iac-plan-row" data-action="{esc(action)}" style="background:{bg}">'
        f'<td style="color:{fg};{weight}white-space:nowrap;text-align:left">'
        f"{esc(SYMBOLS.get(action, '?'))} {esc(action)}</td>"
        f'<td style="text-align:left"><details><summary><code>{esc(resource.get("address", ""))}'
        f"</code>{flags}</summary>"
        f'<pre style="margin:2px 0;font-family:monospace">'
        f"{esc(diff or '(no attribute changes)')}</pre></details></td>"
        # Left-aligned: JupyterLab's HTML styles right-align table cells.
        f'<td style="{theme.MUTED};text-align:left">{esc(why)}</td></tr>'
    )


def render_html(plan: dict[str, Any]) -> str:
    esc = html.escape
    errored = bool(plan.get("errored"))
    danger = any(a in DANGER for a, _ in grouped(plan))
    border = theme.RED if errored or danger else theme.GREEN
    parts = [
        f'<div class="iac-plan" data-errored="{str(errored).lower()}" '
        f'style="border:1px solid {theme.BORDER};border-left:4px solid {border};border-radius:6px;'
        f'padding:6px 10px;margin:4px 0;font-size:0.9em">',
        f'<div class="iac-plan-summary" style="font-weight:600">{esc(title(plan))}</div>',
    ]
    if identity(plan):
        parts.append(
            f'<div class="iac-plan-file" style="{theme.MUTED}">plan file '
            f"<code>{esc(identity(plan))}</code></div>"
        )
    for error in plan.get("errors") or []:
        parts.append(f'<div class="iac-plan-error" style="color:{theme.RED}">{esc(error)}</div>')
    checks = plan.get("checks") or []
    counts = plan.get("groups") or []
    if len(counts) > 1 or plan.get("truncated"):
        cells = "".join(
            f"<tr><td style='text-align:right'>{int(g['count'])}</td><td>{esc(g['action'])}</td>"
            f"<td><code>{esc(g['type'])}</code></td></tr>"
            for g in counts
        )
        parts.append(f'<table class="iac-plan-groups" style="margin:4px 0">{cells}</table>')
    if more_note(plan):
        parts.append(
            f'<div class="iac-plan-more" style="{theme.MUTED}">{esc(more_note(plan))}</div>'
        )
    rows = [(a, r) for a, resources in grouped(plan) for r in resources[:MAX_ROWS]]
    for start in range(0, len(rows), PAGE_ROWS):
        page = rows[start : start + PAGE_ROWS]
        if len(rows) > PAGE_ROWS:
            opened = " open" if start == 0 else ""
            parts.append(
                f'<details class="iac-plan-page"{opened}><summary>rows {start + 1}–'
                f"{start + len(page)} of {len(rows)}</summary>"
            )
        parts.append('<table class="iac-plan-table" style="border-collapse:collapse;width:100%">')
        parts += [_row_html(action, resource, checks) for action, resource in page]
        parts.append("</table>")
        if len(rows) > PAGE_ROWS:
            parts.append("</details>")
    outputs = [o for o in plan.get("outputs") or [] if o.get("action") != "no-op"]
    if outputs:
        rows = "\n".join(
            f"{o['name']}: {_value(o.get('before'))} -> {_value(o.get('after'))}" for o in outputs
        )
        parts.append(
            f"<details><summary>Outputs ({len(outputs)})</summary>"
            f'<pre style="font-family:monospace">{esc(rows)}</pre></details>'
        )
    drift = plan.get("drift") or []
    if drift:
        heading = (
            ""  # a drift check's summary line above already says it
            if title(plan).startswith("Drift:")
            else f"<strong>Drift: {len(drift)} resource{'s' if len(drift) != 1 else ''} "
            "changed outside Terraform</strong>"
        )
        parts.append(
            f'<div class="iac-plan-drift">{heading}'
            '<table style="border-collapse:collapse;width:100%">'
        )
        parts += [_row_html("update", r, []) for r in drift[:MAX_ROWS]]
        parts.append("</table></div>")
    if checks:
        items = "".join(
            f"<li><code>{esc(str(c.get('address')))}</code>: {esc(str(c.get('check_id')))} "
            f"{esc(str(c.get('name')))}</li>"
            for c in checks
        )
        parts.append(
            f'<div class="iac-plan-checks" style="color:{theme.RED}">Policy (checkov): '
            f"{len(checks)} failed check(s)<ul>{items}</ul></div>"
        )
    elif plan.get("checks_note"):
        parts.append(f'<div style="{theme.MUTED}">Policy: {esc(plan["checks_note"])}</div>')
    parts.append("</div>")
    return "".join(parts)
