"""The kernel's answers to ``history_request`` and to ``%magic?`` (the pager).

Cells are prompts, never run through IPython, so IPython's history database knows
nothing of them (and must not: prompts do not belong in the user's IPython history).
:class:`CellHistory` keeps this kernel's cells in memory, for frontends that browse input
history (consoles: up-arrow, search). The agent's own record of every turn is the
session in the store. Session number 1 is this kernel's run; 0 means "this run" too.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from iac_kernel.kernel import completion

SESSION = 1
PAGE_REQUEST = re.compile(r"^\s*%([A-Za-z][\w-]*)\?\s*$")

#: One history entry: (session, line number, input) or (session, line, (input, output)).
Entry = tuple[int, int, Any]


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
    found = completion.inspect(text, len(text))
    if not found.get("found"):
        return None
    return {"source": "page", "data": found["data"], "start": 0}
