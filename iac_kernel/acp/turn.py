"""One ``session/prompt`` turn: stream its events to the client and build the answer."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp.schema import PromptResponse, Usage

from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.locations import grep_locations
from iac_kernel.acp.updates import ToolCallTracker, fast_update, to_update
from iac_kernel.events import AgentEvent, ToolCallResult, TurnEnded
from iac_kernel.events import Usage as CoreUsage

log = logging.getLogger(__name__)


class TurnRelay:
    """The ``emit`` callback of one turn: sends each event as a ``session/update``.

    Every update is awaited before the turn goes on, so all of a turn's updates are
    written before its ``session/prompt`` answer.
    """

    def __init__(self, channel: ClientChannel, session_id: str, cwd: Any = None) -> None:
        self.channel = channel
        self.session_id = session_id
        #: The session's folder: grep's relative match paths become absolute locations.
        self.cwd = cwd
        self.tracker = ToolCallTracker()
        #: Set by session/cancel: the turn ends ``cancelled`` whatever happens next.
        self.cancel_requested = False

    async def __call__(self, event: AgentEvent) -> None:
        payload = fast_update(event)
        if payload is not None:  # a text/thinking delta: no SDK model round trip (H6)
            await self.channel.forward_update({"sessionId": self.session_id, "update": payload})
            return
        self.tracker.see(event)
        update = to_update(event)
        if update is None:
            return
        if isinstance(event, ToolCallResult) and event.name == "grep" and self.cwd is not None:
            update.locations = grep_locations(event.output, self.cwd)
        await self.channel.update(self.session_id, update)

    async def finish(self) -> None:
        """Close tool calls the turn left open (only a core failure leaves any)."""
        for update in self.tracker.closing_updates():
            await self.channel.update(self.session_id, update)


async def run_turn(session: Any, blocks: list[dict[str, Any]], relay: TurnRelay, ask: Any):
    """Run the turn; a turn cancelled before its loop started also ends ``cancelled``.

    (AgentSession.cancel() on a turn whose task has not run yet cancels it before the loop
    can catch it; the CancelledError then reaches us although our own task is fine.)
    """
    try:
        return await session.prompt(blocks, relay, ask)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return TurnEnded("cancelled", CoreUsage())


def prompt_response(ended: TurnEnded) -> PromptResponse:
    usage = ended.usage
    return PromptResponse(
        stop_reason=ended.stop_reason,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            cached_read_tokens=usage.cache_read_tokens or None,
            cached_write_tokens=usage.cache_write_tokens or None,
        ),
    )
