"""The ACP agent: maps each protocol method onto the session manager and its sessions.

One instance serves one connection (stdio, or one client of the kernel's socket); the
:class:`~iac_kernel.sessions.manager.SessionManager` may be shared, so a session loaded
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
attach to it (:mod:`~iac_kernel.acp.attached`).
"""

from __future__ import annotations

import logging
from typing import Any

from acp import PROTOCOL_VERSION, update_user_message_text
from acp.schema import Implementation, InitializeResponse, ListSessionsResponse, PromptResponse

from iac_kernel import __version__
from iac_kernel.acp import commands, errors, notify, session_config, session_state
from iac_kernel.acp.attached import AttachedSessions
from iac_kernel.acp.capabilities import CAPABILITIES
from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.client_features import ClientFeatures, from_initialize
from iac_kernel.acp.content import to_anthropic
from iac_kernel.acp.control import LEASES, Mirrored, tell_lost
from iac_kernel.acp.control import METHOD as METHOD_CONTROL
from iac_kernel.acp.history_cache import KeptReplay, send_history
from iac_kernel.acp.lifecycle import (
    check_cwd,
    check_dirs,
    delete_stored,
    mcp_specs,
    set_dirs,
    start_mcp,
)
from iac_kernel.acp.listing import list_page
from iac_kernel.acp.permissions import PermissionAsker, approver
from iac_kernel.acp.slash_run import run_command
from iac_kernel.acp.transport import after_answer
from iac_kernel.acp.turn import TurnRelay, prompt_response, run_turn
from iac_kernel.agent.session import AgentSession, SessionBusyError, SessionClosedError
from iac_kernel.events import TurnEnded, Usage
from iac_kernel.models.providers import auth_methods
from iac_kernel.sessions.manager import SessionManager
from iac_kernel.sessions.store import SessionNotFoundError

log = logging.getLogger(__name__)


