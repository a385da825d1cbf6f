"""How the kernel packs its messages: compact JSON.

jupyter_client packs with ``json.dumps``' default separators (``", "`` and ``": "``) unless
orjson is installed (compact already). Every IOPub message repeats two headers, so the
spaces cost about 30 bytes a message: a tenth of a streamed update's envelope besides the
signature (``kernel/display.py``). Any JSON reader reads either form, and the signature is
computed over the bytes as packed.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_client.jsonutil import json_clean, json_default
from jupyter_client.session import json_packer


def compact_packer(obj: Any) -> bytes:
    """``obj`` as compact JSON (as jupyter_client's ``json_packer``, without spaces)."""
    try:
        text = json.dumps(
            obj, default=json_default, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    except (TypeError, ValueError):
        text = json.dumps(
            json_clean(obj),
            default=json_default,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    return text.encode("utf8", errors="surrogateescape")


def use_compact_json(session: Any) -> None:
    """Pack ``session``'s messages compactly when it uses jupyter_client's plain JSON
    packer (orjson's is compact already; pickle or msgpack are left alone)."""
    if session is not None and session.pack is json_packer:
        # Session's own setting (a dotted name; it imports the function and uses it).
        session.packer = f"{__name__}.compact_packer"
