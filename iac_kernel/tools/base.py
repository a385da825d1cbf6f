"""The tool interface every tool implements, the context a call runs in, and what all
tools share: the checks of their arguments and the rules for the paths they name.

A tool is one class: its ``name`` is typed there only. What fronts show of a call (its
title, kind, locations, the checklist it sets, the change a stored call made) comes from
the tool's own methods, so nothing outside ``tools/`` branches on a tool's name.
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff, Location
from iac_kernel.guard.approval.request import AskExec

#: Directories the listing and search tools never descend into.
SKIP_DIRS = frozenset({".git", ".terraform", ".terragrunt-cache"})


class Category(enum.Enum):
    """How risky a tool is; the permission gate decides by this."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"


class ToolError(Exception):
    """A tool call failed; the message goes back to the model as a tool error."""


@dataclass
class ToolResult:
    content: str
    is_error: bool = False
    raw_output: Any = None
    diff: Diff | None = None
    #: The known values ``content`` was masked with (None: not known): a load masks the
    #: stored result again only when something else is known then.
    masked_with: frozenset[str] | None = None
    #: A plan's every row in compact form (``summary.card_rows``) for the notebook's plan
    #: card: masked like ``raw_output``, but never stored nor sent to the model or ACP.
    plan_rows: dict[str, Any] | None = None


@dataclass
class ToolContext:
    """Where and how a tool call runs."""

    cwd: Path
    settings: Any  # iac_kernel.config.Settings (kept loose to avoid an import cycle)
    #: Runs a sub-agent turn for the ``agent`` tool; supplied by the agent loop.
    run_subagent: Callable[[str], Awaitable[str]] | None = None
    #: Extra environment for commands.
    env: dict[str, str] = field(default_factory=dict)
    #: Asks the permission gate whether a guarded program may run an argv (exec time);
    #: supplied by the agent loop. None: changing commands are refused.
    ask_exec: AskExec | None = None
    #: Asks the permission gate whether a sandbox may reach a host not on
    #: ``egress_allow`` (``(host, port) -> (allowed, message)``). None: refused.
    ask_egress: Callable[[str, int], Awaitable[tuple[bool, str]]] | None = None
    #: Live output while a command runs: called with each decoded, redacted chunk (the
    #: agent loop supplies it and turns it into ``ToolCallOutput`` events).
    on_output: Callable[[str], None] | None = None
    #: What :meth:`Tool.review` prepared before the question (e.g. the approved bytes of
    #: a saved plan); the approval is bound to it. Set by the agent loop.
    review: Any = None
    #: Writes one audit record of an infrastructure change (an apply) in the session
    #: store; supplied by the agent loop. None: not recorded.
    audit: Callable[[dict[str, Any]], None] | None = None
    #: Asks the user a question (``ask_user``): ``(question, fields) -> ToolResult``, the
    #: fields as :func:`iac_kernel.tools.ask_user.question_fields` gives them; supplied
    #: by the agent loop (:mod:`iac_kernel.agent.questions`). None: nobody can answer.
    ask_user: Callable[[str, list[dict[str, Any]]], Awaitable[ToolResult]] | None = None
    #: Forwards an MCP server's ``elicitation/create`` (its params as the spec's JSON) to
    #: the user; returns the spec's ``ElicitResult`` JSON. The event, for URL mode, is set
    #: when the server says the elicitation completed. Supplied by the agent loop
    #: (:mod:`iac_kernel.agent.questions`). None: every elicitation is declined.
    elicit: Callable[[dict[str, Any], asyncio.Event | None], Awaitable[dict[str, Any]]] | None = (
        None
    )
    #: The files this session's tool calls changed, and its history as masked replay
    #: events (``pull_request`` proposes them); supplied by the agent loop. None: unknown.
    session_changes: Callable[[], list[Path]] | None = None
    session_events: Callable[[], list[Any]] | None = None


