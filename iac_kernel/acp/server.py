"""Serve ACP over one reader/writer pair with the SDK's JSON-RPC connection.

Transport-agnostic: ``iac-kernel acp`` passes stdio, the kernel's endpoint passes a
unix socket connection. The session manager outlives the connection; closing the
sessions is the caller's decision.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from iac_kernel.acp import early
from iac_kernel.acp.agent import IacAgent
from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.routes import Dispatcher
from iac_kernel.acp.sdk_connection import connect
from iac_kernel.acp.transport import LineTransport, Writer
from iac_kernel.agent.session import AgentSession
from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)


async def serve(
    reader: asyncio.StreamReader,
    writer: Writer,
    manager: SessionManager,
    *,
    initialized: dict[str, Any] | None = None,
    early_sessions: Iterable[tuple[AgentSession, dict[str, Any]]] = (),
    allow_bypass: bool = True,
) -> None:
    """Answer ACP messages from ``reader`` on ``writer`` until the input ends.

    ``initialized`` is an ``initialize`` request already answered with
    :func:`iac_kernel.acp.early.answer_bytes` (before the SDK was imported): the agent
    counts as initialized at once, and the request is run through it (without answering
    again, the answers compared) :data:`REPLAY_DELAY` seconds later. ``early_sessions``
    are sessions whose ``session/new`` was answered then too, with their answers: the
    agent adopts them (their commands are sent now, as after any new session's answer)
    and the answers are checked against the SDK's models at the same moment.
    ``allow_bypass=False`` refuses every request that would set bypass mode.

    Turns this connection started are cancelled (and end with a valid history) when it
    ends; the sessions stay open in ``manager``.
    """
    agent = IacAgent(manager)
    agent.allow_bypass = allow_bypass
    dispatcher = Dispatcher(agent)
    transport = LineTransport(reader, writer)
    conn = connect(dispatcher, transport, listening=False)
    agent.attach(ClientChannel(conn, transport))
    replay: asyncio.TimerHandle | None = None
    answers = []
    for session, answer in early_sessions:
        answers.append(answer)
        await agent.adopt(session)
    if initialized is not None:
        # The client was told it is initialized; the agent replays the request a moment
        # later, off the path of the client's next request (a session/new right away).
        agent.initialized = True
        agent.client_info = (initialized.get("params") or {}).get("clientInfo")
        replay = asyncio.get_running_loop().call_later(
            REPLAY_DELAY, _spawn_replay, dispatcher, initialized, answers
        )
    try:
        await conn.main_loop()
    finally:
        if replay is not None:
            replay.cancel()
        try:
            await agent.shutdown()
        finally:
            await conn.close()


#: Seconds after start that an early-answered initialize is run through the agent.
REPLAY_DELAY = 0.5
_replays: set[asyncio.Task[Any]] = set()


def _spawn_replay(
    dispatcher: Dispatcher, message: dict[str, Any], answers: list[dict[str, Any]]
) -> None:
    task = asyncio.ensure_future(_replay_logged(dispatcher, message, answers))
    _replays.add(task)
    task.add_done_callback(_replays.discard)


async def _replay_logged(
    dispatcher: Dispatcher, message: dict[str, Any], answers: list[dict[str, Any]]
) -> None:
    try:
        await replay_initialize(dispatcher, message)
        for answer in answers:
            check_session_answer(answer)
    except Exception:
        log.exception("checking the early answers failed")


def check_session_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """Validate an early ``session/new`` answer with the SDK's ``NewSessionResponse``;
    log an error if the SDK would have put any of its fields differently on the wire.
    Fields the schema does not have (``models``, for older clients) pass as they are, as
    they do on the SDK path, where the handler's dict is sent unchanged."""
    from acp.schema import NewSessionResponse

    serialized = sdk_serialized(NewSessionResponse.model_validate(answer))
    known = {field.alias or name for name, field in NewSessionResponse.model_fields.items()}
    if serialized != {key: value for key, value in answer.items() if key in known}:
        log.error(
            "the early session/new answer differs from the SDK's: %s != %s", answer, serialized
        )
    return serialized


async def replay_initialize(dispatcher: Dispatcher, message: dict[str, Any]) -> dict[str, Any]:
    """Run an early-answered ``initialize`` through the agent; log an error if the
    agent's answer (serialized as the SDK does) differs from the one already sent."""
    result = await dispatcher("initialize", message.get("params"), False)
    answer = sdk_serialized(result)
    expected = early.initialize_result()
    if answer != expected:
        log.error(
            "the early initialize answer differs from the agent's: %s != %s", expected, answer
        )
    return answer


def sdk_serialized(result: Any) -> Any:
    """A handler's result as :class:`acp.connection.Connection` puts it on the wire."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    return result
