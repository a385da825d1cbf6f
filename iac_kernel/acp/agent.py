"""The ACP agent: maps each protocol method onto the session manager and its sessions.

One instance serves one connection (stdio, or one client of the kernel's socket); the
:class:`~iac_kernel.agent.manager.SessionManager` may be shared, so a session loaded
twice is one runtime. The SDK's router calls the methods below by name; the class does
not subclass ``acp.Agent``, so methods it lacks (``authenticate``, extensions) answer
-32601 instead of a silent ``null``.

A ``session/prompt`` on a session that is already running a turn is refused with
-32602 (``{"session_id": "Session is busy: ..."}``); prompts are not queued, so there are
never two loops on one history. The connection that started a turn controls it: another
client of the same session (a second editor on the server's endpoint) cannot cancel it or
change its mode, model or options while it runs (-32602, ``controlled by another
client``), and the turn's permission questions go to the controlling connection only.

A session whose lock a running Jupyter kernel holds runs in that kernel: load and resume
attach to it (:mod:`~iac_kernel.acp.attach.attached`).

The agent is made after the ``initialize`` answer (:mod:`iac_kernel.acp.routes`: this
module imports the agent core, most of start-up). ``session/new`` takes its params as
they came (checked here) and answers in plain JSON: it is answered before the ACP SDK
is imported (its ~280 models take most of a second: ``bench/startup.py``). The modules
built on the SDK's models are imported by the methods that use them.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from iac_kernel.acp.attach.attached import AttachedSessions
from iac_kernel.acp.protocol import errors
from iac_kernel.acp.protocol.notices import CONTROL_METHOD
from iac_kernel.acp.session import state as session_state
from iac_kernel.acp.session.control import LEASES, Mirrored, tell_lost
from iac_kernel.acp.session.lifecycle import delete_stored, opening, set_dirs, start_mcp
from iac_kernel.acp.wire.connection import after_answer
from iac_kernel.agent.session import AgentSession, SessionBusyError, SessionClosedError
from iac_kernel.events import TurnEnded, Usage
from iac_kernel.sessions.store import SessionNotFoundError

if TYPE_CHECKING:
    from acp.schema import ListSessionsResponse, PromptResponse

    from iac_kernel.acp.session.turn import TurnRelay
    from iac_kernel.acp.wire.channel import ClientChannel
    from iac_kernel.agent.manager import SessionManager

log = logging.getLogger(__name__)


class IacAgent:
    """ACP methods for one connection."""

    def __init__(self, manager: SessionManager, channel: ClientChannel) -> None:
        self.manager = manager
        self.channel = channel
        #: Turns this connection started and that are still running, by session id.
        self._turns: dict[str, TurnRelay] = {}
        #: Sessions a kernel holds that this connection attached to.
        self.attached = AttachedSessions(manager, channel)
        #: MCP server states last told to the client, by session id.
        self._mcp_seen: dict[str, Any] = {}

    # -- lifecycle -------------------------------------------------------------------

    async def new_session(self, params: Any) -> dict[str, Any]:
        cwd, specs, dirs = opening(params)
        try:
            session = self.manager.new(cwd)
        except ValueError as exc:
            raise errors.invalid_field("cwd", str(exc)) from None
        if dirs:
            set_dirs(session, dirs)
        await start_mcp(session, specs)
        after_answer(lambda: self._commands(session))
        return self._new_answer(session)

    async def _reopen(
        self,
        method: str,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_: Any,
    ) -> dict[str, Any]:
        """``session/load`` or ``session/resume``: the stored session opened here (or the
        answer of the kernel that holds it), the whole history replayed for a load, then
        its title and commands as ``session/update``, then the answer: nothing of it
        follows the answer. The session keeps the working directory it was created in;
        ``cwd`` must be absolute but need not match (an editor may open the project root).
        """
        from iac_kernel.acp.replay import send_history
        from iac_kernel.acp.session import notify

        cwd, specs, dirs = opening(
            {"cwd": cwd, "mcpServers": mcp_servers, "additionalDirectories": additional_directories}
        )
        session = await self.attached.open_or_forward(method, cwd, session_id, dirs)
        if not isinstance(session, AgentSession):
            return session  # the kernel's answer; a load's history it replayed itself
        set_dirs(session, dirs)
        await start_mcp(session, specs)
        self._join(session)
        if method == "session/load":
            await send_history(self.channel, session)
        await notify.send_info(self.channel, session)
        await self._commands(session)
        self._remember_mcp(session)
        return {
            **session_state.session_state(session, self.channel.features.boolean_options),
            **session_state.answer_meta(session),
        }

    load_session = functools.partialmethod(_reopen, "session/load")
    #: ``session/resume``: like load without the replay (the client shows the history).
    resume_session = functools.partialmethod(_reopen, "session/resume")

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_: Any,
    ) -> dict[str, Any]:
        """A new session with a copy of the history (stored or live), in the source's cwd."""
        from iac_kernel.acp.session import notify

        _, specs, dirs = opening(
            {"cwd": cwd, "mcpServers": mcp_servers, "additionalDirectories": additional_directories}
        )
        try:
            session = self.manager.fork(session_id)
        except (SessionNotFoundError, TypeError):
            raise errors.session_not_found() from None
        set_dirs(session, dirs)
        await start_mcp(session, specs)
        after_answer(lambda: notify.send_info(self.channel, session))
        after_answer(lambda: self._commands(session))
        return self._new_answer(session)

    async def close_session(self, session_id: str, **_: Any) -> dict[str, Any]:
        if await self.attached.detach(session_id):
            return {}  # the kernel keeps its session
        if isinstance(session_id, str):
            LEASES.leave(session_id, self)
        try:
            await self.manager.close(session_id)
        except (SessionNotFoundError, TypeError):
            raise errors.session_not_found() from None
        return {}

    async def delete_session(self, session_id: str, **_: Any) -> dict[str, Any]:
        """Delete a stored session; refused while a kernel or another process holds it,
        or while this connection runs a turn on it."""
        await delete_stored(self.manager, session_id, attached=session_id in self.attached)
        return {}

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> ListSessionsResponse:
        from iac_kernel.acp.session.listing import list_page

        if cwd is not None:
            cwd = opening({"cwd": cwd})[0]
        return list_page(self.manager.list(cwd), cursor)

    # -- settings ----------------------------------------------------------------------

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> dict[str, Any]:
        from iac_kernel.acp.session import notify

        session = self._steerable(session_id, "session/set_mode")
        session_state.apply(session, "mode", mode_id, "modeId")
        after_answer(lambda: notify.send_options(self.channel, session))
        return {}

    async def set_session_model(self, session_id: str, model_id: str, **_: Any) -> dict[str, Any]:
        """``session/set_model``: not in schema v1.19 (the model is a config option), kept
        for clients that still send it."""
        from iac_kernel.acp.session import notify

        session = self._steerable(session_id, "session/set_model")
        session_state.apply(session, "model", model_id, "modelId")
        after_answer(lambda: notify.send_options(self.channel, session))
        return {}

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **_: Any
    ) -> dict[str, Any]:
        from iac_kernel.acp.session import notify

        session = self._steerable(session_id, "session/set_config_option")
        session_state.apply(session, config_id, value)
        if config_id == "mode":
            after_answer(lambda: notify.send_mode(self.channel, session))
        booleans = self.channel.features.boolean_options
        return {"configOptions": session_state.config_options(session, booleans)}

    # -- turns -------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        """Run a turn (or a slash command). Every update of the turn, its title and usage
        included, is sent before this answer, cancelled turns too."""
        from acp import update_user_message_text

        from iac_kernel.acp.protocol.content import to_anthropic
        from iac_kernel.acp.session import commands, notify
        from iac_kernel.acp.session.permissions import PermissionAsker, approver
        from iac_kernel.acp.session.turn import TurnRelay, prompt_response, run_turn

        session = self._live(session_id)
        blocks = to_anthropic(prompt)
        if session.busy:
            if session.session_id not in self._turns:
                raise errors.not_in_control("session/prompt")
            raise errors.session_busy()
        if not LEASES.may_steer(session.session_id, self):
            raise errors.not_in_control("session/prompt", turn=False)
        command = commands.parse(blocks)
        if command is not None:
            return await commands.run_command(self.channel, session, *command)
        sid = session.session_id
        channel = Mirrored(self.channel, sid, self)
        for block in blocks:  # the observers see what was asked
            if block.get("type") == "text" and block.get("text"):
                await channel.observers_update(update_user_message_text(block["text"]))
        relay = TurnRelay(
            channel,
            sid,
            on_model_call=lambda usage: notify.call_usage(channel, session, usage),
        )
        title = session.title
        self._turns[sid] = relay
        try:
            asker = PermissionAsker(
                self.channel, sid, approver(self.manager.origin, self.channel.client_info)
            )
            ended = await run_turn(session, blocks, relay, asker)
        except SessionBusyError:
            raise errors.session_busy() from None
        except SessionClosedError:
            raise errors.session_not_found() from None
        except Exception:
            if not relay.cancel_requested:
                await relay.finish()
                raise
            # A cancelled turn answers "cancelled" even if tearing it down failed.
            log.exception("turn failed while being cancelled")
            ended = TurnEnded("cancelled", Usage())
        finally:
            if self._turns.get(sid) is relay:
                del self._turns[sid]
        await relay.finish()
        await self._after_turn(session, title)
        return prompt_response(ended)

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Cancel this connection's turn on the session. A turn another client started is
        not this one's to cancel: refused (a notification gets no answer, so it is only
        logged)."""
        relay = self._turns.get(session_id) if isinstance(session_id, str) else None
        session = self.manager.sessions.get(session_id) if isinstance(session_id, str) else None
        if relay is None and session is not None and session.busy:
            log.warning("session/cancel refused: another client's turn runs on %s", session_id)
            raise errors.not_in_control("session/cancel")
        holder = LEASES.holder(session_id) if isinstance(session_id, str) else None
        if holder is not None and holder is not self:
            log.warning("session/cancel refused: another client controls %s", session_id)
            raise errors.not_in_control("session/cancel", turn=False)
        if relay is not None:
            relay.cancel_requested = True
        if session is None or not session.cancel():
            log.info("session/cancel: no running turn on %s", session_id)

    async def shutdown(self) -> None:
        """The connection ended: cancel the turns it started and wait for them to end."""
        await self.attached.detach_all()
        for sid, relay in list(self._turns.items()):
            relay.cancel_requested = True
            session = self.manager.sessions.get(sid)
            if session is not None and session.cancel():
                await session.wait_idle()
        LEASES.leave_all(self)

    async def control_session(self, session_id: str, claim: bool = False, **_: Any) -> dict:
        """``_iac/session/control``: whether this client controls the session; with
        ``claim``, take the lease (refused while a turn another client started runs)."""
        session = self._live(session_id)
        if claim:
            if session.busy and session.session_id not in self._turns:
                raise errors.not_in_control(CONTROL_METHOD)
            former = LEASES.claim(session.session_id, self)
            if former is not None:
                await tell_lost(former, session.session_id)
        return {"sessionId": session.session_id, "controller": LEASES.holder(session_id) is self}

    # -- helpers -----------------------------------------------------------------------

    def _live(self, session_id: str) -> AgentSession:
        try:
            session = self.manager.get(session_id)
        except SessionNotFoundError:
            raise errors.session_not_found() from None
        if session.closed:
            raise errors.session_not_found()
        return session

    def _steerable(self, session_id: str, action: str) -> AgentSession:
        """The live session, unless a turn another client started is running on it."""
        session = self._live(session_id)
        if session.busy and session.session_id not in self._turns:
            raise errors.not_in_control(action)
        if not LEASES.may_steer(session.session_id, self):
            raise errors.not_in_control(action, turn=False)
        return session

    def _join(self, session: AgentSession) -> None:
        """This connection has ``session`` open: a member, its controller if nobody is."""
        LEASES.join(session.session_id, self, self.channel)

    def _new_answer(self, session: AgentSession) -> dict[str, Any]:
        """The answer to ``session/new`` or ``session/fork``; this connection a member."""
        self._remember_mcp(session)
        self._join(session)
        return session_state.new_session_answer(session, self.channel.features.boolean_options)

    def _remember_mcp(self, session: AgentSession) -> None:
        """The MCP server states a session answer tells, to tell later changes."""
        self._mcp_seen[session.session_id] = session_state.mcp_statuses(session)

    async def _after_turn(self, session: AgentSession, title_before: str | None) -> None:
        """The turn's title and usage updates (before its answer)."""
        from iac_kernel.acp.session import notify

        seen = self._mcp_seen.get(session.session_id, session_state.mcp_statuses(session))
        statuses = await notify.after_turn(self.channel, session, title_before, seen)
        self._mcp_seen[session.session_id] = statuses

    async def _commands(self, session: AgentSession) -> None:
        """The slash commands the session takes (after a new session's answer)."""
        from iac_kernel.acp.session.commands import send_commands

        await send_commands(self.channel, session)