class Tool:
    """Base class: subclasses set the class attributes and implement :meth:`run`."""

    name: str = ""
    description: str = ""
    input_schema: dict[str, Any] = {}
    #: ACP tool kind (read, edit, search, execute, think, fetch, other): the call's icon
    #: in editors and its card's kind in the notebook.
    kind: str = "other"
    category: Category = Category.READ
    #: The argument the title names (``read_file: main.tf``); "" for the bare name.
    subject: str = ""
    #: File tools: the argument naming the one path the call touches, and its default.
    path_arg: str = ""
    path_default: str | None = None
    #: A tool that runs a sub-agent: offered only where one can run (not to sub-agents).
    runs_subagent: bool = False
    #: A tool whose commands print while they run: their output is masked live.
    prints_live: bool = False
    #: A tool whose result can show what workspace files and commands hold: a ``.tfstate``
    #: it names is a state read, and it says when the sensitive-value scan stopped early.
    shows_contents: bool = False
    #: True when "Allow always" remembers command prefixes rather than the whole tool.
    remembers_prefixes: bool = False

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API expects it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def check(self, args: Any) -> dict[str, Any]:
        """``args`` checked against :attr:`input_schema`, defaults filled in; the usual
        first line of :meth:`run`."""
        return validate_args(self.name, self.input_schema, args)

    def title(self, args: dict[str, Any]) -> str:
        """A short human title, e.g. ``bash: terraform plan``."""
        value = args.get(self.subject) if self.subject and isinstance(args, dict) else None
        if value is None and self.subject == self.path_arg:
            value = self.path_default
        return f"{self.name}: {short(value)}" if value else self.name

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        """Filesystem paths the call touches (for locations and the outside-cwd rule);
        never raises on bad input."""
        raw = args.get(self.path_arg) if self.path_arg and isinstance(args, dict) else None
        raw = self.path_default if raw is None else raw
        try:
            return [resolve_path(ctx, raw)] if raw is not None else []
        except ToolError:
            return []

    def locations(
        self, args: dict[str, Any], ctx: ToolContext, diff: Diff | None
    ) -> list[Location]:
        """Where editors follow the call: its :meth:`paths`, at the first line ``diff``
        (the change it shows) changes."""
        line = diff.first_changed_line() if diff is not None else None
        return [Location(str(path), line) for path in self.paths(args, ctx)]

    def result_locations(self, output: str, cwd: Path) -> list[Location]:
        """Places a finished call found, read from its output (grep: its matches)."""
        return []

    def checklist(self, args: Any) -> list[dict[str, str]] | None:
        """The checklist a completed call sets for the user (update_plan); None: none."""
        return None

    def stored_diff(self, args: dict[str, Any]) -> Diff | None:
        """The change a call made, from its stored input alone (a replay: the file may
        have changed since, so it shows what the call asked for)."""
        return None

    async def review(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """For calls whose approval is bound to what the user reviewed (a saved plan):
        prepared before the question, shown in it (``summary()`` -> {"text", ...}), and
        handed to :meth:`run` as ``ctx.review``. Raising refuses the call. None: no review."""
        return None

    def refusal_record(self, args: dict[str, Any], error: str) -> dict[str, Any] | None:
        """For audited tools: the audit record of a call refused because its review
        failed (None: such calls are not audited)."""
        return None

    def preview(self, args: dict[str, Any], ctx: ToolContext) -> Diff | None:
        """For edit tools: the change the call would make, shown before it is approved."""
        return None

    def ask_reason(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """Why a routine question (not per call) asks about this call, in words naming
        what it runs; None leaves the category's words ("It runs a command…")."""
        return None

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        """What the gate asks before the call: (per call, with no "always" shortcut?,
        why). A tool may leave to exec-time questions what they will ask anyway."""
        return False, None

    def asked_at_exec(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        """True when everything this call runs gets its own exec-time question (a bash
        ``terraform apply``): the gate then does not ask before the call too."""
        return False

    def command_prefixes(
        self, args: dict[str, Any], ctx: ToolContext | None = None
    ) -> list[str] | None:
        """For prefix tools: what "Allow always" would remember for this call
        (``["terraform plan"]``); None when no "always" answer can be offered."""
        return None

    def literal_commands(self, args: dict[str, Any]) -> list[list[str]]:
        """The exact argvs a per-call approval of this call covers (the user saw them
        literally); a guarded program running one of them is not asked again."""
        return []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


# -- paths ------------------------------------------------------------------------------


def resolve_path(ctx: ToolContext, raw: str) -> Path:
    """An absolute path for ``raw``: ``~`` expanded, relative paths taken from ``ctx.cwd``.

    Symlinks are not resolved (tools act on the path the user named); ``..`` is folded.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("path must be a non-empty string")
    if "\x00" in raw:
        raise ToolError("path must not contain NUL characters")
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):  # os.path, not pathlib: a replay resolves thousands
        path = os.path.join(os.path.expanduser(ctx.cwd), path)
    return Path(os.path.normpath(path))


def is_inside(path: Path | str, cwd: Path | str) -> bool:
    """True when ``path`` is ``cwd`` or below it once symlinks are resolved.

    ``../`` and symlinks pointing out of ``cwd`` count as outside. Paths that do not
    exist yet are judged by their nearest existing parent.
    """
    try:
        real = Path(os.path.realpath(path))
        root = Path(os.path.realpath(cwd))
    except (OSError, ValueError):
        return False
    return real == root or root in real.parents


def display_path(path: Path, cwd: Path | str) -> str:
    """``path`` relative to ``cwd`` when it lies below it (lexically), else absolute."""
    try:
        rel = path.relative_to(Path(os.path.normpath(Path(cwd).expanduser())))
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."


def prefix_for(base_dir: Path, cwd: Path | str) -> str:
    """What to put before paths relative to ``base_dir`` so they read from ``cwd``."""
    shown = display_path(base_dir, cwd)
    return "" if shown == "." else shown + os.sep


def shown_path(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` once both are resolved, else as it is."""
    try:
        return str(path.resolve().relative_to(Path(cwd).resolve()))
    except ValueError:
        return str(path)


def short(text: Any, width: int = 80) -> str:
    """The first line of ``text``, shortened for a title."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


# -- arguments --------------------------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
_JSON_TYPES += ((dict, "object"), (list, "array"))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return next(
        (name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__
    )


def _check_value(name: str, value: Any, spec: dict[str, Any]) -> tuple[Any, str | None]:
    """Return the (possibly normalised) value and an error message or ``None``."""
    expected = spec.get("type")
    actual = _json_type(value)
    if expected == "integer" and actual == "number" and float(value).is_integer():
        value, actual = int(value), "integer"
    ok = expected is None or actual == expected or (expected == "number" and actual == "integer")
    if not ok:
        want = _TYPE_NAMES.get(expected, expected)
        return value, f"'{name}' must be {want} (got {actual})"
    if "enum" in spec and value not in spec["enum"]:
        allowed = ", ".join(repr(v) for v in spec["enum"])
        return value, f"'{name}' must be one of {allowed} (got {value!r})"
    if actual in ("integer", "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return value, f"'{name}' must be >= {spec['minimum']} (got {value})"
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            return value, f"'{name}' must be > {spec['exclusiveMinimum']} (got {value})"
        if "maximum" in spec and value > spec["maximum"]:
            return value, f"'{name}' must be <= {spec['maximum']} (got {value})"
    if actual == "string" and len(value) < spec.get("minLength", 0):
        return value, f"'{name}' must not be empty"
    return value, None


def validate_args(tool_name: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Return a copy of ``args`` with defaults filled in, or raise ToolError listing every
    problem (the subset of JSON Schema our tools use).

    ``null`` for an optional field counts as absent (models send it for "not given").
    """
    if not isinstance(args, dict):
        raise ToolError(
            f"Invalid input for {tool_name}: arguments must be a JSON object "
            f"(got {_json_type(args)})"
        )
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    problems = [
        f"missing required field '{n}'" for n in schema.get("required", []) if args.get(n) is None
    ]
    if schema.get("additionalProperties") is False:
        problems += [f"unknown field '{name}'" for name in args if name not in props]
    result: dict[str, Any] = {}
    for name, spec in props.items():
        value = args.get(name)
        if value is None:
            if "default" in spec:
                result[name] = spec["default"]
            continue
        value, problem = _check_value(name, value, spec)
        if problem:
            problems.append(problem)
        result[name] = value
    if problems:
        allowed = ", ".join(props) or "none"
        raise ToolError(f"Invalid input for {tool_name}: {'; '.join(problems)}. Fields: {allowed}.")
    return result
