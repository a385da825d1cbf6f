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
     "output": str | null,        # live output so far while running, then the result;
                                  # head + "…" + tail when long
     "outputTruncated": bool,     # true when "output" was cut ("outputNote" says how)
     "outputNote": str | null,    # e.g. "lines 61–4,919 of 4,939 hidden; the agent saw all of it"
     "outputLines": int,          # lines in the whole output
     "hidden": {"fromLine": int, "toLine": int} | null,   # 1-based, inclusive
     "outputHead": str | null, "outputTail": str | null,  # the two shown parts when cut
     "live": bool,                # output is still streaming (the call runs)
     "elapsed": float | null,     # seconds the call ran (so far, while running)
     "startedAt": float | null,   # epoch seconds the call started (for a ticking clock)
     "fullOutput": str,           # the magic that shows all of it: "%output <callId>"
     "question": null | {"id", "state": "pending|answered|cancelled", "danger": bool,
                         "reason", "options": [str], "answer": str | null,
                         "note": str | null, "labels": {option: label},
                         "kind": str (the request's: "question" for ask_user),
                         "form": null | {"title", "fields": [{"name",
                         "title", "kind": "text|choice|boolean|number", "description",
                         "choices", "required", "default", "mustEqual": str | null}]}},
     "diff": {"path": str, "oldText": str | null, "newText": str} | null,
     "locations": [str],          # files the call touches
     "sessionId": str}

Only the displayed output is cut; the model saw the tool's whole result, and
``%output CALL`` shows all of it.
"""

from __future__ import annotations

import difflib
import html
import json
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.events import Diff
from iac_kernel.kernel import theme
from iac_kernel.kernel.html_output import PRE_STYLE, output_html
from iac_kernel.kernel.paths import shown
from iac_kernel.redact import redact

CARD_MIME = "application/vnd.iac-kernel.toolcall+json"
CARD_VERSION = 1
STATUSES = ("running", "awaiting_permission", "done", "failed", "denied", "cancelled")
KINDS = ("read", "edit", "search", "execute", "fetch", "other")

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

STATUS_LABELS = {
    "running": "running",
    # Timeless: true live, and still true in a file saved mid-question that nothing reopened.
    "awaiting_permission": "asked for permission",
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
    "running": theme.BLUE,
    "awaiting_permission": theme.ORANGE,
    "done": theme.GREEN,
    "failed": theme.RED,
    "denied": theme.RED,
    "cancelled": theme.GREY,
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

    def set_output(self, text: str) -> None:
        self.output = text

    def add_live(self, text: str) -> None:
        self.live += text

    def shown_output(self) -> tuple[str | None, bool, str]:
        """The output as displayed, whether it was cut, and the note saying so."""
        clip = self.clip()
        if clip is None:
            return None, False, ""
        return clip.shown, clip.cut, clip.note

    def clip(self) -> Clip | None:
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
            "input": redacted(self.input),
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


def truncate(text: str) -> tuple[str, bool, str]:
    """The shown text of ``text``, whether it was cut, and the note saying so."""
    result = clip(text)
    return result.shown, result.cut, result.note


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
    name = shown(diff.path).lstrip("/")
    before = "/dev/null" if diff.old_text is None else f"a/{name}"
    return list(difflib.unified_diff(old, new, before, f"b/{name}", lineterm=""))


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
    return STATUS_LABELS.get(card.status, card.status)


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
    output, _truncated, note = card.shown_output()
    if output is not None:
        lines.append("output:")
        lines.append(output.rstrip("\n"))
        if note:
            lines.append(f"[{note}; %output {card.call_id} shows all of it]")
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
    color = STATUS_COLORS.get(card.status, theme.GREY)
    icon = STATUS_ICONS.get(card.status, "")
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
    output, _truncated, note = card.shown_output()
    if output is not None:
        live = card.output is None
        opened = (
            " open"
            if live or card.status in ("failed", "denied", "cancelled") or len(output) < 600
            else ""
        )
        summary = "Output so far" if live else "Output"
        parts.append(
            f"<details{opened}><summary>{summary}</summary>"
            + output_html(output)
            + (
                f'<div class="iac-note" style="{theme.MUTED}"><em>{esc(note)}</em> '
                f"(<code>%output {esc(card.call_id)}</code> shows all of it)</div>"
                if note
                else ""
            )
            + "</details>"
        )
    parts.append("</div>")
    return "".join(parts)
