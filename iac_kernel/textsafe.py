"""Text of any bytes: lossless storage and readable display of lone surrogates.

Python decodes file names, command output and some JSON input that are not valid UTF-8
into *lone surrogates*: a non-UTF-8 byte ``0xE9`` in ``caf\\xe9.tf`` becomes the code
point U+DCE9 (PEP 383 ``surrogateescape``); a JSON ``"\\ud800"`` in a prompt becomes
U+D800. Such strings cannot be encoded as UTF-8, so they would make a write fail.

The documented escape, used by the session store:

* **Storage** (:func:`json_line`): JSON with every lone surrogate written as its standard
  JSON escape ``\\udce9`` (the rest stays UTF-8). ``json.loads`` gives back the exact
  string, so the bytes of the file name are recoverable and a tool can reopen the file.
* **Display** (:func:`readable`): U+DC80..U+DCFF (an undecodable byte) is shown as
  ``\\xe9``; any other lone surrogate as ``\\ud800``. The result is valid Unicode for the
  model, ACP clients and the notebook.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _show(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def readable(text: str) -> str:
    """``text`` with each lone surrogate shown as ``\\xNN`` (a byte) or ``\\uXXXX``."""
    if not isinstance(text, str) or text.isascii() or not _SURROGATE.search(text):
        return text  # (isascii: a flag of the string, no scan)
    return _SURROGATE.sub(_show, text)


def readable_value(value: Any) -> Any:
    """:func:`readable` applied to every string in nested dicts, lists and tuples."""
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, dict):
        return {
            readable(k) if isinstance(k, str) else k: readable_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [readable_value(v) for v in value]
    return value


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_line(record: Any) -> bytes:
    """``record`` as one JSON line of valid UTF-8, lone surrogates escaped losslessly."""
    text = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))
    # Outside string literals JSON is ASCII, so every surrogate here is inside a string.
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape, text)
    return text.encode("utf-8") + b"\n"


def printable(text: str) -> str:
    """``text`` on one line, as it reads: line breaks, control characters (terminal
    escapes) and invisible format characters (bidirectional overrides, zero-width) shown
    as ``\\n``, ``\\x1b``, ``\\u202e``. For text a command's arguments put into a question:
    an argument must not add lines to it, reorder it or hide parts of it."""
    return "".join(_printable_char(c) for c in readable(text))


def shown_lines(text: str) -> str:
    """``text`` for a question that may hold several lines (a script, a plan summary):
    its line breaks and tabs kept, every other control character (CR, terminal escapes,
    C1), line/paragraph separator and invisible format character (bidirectional
    overrides, zero-width) shown as ``\\r``, ``\\x1b``, ``\\u202e``."""
    return "\n".join(
        "".join(c if c == "\t" else _printable_char(c) for c in line)
        for line in readable(text).split("\n")
    )


def _printable_char(char: str) -> str:
    if unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp"):
        return char
    escaped = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if escaped:
        return escaped
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def code_span(text: str) -> str:
    """``text`` as a Markdown code span that its own backquotes cannot close."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"
