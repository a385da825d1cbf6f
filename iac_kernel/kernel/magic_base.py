"""The parts of the cell magics that need no session: parsing a cell into magic lines and
a prompt, the magic's output and error types, and Markdown tables and history text.

See :mod:`iac_kernel.kernel.magics` for the magics themselves.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.events import TextDelta, ToolCallInput, UserMessage

MAGIC_LINE = re.compile(r"^\s*%([A-Za-z][\w-]*)(?:\s+(.*))?$")
FENCE = re.compile(r"^\s*(```|~~~)")
#: Turns of a loaded session shown by %load.
HISTORY_TURNS = 5


class MagicError(Exception):
    """A magic failed; ``ename`` is a short class of error, the message says what to do."""

    def __init__(self, message: str, ename: str = "UsageError"):
        super().__init__(message)
        self.ename = ename


@dataclass
class MagicCall:
    name: str
    args: str
    line: int


@dataclass
class MagicOutput:
    markdown: str
    plain: str
    #: More displays to show after the text: (bundle, display id), e.g. pending buttons.
    displays: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: The cell's value (sent as ``execute_result``), not a display: ``%config KEY``.
    value: bool = False


def split_cell(code: str) -> tuple[list[MagicCall], str]:
    """The cell's magic lines and its prompt (every other line, in order)."""
    magics: list[MagicCall] = []
    prompt: list[str] = []
    fence: str | None = None
    for number, line in enumerate(code.splitlines(), 1):
        fenced = FENCE.match(line)
        if fence is not None:
            if fenced and fenced.group(1) == fence:
                fence = None
            prompt.append(line)
            continue
        if fenced:
            fence = fenced.group(1)
            prompt.append(line)
            continue
        stripped = line.lstrip()
        if stripped.startswith("%%"):
            prompt.append(line.replace("%%", "%", 1))
            continue
        match = MAGIC_LINE.match(line)
        if match:
            magics.append(MagicCall(match.group(1), (match.group(2) or "").strip(), number))
        else:
            prompt.append(line)
    return magics, "\n".join(prompt).strip()


def _table(rows: list[tuple[str, str]]) -> str:
    lines = ["| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return html.escape(str(text)).replace("|", "\\|").replace("\n", " ")


def _plain_table(rows: list[tuple[str, str]]) -> str:
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _history(session: AgentSession) -> str:
    """The last few turns of a loaded session, collapsed."""
    turns: list[list[str]] = []
    for event in session.replay():
        if isinstance(event, UserMessage):
            turns.append([f"**You:** {_quote(event.text)}", ""])
        elif isinstance(event, TextDelta) and turns:
            turns[-1][1] += event.text
        elif isinstance(event, ToolCallInput) and turns:
            turns[-1].append(f"🔧 `{event.title}`")
    if not turns:
        return ""
    shown = turns[-HISTORY_TURNS:]
    body = []
    for prompt, answer, *tools in shown:
        body.append(prompt)
        body.extend(f"- {t}" for t in tools)
        if answer.strip():
            body.append(f"**Agent:** {_quote(answer)}")
        body.append("")
    summary = f"History: last {len(shown)} of {len(turns)} turn(s)"
    return f"<details><summary>{summary}</summary>\n\n" + "\n".join(body) + "\n</details>"


def _quote(text: str, limit: int = 400) -> str:
    text = text.strip()
    return html.escape(text if len(text) <= limit else text[: limit - 1] + "…")
