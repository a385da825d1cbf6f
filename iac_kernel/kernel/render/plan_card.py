"""Plan cards: a Terraform / OpenTofu plan (or drift check) shown as a reviewable card.

A tool result whose ``raw_output`` carries ``"plan"`` (``Plan.to_dict()`` of
:mod:`iac_kernel.terraform.plan`: ``terraform_plan``, a bash ``plan -out``) gets a card
under its tool card, with every row (the result's ``plan_rows``), and so does an apply's
question (its review's plan and rows), as a mime bundle with three forms:

* ``application/vnd.iac-kernel.plan+json``: ``{"version": 1, "callId", "sessionId",
  "plan": {...}, "rows": {...}}`` for the JupyterLab renderer (labextension/src/plan/plan.ts);
  ``rows`` (optional) is every changing row in compact form (``summary.card_rows(plan)``);
* ``text/html``: the summary line, the plan file's identity (path, short hash, time),
  the counts, then the rows in review order (replacements and deletes first,
  highlighted) up to :data:`MAX_ROWS` with a note of the rest, each row's attribute
  diff in a ``<details>``, output changes, drift, failed policy checks;
* ``text/plain``: the same as lines.

Values arrive masked (``(sensitive)``); everything is escaped.
"""

from __future__ import annotations

import html
import json
from typing import Any

from iac_kernel.kernel.render import theme
from iac_kernel.terraform.plan import action_rank, review_key
from iac_kernel.terraform.summary import SYMBOLS, expand_rows

PLAN_MIME = "application/vnd.iac-kernel.plan+json"
PLAN_VERSION = 1
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
#: Rows of the text form, and of the HTML form (which JupyterLab's table of contents
#: parses again on every change of the cell's outputs: it must stay small).
MAX_ROWS = 200
HTML_ROWS = 100
#: Rows per page of the HTML table (each page a ``<details>``; the first one open).
PAGE_ROWS = 50
VALUE_CHARS = 200


def plan_of(raw_output: Any) -> dict[str, Any] | None:
    """The structured plan a tool result carries, if any."""
    if isinstance(raw_output, dict) and isinstance(raw_output.get("plan"), dict):
        return raw_output["plan"]
    return None


