"""A tool's output as HTML for the fallback cards (nbconvert, frontends without the
extension): monospace text, and Markdown tables (the plan tool's summary) as tables.

Everything is escaped; only the table structure is markup.
"""

from __future__ import annotations

import html
import re

#: Monospace in every frontend: JupyterLab's code font where its CSS is loaded.
PRE_STYLE = (
    "margin:4px 0;max-height:24em;overflow:auto;font-family:var(--jp-code-font-family,monospace)"
)
_SEPARATOR = re.compile(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
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
    rows) as an HTML table."""
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
            parts.append(_table(lines[i:end]))
            i = end
            continue
        plain.append(line)
        i += 1
    parts.append(_pre(plain))
    return "".join(parts) or _pre([text])
