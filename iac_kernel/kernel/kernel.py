"""``IacKernel``: a Jupyter kernel whose cells are prompts to an agent session.

It subclasses ipykernel's ``IPythonKernel`` only for the comm manager and the widget
plumbing ipywidgets needs; cell text is never run as Python. A cell's magic lines run
first (:mod:`~iac_kernel.kernel.magics`); the rest of its text is the prompt of one turn
of the kernel's session (:mod:`~iac_kernel.kernel.session.state`), rendered by
:mod:`~iac_kernel.kernel.render` and asking through :mod:`~iac_kernel.kernel.ask`. Silent
execute requests (frontend housekeeping) run magics without output and never a turn.

Re-running a cell (the same ``cellId`` in the request metadata) sends its prompt as a new
turn appended to the session, and the cell says so; ``%new`` or ``%fork`` give a clean
slate. SIGINT cancels the running turns (:mod:`~iac_kernel.kernel.session.state`). A
bad magic, a locked session or an internal failure answers with an ``error`` reply and
one readable line, never a Python traceback; a turn that produced nothing but a model
error (e.g. no API key) replies ``error`` too, so unattended runs fail loudly.

All output of a cell is sent with that cell's parent header, fixed when it starts (see
:mod:`~iac_kernel.kernel.io.publish`).

The kernel always answers. ipykernel runs one shell message at a time (an
``asyncio.Lock``), and a turn is one long execute_request, so a second client's
``kernel_info_request`` (a page reload, a console) would wait until the turn ends. While
the lock is held, :data:`CONCURRENT_REQUESTS` and execute requests whose cell is made only
of ``%permissions`` and ``%output ID`` lines (look at and answer the waiting question,
read a call's output) are dispatched at once instead, as ipykernel does for comm
messages. Such a request gets its reply and an ``idle`` status with its own parent
(JupyterLab waits for both), then a ``busy`` status with the running cell's parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import List

from iac_kernel import __version__
from iac_kernel.agent.loop import CANCELLED_RESULT
from iac_kernel.agent.permissions import DENIED_MESSAGE
from iac_kernel.agent.session import SessionBusyError, SessionClosedError
from iac_kernel.config import Settings
from iac_kernel.events import TurnEnded, Usage
from iac_kernel.guard.sandbox.bwrap import reduced_notice
from iac_kernel.kernel import completion
from iac_kernel.kernel.ask.permission_ui import DISPLAY_ID_KEY, PermissionUI
from iac_kernel.kernel.ask.questions import PendingQuestions
from iac_kernel.kernel.completion import CellHistory
from iac_kernel.kernel.completion import page as help_page
from iac_kernel.kernel.io import paths
from iac_kernel.kernel.io.publish import (
    Publisher,
    error_content,
    input_request,
    iopub_envelope,
    iopub_sender,
)
from iac_kernel.kernel.magics.cell import (
    parameters_block,
    parameters_markdown,
    parameters_of,
    split_cell,
)
from iac_kernel.kernel.magics.commands import MagicError, Magics
from iac_kernel.kernel.render import footer
from iac_kernel.kernel.render.cards import CARD_MIME, ToolCard
from iac_kernel.kernel.render.display import DELTA_MIME
from iac_kernel.kernel.render.turn import CallDisplays, TurnView
from iac_kernel.kernel.session.editors import EditorLink, summary_markdown, summary_plain
from iac_kernel.kernel.session.state import KernelState, RunningTurn, RunningTurns, SessionError
from iac_kernel.kernel.session.status import StatusChannel, ending_metadata, kernel_session_info
from iac_kernel.kernel.session.status import metadata as session_metadata

CANCELLED_NOTE = (
    "The turn was interrupted. What the agent said and did until then is kept in the "
    "session; send another prompt to continue."
)
RERUN_NOTE = (
    "_↻ Re-run of this cell: sent as a new turn. The earlier answer stays in the session "
    "history (`%new` or `%fork` for a clean slate)._"
)

CONCURRENT_REQUESTS = frozenset(
    {
        "kernel_info_request",
        "complete_request",
        "inspect_request",
        "is_complete_request",
        "history_request",
        "comm_info_request",
        "connect_request",
    }
)
CONSOLE_LINE = re.compile(r"^\s*(%permissions\s*|%output\s+\S+\s*)$")


#: Set while a request is served during a turn (see :meth:`IacKernel._abort_queues`).
_SERVING_NOW: contextvars.ContextVar[bool] = contextvars.ContextVar("iac_serving", default=False)


def console_cell(code: str) -> bool:
    """True for a cell of ``%permissions`` / ``%output ID`` lines only."""
    lines = [line for line in code.splitlines() if line.strip()]
    return bool(lines) and all(CONSOLE_LINE.match(line) for line in lines)


def _tool_results(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every tool result block of the history, in order."""
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            yield from (
                b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            )


