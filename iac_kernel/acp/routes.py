"""The method table: what the connection calls for every request and notification.

* ``initialize``, the connection's handshake, is answered here; the agent
  (:class:`~iac_kernel.acp.agent.IacAgent`, whose import brings in the agent core, most
  of start-up) is made for the first request after it;
* ``session/new`` is the agent's, with the params as they came (the agent checks them):
  answering the two requests an editor sends at spawn needs none of the SDK's models,
  whose import takes most of a second (``bench/startup.py``). Every other method goes
  through the SDK's router (:mod:`iac_kernel.acp.wire.router`), imported for the first;
* anything before ``initialize`` is -32600 (a notification is ignored);
* a switch to ``bypass`` mode is -32602 when the front does not allow it (the Jupyter
  server's WebSocket without the owner's opt-in, ``c.IacKernelServer.allow_remote_bypass``),
  before any routing or forwarding: ``session/set_mode``, ``session/set_config_option``
  and ``config/set`` with ``configId = mode``, and a ``/mode bypass`` slash command;
* requests for a session a running kernel holds (after ``session/load`` attached to it)
  go to that kernel as they are (:class:`~iac_kernel.acp.attach.proxy.RemoteSession`);
* ``_iac/approvals/*`` go to the connection's approver when it has one
  (:mod:`iac_kernel.acp.approvals`: the Jupyter server's route and stdio), before the agent;
* a request with ``_meta.operationId`` seen before is not run again: it gets the first
  run's answer, waiting for it if that run still goes, whichever connection it comes
  on (the process remembers the last :data:`KEEP`). A client that lost the answer to
  ``session/prompt`` can send it again without running the turn, and its tools, twice.

What a handler raises becomes the error answer in the connection
(:func:`iac_kernel.acp.protocol.errors.from_exception`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from iac_kernel import __version__
from iac_kernel.acp.approvals import METHODS as APPROVAL_METHODS
from iac_kernel.acp.approvals import Decisions
from iac_kernel.acp.protocol import errors
from iac_kernel.acp.protocol.client_features import from_initialize
from iac_kernel.acp.wire.channel import ClientChannel
from iac_kernel.models.providers import auth_methods

log = logging.getLogger(__name__)

INITIALIZE = "initialize"
NEW_SESSION = "session/new"
#: ``acp.PROTOCOL_VERSION`` of the supported SDK lines (a test compares them).
PROTOCOL_VERSION = 1
#: ``agentCapabilities`` of the ``initialize`` answer (a test validates the answer with
#: the SDK's model). Not advertised: ``auth.logout`` (the auth methods only name an
#: environment variable; there is no login to end, so ``logout`` answers -32601).
CAPABILITIES: dict[str, Any] = {
    "loadSession": True,
    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
    "mcpCapabilities": {"http": True, "sse": True},
    "sessionCapabilities": {
        "list": {},
        "delete": {},
        "additionalDirectories": {},
        "fork": {},
        "resume": {},
        "close": {},
    },
}


class Dispatcher:
    """The connection's handler: the handshake, then the agent ``make_agent(channel)``
    makes (``allow_bypass=False``: requests that set bypass mode are refused);
    ``approvals`` answers ``_iac/approvals/*`` (:class:`~iac_kernel.acp.approvals.Decisions`)."""

    def __init__(
        self,
        make_agent: Callable[[ClientChannel], Any],
        *,
        allow_bypass: bool = True,
        approvals: Decisions | None = None,
    ):
        self.make_agent = make_agent
        self.allow_bypass = allow_bypass
        self.approvals = approvals
        self.channel: ClientChannel | None = None
        self.initialized = False
        self._agent: Any = None
        self._router: Any = None

    @property
    def agent(self) -> Any:
        """The agent (made on first use, after the ``initialize`` answer)."""
        if self._agent is None:
            self._agent = self.make_agent(self.channel)
        return self._agent

    async def shutdown(self) -> None:
        """The connection ended: the agent (if any) cancels the turns it started."""
        if self._agent is not None:
            await self._agent.shutdown()

    async def __call__(self, method: str, params: Any, is_notification: bool) -> Any:
        if method == INITIALIZE and not is_notification:
            return self._initialize(params)
        if not self.initialized:
            if is_notification:
                log.warning("notification %s before initialize ignored", method)
                return None
            raise errors.not_initialized(method)
        field = None if self.allow_bypass else bypass_field(method, params)
        if field is not None:
            if is_notification:
                log.warning("notification %s setting bypass mode ignored", method)
                return None
            raise errors.invalid_field(field, BYPASS_REFUSED)
        if self.approvals is not None and method in APPROVAL_METHODS:
            if is_notification:
                log.warning("notification %s ignored (it is a request)", method)
                return None
            return await self.approvals(method, params)
        key = None if is_notification else operation_key(method, params)
        if key is not None:
            return await OPERATIONS.run(key, lambda: self._dispatch(method, params, False))
        return await self._dispatch(method, params, is_notification)

    async def _dispatch(self, method: str, params: Any, is_notification: bool) -> Any:
        remote = self.agent.attached.for_request(method, params)
        if remote is not None:
            return await remote.forward(method, params, is_notification)
        if method == NEW_SESSION and not is_notification:
            return await self.agent.new_session(params)
        if self._router is None:
            from iac_kernel.acp.wire.router import build_router

            self._router = build_router(self.agent)
        return await self._router(method, params, is_notification)

    def _initialize(self, params: Any) -> dict[str, Any]:
        """``protocolVersion`` is required (the answer names ours, 1, whatever the
        client's); what the client declared is read raw (the SDK's models drop the
        capabilities newer than schema 1.19) onto the channel, whose senders read it."""
        if not isinstance(params, dict) or "protocolVersion" not in params:
            raise errors.invalid_field("protocolVersion", "Field required")
        assert self.channel is not None, "the connection's channel comes first"
        self.channel.features = from_initialize(params)
        self.channel.client_info = params.get("clientInfo")
        self.initialized = True
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": CAPABILITIES,
            "authMethods": auth_methods(),
            "agentInfo": {"name": "iac-kernel", "title": "iac-kernel", "version": __version__},
        }


# -- bypass mode -------------------------------------------------------------------------

BYPASS = "bypass"
BYPASS_REFUSED = (
    "bypass mode cannot be set from a remote client unless the server's owner allows it "
    "(c.IacKernelServer.allow_remote_bypass = True in the Jupyter server's configuration)"
)


def bypass_field(method: str, params: Any) -> str | None:
    """The field of ``params`` that asks for bypass mode, or None."""
    if not isinstance(params, dict):
        return None
    if method == "session/set_mode":
        return "modeId" if _is_bypass(params.get("modeId")) else None
    if method in ("session/set_config_option", "config/set"):
        mode = str(params.get("configId", "")).strip() == "mode"
        return "value" if mode and _is_bypass(params.get("value")) else None
    if method == "session/prompt" and isinstance(params.get("prompt"), list):
        from iac_kernel.acp.session import commands  # with the SDK: not on the start-up path

        blocks = [b for b in params["prompt"] if isinstance(b, dict)]
        parsed = commands.parse(blocks)
        if parsed is not None and parsed[0] == "mode" and _is_bypass(parsed[1]):
            return "prompt"
    return None


def _is_bypass(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == BYPASS


# -- operation ids -----------------------------------------------------------------------

META_KEY = "operationId"
#: Operations remembered (oldest forgotten first).
KEEP = 512
MAX_ID = 200

Key = tuple[str, str, str]


def operation_key(method: str, params: Any) -> Key | None:
    """The operation a request names in ``_meta.operationId``, if any."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    op = meta.get(META_KEY) if isinstance(meta, dict) else None
    if not isinstance(op, str) or not op or len(op) > MAX_ID:
        return None
    sid = params.get("sessionId")
    return (method, sid if isinstance(sid, str) else "", op)


class Operations:
    """Operations by key: their outcome, or the run still going."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._runs: OrderedDict[Key, asyncio.Future[Any]] = OrderedDict()

    async def run(self, key: Key, work: Callable[[], Awaitable[Any]]) -> Any:
        """``work()``'s outcome; run only the first time ``key`` is seen."""
        known = self._runs.get(key)
        if known is not None:
            return await asyncio.shield(known)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._runs[key] = future
        while len(self._runs) > self.keep:
            self._runs.popitem(last=False)
        try:
            result = await work()
        except asyncio.CancelledError:
            # Not run to an answer (its connection went away): a retry runs it.
            self._runs.pop(key, None)
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure nobody retries is not logged twice
            raise
        future.set_result(result)
        return result


#: The agent process's operations (every connection's).
OPERATIONS = Operations()
