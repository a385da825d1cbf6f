"""The older, per-user audit log (``<store root>/audit.jsonl``), and how a record reads.

The audit trail lives in the team store (:mod:`iac_kernel.team.audit`), which imports
this file's records once and writes here only while the store cannot be reached, so that
no record is lost. The file: one JSON record a line, append-only, 0600 in the store's
0700 folder, never followed through a symbolic link; a record is written by one ``write``
under an exclusive lock, so records of several processes never interleave. Records are
masked before they get here (see :mod:`iac_kernel.terraform.review`).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from iac_kernel.sessions import files
from iac_kernel.textsafe import json_line

FILE_NAME = "audit.jsonl"


class AuditLog:
    """The audit records under one store root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self.path = self.root / FILE_NAME

    def append(self, record: dict[str, Any]) -> None:
        files.private_dir(self.root)
        data = json_line(record)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        fd = files.open_fd(self.path, flags)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, cwd: str | None = None) -> list[dict[str, Any]]:
        """Every record, oldest first; with ``cwd``, those of sessions in that folder or
        below it (and of applies in it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        files.refuse_hard_link(fd, self.path)
        with os.fdopen(fd, "rb") as fh:
            lines = fh.read().splitlines()
        out = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn last line after a crash
            if isinstance(record, dict) and (cwd is None or in_folder(record, cwd)):
                out.append(record)
        return out


def in_folder(record: dict[str, Any], cwd: str) -> bool:
    """The record is of a session in ``cwd`` or below it, or of a command run there."""
    base = os.path.realpath(cwd)
    for key in ("cwd", "workdir"):
        value = record.get(key)
        if isinstance(value, str) and value:
            path = os.path.realpath(value)
            if path == base or path.startswith(base.rstrip("/") + "/"):
                return True
    return False


def describe(record: dict[str, Any]) -> list[str]:
    """One record in a few lines of text (``iac-kernel audit``, ``%audit``)."""
    outcome = str(record.get("outcome") or "?")
    if record.get("exit") is not None:
        outcome += f" (exit {record['exit']})"
    when = record.get("recorded_at") or record.get("answered_at") or "?"
    by = f"  by {record['actor']}" if record.get("actor") else ""
    message = [f"  {line[:200]}" for line in str(record.get("message") or "").splitlines()[:1]]
    session = f"  session {record.get('session_id', '?')} in {record.get('cwd', '?')}"
    if record.get("kind") == "cloud_operation":  # judged at the wire (egress/decide.py)
        return [
            f"{when}  {outcome}  {record.get('operation', '?')}  [cloud operation]{by}",
            f"  sent by `{record.get('command', '?')}` to {record.get('host', '?')}, "
            f"request sha256 {str(record.get('request_sha256', '?'))[:12]}",
            *message,
            session,
        ]
    if record.get("kind") == "approval":  # a step of an approval record (team/approvals.py)
        return [
            f"{when}  {record.get('step', '?')}  approval {record.get('approval_id', '?')}{by}",
            *[
                f"  {k} {record[k]}"
                for k in ("summary", "rule", "plan_sha256", "note")
                if record.get(k)
            ],
        ]
    if record.get("kind") == "command":  # a changing command the guard saw (guard/approval)
        target = ", ".join(f"{k} {v}" for k, v in (record.get("target") or {}).items())
        lines = [f"{when}  {outcome}  {record.get('command', '?')}  [{record.get('form', '?')}]"]
        lines.append(f"  {record.get('reason') or 'a changing command'}{by}")
        if target:
            lines.append(f"  target: {target}")
        if record.get("answer"):
            lines.append(f"  answer {record['answer']} by {record.get('approver', '?')}")
        return [*lines, *message, f"{session} (ran in {record.get('workdir', '?')})"]
    command = record.get("command") or f"{record.get('tool', '?')} {record.get('plan_file', '')}"
    lines = [f"{when}  {outcome}  {command}  [{record.get('form', '?')}]"]
    plan = record.get("plan_file")
    if record.get("plan_sha256"):
        lines.append(
            f"  plan {plan} sha256 {str(record['plan_sha256'])[:12]}: {record.get('summary', '')}"
        )
    else:
        lines.append(f"  {'plan ' + str(plan) + ': ' if plan else ''}no reviewed plan")
    failed = (record.get("policy") or {}).get("failed") or []
    if failed:
        lines.append(f"  policy: {len(failed)} failed check(s)")
    if record.get("approver") or record.get("answer"):
        lines.append(
            f"  answer {record.get('answer', '-')} by {record.get('approver', '?')} "
            f"as {record.get('os_user', '?')} at {record.get('answered_at', '?')}"
        )
    else:
        lines.append("  not asked")
    before, after = record.get("state_before") or {}, record.get("state_after") or {}
    if before or after:
        lines.append(f"  state serial {_mark(before)} -> {_mark(after)}")
    mismatch = record.get("lineage_mismatch")
    if mismatch:
        lines.append(
            f"  LINEAGE MISMATCH: asked about lineage {str(mismatch.get('expected'))[:8]}, "
            f"found {str(mismatch.get('found'))[:8]}"
        )
    if record.get("message"):
        lines.append(f"  {str(record['message']).splitlines()[0][:200]}")
    lines.append(f"  session {record.get('session_id', '?')} in {record.get('cwd', '?')}")
    return lines


def _mark(mark: dict[str, Any]) -> str:
    if not mark:
        return "?"
    if mark.get("note"):
        return f"({mark['note']})"
    if mark.get("serial") is None:
        return "(no state)"
    return f"{mark['serial']} (lineage {str(mark.get('lineage'))[:8]})"