def bundle(
    plan: dict[str, Any],
    call_id: str = "",
    session_id: str = "",
    rows: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The mime bundle of one plan card; ``rows``: every changing row in compact form
    (``summary.card_rows(plan)``), which the extension renders as a virtualised list."""
    data = {"version": PLAN_VERSION, "callId": call_id, "sessionId": session_id, "plan": plan}
    if rows:  # they stand for the plan's bounded resource list, and the message stays small
        data.update(plan={**plan, "resources": []}, rows=rows)
    return {
        "text/plain": render_plain(plan, rows),
        "text/html": render_html(plan, rows),
        PLAN_MIME: data,
    }


def title(plan: dict[str, Any]) -> str:
    return str(plan.get("summary") or "Plan")


def identity(plan: dict[str, Any]) -> str:
    file = plan.get("file") or {}
    if not file:
        return ""
    return f"{file.get('path')} · sha256 {file.get('short_hash')} · {file.get('time')}"


def review_list(plan: dict[str, Any], rows: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every changing row as ``{"action", "address", "why", "diff"}`` in review order
    (replacements and deletes first, then updates, then creates; by module and type,
    addresses in natural order): from the compact ``rows`` (the whole plan) when given,
    else the plan's own."""
    if rows:
        return expand_rows(rows)
    moving = [r for r in plan.get("resources") or [] if r.get("action") != "no-op"]
    return [_row(r, str(r.get("action", ""))) for r in sorted(moving, key=_key)]


def _row(resource: dict[str, Any], action: str) -> dict[str, Any]:
    why, diff = str(resource.get("why") or ""), _diff_of(resource)
    return {"action": action, "address": resource.get("address", ""), "why": why, "diff": diff}


def _key(resource: dict[str, Any]) -> tuple[Any, ...]:
    action = str(resource.get("action", ""))
    address, type_ = str(resource.get("address", "")), str(resource.get("type", ""))
    mode = str(resource.get("mode", "managed"))
    return action_rank(action), action, review_key(action, address, type_, mode)


def _diff_of(resource: dict[str, Any]) -> list[str]:
    return [change_line(resource, c) for c in resource.get("changes") or []]


def counts_text(plan: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """``2 replace · 3 delete · 1 update · 4 create`` (review order)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["action"]] = counts.get(row["action"], 0) + 1
    if plan.get("truncated") and plan.get("counts"):  # a bounded plan: its own counts
        counts = {k: v for k, v in plan["counts"].items() if k != "no-op" and v}
    keys = sorted(counts, key=lambda a: (action_rank(a), a))
    return " · ".join(f"{counts[a]} {a}" for a in keys)


def cut_note(plan: dict[str, Any], rows: list[dict[str, Any]], shown: int) -> str:
    """What the fallback leaves out, honestly, and how to see all ("" if nothing)."""
    left = rows[shown:]
    if not left:
        return ""
    destroying = sum(1 for r in left if r["action"] in DANGER)
    file = (plan.get("file") or {}).get("path") or "PLANFILE"
    program = plan.get("program") or "terraform"
    return (
        f"{len(left)} more row{'s' if len(left) != 1 else ''} not shown here"
        + (f" ({destroying} of them replacements or deletes)" if destroying else "")
        + f"; `{program} show {file}` lists every change."
    )


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
        f"Showing {shown} of {total} changing resources (replacements and deletes first); "
        "ask terraform_plan_detail for any other address."
    )


def render_plain(plan: dict[str, Any], rows: dict[str, Any] | None = None) -> str:
    """The card as lines: counts, then the rows in review order (replacements and deletes
    first) up to :data:`MAX_ROWS`, with an honest note of the rest."""
    lines = [title(plan)]
    if identity(plan):
        lines.append(f"plan file: {identity(plan)}")
    listed = review_list(plan, rows)
    if listed:
        lines.append(f"changes: {counts_text(plan, listed)}")
    if more_note(plan) and not rows:
        lines.append(more_note(plan))
    for error in plan.get("errors") or []:
        lines.append(f"error: {error}")
    for row in listed[:MAX_ROWS]:
        action = row["action"]
        lines.append(
            f"  {SYMBOLS.get(action, '?'):>3} {action:<7} {row['address']}"
            + (f"  ({row['why']})" if row["why"] else "")
        )
    if cut_note(plan, listed, MAX_ROWS):
        lines.append(cut_note(plan, listed, MAX_ROWS))
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


def _row_html(action: str, row: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    """One table row: ``row`` is a :func:`review_list` item."""
    esc = html.escape
    bg, fg = COLORS.get(action, COLORS["forget"])
    why = row["why"]
    diff = None if row.get("diff") is None else "\n".join(row["diff"])
    failed = [c for c in checks if c.get("address") == row["address"]]
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
        + (
            f'<td style="text-align:left"><code>{esc(row["address"])}</code>{flags}</td>'
            if diff is None  # a whole plan's card: the diffs are the extension's
            else f'<td style="text-align:left"><details><summary><code>{esc(row["address"])}'
            f"</code>{flags}</summary>"
            f'<pre style="margin:2px 0;font-family:monospace">'
            f"{esc(diff or '(no attribute changes)')}</pre></details></td>"
        )
        +  # Left-aligned: JupyterLab's HTML styles right-align table cells.
        f'<td style="{theme.MUTED};text-align:left">{esc(why)}</td></tr>'
    )


def render_html(plan: dict[str, Any], rows: dict[str, Any] | None = None) -> str:
    """The card as HTML (see :func:`render_plain` for what it lists)."""
    esc = html.escape
    errored = bool(plan.get("errored"))
    listed = review_list(plan, rows)
    danger = any(row["action"] in DANGER for row in listed)
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
    if listed:
        parts.append(f'<div class="iac-plan-counts">{esc(counts_text(plan, listed))}</div>')
    counts = plan.get("groups") or []
    if len(counts) > 1 or plan.get("truncated"):
        cells = "".join(
            f"<tr><td style='text-align:right'>{int(g['count'])}</td><td>{esc(g['action'])}</td>"
            f"<td><code>{esc(g['type'])}</code></td></tr>"
            for g in counts
        )
        parts.append(f'<table class="iac-plan-groups" style="margin:4px 0">{cells}</table>')
    if more_note(plan) and not rows:
        parts.append(
            f'<div class="iac-plan-more" style="{theme.MUTED}">{esc(more_note(plan))}</div>'
        )
    shown = listed[:HTML_ROWS]
    if rows and len(listed) > HTML_ROWS:  # a big plan's rows without their diffs: JupyterLab
        shown = [{**row, "diff": None} for row in shown]  # re-parses this HTML on every change
    for start in range(0, len(shown), PAGE_ROWS):
        page = shown[start : start + PAGE_ROWS]
        if len(shown) > PAGE_ROWS:
            opened = " open" if start == 0 else ""
            parts.append(
                f'<details class="iac-plan-page"{opened}><summary>rows {start + 1}–'
                f"{start + len(page)} of {len(listed)}</summary>"
            )
        parts.append('<table class="iac-plan-table" style="border-collapse:collapse;width:100%">')
        parts += [_row_html(row["action"], row, checks) for row in page]
        parts.append("</table>")
        if len(shown) > PAGE_ROWS:
            parts.append("</details>")
    if cut_note(plan, listed, HTML_ROWS):
        note = esc(cut_note(plan, listed, HTML_ROWS))
        parts.append(f'<div class="iac-plan-cut" style="{theme.MUTED}">{note}</div>')
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
        parts += [_row_html("update", _row(r, "update"), []) for r in drift[:MAX_ROWS]]
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
