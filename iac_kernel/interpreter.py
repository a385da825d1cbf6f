"""This interpreter by a path that exists inside the sandbox (launchers, helpers, the
egress forwarder)."""

from __future__ import annotations

import functools
import os
import sys


@functools.lru_cache(maxsize=1)
def sandbox_python() -> str:
    """This interpreter by a path that exists inside the sandbox, for the launchers'
    ``#!`` line and the helpers: a venv reached through a symlink under /tmp (e.g.
    ``/tmp/link -> /tmp/venv``) is bound by its real folder only, so the symlinked path
    is missing in there. The file name stays (a venv's ``bin/python`` finds its
    ``pyvenv.cfg`` beside it)."""
    folder = os.path.realpath(os.path.dirname(sys.executable))
    return os.path.join(folder, os.path.basename(sys.executable))
