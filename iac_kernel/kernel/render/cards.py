"""Tool-call cards: one display per tool call, updated in place as the call progresses.

Every card is sent as a mime bundle with three forms:

* ``text/plain``: a few lines for consoles, nbval and frontends without HTML;
* ``text/html``: a self-contained card (all content escaped) for every notebook frontend;
* ``application/vnd.iac-kernel.toolcall+json``: the data itself, for the JupyterLab
  renderer extension. Its shape is :data:`CARD_SCHEMA` (``card.schema.json`` beside this
  module, JSON Schema 2020-12): the kernel's tests check every payload it sends against
  it, and the extension's tests check theirs against the same file.

Only the displayed output is cut; the model saw the tool's whole result, and
``%output CALL`` shows all of it.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.kernel.io.paths import shown
from iac_kernel.kernel.render import theme
from iac_kernel.redact import redact, redact_value

CARD_MIME = "application/vnd.iac-kernel.toolcall+json"
#: The payload's contract; its version and tool kinds are read from it.
CARD_SCHEMA = Path(__file__).with_name("card.schema.json")
_SCHEMA = json.loads(CARD_SCHEMA.read_text(encoding="utf-8"))["properties"]
CARD_VERSION: int = _SCHEMA["version"]["const"]
KINDS: tuple[str, ...] = tuple(_SCHEMA["kind"]["enum"])

#: Output shown on a card (the notebook is not the place for a 2 MB log): the first
#: HEAD_LINES lines and the last TAIL_LINES, each part at most *_CHARS characters.
HEAD_LINES = 60
TAIL_LINES = 20
HEAD_CHARS = 3000
TAIL_CHARS = 1500
#: Each string in the shown input (write_file's whole content would drown the card).
INPUT_STRING_CHARS = 400
#: Lines of unified diff shown on a card.
DIFF_LINES = 200

#: Each status as the fallback cards show it: (words, icon, colour).
STATUS_LOOKS = {
    "running": ("running", "⏳", theme.BLUE),
    # Timeless: true live, and still true in a file saved mid-question that nothing reopened.
    "awaiting_permission": ("asked for permission", "✋", theme.ORANGE),
    "done": ("done", "✅", theme.GREEN),
    "failed": ("failed", "❌", theme.RED),
    "denied": ("denied", "⛔", theme.RED),
    "cancelled": ("cancelled", "⏹", theme.GREY),
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
    #: Output printed while running (kept when the call is interrupted).
    live: str = ""
    started_at: float | None = None
    elapsed: float | None = None
    #: The permission question of this call, if one was asked (see the module docstring).
    question: dict[str, Any] | None = None

    def clip(self) -> Clip | None:
        """What the card shows of the output (the result, else what printed so far)."""
        text = self.output if self.output is not None else (self.live or None)
        return None if text is None else clip(text)

    def payload(self) -> dict[str, Any]:
        part = self.clip()
        output, truncated = (part.shown, part.cut) if part else (None, False)
        diff = None
        if self.diff is not None:
            diff = {
                "path": shown(self.diff.path),
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
            "input": redact_value(self.input),
            "output": output,
            "outputTruncated": truncated,
            "outputNote": part.note if part and part.note else None,
            "outputLines": part.lines if part else 0,
            "hidden": (
                {"fromLine": part.hidden[0], "toLine": part.hidden[1]}
                if part and part.hidden
                else None
            ),
            "outputHead": part.head if part and part.cut else None,
            "outputTail": part.tail if part and part.cut else None,
            "live": self.output is None and bool(self.live),
            "elapsed": None if self.elapsed is None else round(self.elapsed, 1),
            "startedAt": self.started_at,
            "fullOutput": f"%output {self.call_id}",
            "question": self.question,
            "diff": diff,
            "locations": [shown(location) for location in self.locations],
            "sessionId": self.session_id,
        }

    def bundle(self) -> dict[str, Any]:
        """The mime bundle for display_data / update_display_data."""
        return {
            "text/plain": render_plain(self),
            "text/html": render_html(self),
            CARD_MIME: self.payload(),
        }


@dataclass
class Clip:
    """What a card shows of an output: all of it, or its head and tail."""

    shown: str
    cut: bool
    note: str
    lines: int
    head: str = ""
    tail: str = ""
    #: 1-based first and last hidden line, when whole lines are hidden.
    hidden: tuple[int, int] | None = None


def clip(text: str) -> Clip:
    """Keep the first :data:`HEAD_LINES` and last :data:`TAIL_LINES` lines (each part cut to
    its character limit); the note says what is hidden, counting lines as an editor does."""
    lines = text.splitlines(keepends=True)
    count = len(lines)
    if count <= HEAD_LINES + TAIL_LINES and len(text) <= HEAD_CHARS + TAIL_CHARS:
        return Clip(text, False, "", count)
    if count > HEAD_LINES + TAIL_LINES:
        head_lines, tail_lines = lines[:HEAD_LINES], lines[count - TAIL_LINES :]
        hidden: tuple[int, int] | None = (HEAD_LINES + 1, count - TAIL_LINES)
    else:  # few but long lines: cut by characters only
        head_lines, tail_lines = [text[:HEAD_CHARS]], [text[-TAIL_CHARS:]]
        hidden = None
    head, tail = "".join(head_lines), "".join(tail_lines)
    shortened = len(head) > HEAD_CHARS or len(tail) > TAIL_CHARS
    head, tail = head[:HEAD_CHARS], tail[-TAIL_CHARS:] if len(tail) > TAIL_CHARS else tail
    hidden_chars = len(text) - len(head) - len(tail)
    if hidden is not None:
        what = f"lines {hidden[0]:,}–{hidden[1]:,} of {count:,} hidden"
        if shortened:
            what += f" and long lines shortened ({hidden_chars:,} characters in all)"
    else:
        what = f"{hidden_chars:,} of {len(text):,} characters hidden"
    note = f"{what}; the agent saw all of it"
    marker = f"\n… {what} …\n" if head.endswith("\n") else f"\n\n… {what} …\n"
    return Clip(head + marker + tail, True, note, count, head, tail, hidden)


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
    name = shown(diff.path).lstrip("/")
    before = "/dev/null" if diff.old_text is None else f"a/{name}"
    return list(difflib.unified_diff(old, new, before, f"b/{name}", lineterm=""))


#: Monospace in every frontend: JupyterLab's code font where its CSS is loaded.
PRE_STYLE = (
    "margin:4px 0;max-height:24em;overflow:auto;font-family:var(--jp-code-font-family,monospace)"
)
_SEPARATOR = re.compile(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _html_table(lines: list[str]) -> str:
    head, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    # Attributes, not a style per cell: the card is resent on every update.
    parts = ['<table border="1" cellpadding="3" style="border-collapse:collapse;margin:4px 0">']
    parts.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    return "".join(parts)


def _pre(lines: list[str]) -> str:
    text = "\n".join(lines)
    return f'<pre style="{PRE_STYLE}">{html.escape(text)}</pre>' if text.strip() else ""


def output_html(text: str) -> str:
    """``text`` as monospace blocks, with each Markdown table (header, ``|---|`` line,
    rows) as an HTML table (the fallback cards' output; all text escaped)."""
    lines = text.split("\n")
    parts: list[str] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if (
            line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and _SEPARATOR.match(lines[i + 1].strip())
        ):
            end = i + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            parts.append(_pre(plain))
            plain = []
            parts.append(_html_table(lines[i:end]))
            i = end
            continue
        plain.append(line)
        i += 1
    parts.append(_pre(plain))
    return "".join(parts) or _pre([text])


def _input_json(card: ToolCard) -> str:
    return json.dumps(shown_input(card.input), indent=2, ensure_ascii=False, default=str)


def _elapsed(card: ToolCard) -> str:
    return "" if card.elapsed is None else f"{card.elapsed:.1f} s"


def danger_pending(card: ToolCard) -> bool:
    """A per-call (destructive) question of this card waits for an answer."""
    question = card.question or {}
    return bool(question.get("danger")) and question.get("state") == "pending"


def status_label(card: ToolCard) -> str:
    """The status in words: a call the user rejected when asked says "rejected", one a
    rule or the mode refused "denied"."""
    question = card.question or {}
    if card.status == "denied" and str(question.get("answer") or "").startswith("reject"):
        return "rejected"
    return STATUS_LOOKS.get(card.status, (card.status,))[0]


def render_plain(card: ToolCard) -> str:
    took = f", {_elapsed(card)}" if card.elapsed is not None else ""
    label = status_label(card)
    if danger_pending(card):
        label = "DESTRUCTIVE, asked for permission"
    lines = [f"[{label}] {card.title} ({card.kind}{took})"]
    if card.input:
        lines.append("input: " + json.dumps(shown_input(card.input), ensure_ascii=False))
    if card.diff is not None:
        diff_lines = unified_diff(card.diff)
        lines.extend(diff_lines[:DIFF_LINES])
        if len(diff_lines) > DIFF_LINES:
            lines.append(f"… diff truncated ({len(diff_lines) - DIFF_LINES} more lines)")
    part = card.clip()
    if part is not None:
        lines.append("output:")
        lines.append(part.shown.rstrip("\n"))
        if part.note:
            lines.append(f"[{part.note}; %output {card.call_id} shows all of it]")
    return "\n".join(lines)


def _diff_html(diff: Diff) -> str:
    rows = []
    diff_lines = unified_diff(diff)
    for line in diff_lines[:DIFF_LINES]:
        color = ""
        if line.startswith("+") and not line.startswith("+++"):
            color = f"background:{theme.GREEN_TINT}"
        elif line.startswith("-") and not line.startswith("---"):
            color = f"background:{theme.RED_TINT}"
        elif line.startswith("@@"):
            color = theme.MUTED
        rows.append(f'<span style="{color}">{html.escape(line)}</span>')
    if len(diff_lines) > DIFF_LINES:
        rows.append(f"<em>… diff truncated ({len(diff_lines) - DIFF_LINES} more lines)</em>")
    if not diff_lines:
        rows.append("<em>(no change)</em>")
    return (
        '<pre class="iac-diff" style="margin:4px 0;padding:4px;overflow-x:auto;'
        'font-family:var(--jp-code-font-family,monospace)">' + "\n".join(rows) + "</pre>"
    )


def render_html(card: ToolCard) -> str:
    _words, icon, color = STATUS_LOOKS.get(card.status, ("", "", theme.GREY))
    label = status_label(card)
    esc = html.escape
    danger = danger_pending(card)
    if danger:  # a destructive call waits: the card says so in red, not routine orange
        color, icon, label = theme.RED, "⚠️", "destructive: asked to approve this one call"
    parts = [
        f'<div class="iac-toolcall{" iac-danger" if danger else ""}" '
        f'data-status="{esc(card.status)}" '
        f'data-call-id="{esc(card.call_id)}" '
        f'style="border:1px solid {theme.BORDER};border-left:4px solid {color};border-radius:6px;'
        f'padding:6px 10px;margin:4px 0;font-size:0.9em">',
        '<div style="display:flex;gap:8px;align-items:baseline">'
        f'<span class="iac-status" style="color:{color};font-weight:600">{icon} {esc(label)}'
        "</span>"
        f"<code>{esc(card.title)}</code>"
        f'<span style="{theme.MUTED}">{esc(card.kind)}</span>'
        + (
            f'<span class="iac-elapsed" style="{theme.MUTED}">{esc(_elapsed(card))}</span>'
            if card.elapsed is not None
            else ""
        )
        + "</div>",
    ]
    if card.locations:
        where = ", ".join(esc(shown(loc)) for loc in card.locations[:5])
        more = f" and {len(card.locations) - 5} more" if len(card.locations) > 5 else ""
        parts.append(f'<div style="{theme.MUTED}">{where}{more}</div>')
    if card.input:
        parts.append(
            "<details><summary>Input</summary>"
            f'<pre style="{PRE_STYLE}">{esc(_input_json(card))}</pre></details>'
        )
    if card.diff is not None:
        # A rejected or cancelled change is collapsed: it did not happen.
        diff_open = "" if card.status in ("denied", "cancelled") else " open"
        parts.append(
            f"<details{diff_open}><summary>Diff of {esc(shown(card.diff.path))}</summary>"
            f"{_diff_html(card.diff)}</details>"
        )
    part = card.clip()
    if part is not None:
        live = card.output is None
        opened = (
            " open"
            if live or card.status in ("failed", "denied", "cancelled") or len(part.shown) < 600
            else ""
        )
        summary = "Output so far" if live else "Output"
        parts.append(
            f"<details{opened}><summary>{summary}</summary>"
            + output_html(part.shown)
            + (
                f'<div class="iac-note" style="{theme.MUTED}"><em>{esc(part.note)}</em> '
                f"(<code>%output {esc(card.call_id)}</code> shows all of it)</div>"
                if part.note
                else ""
            )
            + "</details>"
        )
    parts.append("</div>")
    return "".join(parts)
