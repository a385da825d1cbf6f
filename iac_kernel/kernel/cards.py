"""Tool-call cards: one display per tool call, updated in place as the call progresses.

Every card is sent as a mime bundle with three forms:

* ``text/plain``: a few lines for consoles, nbval and frontends without HTML;
* ``text/html``: a self-contained card (all content escaped) for every notebook frontend;
* ``application/vnd.iac-kernel.toolcall+json``: the data itself, for the JupyterLab
  renderer extension. Its shape is fixed (the extension depends on it)::

    {"version": 1,
     "callId": str,
     "name": str,                 # tool name, e.g. "write_file"
     "title": str,                # e.g. "write_file: main.tf"
     "kind": "read|edit|search|execute|fetch|other",
     "status": "running|awaiting_permission|done|failed|denied|cancelled",
     "input": object,             # the call's input as the model sent it (secrets redacted)
     "output": str | null,        # null until the call ends; truncated for display
     "outputTruncated": bool,     # true when "output" was cut (a note says by how much)
     "diff": {"path": str, "oldText": str | null, "newText": str} | null,
     "locations": [str],          # files the call touches
     "sessionId": str}

Only the displayed output is truncated; the model saw the tool's whole result.
"""

from __future__ import annotations

import difflib
import html
import json
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.agent.events import Diff
from iac_kernel.redact import redact

CARD_MIME = "application/vnd.iac-kernel.toolcall+json"
CARD_VERSION = 1
STATUSES = ("running", "awaiting_permission", "done", "failed", "denied", "cancelled")
KINDS = ("read", "edit", "search", "execute", "fetch", "other")

#: Output shown on a card (the notebook is not the place for a 2 MB log).
OUTPUT_CHARS = 4000
OUTPUT_LINES = 80
#: Each string in the shown input (write_file's whole content would drown the card).
INPUT_STRING_CHARS = 400
#: Lines of unified diff shown on a card.
DIFF_LINES = 200

STATUS_LABELS = {
    "running": "running",
    "awaiting_permission": "awaiting permission",
    "done": "done",
    "failed": "failed",
    "denied": "denied",
    "cancelled": "cancelled",
}
STATUS_ICONS = {
    "running": "⏳",
    "awaiting_permission": "✋",
    "done": "✅",
    "failed": "❌",
    "denied": "⛔",
    "cancelled": "⏹",
}
STATUS_COLORS = {
    "running": "#1f6feb",
    "awaiting_permission": "#bf8700",
    "done": "#1a7f37",
    "failed": "#cf222e",
    "denied": "#cf222e",
    "cancelled": "#6e7781",
}


@dataclass
class ToolCard:
    """The state of one tool call as the notebook shows it."""

    call_id: str
    name: str
    title: str
    kind: str
    session_id: str
    status: str = "running"
    input: dict[str, Any] = field(default_factory=dict)
    output: str | None = None
    diff: Diff | None = None
    locations: list[str] = field(default_factory=list)

    def set_output(self, text: str) -> None:
        self.output = text

    def shown_output(self) -> tuple[str | None, bool, str]:
        """The output as displayed, whether it was cut, and the note saying so."""
        if self.output is None:
            return None, False, ""
        return truncate(self.output)

    def payload(self) -> dict[str, Any]:
        output, truncated, _note = self.shown_output()
        diff = None
        if self.diff is not None:
            diff = {
                "path": self.diff.path,
                "oldText": self.diff.old_text,
                "newText": self.diff.new_text,
            }
        return {
            "version": CARD_VERSION,
            "callId": self.call_id,
            "name": self.name,
            "title": self.title,
            "kind": self.kind if self.kind in KINDS else "other",
            "status": self.status,
            "input": redacted(self.input),
            "output": output,
            "outputTruncated": truncated,
            "diff": diff,
            "locations": list(self.locations),
            "sessionId": self.session_id,
        }

    def bundle(self) -> dict[str, Any]:
        """The mime bundle for display_data / update_display_data."""
        return {
            "text/plain": render_plain(self),
            "text/html": render_html(self),
            CARD_MIME: self.payload(),
        }


def truncate(text: str) -> tuple[str, bool, str]:
    """Cut ``text`` to :data:`OUTPUT_LINES` lines and :data:`OUTPUT_CHARS` characters."""
    lines = text.splitlines(keepends=True)
    cut = "".join(lines[:OUTPUT_LINES])
    if len(cut) > OUTPUT_CHARS:
        cut = cut[:OUTPUT_CHARS]
    if cut == text:
        return text, False, ""
    note = (
        f"Output truncated: showing {len(cut):,} of {len(text):,} characters "
        f"({min(len(lines), OUTPUT_LINES)} of {len(lines)} lines); the agent saw all of it."
    )
    return cut, True, note


