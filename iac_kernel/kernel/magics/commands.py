"""The magic table and its commands: lines that start with ``%`` control the session.

A cell's magics (parsed by :mod:`~iac_kernel.kernel.magics.cell`) run first, in order,
then the rest of the cell (if any text is left) is sent as the prompt; a cell made only of
magics runs no turn. The first failing magic stops the cell: nothing after it runs.

:data:`SPECS` is the table (as ipykernel's shell handlers): each magic's name is the
:class:`Magics` method that runs it, with its usage, summary and the values its first
argument completes to.

``%config``, ``%mode`` and ``%model`` change the kernel's defaults (used by ``%new``) and
the current session if there is one; they do not create a session. ``%session``,
``%fork`` and a prompt do.

Relative paths in magics (``%cwd PATH``, ``%model scripted:PATH``) are taken from the
notebook's folder, never from the current ``%cwd``: a cell means the same folder each
time it runs, so a runbook run again from the top in the same kernel does what it did.
"""

from __future__ import annotations

import asyncio
import difflib
import html
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.config import HEADLESS_POLICIES, MODES, PERMISSION_UIS
from iac_kernel.events import TextDelta, ToolCallInput, UserMessage
from iac_kernel.guard.sandbox.bwrap import status_text as guard_status
from iac_kernel.kernel.ask.permission_ui import choose_ui
from iac_kernel.kernel.io.paths import shown, shown_model
from iac_kernel.kernel.magics.cell import MagicCall
from iac_kernel.kernel.session.state import KernelState, SessionError
from iac_kernel.mcp.commands import McpCommandError, run_mcp_command
from iac_kernel.models.base import ModelError
from iac_kernel.models.providers import PROVIDERS
from iac_kernel.models.registry import available_models, create_model, default_model_id
from iac_kernel.models.scripted import ScriptError
from iac_kernel.sessions.audit import AuditLog, describe, in_folder
from iac_kernel.sessions.store import SessionMeta
from iac_kernel.tools.pull_request import request_prompt, subcommand_prompt

MODE_HELP = {
    "default": "read-only tools run; edits and commands ask first",
    "accept_edits": "file edits run without asking; commands still ask",
    "read_only": "only read-only tools run; everything else is refused",
    "bypass": "everything runs without asking (except per-call approvals)",
}
#: Sessions shown by %sessions before "N more".
LIST_LIMIT = 25
#: Turns of a loaded session shown by %load.
HISTORY_TURNS = 5
#: Audit records shown by %audit (the newest).
AUDIT_LIMIT = 50

#: ``choices(state)``: the values an argument completes to.
Choices = Callable[[KernelState], list[str]]


class MagicError(Exception):
    """A magic failed; ``ename`` is a short class of error, the message says what to do."""

    def __init__(self, message: str, ename: str = "UsageError"):
        super().__init__(message)
        self.ename = ename


@dataclass
class MagicOutput:
    markdown: str
    plain: str
    #: More displays to show after the text: (bundle, display id), e.g. pending buttons.
    displays: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: The cell's value (sent as ``execute_result``), not a display: ``%config KEY``.
    value: bool = False
    #: A prompt the cell then sends to the agent (before the cell's own text): ``%pr``.
    prompt: str | None = None


@dataclass
class MagicSpec:
    """One row of the table: ``name`` is also the :class:`Magics` method that runs it."""

    name: str
    usage: str
    summary: str
    #: The values the first argument completes to.
    choices: Choices | None = None


