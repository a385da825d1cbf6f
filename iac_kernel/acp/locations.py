"""File locations of tool calls, with line numbers where the call has one.

* ``read_file``: the first line read (``offset``, default 1);
* ``edit_file``: the first line the edit changes (from the previewed diff);
* ``grep`` results: each matching ``path:line`` of the output (up to :data:`MAX_MATCHES`).

Editors use them to follow the agent ("jump to the line it is reading").
"""

from __future__ import annotations

import os
import re
from typing import Any

from acp.schema import ToolCallLocation

from iac_kernel.events import Diff, ToolCallInput

MAX_MATCHES = 20
_MATCH_LINE = re.compile(r"^(?P<path>[^\n]+?):(?P<line>\d+):")


def input_locations(event: ToolCallInput) -> list[ToolCallLocation] | None:
    """Locations for a call whose input is known."""
    line = None
    if event.name == "read_file":
        line = _positive(event.input.get("offset")) or 1
    elif event.diff is not None:
        line = first_changed_line(event.diff)
    return [ToolCallLocation(path=path, line=line) for path in event.locations] or None


def grep_locations(output: str, cwd: Any) -> list[ToolCallLocation] | None:
    """``path:line`` matches of grep's content output, absolute, in order, no repeats."""
    found: list[ToolCallLocation] = []
    seen: set[tuple[str, int]] = set()
    for text in output.splitlines():
        match = _MATCH_LINE.match(text)
        if match is None:
            continue
        path = os.path.normpath(os.path.join(str(cwd), match.group("path")))
        key = (path, int(match.group("line")))
        if key in seen:
            continue
        seen.add(key)
        found.append(ToolCallLocation(path=path, line=key[1]))
        if len(found) >= MAX_MATCHES:
            break
    return found or None


def first_changed_line(diff: Diff) -> int:
    """1-based number of the first line that differs between the old and new text."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    for number, (before, after) in enumerate(zip(old, new, strict=False), 1):
        if before != after:
            return number
    return min(len(old), len(new)) + 1 if old != new else 1


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None
