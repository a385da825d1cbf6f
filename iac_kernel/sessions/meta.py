"""Session metadata and the store's small types: ids, times, git roots, errors."""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Any


class SessionNotFoundError(KeyError):
    """No session with that id in the store."""


class SessionLockedError(RuntimeError):
    """Another process (or runtime) writes this session."""

    def __init__(self, session_id: str, holder: dict[str, Any]):
        self.session_id = session_id
        self.holder = holder
        who = holder.get("holder") or "another process"
        super().__init__(
            f"session {session_id} is held by {who} (pid {holder.get('pid', '?')} on "
            f"{holder.get('host', '?')} since {holder.get('since', '?')})"
        )


def now_iso() -> str:
    """UTC time with milliseconds, so sessions updated in one second still sort in order."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


#: git roots found recently, by cwd: (when, root). Creating many sessions in one folder
#: would otherwise run git once per session.
_GIT_ROOTS: dict[str, tuple[float, str | None]] = {}
GIT_ROOT_TTL = 30.0


def git_root(cwd: str) -> str | None:
    """The git top level of ``cwd`` (editors open the project root, notebooks sit below it)."""
    seen = _GIT_ROOTS.get(cwd)
    if seen is not None and time.monotonic() - seen[0] < GIT_ROOT_TTL:
        return seen[1]
    root = _run_git_root(cwd)
    if len(_GIT_ROOTS) > 1000:
        _GIT_ROOTS.clear()
    _GIT_ROOTS[cwd] = (time.monotonic(), root)
    return root


def _run_git_root(cwd: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", cwd, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def is_valid_session_id(session_id: str) -> bool:
    try:
        return str(uuid.UUID(session_id)) == session_id
    except (ValueError, TypeError, AttributeError):
        return False


@dataclass
class SessionMeta:
    session_id: str
    cwd: str
    created_at: str
    updated_at: str
    title: str | None = None
    git_root: str | None = None
    model: str | None = None
    mode: str | None = None
    origin: str = "acp"
    notebook: str | None = None
    message_count: int = 0
    forked_from: str | None = None
    #: The workspace roots beyond ``cwd`` last activated (ACP ``additionalDirectories``),
    #: reported by ``session/list`` so a client can activate them again on load/resume.
    additional_directories: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionMeta:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class StoredSession:
    """A session as read from disk."""

    meta: SessionMeta
    messages: list[dict[str, Any]]
    #: The latest compaction: the summary, and the index of the first message kept verbatim.
    summary: str | None = None
    keep_from: int = 0
    #: What load repaired, in words (empty when nothing was wrong).
    repairs: list[str] = field(default_factory=list)
