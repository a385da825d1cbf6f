"""What a stored tool result was masked with, so a load masks again only what needs it.

A result is stored masked with the values known when it was written (the secret
environment values and the workspace's sensitive values) and the credential shapes.
A load must mask it with what is known *now*: a value learned later must not be shown.
Masking every result again costs most of a long session's load, and is needed only
when something new is known. Each stored result therefore carries a *mark*::

    {"v": VERSION, "set": SET_ID, "tag": TAG}

* ``v``: the masking code's version, a digest of the maskers' source: shape rules are
  value-independent, so a result masked by the same code needs no second run of them;
  any change to the maskers masks every result again, once per load.
* ``set``: names a set of *keyed fingerprints*, one per value the result was masked
  with (stored once per log in a ``mask_set`` record: ``{"type": "mask_set", "id",
  "known": [...]}``). A fingerprint is HMAC-SHA256 under a random per-install key kept in
  the store's private folder (0600, hidden from every sandbox with the store): the log
  holds no unkeyed hash of a secret that could be checked against guesses offline.
* ``tag``: HMAC of the version, the set id and the result's stored text: a text changed
  since it was masked (a log edited by hand) no longer matches.

At load (:class:`Checker`) a result whose tag matches is masked again only with the
values known now whose fingerprints are not in its set (learned since it was written;
none: it is shown as stored). Anything else (no mark, another key, a missing key,
another version, an edited text or set) is masked again in full.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The maskers whose code decides what a stored result holds (relative to the package).
_MASKER_SOURCES = (
    "redact.py",
    "masking/encodings.py",
    "masking/values.py",
    "masking/shapes.py",
    "masking/trust_store.py",
    "masking/own_names.py",
    "terraform/sensitive.py",
)
#: Hex digits kept of a fingerprint (64 bits: a collision between a value known now and
#: one of a set is out of reach) and of a tag.
_FP_HEX = 16
_TAG_HEX = 32


@functools.cache
def version() -> str:
    """A digest of the maskers' source (a random one, matching nothing, when it cannot
    be read)."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    try:
        for name in _MASKER_SOURCES:
            digest.update((package / name).read_bytes())
    except OSError:
        return "unknown-" + secrets.token_hex(8)
    return digest.hexdigest()[:16]


def fingerprint(key: bytes, value: str) -> str:
    data = value.encode("utf-8", "surrogatepass")
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:_FP_HEX]


def fingerprints(key: bytes, values: Iterable[str]) -> list[str]:
    """The sorted, distinct fingerprints of ``values``."""
    return sorted({fingerprint(key, v) for v in values})


def set_id(key: bytes, known: list[str]) -> str:
    return hmac.new(key, "\n".join(known).encode(), hashlib.sha256).hexdigest()[:_FP_HEX]


def _tag(key: bytes, version_: str, set_: str, text: str) -> str:
    mac = hmac.new(key, f"{version_}\n{set_}\n".encode(), hashlib.sha256)
    mac.update(text.encode("utf-8", "surrogatepass"))
    return mac.hexdigest()[:_TAG_HEX]


def mark(key: bytes, values: Iterable[str], text: str) -> tuple[dict[str, str], list[str]]:
    """The mark of ``text`` masked with ``values`` by this code, and its set's
    fingerprints (for the ``mask_set`` record)."""
    known = fingerprints(key, values)
    sid = set_id(key, known)
    return {"v": version(), "set": sid, "tag": _tag(key, version(), sid, text)}, known


@dataclass
class MarkTable:
    """A log's marks: the key (``None``: none could be read), each result's mark by
    call id, and the fingerprint sets they name by id."""

    key: bytes | None = None
    marks: dict[str, Any] = field(default_factory=dict)
    sets: dict[str, Any] = field(default_factory=dict)

    def see(self, record: Mapping[str, Any]) -> None:
        """Take the mark or set a log record holds (any other record: nothing)."""
        kind = record.get("type")
        if kind == "mask_set" and isinstance(record.get("id"), str):
            self.sets[record["id"]] = record.get("known")
        elif kind == "tool_result" and isinstance(record.get("block"), dict):
            call_id = record["block"].get("tool_use_id")
            if isinstance(call_id, str):  # the latest record of a call decides
                self.marks[call_id] = record.get("mask")

    def checker(self, values: Iterable[str]) -> Checker:
        return Checker(self.key, self.marks, self.sets, values)


class Checker:
    """Which values each stored result must be masked with again, given what is known
    now."""

    def __init__(
        self,
        key: bytes | None,
        marks: Mapping[str, Any],
        sets: Mapping[str, Any],
        values: Iterable[str],
    ):
        self._key = key
        self._marks = marks
        self._sets = sets
        #: Every value known now, by its fingerprint.
        self._now = {fingerprint(key, v): v for v in values} if key is not None else {}
        self._since: dict[str, frozenset[str] | None] = {}

    def fresh(self, call_id: str, text: str) -> frozenset[str] | None:
        """The values known now that ``text``, stored as ``call_id``'s result, was not
        masked with (empty: it is shown as stored). ``None``: it must be masked again in
        full (no mark, another key or masking code, its text or set changed since)."""
        found = self._marks.get(call_id)
        if self._key is None or not isinstance(found, dict) or found.get("v") != version():
            return None
        sid = found.get("set")
        fresh = self._learned_since(sid) if isinstance(sid, str) else None
        if fresh is None:
            return None
        tag = _tag(self._key, version(), sid, text)  # type: ignore[arg-type]
        return fresh if hmac.compare_digest(str(found.get("tag", "")), tag) else None

    def _learned_since(self, sid: str) -> frozenset[str] | None:
        """The values known now that set ``sid`` lacks (``None``: no such set)."""
        if sid not in self._since:
            known = self._sets.get(sid)
            ok = isinstance(known, list) and all(isinstance(k, str) for k in known)
            # The set must be what its id says (a set record edited by hand is not).
            if ok and hmac.compare_digest(set_id(self._key, known), sid):  # type: ignore[arg-type]
                had = set(known)  # type: ignore[arg-type]
                self._since[sid] = frozenset(v for fp, v in self._now.items() if fp not in had)
            else:
                self._since[sid] = None
        return self._since[sid]
