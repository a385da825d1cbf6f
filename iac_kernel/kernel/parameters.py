"""Runbook parameters: a cell of ``- name = value`` lines under a "Runbook parameters"
heading is read as parameters, never sent to the model as a prompt.

That is the shape of a runbook's cell tagged ``parameters`` and of the cell papermill
injects (``injected-parameters``; see :mod:`iac_kernel.papermill`)::

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
from typing import Any

HEADING = re.compile(r"^\s*Runbook parameters\b[^\n:]*:\s*$", re.IGNORECASE)
#: ``- name = value`` (the same shape papermill's translator writes).
LINE = re.compile(r"^\s*[-*]\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>.+?)\s*$")


def parse(text: str) -> dict[str, Any] | None:
    """The parameters of a parameters cell, or ``None`` when ``text`` is not one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not HEADING.match(lines[0]):
        return None
    values: dict[str, Any] = {}
    for line in lines[1:]:
        match = LINE.match(line)
        if match is None:
            return None
        try:
            values[match.group("name")] = json.loads(match.group("value"))
        except ValueError:
            return None
    return values


def block(values: dict[str, Any]) -> str:
    """The parameters as the agent reads them after a prompt."""
    lines = ["Runbook parameters:"]
    lines += [
        f"- {name} = {json.dumps(value, ensure_ascii=False)}" for name, value in values.items()
    ]
    return "\n".join(lines)


def markdown(values: dict[str, Any]) -> str:
    """What the parameters cell shows."""
    shown = ", ".join(
        f"`{name}` = `{json.dumps(value, ensure_ascii=False)}`" for name, value in values.items()
    )
    return (
        f"📋 **Runbook parameters**: {shown}. They go to the agent with the next prompt "
        "(no model call for this cell)."
    )
