"""Slash commands: the magics that make sense in an editor, typed at the start of a prompt.

``/session``, ``/mode [MODE]``, ``/model [ID]``, ``/permissions [reset]``, ``/compact``
and ``/mcp [list | add ... | remove NAME]``. They are advertised with
``available_commands_update``; a prompt whose first text starts with one of them runs
the command instead of a turn: its answer is an ``agent_message_chunk`` and the prompt
ends ``end_turn`` with zero usage, after the mode and options it changed. Any other
``/word`` (a path, say) is an ordinary prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acp import update_agent_message_text
from acp.schema import (
    AvailableCommand,
    AvailableCommandsUpdate,
    PromptResponse,
    UnstructuredCommandInput,
)

from iac_kernel.acp.protocol import errors
from iac_kernel.acp.protocol.updates import new_message_id
from iac_kernel.acp.session import notify
from iac_kernel.acp.session.turn import prompt_response
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.agent.conversation import split_point, summarise
from iac_kernel.agent.session import AgentSession
from iac_kernel.config import MODES
from iac_kernel.events import TurnEnded, Usage
from iac_kernel.mcp.commands import McpCommandError, run_mcp_command
from iac_kernel.models.base import ModelError
from iac_kernel.models.registry import available_models
from iac_kernel.models.scripted import ScriptError

COMMANDS: dict[str, tuple[str, str | None]] = {
    "session": ("Show this session: id, folder, model, mode, token usage", None),
    "mode": ("Show or change the permission mode", " | ".join(MODES)),
    "model": ("Show or change the model", "model id"),
    "permissions": ("Show the remembered allow/reject answers; 'reset' forgets them", "reset"),
    "compact": ("Summarise the earlier conversation now to free context", None),
    "mcp": ("MCP servers: list, add NAME COMMAND|URL, remove NAME, trust", "list | add | remove"),
}


@dataclass
class Outcome:
    """What a command printed and which session state it changed."""

    text: str
    changed: str | None = None  # "mode" or "model"


def commands_update() -> AvailableCommandsUpdate:
    return AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[
            AvailableCommand(
                name=name,
                description=description,
                input=UnstructuredCommandInput(hint=hint) if hint else None,
            )
            for name, (description, hint) in COMMANDS.items()
        ],
    )


async def send_commands(channel: ClientChannel, session: AgentSession) -> None:
    await channel.update(session.session_id, commands_update())


def parse(blocks: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(name, args)`` when the prompt is a slash command, else ``None``."""
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
    if not text.startswith("/"):
        return None
    head, _, args = text[1:].partition(" ")
    head, _, more = head.partition("\n")
    if head not in COMMANDS:
        return None
    return head, (more + " " + args).strip()


async def run_command(
    channel: ClientChannel, session: AgentSession, name: str, args: str
) -> PromptResponse:
    """A slash command sent as a prompt: its text as one agent message, then the mode and
    options it changed; the turn ends at once."""
    outcome = await run(session, name, args)
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


async def run(session: AgentSession, name: str, args: str) -> Outcome:
    """Run one command; -32602 for bad arguments."""
    if name == "session":
        return Outcome(_session_text(session))
    if name == "mode":
        if not args:
            return Outcome(f"Mode: `{session.mode}`. Modes: {', '.join(MODES)}.")
        try:
            session.set_mode(args)
        except ValueError as exc:
            raise errors.invalid_field("prompt", str(exc)) from None
        return Outcome(f"Mode set to `{args}`.", "mode")
    if name == "model":
        if not args:
            return Outcome(
                f"Model: `{session.model_id}`. Available: {', '.join(available_models())}."
            )
        try:
            note = session.set_model(args)
        except ValueError as exc:
            raise errors.invalid_field("prompt", str(exc)) from None
        session.notes = []  # said in this answer
        text = f"Model set to `{session.model_id}` ({session.provider})."
        return Outcome(text + (f" {note}" if note else ""), "model")
    if name == "permissions":
        return Outcome(_permissions(session, args))
    if name == "compact":
        return Outcome(await compact_now(session))
    try:
        return Outcome(await run_mcp_command(session, args))
    except McpCommandError as exc:
        raise errors.invalid_field("prompt", str(exc)) from None


def _session_text(session: AgentSession) -> str:
    usage = session.usage
    return "\n".join(
        [
            f"Session `{session.session_id}`" + (f": {session.title}" if session.title else ""),
            f"- folder: `{session.cwd}`",
            f"- model: `{session.model_id}`, mode: `{session.mode}`",
            f"- messages: {len(session.conversation.messages)}",
            f"- tokens this run: {usage.input_tokens} in, {usage.output_tokens} out",
        ]
    )


def _permissions(session: AgentSession, args: str) -> str:
    remembered = session.gate.remembered
    if args == "reset":
        count = len(remembered)
        remembered.clear()
        return f"Forgot {count} remembered answer(s); tools ask again."
    if args:
        raise errors.invalid_field("prompt", "usage: /permissions [reset]")
    if not remembered:
        return f"Mode `{session.mode}`; no remembered answers."
    lines = [f"- `{tool}`: always {answer}" for tool, answer in sorted(remembered.items())]
    return f"Mode `{session.mode}`; remembered answers:\n" + "\n".join(lines)


async def compact_now(session: AgentSession) -> str:
    """Summarise everything but the last exchange into the session's summary."""
    conversation = session.conversation
    visible = conversation.messages[conversation.keep_from :]
    cut = split_point(visible, 0)
    if cut <= 0:
        return "Nothing to compact yet."
    try:
        summary = await summarise(session.model(), visible[:cut], conversation.summary)
    except (ModelError, ScriptError) as exc:
        raise errors.invalid_field("prompt", f"could not compact: {exc}") from None
    conversation.summary = summary
    conversation.keep_from += cut
    session.writer.append_compaction(summary, conversation.keep_from)
    return f"Compacted: {cut} earlier messages were summarised."