class IacAgent:
    """ACP methods for one connection."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self.channel: ClientChannel | None = None
        #: What the client declared in ``initialize`` (:meth:`declare`).
        self.features = ClientFeatures()
        self.initialized = False
        self.client_info: Any = None
        #: Turns this connection started and that are still running, by session id.
        self._turns: dict[str, TurnRelay] = {}
        #: Sessions a kernel holds that this connection attached to.
        self.attached = AttachedSessions(manager, self._channel)
        #: MCP server states last told to the client, by session id.
        self._mcp_seen: dict[str, Any] = {}
        #: False: requests that set bypass mode are refused (routes.py, acp/bypass.py).
        self.allow_bypass = True

    def attach(self, channel: ClientChannel) -> None:
        self.channel = channel
        channel.features = self.features

    def declare(self, params: Any) -> None:
        """Note what the client declared in ``initialize`` (raw params: the SDK's models
        drop the capabilities newer than schema 1.19); the channel's senders read it."""
        self.features = from_initialize(params)
        if self.channel is not None:
            self.channel.features = self.features

    def _booleans(self) -> bool:
        """Whether the client takes ``boolean`` config options."""
        return self.features.boolean_options

    # -- lifecycle -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> InitializeResponse:
        self.initialized = True
        self.client_info = client_info
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=CAPABILITIES,
            agent_info=Implementation(name="iac-kernel", title="iac-kernel", version=__version__),
            auth_methods=auth_methods(),
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **_: Any
    ) -> dict[str, Any]:
        specs = mcp_specs(mcp_servers, cwd)
        dirs = check_dirs(additional_directories)
        try:
            session = self.manager.new(cwd)
        except ValueError as exc:
            raise errors.invalid_field("cwd", str(exc)) from None
        if dirs:
            set_dirs(session, dirs)
        await start_mcp(session, specs)
        after_answer(lambda: notify.send_commands(self._channel(), session))
        return self._new_answer(session)

    async def adopt(self, session: AgentSession) -> None:
        """A session whose ``session/new`` was answered before the SDK loaded
        (:mod:`iac_kernel.acp.early_start`): what :meth:`new_session` does after its answer."""
        self._remember_mcp(session)
        self._join(session)
        await notify.send_commands(self._channel(), session)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Replay the whole history, the title and the commands as session/update, then
        answer: nothing of the load follows its answer.

        The session keeps the working directory it was created in; ``cwd`` must be
        absolute but need not match (an editor may open the project root).
        """
        return await self._reopen(
            "session/load", cwd, session_id, mcp_servers, additional_directories
        )

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Like load without the replay (the client already shows the history)."""
        return await self._reopen(
            "session/resume", cwd, session_id, mcp_servers, additional_directories
        )

    async def _reopen(
        self, method: str, cwd: str, session_id: str, mcp_servers: Any, additional: Any
    ) -> dict[str, Any]:
        """``session/load`` or ``session/resume``: the stored session opened here (or the
        answer of the kernel that holds it), the history replayed for a load, then its
        title and commands, then the answer."""
        check_cwd(cwd)
        specs = mcp_specs(mcp_servers, cwd)
        dirs = check_dirs(additional)
        channel = self._channel()
        async with KeptReplay(channel, active=method == "session/load") as kept:
            session = await self.attached.open_or_forward(
                method, cwd, session_id, dirs, kept.on_lock
            )
            if not isinstance(session, AgentSession):
                return session  # the kernel's answer; a load's history it replayed itself
            set_dirs(session, dirs)
            await start_mcp(session, specs)
            self._join(session)
            if kept.active:
                await send_history(channel, session, kept)
        await notify.send_info(channel, session)
        await notify.send_commands(channel, session)
        return {
            **session_state.session_state(session, self._booleans()),
            **self._mcp_answer(session),
        }

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_: Any,
    ) -> dict[str, Any]:
        """A new session with a copy of the history (stored or live), in the source's cwd."""
        check_cwd(cwd)
        specs = mcp_specs(mcp_servers, cwd)
        dirs = check_dirs(additional_directories)
        try:
            session = self.manager.fork(session_id)
        except (SessionNotFoundError, TypeError):
            raise errors.session_not_found() from None
        set_dirs(session, dirs)
        await start_mcp(session, specs)
        channel = self._channel()
        after_answer(lambda: notify.send_info(channel, session))
        after_answer(lambda: notify.send_commands(channel, session))
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
        if cwd is not None:
            cwd = check_cwd(cwd)
        return list_page(self.manager.list(cwd), cursor)

    # -- settings ----------------------------------------------------------------------

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> dict[str, Any]:
        session = self._steerable(session_id, "session/set_mode")
        session_config.set_mode(session, mode_id)
        after_answer(lambda: notify.send_options(self._channel(), session))
        return {}

    async def set_session_model(self, session_id: str, model_id: str, **_: Any) -> dict[str, Any]:
        """``session/set_model``: not in schema v1.19 (the model is a config option), kept
        for clients that still send it."""
        session = self._steerable(session_id, "session/set_model")
        session_config.set_model(session, model_id)
        after_answer(lambda: notify.send_options(self._channel(), session))
        return {}

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **_: Any
    ) -> dict[str, Any]:
        session = self._steerable(session_id, "session/set_config_option")
        session_config.apply(session, config_id, value)
        if config_id == "mode":
            after_answer(lambda: notify.send_mode(self._channel(), session))
        return {"configOptions": session_state.config_options(session, self._booleans())}

    # -- turns -------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        """Run a turn (or a slash command). Every update of the turn, its title and usage
        included, is sent before this answer, cancelled turns too."""
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
            return await run_command(self._channel(), session, *command)
        sid = session.session_id
        channel = Mirrored(self._channel(), sid, self)
        for block in blocks:  # the observers see what was asked
            if block.get("type") == "text" and block.get("text"):
                await channel.observers_update(update_user_message_text(block["text"]))
        relay = TurnRelay(
            channel,
            sid,
            session.cwd,
            on_model_call=lambda usage: notify.call_usage(channel, session, usage),
        )
        title = session.title
        self._turns[sid] = relay
        try:
            asker = PermissionAsker(
                self._channel(), sid, approver(self.manager.origin, self.client_info)
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
                raise errors.not_in_control(METHOD_CONTROL)
            former = LEASES.claim(session.session_id, self)
            if former is not None:
                await tell_lost(former, session.session_id)
        return {"sessionId": session.session_id, "controller": LEASES.holder(session_id) is self}

    # -- helpers -----------------------------------------------------------------------

    def _channel(self) -> ClientChannel:
        if self.channel is None:
            raise RuntimeError("agent is not attached to a connection")
        return self.channel

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
        LEASES.join(session.session_id, self, self._channel())

    def _new_answer(self, session: AgentSession) -> dict[str, Any]:
        """The answer to ``session/new`` or ``session/fork``; this connection a member."""
        self._remember_mcp(session)
        self._join(session)
        return session_state.new_session_answer(session, self._booleans())

    def _mcp_answer(self, session: AgentSession) -> dict[str, Any]:
        """The answer's MCP ``_meta``, remembered to tell later changes."""
        self._remember_mcp(session)
        return session_state.answer_meta(session)

    def _remember_mcp(self, session: AgentSession) -> None:
        """The MCP server states a session answer tells, to tell later changes."""
        self._mcp_seen[session.session_id] = notify.mcp_statuses(session)

    async def _after_turn(self, session: AgentSession, title_before: str | None) -> None:
        """The turn's title and usage updates (before its answer)."""
        seen = self._mcp_seen.get(session.session_id, notify.mcp_statuses(session))
        statuses = await notify.after_turn(self._channel(), session, title_before, seen)
        self._mcp_seen[session.session_id] = statuses
