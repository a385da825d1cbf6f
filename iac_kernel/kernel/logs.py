"""Keep iac_kernel's log records out of notebook cells.

Inside a kernel, ``sys.stderr`` is ipykernel's IOPub stream: a record logged while no
cell runs (an editor's turn through the ACP endpoint, a refused endpoint connection)
would be sent with the last cell's parent header and show up under that finished cell.
Like ipykernel does for its own logger, the ``iac_kernel`` logger writes to the
kernel's original stderr instead (the terminal or log of the Jupyter server).
``IAC_KERNEL_LOG_LEVEL`` sets the level (default WARNING).
"""

from __future__ import annotations

import io
import logging
import os
import sys

LOGGER = "iac_kernel"


def route_to_original_stderr() -> logging.Handler | None:
    """Install the handler once; returns it (``None`` if there is no stderr to write to)."""
    logger = logging.getLogger(LOGGER)
    for handler in logger.handlers:
        if getattr(handler, "iac_kernel_stderr", False):
            return handler
    stream = _original_stderr()
    if stream is None:
        return None
    handler = logging.StreamHandler(stream)
    handler.iac_kernel_stderr = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("[iac-kernel] %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    level = os.environ.get("IAC_KERNEL_LOG_LEVEL", "WARNING").upper()
    logger.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")
    logger.propagate = False
    return handler


def _original_stderr() -> io.TextIOBase | None:
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        try:
            return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), line_buffering=True)
        except OSError:
            pass
    return sys.__stderr__
