"""``IacKernel``: a Jupyter kernel whose cells are prompts to an agent session.

It subclasses ipykernel's ``IPythonKernel`` only for the comm manager and the widget
plumbing ipywidgets needs; cell text is never run as Python (nor are user expressions,
and the debugger is switched off).

Cells. The cell's magic lines (see :mod:`iac_kernel.kernel.magics`) run first; the rest
of the text is the prompt of one ``session/prompt`` turn of the kernel's session (see
:mod:`iac_kernel.kernel.state`). The turn's output: one Markdown display streamed in
place (:mod:`~iac_kernel.kernel.display`), a card per tool call
(:mod:`~iac_kernel.kernel.cards`), permission buttons or policy notes
(:mod:`~iac_kernel.kernel.permission_ui`), and notes for how the turn ended. Silent
execute requests (frontend housekeeping) run magics without output and never a turn.

Re-running a cell (the same ``cellId`` in the request metadata) sends its prompt as a
new turn appended to the session; the earlier turn stays in the history and the model
sees both. The cell says so. Nothing is rewritten: ``%new`` or ``%fork`` give a clean
slate.

Interrupt. SIGINT cancels the running turns and the cell ends with an ``error`` reply;
the kernel stays alive (see :mod:`~iac_kernel.kernel.running`).

Errors. A bad magic, a missing setting, a locked session or an internal failure answers
with an ``error`` reply and one readable line (short ``ename``, the message), never a
Python traceback. A turn that produced nothing but a model error (e.g. no API key)
shows the error on stderr and replies ``error`` with it, so unattended runs fail loudly.

All output of a cell is sent with that cell's parent header, fixed when it starts: a
widget click processed while the cell runs changes ipykernel's notion of "the current
parent", and output sent through it would land in the wrong cell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import List

from iac_kernel.agent.session import SessionBusyError, SessionClosedError
from iac_kernel.config import Settings
from iac_kernel.events import TurnEnded, Usage
from iac_kernel.guard.sandbox import reduced_notice
from iac_kernel.kernel import footer, parameters, paths
from iac_kernel.kernel.call_displays import CallDisplays
from iac_kernel.kernel.cards import CARD_MIME, ToolCard
from iac_kernel.kernel.cell_history import CellHistory
from iac_kernel.kernel.cell_history import page as help_page
from iac_kernel.kernel.channels import input_request, iopub_envelope, iopub_sender
from iac_kernel.kernel.console import ConsoleMixin
from iac_kernel.kernel.display import DELTA_MIME
from iac_kernel.kernel.editor_turns import summary_markdown, summary_plain
from iac_kernel.kernel.endpoint_hookup import EditorLink
from iac_kernel.kernel.kernel_info import KernelInfoMixin
from iac_kernel.kernel.logs import route_to_original_stderr
from iac_kernel.kernel.magics import MagicError, Magics, split_cell
from iac_kernel.kernel.permission_ui import DISPLAY_ID_KEY, PermissionUI
from iac_kernel.kernel.publish import Publisher, error_content
from iac_kernel.kernel.questions import PendingQuestions
from iac_kernel.kernel.running import RunningTurn, RunningTurns
from iac_kernel.kernel.session_info import ending_metadata
from iac_kernel.kernel.session_info import metadata as session_metadata
from iac_kernel.kernel.state import KernelState, SessionError
from iac_kernel.kernel.status import StatusChannel
from iac_kernel.kernel.turn import TurnView
from iac_kernel.kernel.wire import use_compact_json

CANCELLED_NOTE = (
    "The turn was interrupted. What the agent said and did until then is kept in the "
    "session; send another prompt to continue."
)
RERUN_NOTE = (
    "_↻ Re-run of this cell: sent as a new turn. The earlier answer stays in the session "
    "history (`%new` or `%fork` for a clean slate)._"
)


class IacKernel(KernelInfoMixin, ConsoleMixin, IPythonKernel):
    """The iac-kernel Jupyter kernel."""

    help_links = List([]).tag(config=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        use_compact_json(self.session)  # about 30 bytes less per message (kernel/wire.py)
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
        self.magics.pending = self._pending_bundles
        #: Permission questions waiting for a click, from any cell or client.
        self.questions = PendingQuestions()
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

    # -- signals -------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        route_to_original_stderr()
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
        except SessionError as exc:
            content = self._fail(out, silent, "SessionError", str(exc))
        except Exception as exc:  # never a traceback wall, never a dead kernel
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
        for call in magics:
            result = await self.magics.run(call)
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
        values = parameters.parse(prompt) if prompt else None
        if values is not None:  # a runbook's parameters cell: no model call
            self.state.parameters.update(values)
            self.state.parameters_unsent = True
            if not silent:
                out.markdown(parameters.markdown(values))
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
        view.start()
        try:
            if self.state.parameters_unsent:  # the runbook's parameters, read with this prompt
                prompt = f"{prompt}\n\n{parameters.block(self.state.parameters)}"
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
