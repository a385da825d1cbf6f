"""Paths as the notebook shows them, so a saved notebook carries no path of the machine
that ran it.

Jupyter starts a kernel in its notebook's folder; the kernel records that folder with
:func:`set_base` and every path it displays (card locations and diffs, ``%session``,
``%cwd``, the session info in display metadata) goes through :func:`shown`: relative to
the notebook's folder when inside it or inside the same git checkout (``../README.md``),
``~/…`` under the home directory, unchanged otherwise. The session store and the agent
keep absolute paths; only what is displayed changes.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

_base: str | None = None


def set_base(folder: str | None) -> None:
    """The notebook's folder (``None``: show paths unchanged)."""
    global _base
    _base = os.path.abspath(folder) if folder else None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@lru_cache(maxsize=64)
def _checkout(folder: str) -> str | None:
    for parent in (Path(folder), *Path(folder).parents):
        if (parent / ".git").exists():
            return str(parent)
    return None


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` for display (see the module docstring)."""
    text = os.fspath(path)
    if _base is None or not os.path.isabs(text):
        return text
    absolute = os.path.normpath(text)
    candidates = [os.path.realpath(_base), _base]
    for base in dict.fromkeys(candidates):
        checkout = _checkout(base)
        if _inside(absolute, base) or (checkout and _inside(absolute, checkout)):
            return os.path.relpath(absolute, base)
    home = os.path.expanduser("~")
    if home not in ("", "/") and _inside(absolute, home):
        return "~" + absolute[len(home.rstrip(os.sep)) :]
    return text


def shown_model(model_id: str) -> str:
    """``scripted:/abs/script.json`` with its path shown relative; other ids unchanged."""
    name, sep, path = model_id.partition(":")
    if sep and name == "scripted" and path:
        return f"scripted:{shown(path)}"
    return model_id
