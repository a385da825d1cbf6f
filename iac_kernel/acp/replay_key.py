"""When the lines a load sent before still hold: what they were made with (the replay
and masking code, the known values, the session's folder and home) and which log they
replay (docs/sessions.md, "Kept replay")."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from iac_kernel.agent.history import Known
from iac_kernel.masking import marks
from iac_kernel.sessions.replay_cache import Cached, LogPrefix

#: The cached lines' layout; a change makes every kept replay unused.
FORMAT = 1
#: The code that decides what a replay sends, beside the maskers (``marks.version``).
_SOURCES = (
    "acp/history_cache.py",
    "acp/replay.py",
    "acp/updates.py",
    "acp/plan.py",
    "acp/locations.py",
    "acp/transport.py",
    "agent/history.py",
    "agent/permissions.py",
    "events.py",
    "masking/marks.py",
    "sessions/records.py",
    "sessions/store.py",
    "textsafe.py",
    "tools",
)


#: Installed packages whose version changes the lines (the SDK's models, the encoder).
_PACKAGES = ("agent-client-protocol", "pydantic", "orjson")


def log_holds(found: Cached, inputs: str, log_path: Path) -> bool:
    """True when ``found`` was kept with ``inputs`` and for the start of the log as it
    is now."""
    fields = found.fields
    if fields.get("format") != FORMAT or fields.get("inputs") != inputs:
        return False
    numbering = fields.get("numbering")
    if not isinstance(numbering, dict) or set(numbering) != {"index", "in_answer"}:
        return False
    if type(numbering["index"]) is not int or type(numbering["in_answer"]) is not bool:
        return False
    try:
        size = os.stat(log_path, follow_symlinks=False).st_size
        return found.log.size <= size and LogPrefix.of(log_path, found.log.size) == found.log
    except (OSError, TypeError, KeyError):
        return False


def messages_hold(found: Cached | None, messages: list[dict[str, Any]]) -> bool:
    """True when ``found``'s lines show the first messages of ``messages``."""
    count = found.fields.get("messages") if found is not None else None
    if type(count) is not int or not 0 < count <= len(messages):
        return False
    return found.fields.get("last") == message_digest(messages[count - 1])  # type: ignore[union-attr]


def inputs_key(key: bytes, cwd: Path, known: Known) -> str:
    """A keyed digest of everything besides the log that a replay's lines depend on."""
    parts = [
        code_version(),
        str(cwd),
        os.path.expanduser("~"),
        marks.fingerprints(key, known.values),
        sorted([marks.fingerprint(key, value), name] for value, name in known.secrets().items()),
    ]
    data = json.dumps(parts, ensure_ascii=True).encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:32]


def message_digest(message: dict[str, Any]) -> str:
    text = json.dumps(message, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def code_version() -> str:
    """A digest of the replay's sources and the maskers' version."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{FORMAT}\n{marks.version()}\n".encode())
    for dist in _PACKAGES:  # they shape the lines too (models, encoding)
        try:
            digest.update(f"{dist} {metadata.version(dist)}\n".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{dist} -\n".encode())
    for name in _SOURCES:
        path = package / name
        for each in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            try:
                digest.update(each.read_bytes())
            except OSError:
                return "unknown-" + os.urandom(8).hex()
    return digest.hexdigest()[:16]
