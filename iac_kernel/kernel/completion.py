"""complete, is_complete, inspect and history for cells that are Markdown prompts plus
magics, and ``%magic?`` (the pager).

Completion covers magic names (``%se`` -> ``%session``, ``%sessions``) and their
arguments: session ids after ``%load``, modes, models, setting keys and their values.
Prompt text has no completions.

``is_complete`` (consoles use it to decide whether Enter submits): ``incomplete`` when
the last line ends with a backslash (continue on the next line) or a code fence is still
open; ``invalid`` when a magic line names no magic; ``complete`` otherwise (an empty
cell included: it simply runs nothing).

History: cells are prompts, never run through IPython, so IPython's history database
knows nothing of them (and must not: prompts do not belong in the user's IPython
history). :class:`CellHistory` keeps this kernel's cells in memory, for frontends that
browse input history (consoles: up-arrow, search). The agent's own record of every turn
is the session in the store. Session number 1 is this kernel's run; 0 means "this run" too.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from iac_kernel.kernel.magics.cell import split_cell
from iac_kernel.kernel.magics.commands import MAGICS, SECOND_CHOICES
from iac_kernel.kernel.render.display import FENCE
from iac_kernel.kernel.session.state import KernelState

_PARTIAL_MAGIC = re.compile(r"^(\s*)%([\w-]*)$")
_ARGUMENTS = re.compile(r"^\s*%([\w-]+)\s+(.*)$")
SESSION = 1
PAGE_REQUEST = re.compile(r"^\s*%([A-Za-z][\w-]*)\?\s*$")

#: One history entry: (session, line number, input) or (session, line, (input, output)).
Entry = tuple[int, int, Any]


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
        matches = [f"%{name}" for name in MAGICS if name.startswith(word)]
        start = line_start + len(partial.group(1))
    else:
        args = _ARGUMENTS.match(before)
        if args:
            name, rest = args.group(1), args.group(2)
            words = rest.split(" ")
            choices: list[str] = []
            spec = MAGICS.get(name)
            if len(words) == 1 and spec is not None and spec.choices is not None:
                choices = _safe(lambda: spec.choices(state))
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
    if any(call.name not in MAGICS for call in magics):
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
    spec = MAGICS.get(match.group(1)) if match else None
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


class CellHistory:
    """The cells executed in this kernel with ``store_history``, by execution count."""

    def __init__(self) -> None:
        self.cells: list[tuple[int, str]] = []

    def store(self, line: int, code: str) -> None:
        self.cells.append((line, code))

    def reply(
        self,
        hist_access_type: str,
        output: bool = False,
        raw: bool = True,
        session: int | None = 0,
        start: int | None = 0,
        stop: int | None = None,
        n: int | None = None,
        pattern: str | None = None,
        unique: bool = False,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """A ``history_reply`` body for tail, range and search requests."""
        if hist_access_type == "tail":
            rows = self.cells[-n:] if n else list(self.cells)
        elif hist_access_type == "range":
            rows = self._range(session, start, stop)
        elif hist_access_type == "search":
            rows = self._search(pattern or "*", n, unique)
        else:
            rows = []
        return {"status": "ok", "history": [self._entry(line, code, output) for line, code in rows]}

    def _range(self, session: int | None, start: int | None, stop: int | None) -> list:
        if session not in (None, 0, SESSION):
            return []
        first = start or 0
        return [(ln, c) for ln, c in self.cells if ln >= first and (stop is None or ln < stop)]

    def _search(self, pattern: str, n: int | None, unique: bool) -> list:
        found = [(ln, c) for ln, c in self.cells if fnmatch.fnmatchcase(c, pattern)]
        if unique:
            latest: dict[str, tuple[int, str]] = {}
            for line, code in found:
                latest.pop(code, None)
                latest[code] = (line, code)
            found = list(latest.values())
        return found[-n:] if n else found

    @staticmethod
    def _entry(line: int, code: str, output: bool) -> Entry:
        # Outputs are displays and cards, not text: the output slot is None.
        return (SESSION, line, (code, None) if output else code)


def page(code: str) -> dict[str, Any] | None:
    """``%name?`` -> a ``page`` payload with that magic's help (None for other cells)."""
    match = PAGE_REQUEST.match(code)
    if match is None:
        return None
    text = f"%{match.group(1)}"
    found = inspect(text, len(text))
    if not found.get("found"):
        return None
    return {"source": "page", "data": found["data"], "start": 0}
