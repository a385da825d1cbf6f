"""A cell's text read as the kernel reads it: magic lines, the prompt, or runbook parameters.

Magic lines: a line whose first non-blank characters are ``%`` and a letter, except inside
a fenced code block (a pasted snippet stays prompt text). ``%%`` at the start of a line
escapes a literal ``%`` (the line goes to the prompt with one ``%`` removed).

Runbook parameters: a cell of ``- name = value`` lines under a "Runbook parameters"
heading is read as parameters, never sent to the model as a prompt. That is the shape of
a runbook's cell tagged ``parameters`` and of the cell papermill injects
(``injected-parameters``; see :mod:`iac_kernel.papermill`)::

    Runbook parameters (injected by papermill):
    - environment = "staging"

Values are JSON. The kernel keeps them for the session (later cells override earlier
ones, so papermill's values win over the defaults) and sends them with the next prompt,
under the same heading, so the agent (and a scripted model's ``vars``) reads them there.
nbclient sends no cell tags to the kernel, so the cell is recognised by its text: the
heading line and nothing but parameter lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from iac_kernel.kernel.render.display import FENCE

MAGIC_LINE = re.compile(r"^\s*%([A-Za-z][\w-]*)(?:\s+(.*))?$")
HEADING = re.compile(r"^\s*Runbook parameters\b[^\n:]*:\s*$", re.IGNORECASE)
#: ``- name = value`` (the same shape papermill's translator writes).
PARAMETER = re.compile(r"^\s*[-*]\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>.+?)\s*$")


@dataclass
class MagicCall:
    name: str
    args: str
    line: int


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


def parameters_of(text: str) -> dict[str, Any] | None:
    """The parameters of a parameters cell, or ``None`` when ``text`` is not one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not HEADING.match(lines[0]):
        return None
    values: dict[str, Any] = {}
    for line in lines[1:]:
        match = PARAMETER.match(line)
        if match is None:
            return None
        try:
            values[match.group("name")] = json.loads(match.group("value"))
        except ValueError:
            return None
    return values


def parameters_block(values: dict[str, Any]) -> str:
    """The parameters as the agent reads them after a prompt."""
    lines = ["Runbook parameters:"]
    lines += [
        f"- {name} = {json.dumps(value, ensure_ascii=False)}" for name, value in values.items()
    ]
    return "\n".join(lines)


def parameters_markdown(values: dict[str, Any]) -> str:
    """What the parameters cell shows."""
    shown = ", ".join(
        f"`{name}` = `{json.dumps(value, ensure_ascii=False)}`" for name, value in values.items()
    )
    return (
        f"📋 **Runbook parameters**: {shown}. They go to the agent with the next prompt "
        "(no model call for this cell)."
    )
