"""Paths as the notebook shows them, so a saved notebook carries no path of the machine
that ran it.

Jupyter starts a kernel in its notebook's folder; the kernel records that folder with
:func:`set_base` and every path it displays (card locations and diffs, ``%session``,
``%cwd``, the session info in display metadata) goes through :func:`shown`: relative to
the notebook's folder when inside it or inside the same git checkout (``../README.md``),
``~/…`` under the home directory, unchanged otherwise. Everything else the kernel sends
to the cell (text, tool output, errors) goes through :func:`sanitize`, which writes those
same folders as ``.``, ``..`` and ``~`` wherever they appear. The session store and the
agent keep absolute paths; only what the notebook shows (and saves) changes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

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
    """``scripted:/abs/script.json`` with its path shown relative; a real model with its
    provider (``anthropic:claude-sonnet-4-6``, ``deepseek:deepseek-flash``)."""
    from iac_kernel.models.registry import describe

    name, sep, path = model_id.partition(":")
    if sep and name == "scripted" and path:
        return f"scripted:{shown(path)}"
    provider, model = describe(model_id)
    if provider in ("scripted", "unknown"):
        return model_id
    return f"{provider}:{model}"


def _prefixes() -> list[tuple[str, str]]:
    """(absolute prefix, what replaces it) for :func:`sanitize`, longest first."""
    if _base is None:
        return []
    pairs: dict[str, str] = {}
    for base in (os.path.realpath(_base), _base):
        pairs.setdefault(base, ".")
        checkout = _checkout(base)
        if checkout and checkout != base:
            pairs.setdefault(checkout, os.path.relpath(checkout, base))
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        pairs.setdefault(home.rstrip(os.sep), "~")
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


@lru_cache(maxsize=8)
def _pattern(prefixes: tuple[tuple[str, str], ...]) -> re.Pattern[str] | None:
    if not prefixes:
        return None
    alternatives = "|".join(re.escape(prefix) for prefix, _ in prefixes)
    return re.compile(f"(?:{alternatives})(?![\\w.-])")


def sanitize(value: Any) -> Any:
    """``value`` (a string, or strings at any depth) with the notebook's folder, its git
    checkout and the home directory written relatively (``.``, ``..``, ``~``): what the
    kernel sends to the notebook, so a saved notebook carries no path of this machine."""
    prefixes = tuple(_prefixes())
    pattern = _pattern(prefixes)
    if pattern is None:
        return value
    table = dict(prefixes)
    return _walk(value, lambda text: pattern.sub(lambda m: table[m.group(0)], text))


def _walk(value: Any, fix: Any) -> Any:
    if isinstance(value, str):
        return fix(value) if os.sep in value else value
    if isinstance(value, dict):
        return {key: _walk(item, fix) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, fix) for item in value]
    return value
