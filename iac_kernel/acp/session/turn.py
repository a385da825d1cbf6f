"""One ``session/prompt`` turn: stream its events to the client and build the answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp.schema import PromptResponse, Usage

from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.acp.protocol.notices import live_update
from iac_kernel.acp.protocol.updates import (
    PlanTracker,
    ToolCallTracker,
    chunk_kind,
    chunk_update,
    extra_fields,
    new_message_id,
    to_update,
)
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.events import AgentEvent, ModelCallDone, TurnEnded
from iac_kernel.events import Usage as CoreUsage

log = logging.getLogger(__name__)


class TurnRelay:
    """The ``emit`` callback of one turn: sends each event as a ``session/update``.

    Text and thinking deltas that arrive together (in one event-loop iteration: a
    network read often carries many) go out as one chunk, sent as soon as the loop
    turns; any other event, and :meth:`finish`, first sends the text held. Other
    updates are awaited before the turn goes on, so all of a turn's updates are written
    before its ``session/prompt`` answer, in the order of the events.
    """

    def __init__(
        self,
        channel: ClientChannel,
        session_id: str,
        on_model_call: Callable[[CoreUsage], Awaitable[None]] | None = None,
    ) -> None:
        self.channel = channel
        #: Sends a ``usage_update`` after each model call (the context filled so far; it
        #: gets the turn's usage so far, for the cost).
        self.on_model_call = on_model_call
        self.session_id = session_id
        self.tracker = ToolCallTracker()
        #: What the client declared (notices and compactions as updates of their own).
        self.features: ClientFeatures = getattr(channel, "features", ClientFeatures())
        #: Calls that set a checklist: their completion sends the model's plan.
        self.plans = PlanTracker()
        #: Set by session/cancel: the turn ends ``cancelled`` whatever happens next.
        self.cancel_requested = False
        #: Deltas not sent yet, all of ``_held_kind``; whether a send of them is scheduled.
        self._held: list[str] = []
        self._held_kind: str | None = None
        self._send_scheduled = False
        self._senders: set[asyncio.Task[None]] = set()
        #: A send of held text waiting for the client to read (back-pressure).
        self._draining: asyncio.Task[Any] | None = None
        #: The ``messageId`` of the model call streaming now (one message a model call).
        self._message_id: str | None = None

    async def __call__(self, event: AgentEvent) -> None:
        kind = chunk_kind(event)
        if kind is not None:  # a text/thinking delta: held, no SDK model round trip
            if kind != self._held_kind:
                await self.send_held()
                self._held_kind = kind
            self._held.append(event.text)  # type: ignore[attr-defined]
            if self._draining is not None:  # the client reads slowly: wait for it
                await asyncio.shield(self._draining)
            if not self._send_scheduled:
                self._send_scheduled = True
                sender = asyncio.ensure_future(self._send_held_soon())
                self._senders.add(sender)
                sender.add_done_callback(self._senders.discard)
            return
        await self.send_held()
        if isinstance(event, ModelCallDone):
            self._message_id = None
            if self.on_model_call is not None:
                await self.on_model_call(event.usage)
            return
        self.tracker.see(event)
        special = live_update(event, self.features)
        if special is not None:
            await self.channel.forward_update({"sessionId": self.session_id, "update": special})
            return
        plan = self.plans.see(event)
        update = to_update(event)
        if update is not None:
            extra = extra_fields(event, self._message_id)
            await self.channel.update(self.session_id, update, extra)
        if plan is not None:
            await self.channel.update(self.session_id, plan)

    async def send_held(self) -> None:
        """Send the deltas held, as one chunk."""
        if not self._held:
            return
        text = "".join(self._held)
        self._held.clear()
        if self._message_id is None:
            self._message_id = new_message_id()
        update = chunk_update(self._held_kind or "agent_message_chunk", text, self._message_id)
        await self.channel.forward_update({"sessionId": self.session_id, "update": update})

    async def _send_held_soon(self) -> None:
        # Runs once the loop turns; deltas arriving meanwhile join the same chunk.
        self._send_scheduled = False
        self._draining = asyncio.current_task()  # seen by __call__ only if drain blocks
        try:
            await self.send_held()
        finally:
            self._draining = None

    async def finish(self) -> None:
        """Send the text held, then close tool calls the turn left open (only a core
        failure leaves any)."""
        await self.send_held()
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