def _result_text(block: dict[str, Any]) -> str:
    value = block.get("content")
    if isinstance(value, list):
        return "".join(b.get("text", "") for b in value if isinstance(b, dict))
    return str(value if value is not None else "")


def tool_output(messages: list[dict[str, Any]], call_id: str) -> str | None:
    """The whole result the model got for ``call_id``, from the session's history."""
    found = [b for b in _tool_results(messages) if b.get("tool_use_id") == call_id]
    return _result_text(found[-1]) if found else None


def history_outcome(state: Any, call_id: str, session_id: str) -> str | None:
    """``done``/``failed``/``denied``/``not_run`` for a call in a stored session's history,
    or ``None`` when the session or the call is not there."""
    if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", session_id):
        return None  # not a session id: never a path into the store
    session = state.current
    try:
        if session is not None and session.session_id == session_id:
            messages = session.conversation.messages
        else:
            messages = state.manager.store.read(session_id).messages
    except Exception:  # unknown, unreadable or malformed id: nobody knows
        return None
    for block in _tool_results(messages):
        if block.get("tool_use_id") == call_id:
            if _result_text(block).startswith(DENIED_MESSAGE):
                return "denied"
            return "failed" if block.get("is_error") else "done"
    asked = any(
        block.get("type") == "tool_use" and block.get("id") == call_id
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict)
    )
    return "not_run" if asked else None


