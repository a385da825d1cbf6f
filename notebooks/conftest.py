"""pytest --nbval support for the runbooks.

Two adjustments, both so nbval checks what a notebook user sees:

* nbval 0.11 ignores ``update_display_data`` ("unhandled iopub msg"), so it would compare
  the first version of every display (the "Working…" placeholder, a card still
  "running") with the final one saved in the notebook. The iac-kernel streams its answer
  and its tool cards in place, so here each display of a cell is held until the cell is
  idle, updated in place, and then handed to nbval in creation order: the final output,
  as Jupyter and nbclient show it.
* nbval's sanitize regexes only touch strings, and a tool card's
  ``application/vnd.iac-kernel.toolcall+json`` is an object (with the session id and
  absolute paths in it): objects are compared as their sorted JSON text, sanitized.
* Without ``--nbval-sanitize-with``, ``nbval-sanitize.cfg`` beside this file is used, so a
  plain ``pytest --nbval notebooks/`` checks the runbooks as CI does.
* Every notebook's kernel gets a fresh, empty session store and no Anthropic
  credentials, so ``%sessions`` lists only that notebook's sessions and the scripted
  model answers, as in the committed run (``notebooks/README.md``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.models.providers import CREDENTIAL_ENV as CREDENTIALS

SANITIZE = Path(__file__).with_name("nbval-sanitize.cfg")
RUNBOOK_ENV = {"IAC_KERNEL_CHECKOV": "off", "TF_CLI_CONFIG_FILE": os.devnull}
_stores: list[str] = []


def _transient_id(msg: dict[str, Any]) -> str | None:
    return (msg.get("content", {}).get("transient") or {}).get("display_id")


def fold_display_updates(get_message: Any) -> Any:
    """Wrap ``RunningKernel.get_message`` so iopub displays arrive once, in final form."""

    def wrapped(self: Any, stream: str, timeout: float | None = None) -> dict[str, Any]:
        if stream != "iopub":
            return get_message(self, stream, timeout)
        ready: deque[dict[str, Any]] = self.__dict__.setdefault("_iac_ready", deque())
        held: dict[str, list[dict[str, Any]]] = self.__dict__.setdefault("_iac_held", {})
        while not ready:
            msg = get_message(self, stream, timeout)
            parent = msg.get("parent_header", {}).get("msg_id", "")
            kind = msg.get("msg_type")
            if kind == "display_data":
                held.setdefault(parent, []).append(msg)
                continue
            if kind == "update_display_data":
                display_id = _transient_id(msg)
                for earlier in held.get(parent, []):
                    if display_id and _transient_id(earlier) == display_id:
                        earlier["content"]["data"] = msg["content"]["data"]
                        earlier["content"]["metadata"] = msg["content"].get("metadata", {})
                continue
            if kind == "status" and msg.get("content", {}).get("execution_state") == "idle":
                ready.extend(held.pop(parent, []))
            ready.append(msg)
        return ready.popleft()

    wrapped.__wrapped__ = get_message  # type: ignore[attr-defined]
    return wrapped


def sanitize_objects(sanitize: Any) -> Any:
    """Wrap ``IPyNbCell.sanitize`` so dicts and lists are sanitized as sorted JSON text."""

    def wrapped(self: Any, s: Any) -> Any:
        if isinstance(s, dict | list):
            s = json.dumps(s, sort_keys=True, indent=1, ensure_ascii=False)
        return sanitize(self, s)

    wrapped.__wrapped__ = sanitize  # type: ignore[attr-defined]
    return wrapped


def _fresh_store() -> None:
    store = tempfile.mkdtemp(prefix="iac-kernel-nbval-sessions-")
    _stores.append(store)
    os.environ["IAC_KERNEL_SESSIONS_DIR"] = store


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("nbval"):
        return
    if getattr(config.option, "nbval_sanitize_with", None) is None:
        config.option.nbval_sanitize_with = str(SANITIZE)
    from nbval import kernel as nbval_kernel
    from nbval import plugin as nbval_plugin

    cell = nbval_plugin.IPyNbCell
    if not hasattr(cell.sanitize, "__wrapped__"):
        cell.sanitize = sanitize_objects(cell.sanitize)
    running = nbval_kernel.RunningKernel
    if not hasattr(running.get_message, "__wrapped__"):
        running.get_message = fold_display_updates(running.get_message)
        start = running.__init__

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            _fresh_store()  # the kernel process inherits it
            for name in CREDENTIALS:
                os.environ.pop(name, None)
            # Terraform runbooks (06, 07): no checkov run, no CLI config file warning.
            os.environ.update(RUNBOOK_ENV)
            start(self, *args, **kwargs)

        running.__init__ = init


def pytest_unconfigure(config: pytest.Config) -> None:
    while _stores:
        shutil.rmtree(_stores.pop(), ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A notebook's cells run in their order, one notebook after another, whatever order
    the tests run in: pytest-randomly (``-p randomly``, as CI runs) shuffles items within
    a module, and nbval's cells belong to none, so they would be interleaved across
    notebooks. The notebooks keep the shuffled order among themselves."""
    from nbval.plugin import IPyNbCell

    cells = [item for item in items if isinstance(item, IPyNbCell)]
    if not cells:
        return
    first = items.index(cells[0])
    rest = [item for item in items if not isinstance(item, IPyNbCell)]
    at = sum(1 for item in items[:first] if not isinstance(item, IPyNbCell))
    notebooks = list(dict.fromkeys(cell.parent for cell in cells))
    cells.sort(key=lambda cell: (notebooks.index(cell.parent), cell.cell_num))
    items[:] = rest[:at] + cells + rest[at:]
