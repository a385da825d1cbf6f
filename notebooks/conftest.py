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
* A runbook that needs the stand-in forge (08) gets it, started before its kernel and
  stopped after it, and its kernel the forge's environment (``tools/stand_in_forge.py``).
* A cell tagged ``approve-in-recording`` whose output is compared (not tagged
  ``nbval-ignore-output``) runs as its recording ran: with ``allow_stdin``, so the kernel
  shows its question's buttons, and **Allow once** clicked by a second client of the
  kernel (:class:`Person`, as a second browser tab would), the comm message a browser
  sends (``tools/record_approved.py`` clicks the same way).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from jupyter_client.session import Session

from iac_kernel.models.providers import CREDENTIAL_ENV as CREDENTIALS

sys.path.insert(0, str(Path(__file__).with_name("tools")))

from record_approved import ALLOW, TAG, button_named, typed_confirmation
from run_notebooks import environ
from stand_in_forge import runbook_forge

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


class Person:
    """Answers a kernel's questions as a person in JupyterLab does: a second client of the
    kernel watches its messages and, while :attr:`approving`, types a typed confirmation's
    name and clicks **Allow once** on the question's widget."""

    def __init__(self, manager: Any) -> None:
        self.approving = False
        self.clicked = 0
        self._stop = threading.Event()
        # A session of its own: a client shares the manager's by default, and two shell
        # sockets of one identity would steal each other's replies.
        key, scheme = manager.session.key, manager.session.signature_scheme
        self.client = manager.client(session=Session(key=key, signature_scheme=scheme))
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)  # its iopub is subscribed from here on
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except Empty:
                continue
            if not self.approving:
                continue
            typed = typed_confirmation(msg)
            if typed is not None:
                self._send(msg, {"method": "update", "state": {"value": typed}, "buffer_paths": []})
            if button_named(msg, ALLOW):
                self._send(msg, {"method": "custom", "content": {"event": "click"}})
                self.clicked += 1

    def _send(self, opened: dict[str, Any], data: dict[str, Any]) -> None:
        content = {"comm_id": opened["content"]["comm_id"], "data": data}
        self.client.shell_channel.send(self.client.session.msg("comm_msg", content))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.stop_channels()


def approves(cell: Any) -> bool:
    """Whether nbval runs ``cell`` with a person's click, as it was recorded."""
    tags = cell.get("metadata", {}).get("tags", [])
    return TAG in tags and "nbval-ignore-output" not in tags


def approving_execute(execute: Any) -> Any:
    """Wrap ``RunningKernel.execute_cell_input``: a cell nbval runs with a click
    (:func:`approves`) is sent with ``allow_stdin`` and its :class:`Person` watching."""

    def wrapped(self: Any, cell_input: str, allow_stdin: bool | None = None) -> Any:
        person: Person | None = self.__dict__.get("_iac_person")
        wanted = bool(self.__dict__.get("_iac_approves"))
        if wanted and person is None:
            person = self.__dict__["_iac_person"] = Person(self.km)
        if person is not None:
            person.approving = wanted
        return execute(self, cell_input, allow_stdin=True if wanted else allow_stdin)

    wrapped.__wrapped__ = execute  # type: ignore[attr-defined]
    return wrapped


def with_forge(setup: Any, teardown: Any) -> tuple[Any, Any]:
    """Wrap ``IPyNbFile.setup``/``teardown``: the stand-in forge a runbook needs runs from
    before its kernel starts (which inherits the forge's environment) until it stopped."""

    def start(self: Any) -> None:
        stack = self.__dict__["_iac_forge"] = contextlib.ExitStack()
        env = stack.enter_context(runbook_forge(Path(str(self.fspath))))
        try:
            with environ(env):
                setup(self)
        except BaseException:
            stack.close()
            raise

    def stop(self: Any) -> None:
        try:
            kernel = getattr(self, "kernel", None)
            person = kernel.__dict__.pop("_iac_person", None) if kernel is not None else None
            if person is not None:
                person.stop()
            teardown(self)
        finally:
            stack = self.__dict__.pop("_iac_forge", None)
            if stack is not None:
                stack.close()

    start.__wrapped__ = setup  # type: ignore[attr-defined]
    return start, stop


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tell the notebook's kernel whether the cell about to run gets a person's click."""
    kernel = getattr(getattr(item, "parent", None), "kernel", None)
    cell = getattr(item, "cell", None)
    if kernel is not None and cell is not None:
        kernel.__dict__["_iac_approves"] = approves(cell)


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
    notebook = nbval_plugin.IPyNbFile
    if not hasattr(notebook.setup, "__wrapped__"):
        notebook.setup, notebook.teardown = with_forge(notebook.setup, notebook.teardown)
    running = nbval_kernel.RunningKernel
    if not hasattr(running.execute_cell_input, "__wrapped__"):
        running.execute_cell_input = approving_execute(running.execute_cell_input)
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
