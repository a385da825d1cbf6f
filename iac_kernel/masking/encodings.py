"""The forms a known secret value prints in.

A value is found as is, JSON-escaped (Python's and Go's: Terraform writes ``&``, ``<``,
``>`` as ``\\u0026``, ``\\u003c``, ``\\u003e``), URL-encoded, in hex, in base64 (at any of
the three byte alignments, so a value inside a longer encoded text is found too) and
reversed; a JSON form inside another JSON string too. Each spelling counts: hex and every
per-character escape in any case (:func:`caseless_forms`), ``\\u003C`` and ``%2f``,
HTML entities, octal; and every form of :data:`MIN_SPLIT` characters or more split by
whitespace or dump columns (:mod:`.values`). Transformations of the value itself (upper
case, arithmetic, compression) are not forms: masking by value cannot know them.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from urllib.parse import quote, quote_plus

#: Values this long or longer are also looked for encoded and reversed.
MIN_VALUE = 4
#: A base64 core shorter than this is too likely by chance (a 4-byte value's own padded
#: encoding is always looked for).
MIN_ENCODED = 6
#: Forms this long or longer are also found split by whitespace and dump columns
#: (wrapped base64, ``xxd``, ``od``, one character per line).
MIN_SPLIT = 8


def json_forms(value: str) -> set[str]:
    """Python's (ASCII and not) and Go's JSON string escapes of ``value``."""
    ascii_form = json.dumps(value)[1:-1]
    plain = json.dumps(value, ensure_ascii=False)[1:-1]
    go = (
        plain.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    go_ascii = ascii_form.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return {ascii_form, plain, go, go_ascii}


def base64_cores(data: bytes) -> set[str]:
    """For each alignment of ``data`` inside a longer byte string, the base64 characters
    that depend on ``data`` alone (standard and URL-safe alphabets)."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        start = 4 if offset else 0
        end = ((offset + len(data)) // 3) * 4
        core = encoded[start:end]
        if offset == 0 and len(data) % 3 == 0:
            core = encoded  # no padding: the whole text is the value's
        if len(core) >= MIN_ENCODED:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    if len(data) % 3:  # the value alone, padded
        alone = base64.b64encode(data).decode()
        cores |= {alone, alone.replace("+", "-").replace("/", "_")}
    return cores


def _upper_escapes(form: str) -> str:
    """``\\u003c`` spelt ``\\u003C``, ``%2f`` spelt ``%2F`` (and the other way)."""
    form = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: "\\u" + m.group(1).upper(), form)
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m.group(0).lower(), form)


#: What bash's ``printf %q`` puts a backslash before (and ``#``, ``~`` at the start).
_PRINTF_Q = frozenset(" !\"$&'()*,;<>?[\\]^`{|}")


def quoted_forms(value: str) -> set[str]:
    """How shells and Python print a value holding special characters: ``printf %q``,
    ``declare -p`` / ``export -p`` (in ``"..."``), ``set -x`` and ``shlex.quote`` (in
    ``'...'``), ``repr()``. A value without them prints as itself."""
    backslashed = "".join("\\" + c if c in _PRINTF_Q else c for c in value)
    if value[:1] in ("#", "~"):
        backslashed = "\\" + backslashed
    double = value.replace("\\", "\\\\")
    for char in '"$`':
        double = double.replace(char, "\\" + char)
    return {
        backslashed,
        double,
        value.replace("'", "'\\''"),
        value.replace("'", "'\"'\"'"),
        repr(value)[1:-1],
    } - {value}


def caseless_forms(value: str) -> set[str]:
    """Forms found in any case: those whose letters are hex digits and escape markers
    only (``416D70``, ``\\X41``, ``&#X41;``; each character escaped: ``\\x41\\x42``,
    ``\\u0041``, ``%41%42``, ``&#x41;``, and octal ``\\101`` per byte), and a value of
    :data:`MIN_SPLIT` characters or more itself (``tr a-z A-Z``, ``upper()``; a shorter
    one in another case is too often an ordinary word)."""
    if len(value) < MIN_VALUE:
        return set()
    data = value.encode("utf-8", "surrogatepass")
    units = value.encode("utf-16-be", "surrogatepass")
    u16 = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    return {
        binascii.hexlify(data).decode(),
        "".join(f"\\x{b:02x}" for b in data),
        "".join(f"%{b:02x}" for b in data),
        "".join(f"\\u{u}" for u in u16),
        "".join(f"&#x{ord(c):x};" for c in value),
        "".join(f"&#x{b:02x};" for b in data if len(data) == len(value)),
        value if len(value) >= MIN_SPLIT else "",
    } - {""}


def forms(value: str) -> set[str]:
    """Every printed form of ``value`` (``value`` itself included)."""
    out = {value} | json_forms(value) | quoted_forms(value)
    for form in list(out):  # JSON inside a JSON string (``jq -R``, a state in a tool result)
        if "\\" in form:
            out |= json_forms(form)
    for line in value.splitlines() if "\n" in value else []:
        if len(line.strip()) >= 8:  # a multi-line value printed one line at a time
            out |= {line} | json_forms(line)
    if len(value) >= MIN_VALUE:
        data = value.encode("utf-8", "surrogatepass")
        out |= base64_cores(data)
        hexed = binascii.hexlify(data).decode()
        out |= {hexed, hexed.upper()}
        out |= {quote(value, safe=""), quote(value), quote_plus(value)}
        out.add(value[::-1])
        out.add(html.escape(value))
        out.add("".join(f"&#{ord(c)};" for c in value))  # decimal entities
        out.add("".join(f"\\{b:03o}" for b in data))  # octal escapes (printf, od -b)
        out.add("".join(f"{b:03o}" for b in data))  # od -b with its spaces squeezed
        out |= {_upper_escapes(form) for form in out if "\\u" in form or "%" in form}
    return {form for form in out if form}