def redacted(value: Any) -> Any:
    """``value`` with secret environment values replaced (strings at any depth)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def shown_input(value: Any) -> Any:
    """The input for display: long strings cut, secret values redacted."""
    if isinstance(value, str):
        value = redact(value)
        if len(value) > INPUT_STRING_CHARS:
            more = len(value) - INPUT_STRING_CHARS
            return value[:INPUT_STRING_CHARS] + f"… ({more:,} more characters)"
        return value
    if isinstance(value, dict):
        return {k: shown_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_input(v) for v in value]
    return value


def unified_diff(diff: Diff) -> list[str]:
    """The change as unified diff lines (no trailing newlines)."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    name = diff.path.lstrip("/")
    before = "/dev/null" if diff.old_text is None else f"a/{name}"
    return list(difflib.unified_diff(old, new, before, f"b/{name}", lineterm=""))


def _input_json(card: ToolCard) -> str:
    return json.dumps(shown_input(card.input), indent=2, ensure_ascii=False, default=str)


def render_plain(card: ToolCard) -> str:
    lines = [f"[{STATUS_LABELS.get(card.status, card.status)}] {card.title} ({card.kind})"]
    if card.input:
        lines.append("input: " + json.dumps(shown_input(card.input), ensure_ascii=False))
    if card.diff is not None:
        diff_lines = unified_diff(card.diff)
        lines.extend(diff_lines[:DIFF_LINES])
        if len(diff_lines) > DIFF_LINES:
            lines.append(f"… diff truncated ({len(diff_lines) - DIFF_LINES} more lines)")
    output, _truncated, note = card.shown_output()
    if output is not None:
        lines.append("output:")
        lines.append(output.rstrip("\n"))
        if note:
            lines.append(f"[{note}]")
    return "\n".join(lines)


def _diff_html(diff: Diff) -> str:
    rows = []
    diff_lines = unified_diff(diff)
    for line in diff_lines[:DIFF_LINES]:
        color = ""
        if line.startswith("+") and not line.startswith("+++"):
            color = "background:#e6ffec;color:#116329"
        elif line.startswith("-") and not line.startswith("---"):
            color = "background:#ffebe9;color:#82071e"
        elif line.startswith("@@"):
            color = "color:#6e7781"
        rows.append(f'<span style="{color}">{html.escape(line)}</span>')
    if len(diff_lines) > DIFF_LINES:
        rows.append(f"<em>… diff truncated ({len(diff_lines) - DIFF_LINES} more lines)</em>")
    if not diff_lines:
        rows.append("<em>(no change)</em>")
    return (
        '<pre class="iac-diff" style="margin:4px 0;padding:4px;overflow-x:auto">'
        + "\n".join(rows)
        + "</pre>"
    )


def render_html(card: ToolCard) -> str:
    color = STATUS_COLORS.get(card.status, "#6e7781")
    icon = STATUS_ICONS.get(card.status, "")
    label = STATUS_LABELS.get(card.status, card.status)
    esc = html.escape
    parts = [
        f'<div class="iac-toolcall" data-status="{esc(card.status)}" '
        f'data-call-id="{esc(card.call_id)}" '
        f'style="border:1px solid #d0d7de;border-left:4px solid {color};border-radius:6px;'
        f'padding:6px 10px;margin:4px 0;font-size:0.9em">',
        '<div style="display:flex;gap:8px;align-items:baseline">'
        f'<span class="iac-status" style="color:{color};font-weight:600">{icon} {esc(label)}'
        "</span>"
        f"<code>{esc(card.title)}</code>"
        f'<span style="color:#6e7781">{esc(card.kind)}</span></div>',
    ]
    if card.locations:
        shown = ", ".join(esc(loc) for loc in card.locations[:5])
        more = f" and {len(card.locations) - 5} more" if len(card.locations) > 5 else ""
        parts.append(f'<div style="color:#6e7781">{shown}{more}</div>')
    if card.input:
        parts.append(
            "<details><summary>Input</summary>"
            f'<pre style="margin:4px 0">{esc(_input_json(card))}</pre></details>'
        )
    if card.diff is not None:
        parts.append(
            f"<details open><summary>Diff of {esc(card.diff.path)}</summary>"
            f"{_diff_html(card.diff)}</details>"
        )
    output, _truncated, note = card.shown_output()
    if output is not None:
        opened = " open" if card.status in ("failed", "denied") or len(output) < 600 else ""
        parts.append(
            f"<details{opened}><summary>Output</summary>"
            f'<pre style="margin:4px 0;max-height:24em;overflow:auto">{esc(output)}</pre>'
            + (
                f'<div class="iac-note" style="color:#6e7781"><em>{esc(note)}</em></div>'
                if note
                else ""
            )
            + "</details>"
        )
    parts.append("</div>")
    return "".join(parts)
