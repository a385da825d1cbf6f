"""complete, is_complete and inspect for cells that are Markdown prompts plus magics.

Completion covers magic names (``%se`` -> ``%session``, ``%sessions``) and their
arguments: session ids after ``%load``, modes, models, setting keys and their values.
Prompt text has no completions.

``is_complete`` (consoles use it to decide whether Enter submits): ``incomplete`` when
the last line ends with a backslash (continue on the next line) or a code fence is still
open; ``invalid`` when a magic line names no magic; ``complete`` otherwise (an empty
cell included: it simply runs nothing).
"""

from __future__ import annotations

import re
from typing import Any

from iac_kernel.kernel.magic_base import FENCE, split_cell
from iac_kernel.kernel.magics import ARGUMENT_CHOICES, SECOND_CHOICES, SPECS
from iac_kernel.kernel.state import KernelState

MAGIC_NAMES = [spec.name for spec in SPECS]
_PARTIAL_MAGIC = re.compile(r"^(\s*)%([\w-]*)$")
_ARGUMENTS = re.compile(r"^\s*%([\w-]+)\s+(.*)$")


def complete(code: str, cursor_pos: int | None, state: KernelState) -> dict[str, Any]:
    """A ``complete_reply`` body."""
    if cursor_pos is None or not 0 <= cursor_pos <= len(code):
        cursor_pos = len(code)
    line_start = code.rfind("\n", 0, cursor_pos) + 1
    before = code[line_start:cursor_pos]
    matches: list[str] = []
    start = cursor_pos

    partial = _PARTIAL_MAGIC.match(before)
    if partial:
        word = partial.group(2)
        matches = [f"%{name}" for name in MAGIC_NAMES if name.startswith(word)]
        start = line_start + len(partial.group(1))
    else:
        args = _ARGUMENTS.match(before)
        if args:
            name, rest = args.group(1), args.group(2)
            words = rest.split(" ")
            choices: list[str] = []
            if len(words) == 1 and name in ARGUMENT_CHOICES:
                choices = _safe(lambda: ARGUMENT_CHOICES[name](state))
            elif len(words) == 2 and (name, words[0]) in SECOND_CHOICES:
                choices = _safe(lambda: SECOND_CHOICES[(name, words[0])](state))
            word = words[-1]
            matches = [c for c in choices if c.startswith(word)]
            start = cursor_pos - len(word)
    return {
        "status": "ok",
        "matches": matches,
        "cursor_start": start,
        "cursor_end": cursor_pos,
        "metadata": {},
    }


def _safe(fn: Any) -> list[str]:
    try:
        return list(fn())
    except Exception:  # completion must never fail the request (e.g. an unreadable store)
        return []


def is_complete(code: str) -> dict[str, Any]:
    """An ``is_complete_reply`` body."""
    lines = code.splitlines()
    open_fence: str | None = None
    for line in lines:
        fence = FENCE.match(line)
        if fence and (open_fence is None or fence.group(1) == open_fence):
            open_fence = None if open_fence else fence.group(1)
    if open_fence is not None:
        return {"status": "incomplete", "indent": ""}
    if lines and lines[-1].rstrip().endswith("\\") and not lines[-1].rstrip().endswith("\\\\"):
        return {"status": "incomplete", "indent": ""}
    magics, _prompt = split_cell(code)
    if any(call.name not in MAGIC_NAMES for call in magics):
        return {"status": "invalid"}
    return {"status": "complete"}


def inspect(code: str, cursor_pos: int | None) -> dict[str, Any]:
    """An ``inspect_reply`` body: the help of the magic under the cursor."""
    if cursor_pos is None or not 0 <= cursor_pos <= len(code):
        cursor_pos = len(code)
    line_start = code.rfind("\n", 0, cursor_pos) + 1
    line_end = code.find("\n", cursor_pos)
    line = code[line_start : None if line_end < 0 else line_end]
    match = re.match(r"^\s*%([\w-]+)", line)
    spec = next((s for s in SPECS if match and s.name == match.group(1)), None)
    if spec is None:
        return {"status": "ok", "found": False, "data": {}, "metadata": {}}
    return {
        "status": "ok",
        "found": True,
        "data": {
            "text/plain": f"{spec.usage}\n    {spec.summary}",
            "text/markdown": f"`{spec.usage}`\n\n{spec.summary}",
        },
        "metadata": {},
    }