class Magics:
    """Runs magic lines against the kernel's state: one method per magic, named after it."""

    def __init__(self, state: KernelState):
        self.state = state
        #: ``full_output(call_id) -> (text, error)`` (the kernel supplies it, for %output).
        self.full_output: Callable[[str], tuple[str | None, str | None]] | None = None
        #: ``pending() -> [(bundle, display_id)]``: waiting questions' buttons (%permissions).
        self.pending: Callable[[], list[tuple[dict[str, Any], str]]] = list

    async def run(self, call: MagicCall) -> MagicOutput:
        spec = MAGICS.get(call.name)
        if spec is None:
            close = difflib.get_close_matches(call.name, list(MAGICS), n=1)
            hint = f" Did you mean %{close[0]}?" if close else ""
            raise MagicError(
                f"unknown magic %{call.name}.{hint} Magics: " + ", ".join(f"%{n}" for n in MAGICS),
                "UnknownMagic",
            )
        try:
            return await getattr(self, spec.name)(call.args)
        except SessionError as exc:
            raise MagicError(str(exc), "SessionError") from None

    def _current(self) -> AgentSession | None:
        session = self.state.current
        return session if session is not None and not session.closed else None

    async def session(self, args: str) -> MagicOutput:
        if args:
            raise MagicError("%session takes no arguments (use %load ID to switch)")
        session = self.state.session()
        meta = session.meta
        usage = session.usage
        rows = [
            ("id", f"`{session.session_id}`"),
            ("title", _cell(meta.title or "(untitled until the first prompt)")),
            ("cwd", f"`{shown(session.cwd)}`"),
            (
                "git root",
                f"`{shown(meta.git_root)}`" if meta.git_root else "(not in a git repository)",
            ),
            ("model", f"`{shown_model(session.model_id)}`"),
            ("mode", f"`{session.mode}`"),
            ("messages", str(meta.message_count)),
            (
                "tokens used",
                f"{usage.total_tokens:,} (input {usage.input_tokens:,}, "
                f"output {usage.output_tokens:,}; this kernel)",
            ),
            ("store", f"`{_store_shown(self.state.manager.store.root)}`"),
            ("guard", _cell(guard_status())),
        ]
        if session.provider != "scripted":
            rows.insert(4, ("provider", f"`{session.provider}`"))
        if meta.notebook:
            rows.append(("notebook", f"`{shown(meta.notebook)}`"))
        if meta.forked_from:
            rows.append(("forked from", f"`{meta.forked_from}`"))
        plain_rows = [(k, v.replace("`", "")) for k, v in rows]
        return MagicOutput(_table(rows), _plain_table(plain_rows))

    async def sessions(self, args: str) -> MagicOutput:
        if args not in ("", "all"):
            raise MagicError("usage: %sessions [all]")
        everywhere = args == "all"
        metas = self.state.sessions(everywhere)
        where = "in the store" if everywhere else f"in `{shown(self.state.cwd)}`"
        if not metas:
            text = f"No sessions {where} yet."
            if not everywhere:
                text += " `%sessions all` lists every folder."
            return MagicOutput(text, text.replace("`", ""))
        current = self._current()
        current_id = current.session_id if current else None
        head = "| | id | title | updated | messages | origin | open in |"
        lines = [head, "|---|---|---|---|---|---|---|"]
        plain = []
        for meta in metas[:LIST_LIMIT]:
            mark = "▶" if meta.session_id == current_id else ""
            holder = self._holder(meta, current_id)
            cwd = f" ({shown(meta.cwd)})" if everywhere else ""
            lines.append(
                f"| {mark} | `{meta.session_id}` | {_cell((meta.title or '') + cwd)} | "
                f"{meta.updated_at} | {meta.message_count} | {meta.origin} | {_cell(holder)} |"
            )
            plain.append(
                f"{'*' if mark else ' '} {meta.session_id}  {meta.title or '(untitled)'}{cwd}  "
                f"{meta.updated_at}  {meta.message_count} messages  {meta.origin}"
                + (f"  open in {holder}" if holder else "")
            )
        if len(metas) > LIST_LIMIT:
            more = f"… and {len(metas) - LIST_LIMIT} older sessions."
            lines.append(f"\n{more}")
            plain.append(more)
        title = f"**{len(metas)} session(s)** {where}; `%load ID` switches to one.\n\n"
        return MagicOutput(title + "\n".join(lines), "\n".join(plain))

    def _holder(self, meta: SessionMeta, current_id: str | None) -> str:
        if meta.session_id == current_id:
            return "this kernel"
        try:
            holder = self.state.manager.store.lock_holder(meta.session_id)
        except OSError:
            return ""
        if not holder:
            return ""
        return str(holder.get("holder") or f"pid {holder.get('pid', '?')}")

    async def load(self, args: str) -> MagicOutput:
        if not args:
            raise MagicError("usage: %load SESSION_ID (see %sessions)")
        session = await self.state.load(args)
        text = f"Loaded session `{session.session_id}`: {_cell(session.title or '(untitled)')}"
        model = shown_model(session.model_id)
        text += f" ({session.meta.message_count} messages, model `{model}`)."
        if session.repairs:
            text += " Repaired on load: " + "; ".join(session.repairs) + "."
        history = _history(session)
        return MagicOutput(text + ("\n\n" + history if history else ""), text.replace("`", ""))

    async def fork(self, args: str) -> MagicOutput:
        if args:
            raise MagicError("%fork takes no arguments")
        source = self.state.session().session_id
        session = await self.state.fork()
        text = f"Forked `{source}` into `{session.session_id}`; this notebook now uses the fork."
        return MagicOutput(text, text.replace("`", ""))

    async def new(self, args: str) -> MagicOutput:
        session = await self.state.new(args or None)
        text = f"Started a new session `{session.session_id}` in `{shown(session.cwd)}`."
        return MagicOutput(text, text.replace("`", ""))

    async def help(self, args: str) -> MagicOutput:
        name = args.strip().lstrip("%")
        if name:
            spec = MAGICS.get(name)
            if spec is None:
                raise MagicError(f"no magic %{name}; %help lists them")
            text = f"`{spec.usage}`: {spec.summary}"
            return MagicOutput(text, f"{spec.usage}\n    {spec.summary}")
        # A "|" in a usage (e.g. "[reset | ui MODE]") would end the table cell: escaped.
        rows = [(f"`{s.usage}`".replace("|", "\\|"), s.summary) for s in SPECS]
        intro = (
            "**iac-kernel**: each cell is a prompt to the agent; lines starting with `%` are "
            "magics (`%%` escapes a literal `%`)."
        )
        markdown = intro + "\n\n| magic | what it does |\n|---|---|\n"
        markdown += "\n".join(f"| {u} | {_cell(s)} |" for u, s in rows)
        plain = "Each cell is a prompt; lines starting with % are magics.\n" + "\n".join(
            f"{s.usage}\n    {s.summary}" for s in SPECS
        )
        return MagicOutput(markdown, plain)

    async def model(self, args: str) -> MagicOutput:
        current = self._current()
        active = current.model_id if current else (self.state.settings.model or default_model_id())
        if not args:
            lines = [f"- `{m}`" + (" ← current" if m == active else "") for m in available_models()]
            text = f"Model: `{active}`. Available (any Claude id works too):\n\n" + "\n".join(lines)
            text += (
                "\n\n`scripted:PATH` replays your own script; `PROVIDER:MODEL` picks any model "
                f"of a provider ({', '.join(PROVIDERS)}; see docs/providers.md)."
            )
            return MagicOutput(text, f"model: {active}; available: {', '.join(available_models())}")
        # A script path is the notebook's own file: taken from its folder, not from %cwd.
        model_id = _absolute_script(args, self.state.notebook_dir)
        try:
            create_model(model_id, self.state.settings.script)
        except (ScriptError, ModelError, ValueError) as exc:
            raise MagicError(f"cannot use model {args!r}: {exc}", "ModelError") from None
        note = None
        if current is not None:
            try:
                note = current.set_model(model_id)
            except ValueError as exc:
                raise MagicError(str(exc), "ModelError") from None
            current.notes = []  # shown here, not again at the next turn
            model_id = current.model_id
        self.state.settings.model = model_id
        name = args if model_id.startswith("scripted") else shown_model(model_id)
        text = f"Model set to `{name}`." + (f" {note}" if note else "")
        return MagicOutput(text, text.replace("`", ""))

    async def mode(self, args: str) -> MagicOutput:
        current = self._current()
        active = current.mode if current else self.state.settings.mode
        if not args:
            lines = [
                f"- `{m}`: {MODE_HELP[m]}" + (" ← current" if m == active else "") for m in MODES
            ]
            text = f"Mode: `{active}`.\n\n" + "\n".join(lines)
            return MagicOutput(text, f"mode: {active}; modes: {', '.join(MODES)}")
        if args not in MODES:
            raise MagicError(f"unknown mode {args!r}; modes: {', '.join(MODES)}")
        if current is not None:
            current.set_mode(args)
        self.state.settings.mode = args
        text = f"Mode set to `{args}`: {MODE_HELP[args]}."
        return MagicOutput(text, text.replace("`", ""))

    async def cwd(self, args: str) -> MagicOutput:
        current = self._current()
        if not args:
            where = shown(current.cwd if current else self.state.cwd)
            return MagicOutput(f"Working directory: `{where}`", where)
        # From the notebook's folder, not the last %cwd: see the module docstring.
        new = _directory(self.state.notebook_dir, args)
        if current is not None:
            if current.busy:
                raise MagicError("a turn is running; wait for it or interrupt it", "SessionError")
            current.set_cwd(new)
        self.state.cwd = new
        text = f"Working directory set to `{shown(new)}`."
        return MagicOutput(text, text.replace("`", ""))

    async def config(self, args: str) -> MagicOutput:
        if not args:
            current = self._current()
            values = (current.settings if current else self.state.settings).public()
            rows = [(f"`{k}`", f"`{_cell(v)}`") for k, v in values.items()]
            text = "Settings (`%config KEY VALUE` changes one):\n\n" + _table(rows)
            return MagicOutput(text, _plain_table([(k, str(v)) for k, v in values.items()]))
        key, _, value = args.partition(" ")
        value = value.strip()
        known = self.state.settings.keys()
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" Did you mean {close[0]}?" if close else ""
            raise MagicError(f"unknown setting {key!r}.{hint} `%config` lists them", "ConfigError")
        if not value:  # the setting's value, as the cell's result
            current = self._current()
            shown = getattr(current.settings if current else self.state.settings, key)
            text = "none" if shown is None else str(shown)
            return MagicOutput(f"`{key}` = `{text}`", text, value=True)
        if key == "sessions_dir":
            raise MagicError("sessions_dir cannot change in a running kernel", "ConfigError")
        if key == "model":
            return await self.model(value)
        if key == "mode":
            return await self.mode(value)
        try:
            self.state.settings.copy().set(key, value)  # validate before touching anything
            current = self._current()
            if current is not None:
                current.set_config(key, value)
            self.state.settings.set(key, value)
        except ValueError as exc:
            raise MagicError(str(exc), "ConfigError") from None
        shown = getattr(self.state.settings, key)
        text = f"`{key}` set to `{shown}`."
        return MagicOutput(text, text.replace("`", ""))

    async def permissions(self, args: str) -> MagicOutput:
        words = args.split()
        current = self._current()
        if words == ["reset"]:
            if current is not None:
                current.gate.forget()
            text = "Forgot every 'always' answer of this session."
            return MagicOutput(text, text)
        if words and words[0] == "ui":
            if len(words) != 2 or words[1] not in PERMISSION_UIS:
                raise MagicError(f"usage: %permissions ui {'|'.join(PERMISSION_UIS)}")
            self.state.permission_ui = words[1]
            text = f"Permission UI set to `{words[1]}`."
            return MagicOutput(text, text.replace("`", ""))
        if words:
            raise MagicError("usage: %permissions [reset | ui auto|widgets|stdin|policy]")
        settings = current.settings if current else self.state.settings
        always = "; ".join(current.gate.remembered_summary()) if current else ""
        ui = self.state.permission_ui
        rows = [
            ("mode", f"`{settings.mode}`: {MODE_HELP.get(settings.mode, '')}"),
            ("remembered answers", _cell(always or "none")),
            ("headless policy", f"`{settings.headless_policy}`"),
            (
                "permission UI",
                f"`{ui}` (interactive cells: `{choose_ui(ui, True, settings.headless_policy)}`; "
                f"cells without stdin: `{choose_ui(ui, False, settings.headless_policy)}`)",
            ),
        ]
        text = (
            _table(rows)
            + "\n\nChange with `%mode MODE`, `%config headless_policy deny|allow|stdin`"
            ", `%permissions ui MODE`, `%permissions reset`."
        )
        plain = _plain_table([(k, v.replace("`", "")) for k, v in rows])
        waiting = self.pending()
        if waiting:
            note = f"{len(waiting)} question(s) wait for an answer: the buttons below answer them."
            text, plain = f"✋ **{note}**\n\n{text}", f"{note}\n{plain}"
        return MagicOutput(text, plain, waiting)

    async def output(self, args: str) -> MagicOutput:
        call_id = args.strip()
        if not call_id or " " in call_id:
            raise MagicError("usage: %output CALL_ID (the id is on the tool card)")
        if self.full_output is None:
            raise MagicError("full output is not available here")
        text, error = self.full_output(call_id)
        if text is None:
            raise MagicError(error or f"no output for {call_id!r}", "NotFound")
        fence = "`" * max(3, _longest_backtick_run(text) + 1)
        lines = len(text.splitlines())
        head = f"**Output of `{call_id}`** ({lines:,} lines, {len(text):,} characters):"
        return MagicOutput(f"{head}\n\n{fence}text\n{text}\n{fence}", text)

    async def mcp(self, args: str) -> MagicOutput:
        """The servers of a ``.mcp.json`` in the session's folder start with the session
        (:func:`iac_kernel.mcp.trust.follow_session`, a kernel state listener); ``%mcp
        add`` and ``%mcp remove`` change the running session only."""
        try:
            text = await run_mcp_command(self.state.session(), args)
        except McpCommandError as exc:
            raise MagicError(str(exc).replace("usage: mcp", "usage: %mcp"), "McpError") from None
        return MagicOutput(text, re.sub(r"[`*]", "", text))

    async def audit(self, args: str) -> MagicOutput:
        """The audit records of applies (``docs/audit.md``), newest last: of this folder
        (and below), or with ``all`` of every folder."""
        if args.strip() not in ("", "all"):
            raise MagicError(f"usage: {MAGICS['audit'].usage}")
        everywhere = args.strip() == "all"
        state = self.state
        from iac_kernel.team.audit import trail  # SQLAlchemy: loaded when asked
        from iac_kernel.team.store import TeamStoreError

        try:  # the older audit.jsonl's records are imported first
            entries = await asyncio.to_thread(trail(AuditLog(state.settings.sessions_dir)).entries)
        except TeamStoreError as exc:
            raise MagicError(str(exc), "AuditError") from None
        cwd = str(state.cwd)
        records = [e.public() for e in entries if everywhere or in_folder(e.record, cwd)]
        if not records:
            where = "in the store" if everywhere else f"for {state.cwd}"
            text = f"No audit records {where} yet."
            return MagicOutput(text, text)
        text = "\n".join(line for record in records[-AUDIT_LIMIT:] for line in describe(record))
        head = f"{len(records)} audit record(s)" + (
            f", the last {AUDIT_LIMIT}" if len(records) > AUDIT_LIMIT else ""
        )
        return MagicOutput(f"{head}:\n\n```\n{text}\n```", f"{head}:\n{text}")

    async def pr(self, args: str) -> MagicOutput:
        """The agent proposes the session's changes for review (the pull_request tool):
        it writes the summary, the user approves the diff in the tool's question.
        ``review NUMBER`` plans a request's head and posts the plan to it; ``apply NUMBER``
        applies the plan it carries, bound to its review (both through the agent's tools)."""
        self.state.session()  # the session whose changes are proposed
        prompt = subcommand_prompt(args.strip())
        if prompt is not None:
            verb = args.split()[0]
            text = (
                f"Asking the agent to plan pull request {args.split()[1]} and post the plan to it."
                if verb == "review"
                else f"Asking the agent to apply the plan pull request {args.split()[1]} carries, "
                "bound to its review; you approve the apply."
            )
            return MagicOutput(text, text, prompt=prompt)
        if args.split()[:1] in (["review"], ["apply"]) and len(args.split()) < 2:
            raise MagicError(f"usage: {MAGICS['pr'].usage}")
        text = (
            "Asking the agent to open a pull request of the files this session changed; "
            "you approve the diff before anything is pushed."
        )
        return MagicOutput(text, text, prompt=request_prompt(args.strip()))


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _directory(base: str, raw: str) -> str:
    """``raw`` (relative to ``base``) as a real directory path; MagicError if it is none."""
    target = Path(raw).expanduser()
    if not target.is_absolute():
        target = Path(base) / target
    if not target.is_dir():
        raise MagicError(f"{raw!r} is not a directory")
    return os.path.realpath(target)


