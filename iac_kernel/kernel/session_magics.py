"""The session magics: ``%session``, ``%sessions``, ``%load``, ``%fork``, ``%new``.

Each is ``async def NAME(magics, args) -> MagicOutput``, registered in
:data:`iac_kernel.kernel.magics.SPECS`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from iac_kernel.guard.sandbox import status_text as guard_status
from iac_kernel.kernel.magic_base import (
    MagicError,
    MagicOutput,
    _cell,
    _history,
    _plain_table,
    _table,
)
from iac_kernel.kernel.paths import shown, shown_model
from iac_kernel.sessions.store import SessionMeta

if TYPE_CHECKING:
    from iac_kernel.kernel.magics import Magics

#: Sessions shown by %sessions before "N more".
LIST_LIMIT = 25


async def session(magics: Magics, args: str) -> MagicOutput:
    if args:
        raise MagicError("%session takes no arguments (use %load ID to switch)")
    session = magics.state.session()
    meta = session.meta
    usage = session.usage
    rows = [
        ("id", f"`{session.session_id}`"),
        ("title", _cell(meta.title or "(untitled until the first prompt)")),
        ("cwd", f"`{shown(session.cwd)}`"),
        (
            "git root",
            f"`{shown(meta.git_root)}`" if meta.git_root else "(not in a git repository)",
        ),
        ("model", f"`{shown_model(session.model_id)}`"),
        ("mode", f"`{session.mode}`"),
        ("messages", str(meta.message_count)),
        (
            "tokens used",
            f"{usage.total_tokens:,} (input {usage.input_tokens:,}, "
            f"output {usage.output_tokens:,}; this kernel)",
        ),
        ("store", f"`{_store_shown(magics.state.manager.store.root)}`"),
        ("guard", _cell(guard_status())),
    ]
    if session.provider != "scripted":
        rows.insert(4, ("provider", f"`{session.provider}`"))
    if meta.notebook:
        rows.append(("notebook", f"`{shown(meta.notebook)}`"))
    if meta.forked_from:
        rows.append(("forked from", f"`{meta.forked_from}`"))
    plain_rows = [(k, v.replace("`", "")) for k, v in rows]
    return MagicOutput(_table(rows), _plain_table(plain_rows))


async def sessions(magics: Magics, args: str) -> MagicOutput:
    if args not in ("", "all"):
        raise MagicError("usage: %sessions [all]")
    everywhere = args == "all"
    metas = magics.state.sessions(everywhere)
    where = "in the store" if everywhere else f"in `{shown(magics.state.cwd)}`"
    if not metas:
        text = f"No sessions {where} yet."
        if not everywhere:
            text += " `%sessions all` lists every folder."
        return MagicOutput(text, text.replace("`", ""))
    current = magics._current()
    current_id = current.session_id if current else None
    head = "| | id | title | updated | messages | origin | open in |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    plain = []
    for meta in metas[:LIST_LIMIT]:
        mark = "▶" if meta.session_id == current_id else ""
        holder = _holder(magics, meta, current_id)
        cwd = f" ({shown(meta.cwd)})" if everywhere else ""
        lines.append(
            f"| {mark} | `{meta.session_id}` | {_cell((meta.title or '') + cwd)} | "
            f"{meta.updated_at} | {meta.message_count} | {meta.origin} | {_cell(holder)} |"
        )
        plain.append(
            f"{'*' if mark else ' '} {meta.session_id}  {meta.title or '(untitled)'}{cwd}  "
            f"{meta.updated_at}  {meta.message_count} messages  {meta.origin}"
            + (f"  open in {holder}" if holder else "")
        )
    if len(metas) > LIST_LIMIT:
        more = f"… and {len(metas) - LIST_LIMIT} older sessions."
        lines.append(f"\n{more}")
        plain.append(more)
    title = f"**{len(metas)} session(s)** {where}; `%load ID` switches to one.\n\n"
    return MagicOutput(title + "\n".join(lines), "\n".join(plain))


def _holder(magics: Magics, meta: SessionMeta, current_id: str | None) -> str:
    if meta.session_id == current_id:
        return "this kernel"
    try:
        holder = magics.state.manager.store.lock_holder(meta.session_id)
    except OSError:
        return ""
    if not holder:
        return ""
    return str(holder.get("holder") or f"pid {holder.get('pid', '?')}")


async def load(magics: Magics, args: str) -> MagicOutput:
    if not args:
        raise MagicError("usage: %load SESSION_ID (see %sessions)")
    session = await magics.state.load(args)
    text = f"Loaded session `{session.session_id}`: {_cell(session.title or '(untitled)')}"
    model = shown_model(session.model_id)
    text += f" ({session.meta.message_count} messages, model `{model}`)."
    if session.repairs:
        text += " Repaired on load: " + "; ".join(session.repairs) + "."
    history = _history(session)
    return MagicOutput(text + ("\n\n" + history if history else ""), text.replace("`", ""))


async def fork(magics: Magics, args: str) -> MagicOutput:
    if args:
        raise MagicError("%fork takes no arguments")
    source = magics.state.session().session_id
    session = await magics.state.fork()
    text = f"Forked `{source}` into `{session.session_id}`; this notebook now uses the fork."
    return MagicOutput(text, text.replace("`", ""))


async def new(magics: Magics, args: str) -> MagicOutput:
    session = await magics.state.new(args or None)
    text = f"Started a new session `{session.session_id}` in `{shown(session.cwd)}`."
    return MagicOutput(text, text.replace("`", ""))


def _store_shown(root: object) -> str:
    """The store folder for display: its variable's name when the environment set it."""
    if os.environ.get("IAC_KERNEL_SESSIONS_DIR"):
        return "$IAC_KERNEL_SESSIONS_DIR"
    return shown(str(root))
