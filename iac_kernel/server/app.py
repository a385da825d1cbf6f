"""The extension application: registers the ACP socket and owns the session manager."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float

from iac_kernel.acp.approvals import Decisions
from iac_kernel.server import approvals, link
from iac_kernel.server.handler import AcpSocket
from iac_kernel.server.sessions import RootedManager, make_manager

#: Under the server's base_url.
PATH = "iac-kernel/acp"


class IacKernelServer(ExtensionApp):
    """ACP for editors at ``{base_url}iac-kernel/acp`` (see :mod:`iac_kernel.server`)."""

    name = "iac_kernel"
    load_other_extensions = True
    allow_remote_bypass = Bool(
        False,
        config=True,
        help="Let WebSocket clients switch a session to bypass mode (session/set_mode, "
        "the mode config option, /mode bypass). Off: such requests get a JSON-RPC error.",
    )
    _session_manager: RootedManager | None = None
    _links: link.Links | None = None
    #: The team's approval records (the approvals panel's API), opened on first use.
    _approvals: approvals.Book | None = None

    resume_window = Float(
        link.WINDOW,
        config=True,
        help="Seconds a dropped resumable ACP connection is kept for its client to "
        "come back (its turns go on, its questions stay open).",
    )

    def manager(self) -> RootedManager:
        """One manager for every connection of this server: a session loaded twice is
        one runtime."""
        if self._session_manager is None:
            self._session_manager = make_manager(self.serverapp.root_dir)
        return self._session_manager

    def links(self) -> link.Links:
        if self._links is None:
            self._links = link.Links(self.resume_window)
        return self._links

    def initialize_handlers(self) -> None:
        self._approvals = book = approvals.Book()
        options = {
            "manager": self.manager,
            "links": self.links(),
            "allow_bypass": lambda: self.allow_remote_bypass,
            "decisions": lambda user: Decisions(lambda: approvals.approver(user), book.approvals),
        }
        self.handlers.append((rf"/{PATH}", AcpSocket, options))
        self.handlers.extend(approvals.handlers(book))

    async def stop_extension(self) -> None:
        """End the connections, then close the sessions this server opened (histories
        saved, locks released)."""
        if self._links is not None:
            await self._links.end_all()
        if self._session_manager is not None:
            await self._session_manager.close_all()
        if self._approvals is not None:
            self._approvals.close()
