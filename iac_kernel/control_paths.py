"""Host paths the agent adds at runtime to its control plane (sockets, connection files,
the egress proxy's folder): every bash call's sandbox hides them
(:func:`iac_kernel.guard.sandbox.hidden.control_plane`). A leaf module, so that the parts that
make such paths (the egress proxy, the kernel, the endpoint) need not import the guard."""

from __future__ import annotations

import os
from pathlib import Path

_REGISTERED: set[Path] = set()


def register(path: str | os.PathLike[str]) -> None:
    """Hide ``path`` (a socket, a file, a folder) from every bash call from now on."""
    _REGISTERED.add(Path(path))


def unregister(path: str | os.PathLike[str]) -> None:
    _REGISTERED.discard(Path(path))


def registered() -> list[Path]:
    """Every registered path, sorted."""
    return sorted(_REGISTERED)
