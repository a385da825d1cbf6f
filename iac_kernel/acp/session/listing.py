"""``session/list``: stored sessions of exactly one working directory, newest first,
in pages joined by an opaque cursor.

The cursor encodes the sort key of the last session shown, so a page follows on from
where the previous one stopped even when sessions are added or updated in between.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from acp.schema import ListSessionsResponse, SessionInfo

from iac_kernel.acp.protocol import errors
from iac_kernel.sessions.store import SessionMeta
from iac_kernel.textsafe import readable

PAGE_SIZE = 50


def list_page(
    metas: list[SessionMeta], cursor: str | None, page_size: int = PAGE_SIZE
) -> ListSessionsResponse:
    """One page of ``metas`` (sorted newest first, as the store lists them)."""
    start = 0
    if cursor is not None:
        after = decode_cursor(cursor)
        start = next((i for i, m in enumerate(metas) if _key(m) < after), len(metas))
    page = metas[start : start + page_size]
    more = start + page_size < len(metas)
    return ListSessionsResponse(
        sessions=[session_info(meta) for meta in page],
        next_cursor=encode_cursor(_key(page[-1])) if more and page else None,
    )


def session_info(meta: SessionMeta) -> SessionInfo:
    extra: dict[str, Any] = {
        "createdAt": meta.created_at,
        "origin": meta.origin,
        "messageCount": meta.message_count,
    }
    for name, value in (
        ("gitRoot", meta.git_root),
        ("notebook", meta.notebook),
        ("model", meta.model),
        ("mode", meta.mode),
        ("forkedFrom", meta.forked_from),
    ):
        if value:
            extra[name] = readable(value)
    return SessionInfo(
        session_id=meta.session_id,
        cwd=readable(meta.cwd),  # a non-UTF-8 folder or title is shown, never a crash
        title=readable(meta.title) if meta.title else meta.title,
        updated_at=meta.updated_at,
        additional_directories=_dirs(meta.additional_directories) or None,
        field_meta={"iac_kernel": extra},
    )


def _dirs(value: Any) -> list[str]:
    """The stored roots (a hand-edited file may hold anything: only absolute paths)."""
    if not isinstance(value, list):
        return []
    return [readable(d) for d in value if isinstance(d, str) and d.startswith("/")]


def _key(meta: SessionMeta) -> tuple[str, str]:
    return (meta.updated_at, meta.session_id)


def encode_cursor(key: tuple[str, str]) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, session_id = json.loads(raw)
        if not isinstance(updated_at, str) or not isinstance(session_id, str):
            raise ValueError
    except (ValueError, TypeError):
        raise errors.invalid_field("cursor", "invalid cursor; pass nextCursor unchanged") from None
    return updated_at, session_id
