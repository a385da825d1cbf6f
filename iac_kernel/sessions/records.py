"""The session log's records: parsing, assembling messages, and repairing a history.

One JSON object per line (see :mod:`iac_kernel.textsafe` for how any text is stored)::

    {"type": "message", "ts", "message": {"role", "content"}}
    {"type": "tool_result", "ts", "name", "block": {"type": "tool_result", ...},
     "raw_output"?, "full"?, "mask"?}        # one per finished tool call, in order
    {"type": "mask_set", "ts", "id", "known": [...]}  # before the first result naming it
    {"type": "compaction", "ts", "summary", "keep_from"}
    {"type": "repaired", "ts", "notes": [...]}  # what a load repaired

``mask`` and ``mask_set``: what a result's text was masked with (keyed fingerprints, see
:mod:`iac_kernel.masking.marks`), so a load masks again only what needs it.

Consecutive ``tool_result`` records form one user message (the Messages API wants all
results of a response in the message that follows it). Older logs hold whole result
messages (``message`` or ``repair`` records); both read the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

INTERRUPTED_RESULT = "Interrupted: the session stopped before this tool call finished."

Record = dict[str, Any]


@dataclass
class LogScan:
    """A parsed log: the good records, and what was unreadable."""

    records: list[Record] = field(default_factory=list)
    bad_lines: int = 0
    #: Whether the last unreadable line lacked a newline (a crash mid-write).
    torn_tail: bool = False


def scan(data: bytes | Iterable[bytes]) -> LogScan:
    """Parse every line (of the bytes, or of an iterable of lines read one at a time: a
    big log is never held whole); a line that is not a whole JSON object is counted as
    bad."""
    lines = data.splitlines(keepends=True) if isinstance(data, bytes) else data
    result = LogScan()
    for raw in lines:
        complete = raw.endswith(b"\n")
        record = None
        if complete:
            record = parse_line(raw)
        if isinstance(record, dict) and "type" in record:
            result.records.append(record)
        elif raw.strip():
            result.bad_lines += 1
            result.torn_tail = not complete
    return result


def parse_line(raw: bytes) -> Any:
    """One log line's JSON value (``None``: not JSON). orjson reads it when it can; it
    refuses what the log may hold and ``json`` reads (lone surrogates stored as
    ``\\udce9`` escapes, numbers beyond 64 bits), which then go to ``json``."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _is_message(record: Record) -> bool:
    return record.get("type") in ("message", "repair") and isinstance(record.get("message"), dict)


def _is_result(record: Record) -> bool:
    block = record.get("block")
    return (
        record.get("type") == "tool_result"
        and isinstance(block, dict)
        and block.get("type") == "tool_result"
        and isinstance(block.get("tool_use_id"), str)
    )


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@dataclass
class Assembled:
    messages: list[dict[str, Any]]
    summary: str | None
    keep_from: int
    #: For each record, the index of the message it belongs to (or will start: for a
    #: compaction, the number of messages before it).
    owner: list[int]


def assemble(records: list[Record]) -> Assembled:
    """Messages from records, consecutive tool results merged into one user message."""
    messages: list[dict[str, Any]] = []
    owner: list[int] = []
    summary = None
    keep_from = 0
    in_results = False
    for record in records:
        if _is_result(record):
            if in_results:
                messages[-1]["content"].append(record["block"])
            else:
                messages.append({"role": "user", "content": [record["block"]]})
                in_results = True
            owner.append(len(messages) - 1)
            continue
        if _is_message(record):
            in_results = False
            messages.append(record["message"])
            owner.append(len(messages) - 1)
            continue
        owner.append(len(messages))
        if record.get("type") == "compaction":
            summary = record.get("summary")
            try:
                keep_from = int(record.get("keep_from", 0))
            except (TypeError, ValueError):
                keep_from = 0
    return Assembled(messages, summary, keep_from, owner)


def result_record(call_id: str, text: str, ts: str, name: str = "") -> Record:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": True}
    return {"type": "tool_result", "ts": ts, "name": name, "block": block}


