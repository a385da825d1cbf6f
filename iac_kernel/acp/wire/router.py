"""The SDK's agent router, with our routes added: where the ACP SDK's models validate
params (imported for the first request after ``initialize`` and ``session/new``).

* ``session/fork``, ``session/resume`` and ``session/close`` need the SDK's
  ``use_unstable_protocol``;
* ``session/load`` takes ``mcpServers`` as optional (missing = none: the reference's own
  parameter tables leave it out), and ``session/delete`` is routed (the SDK 0.12.1
  router has no route for it);
* ``sessions/list`` and ``config/set`` (the names our reference used) and
  ``session/set_model`` (dropped from schema v1.19) get routes of their own: the SDK
  hands unknown names to ``ext_method`` only when they start with ``_``;
* ``session/cancel`` sent as a request (it is a notification) is answered, so a client
  that may not cancel (another client's turn) hears why;
* ``_iac/session/control`` is our one extension (:mod:`iac_kernel.acp.session.control`).

Handlers are the agent's methods, called by name with the validated fields.
"""

from __future__ import annotations

from typing import Annotated, Any

from acp import RequestError
from acp.agent.router import build_agent_router
from acp.meta import AGENT_METHODS
from acp.router import MessageRouter
from acp.schema import (
    AcpMcpServer,
    BaseModel,
    CancelNotification,
    DeleteSessionRequest,
    HttpMcpServer,
    ListSessionsRequest,
    LoadSessionRequest,
    McpServerStdio,
    SseMcpServer,
)
from acp.utils import normalize_result
from pydantic import Field

from iac_kernel.acp.protocol.notices import CONTROL_METHOD

McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None


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
    """``_iac/session/control`` params."""

    session_id: Annotated[str, Field(alias="sessionId")]
    claim: bool = False


def build_router(agent: Any) -> MessageRouter:
    """The router calling ``agent``'s methods (:class:`~iac_kernel.acp.agent.IacAgent`)."""
    router = build_agent_router(agent, use_unstable_protocol=True)
    routes = (
        (AGENT_METHODS["session_load"], LoadSessionParams, "load_session"),
        (AGENT_METHODS["session_delete"], DeleteSessionRequest, "delete_session"),
        (AGENT_METHODS["session_cancel"], CancelNotification, "cancel"),
        ("session/set_model", SetSessionModelRequest, "set_session_model"),
        ("config/set", ConfigSetRequest, "set_config_option"),
    )
    for method, model, name in routes:
        router.route_request(method, model, agent, name, adapt_result=normalize_result)
    router.route_request("sessions/list", ListSessionsRequest, agent, "list_sessions")
    router.handle_extension_request(_extensions(agent))
    return router


def _extensions(agent: Any):
    """Requests named with a leading ``_`` (the SDK strips it before calling this)."""

    async def handle(name: str, params: Any) -> Any:
        if "_" + name != CONTROL_METHOD:
            raise RequestError.method_not_found("_" + name)
        request = ControlRequest.model_validate(params)
        return await agent.control_session(request.session_id, request.claim)

    return handle
