"""The extension application: registers the ACP socket and owns the session manager."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool

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

    def manager(self) -> RootedManager:
        """One manager for every connection of this server: a session loaded twice is
        one runtime."""
        if self._session_manager is None:
            self._session_manager = make_manager(self.serverapp.root_dir)
        return self._session_manager

    def initialize_handlers(self) -> None:
        options = {"manager": self.manager, "allow_bypass": lambda: self.allow_remote_bypass}
        self.handlers.append((rf"/{PATH}", AcpSocket, options))

    async def stop_extension(self) -> None:
        """Close the sessions this server opened (histories saved, locks released)."""
        if self._session_manager is not None:
            await self._session_manager.close_all()
