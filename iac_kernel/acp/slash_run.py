"""A slash command sent as a prompt (``/mode plan``): run it, answer with its text as
one agent message, and send the mode and options it changed; the turn ends at once."""

from __future__ import annotations

from acp import update_agent_message_text
from acp.schema import PromptResponse

from iac_kernel.acp import commands, notify
from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.turn import prompt_response
from iac_kernel.acp.updates import new_message_id
from iac_kernel.agent.session import AgentSession
from iac_kernel.events import TurnEnded, Usage


async def run_command(
    channel: ClientChannel, session: AgentSession, name: str, args: str
) -> PromptResponse:
    outcome = await commands.run(session, name, args)
    await channel.update(
        session.session_id,
        update_agent_message_text(outcome.text),
        {"messageId": new_message_id()},
    )
    if outcome.changed == "mode":
        await notify.send_mode(channel, session)
    if outcome.changed:
        await notify.send_options(channel, session)
    return prompt_response(TurnEnded("end_turn", Usage()))
