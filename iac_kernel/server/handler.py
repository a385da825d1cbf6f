"""The WebSocket handler: the server's own authentication, then ACP on the socket.

Built like Jupyter's kernel and terminal websockets: :class:`JupyterHandler` resolves
the user (token in the ``Authorization`` header, or the login cookie; under JupyterHub
the hub's OAuth and its ``access:servers`` scopes), ``WebSocketMixin`` checks the
``Origin`` as for kernel websockets and keeps the connection alive with pings, and the
server's authorizer must allow ``execute`` on :data:`AUTH_RESOURCE`, and the peer must not
be a process of a bash call's sandbox (:mod:`iac_kernel.guard.peers`). A request that
fails any of these is refused (403) before the upgrade.

The bearer is taken from the ``Authorization`` header only: Jupyter itself also accepts
``?token=`` in the URL, where it ends up in proxy logs and shell history, so a request
to this endpoint with a token in its query is refused (400) before anything reads it.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.websocket import WebSocketHandler

from iac_kernel.acp.remote import TOKEN_PARAMS
from iac_kernel.guard import peers
from iac_kernel.server.stream import FrameReader, FrameWriter

#: The authorizer's resource: operators can gate the endpoint apart from kernels.
AUTH_RESOURCE = "iac_kernel"
URL_TOKEN_REFUSED = "Send the token in the Authorization header, not in the URL"


class AcpSocket(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """One ACP connection: one client, one principal, one agent."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, manager: Any, allow_bypass: Any = lambda: False) -> None:
        """``manager`` returns the server's session manager (made on first use);
        ``allow_bypass`` the owner's ``allow_remote_bypass`` setting."""
        self._manager = manager
        self._allow_bypass = allow_bypass
        self._frames = FrameReader()
        self._serving: asyncio.Task[None] | None = None

    def prepare(self, *args: Any, **kwargs: Any) -> Any:
        # Before the server's authentication, which would accept the token there.
        # Answered here (no HTTPError): tornado would log the URL, token included.
        if any(name.lower() in TOKEN_PARAMS for name in self.request.query_arguments):
            self.log.warning("refused an ACP connection with a token in its URL")
            # The access log prints the URI, scrubbing only the spellings Jupyter reads.
            self.request.uri = self.request.path
            self.set_status(400, reason=URL_TOKEN_REFUSED)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(URL_TOKEN_REFUSED + "\n")
            return None
        return super().prepare(*args, **kwargs)

    def set_default_headers(self) -> None:
        """No page headers (CSP and the like) on a websocket upgrade."""

    def get_compression_options(self) -> dict[str, Any] | None:
        return self.settings.get("websocket_compression_options")

    async def get(self, *args: Any, **kwargs: Any) -> None:
        # jupyter_server >= 2.13 refuses an unknown user in prepare() already; older
        # versions leave it to the handler (this is what its ws_authenticated does).
        if self.current_user is None:
            self.log.warning("refused an unauthenticated ACP connection")
            raise web.HTTPError(403)
        authorized = self.authorizer.is_authorized(
            self, self.current_user, "execute", AUTH_RESOURCE
        )
        if inspect.isawaitable(authorized):  # async authorizers are allowed
            authorized = await authorized
        if not authorized:
            raise web.HTTPError(403)
        if await asyncio.to_thread(self._from_a_sandbox):
            self.log.warning("refused an ACP connection from a sandboxed tool call")
            raise web.HTTPError(403)
        # The RFD's transport-level id, on the 101 answer (not a credential).
        self.set_header("Acp-Connection-Id", str(uuid.uuid4()))
        await super().get(*args, **kwargs)

    def _from_a_sandbox(self) -> bool:
        """The peer is a process of a bash call's sandbox (guard/peers.py)."""
        stream = getattr(self.request.connection, "stream", None)
        sock = getattr(stream, "socket", None)
        return sock is not None and peers.from_a_sandbox(sock)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        name = getattr(self.current_user, "username", "?")
        self.log.info("ACP connection opened for %s", name)
        self._serving = asyncio.ensure_future(self._serve())

    async def _serve(self) -> None:
        from iac_kernel.acp.endpoint import load_server

        writer = FrameWriter(self)
        manager = self._manager()
        claims = manager.connection()
        try:
            serve = await load_server()
            await serve(
                self._frames.reader, writer, manager, allow_bypass=bool(self._allow_bypass())
            )
        except asyncio.CancelledError:
            pass
        except Exception:
            self.log.exception("ACP connection failed")
        finally:
            writer.close()
            try:
                await manager.release(claims)
            except Exception:
                self.log.exception("closing the connection's sessions failed")

    def on_message(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            self.log.info("ignoring a binary frame (ACP messages are text frames)")
            return
        self._frames.feed(message)

    def on_close(self) -> None:
        # The agent cancels the turns this connection started, then the sessions only
        # it had open are closed (saved, their locks released).
        self._frames.end()
