"""The method table: the SDK's agent router plus our aliases, behind a guard that keeps
every failure a clean JSON-RPC error.

* ``session/fork``, ``session/resume`` and ``session/close`` need the SDK's
  ``use_unstable_protocol``;
* ``session/new`` and ``session/load`` take ``mcpServers`` as optional (missing = none:
  the reference's own parameter tables leave it out), and ``session/delete`` is routed
  (the SDK 0.12.1 router has no route for it);
* ``sessions/list`` and ``config/set`` (the names our reference used) and
  ``session/set_model`` (dropped from schema v1.19) get routes of their own: the SDK
  hands unknown names to ``ext_method`` only when they start with ``_``;
* ``session/cancel`` sent as a request (it is a notification) is answered, so a client
  that may not cancel (another client's turn) hears why;
* a switch to ``bypass`` mode is -32602 when the front does not allow it
  (:mod:`~iac_kernel.acp.bypass`: the Jupyter server's WebSocket without the owner's
  opt-in), before any routing or forwarding;
* requests for a session a running kernel holds (after ``session/load`` attached to it)
  go to that kernel as they are (:class:`~iac_kernel.acp.proxy.RemoteSession`);
* a request with ``_meta.operationId`` seen before is not run again: it gets the first
  run's answer (:mod:`~iac_kernel.acp.operations`);
* anything before ``initialize`` is -32600; bad params are -32602 naming the fields;
  an unexpected failure is -32603 with a one-line, redacted reason (never a traceback),
  and so is a session store that refuses (a link in place of its index) or fails.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from acp import RequestError
from acp.agent.router import build_agent_router
from acp.meta import AGENT_METHODS
from acp.router import MessageRouter, Route
from acp.schema import (
    AcpMcpServer,
    BaseModel,
    CancelNotification,
    DeleteSessionRequest,
    HttpMcpServer,
    ListSessionsRequest,
    LoadSessionRequest,
    McpServerStdio,
    NewSessionRequest,
    SseMcpServer,
)
from acp.utils import normalize_result
from pydantic import Field, ValidationError

from iac_kernel.acp import bypass, errors
from iac_kernel.acp.agent import IacAgent
from iac_kernel.acp.control import METHOD as CONTROL
from iac_kernel.acp.operations import OPERATIONS, operation_key
from iac_kernel.acp.proxy import RemoteSession
from iac_kernel.sessions.files import StoreOpenError, StoreWriteError

log = logging.getLogger(__name__)


McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None


class NewSessionParams(NewSessionRequest):
    """``session/new`` params with ``mcpServers`` optional."""

    mcp_servers: Annotated[McpServers, Field(alias="mcpServers")] = None


class LoadSessionParams(LoadSessionRequest):
    """``session/load`` params with ``mcpServers`` optional."""

    mcp_servers: Annotated[McpServers, Field(alias="mcpServers")] = None


class SetSessionModelRequest(BaseModel):
    """``session/set_model`` params (the unstable method before model config options)."""

    session_id: Annotated[str, Field(alias="sessionId")]
    model_id: Annotated[str, Field(alias="modelId")]


class ConfigSetRequest(BaseModel):
    """``config/set`` params: like session/set_config_option, with any scalar value."""

    session_id: Annotated[str, Field(alias="sessionId")]
    config_id: Annotated[str, Field(alias="configId")]
    value: str | int | bool


class ControlRequest(BaseModel):
    """``_iac/session/control`` params (:mod:`iac_kernel.acp.control`)."""

    session_id: Annotated[str, Field(alias="sessionId")]
    claim: bool = False


class Dispatcher:
    """The ``MethodHandler`` the SDK connection calls for every request and notification."""

    def __init__(self, agent: IacAgent) -> None:
        self.agent = agent
        self.router = build_router(agent)

    async def __call__(self, method: str, params: Any, is_notification: bool) -> Any:
        if not self.agent.initialized and method != AGENT_METHODS["initialize"]:
            if is_notification:
                log.warning("notification %s before initialize ignored", method)
                return None
            raise errors.not_initialized(method)
        if method == AGENT_METHODS["initialize"]:
            self.agent.declare(params)
        if not self.agent.allow_bypass:
            field = bypass.bypass_field(method, params)
            if field is not None and is_notification:
                log.warning("notification %s setting bypass mode ignored", method)
                return None
            if field is not None:
                raise bypass.refusal(field)
        key = None if is_notification else operation_key(method, params)
        if key is not None:
            return await OPERATIONS.run(key, lambda: self._dispatch(method, params, False))
        return await self._dispatch(method, params, is_notification)

    async def _dispatch(self, method: str, params: Any, is_notification: bool) -> Any:
        remote = self.agent.attached.for_request(method, params)
        if remote is not None:
            return await _forward(remote, method, params, is_notification)
        try:
            return await self.router(method, params, is_notification)
        except RequestError:
            raise
        except ValidationError as exc:
            raise errors.from_validation(exc) from None
        except asyncio.CancelledError:
            raise
        except (StoreOpenError, StoreWriteError) as exc:  # said in full by the store: no trace
            log.warning("%s failed: %s", method, exc.strerror or exc)
            raise errors.store_failure(exc) from None
        except Exception as exc:
            log.exception("%s failed", method)
            raise errors.internal(exc) from None


async def _forward(remote: RemoteSession, method: str, params: Any, is_notification: bool) -> Any:
    """A request for a session a kernel holds: the kernel answers it (its errors too)."""
    try:
        return await remote.forward(method, params, is_notification)
    except RequestError:
        if is_notification:
            log.info("%s for %s: the kernel is gone", method, remote.session_id)
            return None
        raise


def build_router(agent: IacAgent) -> MessageRouter:
    router = build_agent_router(agent, use_unstable_protocol=True)  # type: ignore[arg-type]
    router.route_request(AGENT_METHODS["session_new"], NewSessionParams, agent, "new_session")
    router.route_request(
        AGENT_METHODS["session_load"],
        LoadSessionParams,
        agent,
        "load_session",
        adapt_result=normalize_result,
    )
    router.route_request(
        AGENT_METHODS["session_delete"],
        DeleteSessionRequest,
        agent,
        "delete_session",
        adapt_result=normalize_result,
    )
    router.route_request(
        AGENT_METHODS["session_cancel"],
        CancelNotification,
        agent,
        "cancel",
        adapt_result=normalize_result,
    )
    router.route_request("sessions/list", ListSessionsRequest, agent, "list_sessions")
    router.handle_extension_request(_extensions(agent))
    router.route_request(
        "session/set_model",
        SetSessionModelRequest,
        agent,
        "set_session_model",
        adapt_result=normalize_result,
    )
    router.add_route(
        Route(
            method="config/set",
            func=_config_set(agent),
            kind="request",
            adapt_result=normalize_result,
        )
    )
    return router


def _extensions(agent: IacAgent):
    """Requests named with a leading ``_`` (the SDK strips it before calling this)."""

    async def handle(name: str, params: Any) -> Any:
        if "_" + name != CONTROL:
            raise RequestError.method_not_found("_" + name)
        request = ControlRequest.model_validate(params)
        return await agent.control_session(request.session_id, request.claim)

    return handle


def _config_set(agent: IacAgent):
    async def handle(params: Any) -> Any:
        request = ConfigSetRequest.model_validate(params)
        return await agent.set_config_option(
            config_id=request.config_id, session_id=request.session_id, value=request.value
        )

    return handle
