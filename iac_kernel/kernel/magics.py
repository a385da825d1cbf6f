"""Cell magics: lines that start with ``%`` control the session instead of prompting it.

Parsing: a line whose first non-blank characters are ``%`` and a letter is a magic line,
except inside a fenced code block (a pasted snippet stays prompt text). ``%%`` at the
start of a line escapes a literal ``%`` (the line goes to the prompt with one ``%``
removed). A cell's magics run first, in order, then the rest of the cell (if any text is
left) is sent as the prompt; a cell made only of magics runs no turn. The first failing
magic stops the cell: nothing after it runs.

``%config``, ``%mode`` and ``%model`` change the kernel's defaults (used by ``%new``) and
the current session if there is one; they do not create a session. ``%session``,
``%fork`` and a prompt do.

Relative paths in magics (``%cwd PATH``, ``%model scripted:PATH``) are taken from the
notebook's folder, never from the current ``%cwd``: a cell means the same folder each
time it runs, so a runbook run again from the top in the same kernel does what it did.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.config import HEADLESS_POLICIES, MODES
from iac_kernel.kernel import session_magics
from iac_kernel.kernel.magic_base import (
    MagicCall,
    MagicError,
    MagicOutput,
    _cell,
    _plain_table,
    _table,
)
from iac_kernel.kernel.magic_base import split_cell as split_cell  # re-exported
from iac_kernel.kernel.paths import shown, shown_model
from iac_kernel.kernel.permission_ui import PERMISSION_UIS, choose_ui
from iac_kernel.kernel.state import KernelState, SessionError
from iac_kernel.models.base import ModelError
from iac_kernel.models.registry import available_models, create_model
from iac_kernel.models.scripted import ScriptError

MODE_HELP = {
    "default": "read-only tools run; edits and commands ask first",
    "accept_edits": "file edits run without asking; commands still ask",
    "read_only": "only read-only tools run; everything else is refused",
    "bypass": "everything runs without asking (except per-call approvals)",
}


Handler = Callable[["Magics", str], Awaitable[MagicOutput]]


@dataclass
class MagicSpec:
    name: str
    usage: str
    summary: str
    handler: Handler


class Magics:
    """Runs magic lines against the kernel's state."""

    def __init__(self, state: KernelState):
        self.state = state
        self.specs: dict[str, MagicSpec] = {spec.name: spec for spec in SPECS}
        #: ``full_output(call_id) -> (text, error)`` (the kernel supplies it, for %output).
        self.full_output: Callable[[str], tuple[str | None, str | None]] | None = None
        #: ``pending() -> [(bundle, display_id)]``: waiting questions' buttons (%permissions).
        self.pending: Callable[[], list[tuple[dict[str, Any], str]]] = list

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    async def run(self, call: MagicCall) -> MagicOutput:
        spec = self.specs.get(call.name)
        if spec is None:
            close = difflib.get_close_matches(call.name, self.names, n=1)
            hint = f" Did you mean %{close[0]}?" if close else ""
            raise MagicError(
                f"unknown magic %{call.name}.{hint} Magics: "
                + ", ".join(f"%{n}" for n in self.names),
                "UnknownMagic",
            )
        try:
            return await spec.handler(self, call.args)
        except SessionError as exc:
            raise MagicError(str(exc), "SessionError") from None

    def _current(self) -> AgentSession | None:
        session = self.state.current
        return session if session is not None and not session.closed else None

    # -- handlers ------------------------------------------------------------------------

    async def help(self, args: str) -> MagicOutput:
        name = args.strip().lstrip("%")
        if name:
            spec = self.specs.get(name)
            if spec is None:
                raise MagicError(f"no magic %{name}; %help lists them")
            text = f"`{spec.usage}`: {spec.summary}"
            return MagicOutput(text, f"{spec.usage}\n    {spec.summary}")
        # A "|" in a usage (e.g. "[reset | ui MODE]") would end the table cell: escaped.
        rows = [(f"`{s.usage}`".replace("|", "\\|"), s.summary) for s in self.specs.values()]
        intro = (
            "**iac-kernel**: each cell is a prompt to the agent; lines starting with `%` are "
            "magics (`%%` escapes a literal `%`)."
        )
        markdown = intro + "\n\n| magic | what it does |\n|---|---|\n"
        markdown += "\n".join(f"| {u} | {_cell(s)} |" for u, s in rows)
        plain = "Each cell is a prompt; lines starting with % are magics.\n" + "\n".join(
            f"{s.usage}\n    {s.summary}" for s in self.specs.values()
        )
        return MagicOutput(markdown, plain)

    async def model(self, args: str) -> MagicOutput:
        current = self._current()
        active = current.model_id if current else (self.state.settings.model or _default_model())
        if not args:
            lines = [f"- `{m}`" + (" ← current" if m == active else "") for m in available_models()]
            text = f"Model: `{active}`. Available (any Claude id works too):\n\n" + "\n".join(lines)
            text += (
                "\n\n`scripted:PATH` replays your own script; `PROVIDER:MODEL` picks any model "
                "of a provider (openai, dashscope, deepseek, ollama, ...; see docs/providers.md)."
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


def _default_model() -> str:
    from iac_kernel.models.registry import default_model_id

    return default_model_id()


SPECS = [
    MagicSpec("help", "%help [MAGIC]", "List the magics, or explain one.", Magics.help),
    MagicSpec(
        "session",
        "%session",
        "Show the current session: id, title, cwd, model, mode, tokens used.",
        session_magics.session,
    ),
    MagicSpec(
        "sessions",
        "%sessions [all]",
        "List the stored sessions of this folder (all: of every folder).",
        session_magics.sessions,
    ),
    MagicSpec(
        "load",
        "%load ID",
        "Switch to a stored session (an id or a unique prefix); releases the current one.",
        session_magics.load,
    ),
    MagicSpec(
        "fork", "%fork", "Copy the current session and continue in the copy.", session_magics.fork
    ),
    MagicSpec("new", "%new [TITLE]", "Start a fresh session in this folder.", session_magics.new),
    MagicSpec("model", "%model [ID]", "Show the models, or switch the model.", Magics.model),
    MagicSpec(
        "mode",
        "%mode [MODE]",
        "Show or set the permission mode: " + ", ".join(MODES) + ".",
        Magics.mode,
    ),
    MagicSpec(
        "cwd",
        "%cwd [PATH]",
        "Show or change the agent's working directory (a relative PATH is taken from the "
        "notebook's folder).",
        Magics.cwd,
    ),
    MagicSpec(
        "config",
        "%config [KEY [VALUE]]",
        "List the settings, show one (`%config max_tokens`) or change one "
        "(`%config max_tokens 4096`).",
        Magics.config,
    ),
    MagicSpec(
        "permissions",
        "%permissions [reset | ui MODE]",
        "Show the permission rules; forget 'always' answers; choose how to ask "
        "(" + "/".join(PERMISSION_UIS) + ").",
        Magics.permissions,
    ),
    MagicSpec(
        "output",
        "%output CALL_ID",
        "Show everything a tool call returned (cards show its head and tail).",
        Magics.output,
    ),
]

#: Values a magic's first argument completes to (used by the completer).
ARGUMENT_CHOICES: dict[str, Callable[[KernelState], list[str]]] = {
    "help": lambda _state: [spec.name for spec in SPECS],
    "load": lambda state: state.session_ids(),
    "mode": lambda _state: list(MODES),
    "model": lambda _state: available_models(),
    "sessions": lambda _state: ["all"],
    "permissions": lambda _state: ["reset", "ui"],
    "config": lambda state: state.settings.keys(),
}
#: Values of a second argument: ``%config KEY <value>``, ``%permissions ui <mode>``.
SECOND_CHOICES: dict[tuple[str, str], Callable[[KernelState], list[str]]] = {
    ("config", "mode"): lambda _state: list(MODES),
    ("config", "headless_policy"): lambda _state: list(HEADLESS_POLICIES),
    ("config", "model"): lambda _state: available_models(),
    ("permissions", "ui"): lambda _state: list(PERMISSION_UIS),
}

# %mcp lives in its own module; registered here with its argument choices.
from iac_kernel.kernel import mcp_magic  # noqa: E402

SPECS.append(MagicSpec("mcp", mcp_magic.USAGE, mcp_magic.SUMMARY, mcp_magic.mcp_magic))
ARGUMENT_CHOICES["mcp"] = lambda _state: list(mcp_magic.CHOICES)

from iac_kernel.kernel import audit_magic  # noqa: E402

SPECS.append(MagicSpec("audit", audit_magic.USAGE, audit_magic.SUMMARY, audit_magic.audit_magic))
ARGUMENT_CHOICES["audit"] = lambda _state: list(audit_magic.CHOICES)