def _absolute_script(model_id: str, cwd: str) -> str:
    """``scripted:PATH`` with a relative PATH taken from ``cwd`` (the notebook's folder;
    sessions store it absolute)."""
    name, sep, path = model_id.partition(":")
    if sep and name == "scripted" and path and not Path(path).expanduser().is_absolute():
        return f"scripted:{Path(cwd) / path}"
    return model_id


def _store_shown(root: object) -> str:
    """The store folder for display: its variable's name when the environment set it."""
    if os.environ.get("IAC_KERNEL_SESSIONS_DIR"):
        return "$IAC_KERNEL_SESSIONS_DIR"
    return shown(str(root))


def _table(rows: list[tuple[str, str]]) -> str:
    lines = ["| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return html.escape(str(text)).replace("|", "\\|").replace("\n", " ")


def _plain_table(rows: list[tuple[str, str]]) -> str:
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _history(session: AgentSession) -> str:
    """The last few turns of a loaded session, collapsed."""
    turns: list[list[str]] = []
    for event in session.replay():
        if isinstance(event, UserMessage):
            turns.append([f"**You:** {_quote(event.text)}", ""])
        elif isinstance(event, TextDelta) and turns:
            turns[-1][1] += event.text
        elif isinstance(event, ToolCallInput) and turns:
            turns[-1].append(f"🔧 `{event.title}`")
    if not turns:
        return ""
    shown = turns[-HISTORY_TURNS:]
    body = []
    for prompt, answer, *tools in shown:
        body.append(prompt)
        body.extend(f"- {t}" for t in tools)
        if answer.strip():
            body.append(f"**Agent:** {_quote(answer)}")
        body.append("")
    summary = f"History: last {len(shown)} of {len(turns)} turn(s)"
    return f"<details><summary>{summary}</summary>\n\n" + "\n".join(body) + "\n</details>"


def _quote(text: str, limit: int = 400) -> str:
    text = text.strip()
    return html.escape(text if len(text) <= limit else text[: limit - 1] + "…")


def _fixed(*values: str) -> Choices:
    return lambda _state: list(values)


#: The magics, in the order %help lists them.
SPECS = [
    MagicSpec("help", "%help [MAGIC]", "List the magics, or explain one.", lambda _s: list(MAGICS)),
    MagicSpec(
        "session", "%session", "Show the current session: id, title, cwd, model, mode, tokens used."
    ),
    MagicSpec(
        "sessions",
        "%sessions [all]",
        "List the stored sessions of this folder (all: of every folder).",
        _fixed("all"),
    ),
    MagicSpec(
        "load",
        "%load ID",
        "Switch to a stored session (an id or a unique prefix); releases the current one.",
        lambda state: state.session_ids(),
    ),
    MagicSpec("fork", "%fork", "Copy the current session and continue in the copy."),
    MagicSpec("new", "%new [TITLE]", "Start a fresh session in this folder."),
    MagicSpec(
        "model",
        "%model [ID]",
        "Show the models, or switch the model.",
        lambda _s: available_models(),
    ),
    MagicSpec(
        "mode",
        "%mode [MODE]",
        "Show or set the permission mode: " + ", ".join(MODES) + ".",
        _fixed(*MODES),
    ),
    MagicSpec(
        "cwd",
        "%cwd [PATH]",
        "Show or change the agent's working directory (a relative PATH is taken from the "
        "notebook's folder).",
    ),
    MagicSpec(
        "config",
        "%config [KEY [VALUE]]",
        "List the settings, show one (`%config max_tokens`) or change one "
        "(`%config max_tokens 4096`).",
        lambda state: state.settings.keys(),
    ),
    MagicSpec(
        "permissions",
        "%permissions [reset | ui MODE]",
        "Show the permission rules; forget 'always' answers; choose how to ask "
        "(" + "/".join(PERMISSION_UIS) + ").",
        _fixed("reset", "ui"),
    ),
    MagicSpec(
        "output",
        "%output CALL_ID",
        "Show everything a tool call returned (cards show its head and tail).",
    ),
    MagicSpec(
        "mcp",
        "%mcp [list | add NAME COMMAND [ARG...] | add NAME URL [--sse] | remove NAME "
        "| trust [HASH]]",
        "The session's MCP servers (.mcp.json, %mcp add): list, add, remove; trust .mcp.json.",
        _fixed("list", "add", "remove", "trust"),
    ),
    MagicSpec(
        "pr",
        "%pr [TITLE] | %pr review NUMBER [DIR] | %pr apply NUMBER [PLAN]",
        "Propose the files this session changed as a pull/merge request (GitHub, GitLab): "
        "the agent writes the summary, you approve the diff, the address comes back here. "
        "review: plan a request's head and post the plan to it; apply: apply the plan it "
        "carries, only as reviewed (approved by another person, merged).",
        _fixed("review", "apply"),
    ),
    MagicSpec(
        "audit",
        "%audit [all]",
        "The audit records of applies (plan, answer, exit, state) of this folder (all: every).",
        _fixed("all"),
    ),
]
MAGICS = {spec.name: spec for spec in SPECS}
#: Values of a second argument: ``%config KEY <value>``, ``%permissions ui <mode>``.
SECOND_CHOICES: dict[tuple[str, str], Choices] = {
    ("config", "mode"): _fixed(*MODES),
    ("config", "headless_policy"): _fixed(*HEADLESS_POLICIES),
    ("config", "model"): lambda _s: available_models(),
    ("permissions", "ui"): _fixed(*PERMISSION_UIS),
}
