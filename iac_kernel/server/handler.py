"""The WebSocket handler: the server's own authentication, then ACP on the socket.

Built like Jupyter's kernel and terminal websockets: :class:`JupyterHandler` resolves
the user (token in the ``Authorization`` header, or the login cookie; under JupyterHub
the hub's OAuth and its ``access:servers`` scopes), ``WebSocketMixin`` checks the
``Origin`` as for kernel websockets and keeps the connection alive with pings, and the
server's authorizer must allow ``execute`` on :data:`AUTH_RESOURCE`, and the peer must not
be a process of a bash call's sandbox (:mod:`iac_kernel.guard.sandbox.processes`). A request that
fails any of these is refused (403) before the upgrade.

The bearer is taken from the ``Authorization`` header only: Jupyter itself also accepts
``?token=`` in the URL, where it ends up in proxy logs and shell history, so a request
to this endpoint with a token in its query is refused (400) before anything reads it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.websocket import WebSocketHandler

from iac_kernel.acp.approvals import Decisions
from iac_kernel.acp.remote.resume import (
    CONNECTION_HEADER,
    NORMAL_CLOSE,
    RECEIVED_HEADER,
    parse_count,
)
from iac_kernel.acp.remote.target import TOKEN_PARAMS
from iac_kernel.guard.sandbox import processes
from iac_kernel.server import sse
from iac_kernel.server.link import Link, Links

#: The authorizer's resource: operators can gate the endpoint apart from kernels.
AUTH_RESOURCE = "iac_kernel"
URL_TOKEN_REFUSED = "Send the token in the Authorization header, not in the URL"


class AcpSocket(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """One ACP connection: one client, one principal, one agent."""

    auth_resource = AUTH_RESOURCE

    def initialize(
        self,
        manager: Any,
        links: Links,
        allow_bypass: Any = lambda: False,
        decisions: Callable[[Any], Decisions] | None = None,
    ) -> None:
        """``manager`` returns the server's session manager (made on first use);
        ``links`` are the server's logical connections (:mod:`iac_kernel.server.link`);
        ``allow_bypass`` the owner's ``allow_remote_bypass`` setting; ``decisions`` the
        approver of an authenticated user (``_iac/approvals/*``)."""
        self._manager = manager
        self._links = links
        self._allow_bypass = allow_bypass
        self._decisions = decisions
        self._link: Link | None = None
        self._client_has = 0
        #: The link and event stream a GET serves (the HTTP profile).
        self._stream: tuple[Link, sse.EventStream] | None = None

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

    async def _check_access(self) -> None:
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

    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self._check_access()
        if self.request.headers.get("Upgrade", "").lower() != "websocket" and sse.wants_events(
            self.request.headers.get("Accept")
        ):
            await self._event_stream()
            return
        self._link = self._pick_link()
        # The RFD's transport-level id, on the 101 answer (not a credential).
        self.set_header(CONNECTION_HEADER, self._link.id)
        if self._link.resumable:
            self.set_header(RECEIVED_HEADER, str(self._link.received))
        await super().get(*args, **kwargs)

    def _pick_link(self) -> Link:
        """The link the client resumes (its ``Acp-Connection-Id`` and ``Acp-Received``),
        else a new one (resumable if the client sent ``Acp-Received``)."""
        user = getattr(self.current_user, "username", "")
        client_has = parse_count(self.request.headers.get(RECEIVED_HEADER))
        if client_has is not None:
            link = self._links.find(self.request.headers.get(CONNECTION_HEADER), client_has)
            if link is not None:
                link.take_over()  # frames still arriving on the old socket are not counted
                self._client_has = client_has
                return link
        return self._links.new(user, resumable=client_has is not None)

    # -- the HTTP profile (iac_kernel.server.sse) ------------------------------------

    async def post(self) -> None:
        """One client message; an ``initialize`` without a connection opens one."""
        await self._check_access()
        body = self.request.body.decode("utf-8", "replace")
        wanted = self.request.headers.get(CONNECTION_HEADER)
        if wanted:
            link = self._http_link(wanted)
            link.post(body)
            self.set_status(202)
            self.finish()
            return
        is_initialize, request_id = sse.initialize_id(body)
        if not is_initialize:
            raise web.HTTPError(400, "the first POST must be an initialize request")
        user = getattr(self.current_user, "username", "")
        link = self._links.new(user, resumable=True)
        link.start(self._serve)
        answered = link.answer_to(request_id)
        link.post(body)
        number, text = await answered
        link.outbox.ack(number)  # delivered here: a stream starts after it
        self.set_header(CONNECTION_HEADER, link.id)
        self.set_header("Content-Type", "application/json")
        self.finish(text)

    async def delete(self) -> None:
        """End the connection."""
        await self._check_access()
        self._http_link(self.request.headers.get(CONNECTION_HEADER)).end()
        self.set_status(204)
        self.finish()

    def _http_link(self, link_id: str | None) -> Link:
        link = self._links.get(link_id)
        if link is None or not link.resumable:
            raise web.HTTPError(404, "unknown ACP connection (it ended, or never was)")
        return link

    async def _event_stream(self) -> None:
        link = self._http_link(self.request.headers.get(CONNECTION_HEADER))
        after = parse_count(self.request.headers.get("Last-Event-ID"))
        after = link.outbox.acked if after is None else after
        if not link.can_resume(after):
            raise web.HTTPError(409, "those events are gone; open a new connection")
        self.set_header("Content-Type", sse.EVENT_STREAM)
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # nginx: do not buffer the stream
        stream = sse.EventStream(self, after)
        self._stream = (link, stream)
        link.take_over()
        await stream.start()
        link.attach(stream, after, self._serve)
        await stream.ended

    def _from_a_sandbox(self) -> bool:
        """The peer is a process of a bash call's sandbox (guard/sandbox/processes.py)."""
        stream = getattr(self.request.connection, "stream", None)
        sock = getattr(stream, "socket", None)
        return sock is not None and processes.from_a_sandbox(sock)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        name = getattr(self.current_user, "username", "?")
        self.log.info("ACP connection opened for %s", name)
        if self._link is not None:
            self._link.attach(self, self._client_has, self._serve)

    async def _serve(self, link: Link) -> None:
        """The link's ACP server (it outlives this socket when the link is resumed)."""
        from iac_kernel.acp.serve.endpoint import load_server

        manager = self._manager()
        claims = manager.connection()
        # The link's approver is the user who opened it, never one named in a request.
        decisions = self._decisions(self.current_user) if self._decisions else None
        try:
            serve = await load_server()
            await serve(
                link.frames.reader,
                link,
                manager,
                allow_bypass=bool(self._allow_bypass()),
                approvals=decisions,
            )
        except asyncio.CancelledError:
            pass
        except Exception:
            self.log.exception("ACP connection failed")
        finally:
            link.end()
            try:
                await manager.release(claims)
            except Exception:
                self.log.exception("closing the connection's sessions failed")

    def on_message(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            self.log.info("ignoring a binary frame (ACP messages are text frames)")
            return
        if self._link is not None:
            self._link.feed(self, message)

    def on_close(self) -> None:
        # When the link ends, the agent cancels the turns it started, then the sessions
        # only it had open are closed (saved, their locks released).
        if self._stream is not None:
            link, stream = self._stream
            link.detach(stream, clean=False)
            stream.close()
        if self._link is not None:
            self._link.detach(self, clean=self.close_code == NORMAL_CLOSE)
