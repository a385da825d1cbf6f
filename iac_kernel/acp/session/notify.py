"""Session-level notifications: title, usage (after each model call and at turn end), options,
mode, MCP status (the slash commands: :func:`iac_kernel.acp.session.commands.send_commands`).

Each helper sends one ``session/update``; the caller decides when (a turn's usage and
title before its ``session/prompt`` answer; a load's title before its answer; a new
session's commands after its answer, once the client knows the id).
"""

from __future__ import annotations

import logging
from typing import Any

from acp import RequestError
from acp.schema import (
    ConfigOptionUpdate,
    Cost,
    CurrentModeUpdate,
    SessionInfoUpdate,
    UsageUpdate,
)

from iac_kernel.acp.session import state as session_state
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.agent.session import AgentSession
from iac_kernel.events import Usage
from iac_kernel.models.scripted import estimate_tokens

DEFAULT_CONTEXT_WINDOW = 200_000
log = logging.getLogger(__name__)


async def send_info(
    channel: ClientChannel, session: AgentSession, meta: dict[str, Any] | None = None
) -> None:
    update = SessionInfoUpdate(
        session_update="session_info_update",
        title=session.title,
        updated_at=session.meta.updated_at,
        field_meta=meta,
    )
    await channel.update(session.session_id, update)


async def send_options(channel: ClientChannel, session: AgentSession) -> None:
    update = ConfigOptionUpdate(
        session_update="config_option_update",
        config_options=session_state.config_options(session, channel.features.boolean_options),
    )
    await channel.update(session.session_id, update)


async def send_mode(channel: ClientChannel, session: AgentSession) -> None:
    update = CurrentModeUpdate(session_update="current_mode_update", current_mode_id=session.mode)
    await channel.update(session.session_id, update)


async def send_usage(
    channel: ClientChannel, session: AgentSession, turn_usage: Usage | None = None
) -> None:
    """The context filled so far and, where the footer has a price, the session's cost
    (``turn_usage``: the running turn's usage so far, not yet in ``session.cost``)."""
    used, size = context_usage(session)
    update = UsageUpdate(
        session_update="usage_update", used=used, size=size, cost=session_cost(session, turn_usage)
    )
    await channel.update(session.session_id, update)


def session_cost(session: AgentSession, turn_usage: Usage | None = None) -> Cost | None:
    """``Cost`` (USD, list price) of the session's turns since it was opened, with the
    running turn's usage so far; ``None`` where the price is not known."""
    running = session.turn_cost(turn_usage) if turn_usage is not None else None
    used = turn_usage is not None and bool(turn_usage.input_tokens or turn_usage.output_tokens)
    amount = session.cost.total(running, used)
    return None if amount is None else Cost(amount=round(amount, 6), currency="USD")


async def call_usage(channel: ClientChannel, session: AgentSession, turn_usage: Usage) -> None:
    """A model call of a running turn finished: the usage so far. A client that went away
    does not stop the turn (its answer reports the failure, if any)."""
    try:
        await send_usage(channel, session, turn_usage)
    except (ConnectionError, RequestError) as exc:
        log.info("usage update not sent: %s", exc)


def context_usage(session: AgentSession) -> tuple[int, int]:
    """Tokens the next model call would start from, and the model's context window."""
    used = estimate_tokens(session.conversation.model_messages())
    size = session.settings.context_window
    if not size:
        try:
            size = session.model().context_window
        except Exception:
            size = DEFAULT_CONTEXT_WINDOW
    return used, int(size)


async def after_turn(
    channel: ClientChannel, session: AgentSession, title_before: str | None, seen: Any
) -> Any:
    """The turn's title and usage updates (before its answer): the title when it changed,
    with the MCP servers' states in ``_meta`` when they differ from ``seen`` (a server
    that died during the turn). A client that went away does not change the turn's
    answer. Returns the states now told."""
    statuses = session_state.mcp_statuses(session)
    changed = statuses != seen
    try:
        if session.title != title_before or changed:
            meta = {"iac_kernel": {"mcpServers": statuses}} if changed else None
            await send_info(channel, session, meta)
        await send_usage(channel, session)
    except (ConnectionError, RequestError) as exc:
        log.info("turn-end updates not sent: %s", exc)
    return statuses