def normalize(records: list[Record], ts: str) -> tuple[list[Record], list[str]]:
    """A valid history: every tool_use answered right after its response (missing ones
    get an "Interrupted" result), results without their tool_use dropped, compaction
    indices kept pointing at the same messages. Returns the records and what changed."""
    out: list[Record] = []
    notes: list[str] = []
    pending: dict[str, str] = {}  # unanswered tool_use id -> tool name, of the last response
    window = False  # right after a response with tool calls: results may follow
    interrupted = orphans = 0
    records = [{**r, "_i": i} for i, r in enumerate(records)]

    def close_window() -> None:
        nonlocal window, interrupted
        for call_id, name in pending.items():
            out.append(result_record(call_id, INTERRUPTED_RESULT, ts, name))
            interrupted += 1
        pending.clear()
        window = False

    for record in records:
        if _is_result(record):
            call_id = record["block"]["tool_use_id"]
            if window and call_id in pending:
                pending.pop(call_id)
                out.append(record)
            else:
                orphans += 1
            continue
        if not _is_message(record):
            out.append(record)
            continue
        message = record["message"]
        role = message.get("role")
        if role == "user" and window:
            blocks = _blocks(message)
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                kept = [b for b in results if b.get("tool_use_id") in pending]
                for b in kept:
                    pending.pop(b["tool_use_id"], None)
                dropped = len(results) - len(kept)
                if pending:
                    close_window()  # missing results go just before this message
                window = False
                if dropped:
                    orphans += dropped
                    others = [b for b in blocks if b.get("type") != "tool_result"]
                    blocks = kept + others
                    if not blocks:
                        continue
                    record = {**record, "message": {**message, "content": blocks}}
                out.append(record)
                continue
        if window:
            close_window()
        if role == "user":
            blocks = _blocks(message)
            if any(b.get("type") == "tool_result" for b in blocks):
                others = [b for b in blocks if b.get("type") != "tool_result"]
                orphans += len(blocks) - len(others)
                if not others:
                    continue
                record = {**record, "message": {**message, "content": others}}
            out.append(record)
        elif role == "assistant":
            out.append(record)
            for b in _blocks(message):
                if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    pending[b["id"]] = str(b.get("name", ""))
            window = bool(pending)
        else:
            orphans += 1  # a message of no known role cannot be sent
    if window:
        close_window()
    if interrupted:
        notes.append(f"closed {interrupted} interrupted tool call(s)")
    if orphans:
        notes.append(f"dropped {orphans} tool result(s) or message(s) with no place")
    if notes:
        out = _keep_compactions(records, out)
    for record in out:
        record.pop("_i", None)
    return out, notes


def _keep_compactions(old: list[Record], new: list[Record]) -> list[Record]:
    """Point each compaction's ``keep_from`` at the same first kept message as before."""
    before = assemble(old)
    after = assemble(new)
    first_record_of: dict[int, int] = {}
    for index, msg in enumerate(before.owner):
        first_record_of.setdefault(msg, index)
    position = {r["_i"]: j for j, r in enumerate(new) if "_i" in r}
    survivors = [(i, position.get(i)) for i in range(len(old))]
    fixed = []
    for record in new:
        if record.get("type") == "compaction":
            try:
                keep = int(record.get("keep_from", 0))
            except (TypeError, ValueError):
                keep = 0
            start = first_record_of.get(keep, len(old))
            target = next((j for i, j in survivors if i >= start and j is not None), None)
            new_keep = after.owner[target] if target is not None else len(after.messages)
            record = {**record, "keep_from": new_keep}
        fixed.append(record)
    return fixed


def repair_notes(scan: LogScan, notes: list[str]) -> list[str]:
    """Everything a load repaired, in words (unreadable lines first)."""
    repairs = []
    if scan.bad_lines:
        where = "at the end of the log" if scan.torn_tail and scan.bad_lines == 1 else "in the log"
        repairs.append(f"dropped {scan.bad_lines} unreadable or half-written line(s) {where}")
    return repairs + notes


def result_text(content: Any) -> str:
    """The text of a tool_result's content (a string or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