class IacKernel(IPythonKernel):
    """The iac-kernel Jupyter kernel."""

    help_links = List([]).tag(config=True)
    implementation = "iac-kernel"
    implementation_version = __version__
    language_info = {
        "name": "markdown",
        "version": "1.0",
        "mimetype": "text/markdown",
        "file_extension": ".md",
        "pygments_lexer": "markdown",
        "codemirror_mode": "markdown",
        "nbconvert_exporter": "markdown",
    }
    banner = (
        f"iac-kernel {__version__}: an infrastructure-as-code agent. Each cell is a prompt; "
        "%help lists the magics."
    )

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._count = 0
        #: Bad IAC_KERNEL_* variables (defaults used): the first cell and every ``%config``
        #: listing show them on stderr.
        self.startup_problems: list[str] = []
        self._problems_shown: int | None = None  # the cell that showed them
        self.cell_history = CellHistory()
        #: The session and usage of the last turn that ended (the status comm's turnUsage).
        self.last_turn: tuple[str, Usage] | None = None
        self.state = KernelState(
            Settings.from_env(problems=self.startup_problems),
            os.getcwd(),
            notebook=os.environ.get("JPY_SESSION_NAME") or None,
            permission_ui=os.environ.get("IAC_KERNEL_PERMISSION_UI", "auto"),
        )
        paths.set_base(os.getcwd())  # displayed paths: relative to the notebook's folder
        self.magics = Magics(self.state)
        self.magics.full_output = self.full_output
        #: Permission questions waiting for a click, from any cell or client.
        self.questions = PendingQuestions()
        self.magics.pending = self.questions.bundles
        #: Every tool card shown by this kernel (for %output and the status comm).
        self.tool_cards: dict[str, ToolCard] = {}
        self.status = StatusChannel(
            self.session_info,
            self.full_output,
            self.questions.answer,
            self.call_outcome,
            call_card=lambda call_id, display_id: self.running.call_card(call_id, display_id),
        )
        self.questions.listeners.append(self.status.push)
        self.state.listeners.append(lambda _session: self.status.push())
        self.running = RunningTurns()
        self._cells_run: set[tuple[str, str]] = set()
        self.editor_link = EditorLink(self.state, self.running.runs)

    @property
    def kernel_info(self) -> dict[str, Any]:
        info = dict(super().kernel_info)
        # The status bar's model, mode and session from the start (see session/status.py).
        try:
            info["iac_kernel"] = self.session_info()
        except Exception:  # kernel_info must always answer
            self.log.exception("session info failed")
        # Python debugging makes no sense for prompts.
        info["supported_features"] = [
            f for f in info.get("supported_features", []) if f != "debugger"
        ]
        return info

    @property
    def execution_count(self) -> int:  # type: ignore[override]
        # IPythonKernel reads the IPython shell's counter, which never moves here.
        return getattr(self, "_count", 0)

    @execution_count.setter
    def execution_count(self, value: int) -> None:
        self._count = value

    # -- the status bar, %output, concurrent requests ----------------------------------------

    def session_info(self) -> dict[str, Any]:
        """What the status bar shows (see :mod:`~iac_kernel.kernel.session.status`)."""
        return kernel_session_info(
            self.state, self.questions, self.running.snapshot(), self.last_turn
        )

    def call_outcome(self, call_id: str, session_id: str) -> dict[str, Any]:
        """What became of a call whose card a notebook saved while it asked: this kernel's
        card when it has one, else what the session's history says: ``done``, ``failed``,
        ``denied``, or ``not_run`` (asked, never answered); ``None`` when nobody knows."""
        card = self.tool_cards.get(call_id)
        if card is not None and card.status != "awaiting_permission":
            return {"card": card.payload(), "outcome": card.status}
        if any(q.request.call_id == call_id for q in self.questions.questions.values()):
            return {"card": None, "outcome": "awaiting_permission"}
        return {"card": None, "outcome": history_outcome(self.state, call_id, session_id)}

    def full_output(self, call_id: str) -> tuple[str | None, str | None]:
        """Everything a tool call returned, from the session's history; for an interrupted
        call, what it printed before the interrupt."""
        call_id = call_id.strip()
        card = self.tool_cards.get(call_id)
        session = self.state.current
        found = None
        if session is not None and not session.closed:
            found = tool_output(session.conversation.messages, call_id)
        if card is not None and card.live and (found is None or found == CANCELLED_RESULT):
            return card.output if card.output is not None else card.live, None
        if found is not None:
            return found, None
        if card is not None and card.output is not None:
            return card.output, None
        return None, f"no tool call {call_id!r} in this session (ids are on the cards)"

    async def shell_main(self, subshell_id: str | None, msg: Any) -> None:  # type: ignore[override]
        lock = getattr(self, "_main_asyncio_lock", None)
        if subshell_id is None and lock is not None and lock.locked() and self.session:
            if self._answer_now(msg):
                await self._dispatch_now(msg)
                return
        await super().shell_main(subshell_id, msg)

    def _answer_now(self, msg: Any) -> bool:
        try:
            _idents, frames = self.session.feed_identities(msg, copy=False)
            parsed = self.session.deserialize(frames, content=False, copy=False)
        except Exception:
            return False
        msg_type = parsed["header"].get("msg_type")
        if msg_type in CONCURRENT_REQUESTS:
            return True
        if msg_type != "execute_request":
            return False
        try:
            content = self.session.unpack(parsed["content"])
        except Exception:
            return False
        return isinstance(content, dict) and console_cell(str(content.get("code", "")))

    def _abort_queues(self, subshell_id: str | None = None) -> None:
        """A failing console cell (``%output no-such-id``) served during a turn must not
        abort the cells queued behind the turn, as a failing cell with ``stop_on_error``
        does."""
        if _SERVING_NOW.get():
            return
        super()._abort_queues(subshell_id)

    async def _dispatch_now(self, msg: Any) -> None:
        running_parent = self.get_parent("shell")
        running_ident = self._get_shell_context_var(self._shell_parent_ident)
        token = _SERVING_NOW.set(True)
        try:
            await self.dispatch_shell(msg, subshell_id=None, concurrent=True)
            request = self.get_parent("shell")
            if request is not running_parent:
                self._publish_status("idle", "shell", parent=request)
        finally:
            _SERVING_NOW.reset(token)
            self.set_parent(running_ident, running_parent, channel="shell")
            if running_parent:
                self._publish_status("busy", "shell", parent=running_parent)

    # -- requests besides execute ------------------------------------------------------------

    async def do_history(self, hist_access_type: str, output: bool, raw: bool, **kw: Any) -> Any:  # type: ignore[override]
        return self.cell_history.reply(hist_access_type, output, raw, **kw)

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:  # type: ignore[override]
        return completion.complete(code, cursor_pos, self.state)

    async def do_is_complete(self, code: str) -> dict[str, Any]:  # type: ignore[override]
        return completion.is_complete(code)

    async def do_inspect(  # type: ignore[override]
        self, code: str, cursor_pos: int | None, detail_level: int = 0, omit_sections: Any = ()
    ) -> dict[str, Any]:
        return completion.inspect(code, cursor_pos)

    async def do_debug_request(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "response",
            "request_seq": msg.get("seq"),
            "success": False,
            "command": msg.get("command"),
            "message": "iac-kernel cells are prompts; there is no debugger",
        }

    # -- signals -------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_sigint)
        loop = getattr(self.io_loop, "asyncio_loop", None)
        if loop is not None:
            self.editor_link.start(loop)
        self.status.register(self.comm_manager)

    def pre_handler_hook(self) -> None:
        """ipykernel installs a KeyboardInterrupt handler here; our SIGINT handler stays."""

    def post_handler_hook(self) -> None:
        """Nothing to restore (see :meth:`pre_handler_hook`)."""

    def _on_sigint(self, _signum: int, _frame: Any) -> None:
        if not self.running.interrupt():
            self.log.info("SIGINT with no turn running: ignored")

    # -- execution -----------------------------------------------------------------------------

    async def do_execute(  # type: ignore[override]
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool = False,
        *,
        cell_meta: dict[str, Any] | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        parent = self.get_parent("shell")
        ident = self._get_shell_context_var(self._shell_parent_ident)
        out = Publisher(iopub_sender(self, parent), iopub_envelope(self, parent), self.session.pack)
        if not silent:
            if store_history:
                self.cell_history.store(self.execution_count, code)
            self._show_settings_problems(out)
            self._show_editor_turns(out)
        try:
            content = await self._execute(code, silent, allow_stdin, cell_id, out, parent, ident)
        except MagicError as exc:
            content = self._fail(out, silent, exc.ename, str(exc))
        except Exception as exc:  # never a traceback wall, never a dead kernel
            if not isinstance(exc, SessionError):
                self.log.exception("cell failed")
            content = self._fail(out, silent, type(exc).__name__, str(exc) or "internal error")
        content["execution_count"] = self.execution_count
        if content["status"] == "ok":
            content.setdefault("payload", [])
            content.setdefault("user_expressions", {})
        return content

    def _show_settings_problems(self, out: Publisher, again: bool = False) -> None:
        """The first cell (and, with ``again``, a ``%config`` listing) says which settings
        were ignored at start."""
        if self._problems_shown is not None and (
            not again or self._problems_shown == self.execution_count
        ):
            return  # shown already (in this very cell, for a %config listing)
        self._problems_shown = self.execution_count
        for line in self.startup_problems:
            out.stream(f"iac-kernel setting ignored: {line}\n", "stderr")

    def _show_editor_turns(self, out: Publisher) -> None:
        """Editors attached through the endpoint prompted this session since the last
        cell: say so first (their turns are already in the history)."""
        turns = self.editor_link.editor_turns()
        if turns:
            out.markdown(summary_markdown(turns), summary_plain(turns))

    def _fail(self, out: Publisher, silent: bool, ename: str, evalue: str) -> dict[str, Any]:
        return error_content(ename, evalue) if silent else out.error(ename, evalue)

    async def _execute(
        self,
        code: str,
        silent: bool,
        allow_stdin: bool,
        cell_id: str | None,
        out: Publisher,
        parent: dict[str, Any],
        ident: Any,
    ) -> dict[str, Any]:
        paged = help_page(code)  # %magic? pages the magic's help
        if paged is not None:
            return {"status": "ok", "payload": [paged]}
        magics, prompt = split_cell(code)
        asked: list[str] = []  # prompts magics send (%pr), before the cell's own text
        for call in magics:
            result = await self.magics.run(call)
            if result.prompt:
                asked.append(result.prompt)
            if silent:
                continue
            if call.name == "config" and not call.args:
                self._show_settings_problems(out, again=True)
            bundle = {"text/markdown": result.markdown, "text/plain": result.plain}
            info = session_metadata(self.state.current)
            if result.value:  # e.g. %config KEY: the cell's value
                out.result(bundle, self.execution_count, info)
            else:
                out.display(bundle, metadata=info)
                # e.g. %permissions: the pending question's buttons, under its display id.
                for extra, display_id in result.displays:
                    out.display(extra, display_id, metadata={DISPLAY_ID_KEY: display_id})
        if magics:
            self.status.push()  # %mode, %model, %new… change what the status bar shows
        if asked:
            prompt = "\n\n".join([*asked, prompt] if prompt else asked)
        values = parameters_of(prompt) if prompt else None
        if values is not None:  # a runbook's parameters cell: no model call
            self.state.parameters.update(values)
            self.state.parameters_unsent = True
            if not silent:
                out.markdown(parameters_markdown(values))
            return {"status": "ok"}
        if not prompt or silent:
            return {"status": "ok"}
        return await self._turn(prompt, out, allow_stdin, cell_id, parent, ident)

    async def _turn(
        self,
        prompt: str,
        out: Publisher,
        allow_stdin: bool,
        cell_id: str | None,
        parent: dict[str, Any],
        ident: Any,
    ) -> dict[str, Any]:
        session = self.state.session()
        if session.busy:
            if not self.running.runs(session):
                raise SessionError(
                    "an editor is running a turn in this session (through the kernel's ACP "
                    "endpoint); wait for it to finish, or cancel it in the editor"
                )
            raise SessionError("a turn is already running in this session; wait or interrupt it")
        if cell_id:
            key = (session.session_id, cell_id)
            if key in self._cells_run:
                out.markdown(RERUN_NOTE)
            self._cells_run.add(key)

        async def ask_stdin(text: str) -> str:
            return await input_request(self, text, parent, ident)

        def on_card(card: ToolCard, _display_id: str) -> None:
            self.tool_cards[card.call_id] = card
            self.status.push_card(card.payload())

        notice = reduced_notice(session.session_id)  # guard (issue 11): said once per session
        if notice:
            out.markdown(f"⚠️ {notice}")
        displays = CallDisplays()
        view = TurnView(
            out,
            session.session_id,
            end_metadata=lambda ended: ending_metadata(session, ended.usage),
            on_card=on_card,
            deltas=self.status.renders(DELTA_MIME),
            on_usage=lambda usage: self._turn_usage(running, usage),
            model=paths.shown_model(session.model_id),
            cost=footer.cost_of(session.model_id),
            displays=displays,
        )
        ui = PermissionUI(
            out,
            ui=self.state.permission_ui,
            allow_stdin=allow_stdin,
            policy=lambda: session.settings.headless_policy,
            ask_stdin=ask_stdin if allow_stdin else None,
            on_status=view.set_status,
            questions=self.questions,
            on_question=view.set_question,
            card_shown=self.status.renders(CARD_MIME),
            displays=displays,
        )
        running = RunningTurn(
            session,
            asyncio.get_running_loop(),
            msg_id=str(parent.get("header", {}).get("msg_id", "")),
            cell_id=cell_id,
            execution_count=self.execution_count,
            displays=displays,
        )
        self.running.add(running)
        self.status.push()
        try:
            if self.state.parameters_unsent:  # the runbook's parameters, read with this prompt
                prompt = f"{prompt}\n\n{parameters_block(self.state.parameters)}"
                self.state.parameters_unsent = False
            ended = await session.prompt([{"type": "text", "text": prompt}], view.emit, ui.ask)
            self.last_turn = (session.session_id, ended.usage)
        except (SessionBusyError, SessionClosedError) as exc:
            view.finish(TurnEnded("end_turn", Usage()))
            raise SessionError(str(exc)) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # The turn's task was cancelled before it could start: nothing ran.
            ended = TurnEnded("cancelled", Usage())
            self.last_turn = (session.session_id, ended.usage)
        finally:
            self.running.discard(running)
            self.status.push()
        view.finish(ended, session_metadata(session, ended.usage))
        if ended.stop_reason == "cancelled":
            return out.error("Cancelled", CANCELLED_NOTE)
        if view.failed:
            return error_content("ModelError", view.errors[0])
        return {"status": "ok"}

    def _turn_usage(self, running: RunningTurn, usage: Usage) -> None:
        running.usage = usage
        self.status.push()  # the status bar's tokens move call by call

    def do_shutdown(self, restart: bool) -> dict[str, Any]:  # type: ignore[override]
        """Close the ACP endpoint and release the session locks (this runs on the control
        thread)."""
        loop = getattr(self.io_loop, "asyncio_loop", None)
        if loop is not None and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._close(), loop)
            with contextlib.suppress(Exception):
                future.result(timeout=5)
        if self.editor_link.endpoint is not None:
            self.editor_link.endpoint.remove_files()
        return super().do_shutdown(restart)

    async def _close(self) -> None:
        await self.editor_link.close()  # editors first: their turns end, then the locks go
        await self.state.close()
