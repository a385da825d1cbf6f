"""The session manager of a Jupyter server's ACP endpoint: the user's store, new
sessions only inside the server's ``root_dir``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.config import Settings
from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)


class RootedManager(SessionManager):
    """A :class:`SessionManager` whose new sessions start inside ``root_dir``.

    Loading, listing and forking stay as they are: the store is the user's, and this
    server runs as that user.
    """

    def __init__(self, settings: Settings, root_dir: str, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.root_dir = os.path.realpath(root_dir)

    def new(self, cwd: str, **meta: Any) -> AgentSession:
        cwd = self._check_cwd(cwd)
        if not inside(cwd, self.root_dir):
            raise ValueError(f"cwd {cwd!r} is outside the Jupyter server's root_dir")
        return super().new(cwd, **meta)


def inside(path: str, root: str) -> bool:
    """Whether ``path`` (symlinks resolved) is ``root`` or below it."""
    real = Path(os.path.realpath(path))
    return real == Path(root) or Path(root) in real.parents


def make_manager(root_dir: str) -> RootedManager:
    """The server's manager, with settings from the server's environment."""
    problems: list[str] = []
    settings = Settings.from_env(problems=problems)
    for line in problems:
        log.warning("setting ignored: %s", line)
    return RootedManager(
        settings, root_dir, holder=f"jupyter server (pid {os.getpid()})", origin="acp"
    )
