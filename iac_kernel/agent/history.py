"""Turn stored messages back into agent events, to replay a session to a front end.

Events carry what the live turn showed: readable text (lone surrogates from undecodable
bytes shown as ``\\xNN``, see :mod:`iac_kernel.textsafe`) and diffs with secrets redacted.
Tool results are masked again with what is known now (credential shapes, secret
environment values, the workspace's sensitive values): a record stored before a value was
known to be sensitive is not replayed with it. A result whose mark says which values this
masking code masked it with (:mod:`iac_kernel.masking.marks`) is masked again only with
the values learned since (none: it is shown as stored).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.agent.permissions import DENIED_MESSAGE
from iac_kernel.events import (
    AgentEvent,
    Diff,
    Location,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    UserMessage,
)
from iac_kernel.masking.marks import MarkTable
from iac_kernel.redact import (
    redact_diff,
    redactor,
    secret_values,
    value_redactor,
    values_redactor,
)
from iac_kernel.sessions.records import result_text
from iac_kernel.terraform.sensitive import mask_text
from iac_kernel.terraform.workspace import sensitive_values
from iac_kernel.textsafe import readable, readable_value
from iac_kernel.tools.base import Tool, ToolContext


@dataclass(frozen=True)
class Known:
    """What a replay masks and redacts with: the workspace's sensitive values and the
    environment (its secret-named variables)."""

    values: frozenset[str]
    env: dict[str, str]

    @classmethod
    def now(cls, cwd: Path | None) -> Known:
        """What is known now for a session in ``cwd`` (``None``: no workspace)."""
        values = sensitive_values(cwd) if cwd is not None else frozenset()
        return cls(frozenset(values), dict(os.environ))  # read once, not once per result

    def secrets(self) -> dict[str, str]:
        """The environment's secret values, each with its variable's name."""
        return secret_values(self.env)


def replay(
    messages: list[dict[str, Any]],
    tools: dict[str, Tool],
    ctx: ToolContext | None = None,
    marks: MarkTable | None = None,
    known: Known | None = None,
) -> Iterator[AgentEvent]:
    """Events that show ``messages`` as they happened: prompts, answers, thoughts, tools.

    With ``ctx`` (the session's cwd and settings), tool calls carry their file locations.
    With ``marks`` (the log's), a result is masked again only with the values of what is
    known now (``known``, by default read now) that it was not masked with.
    """
    calls: dict[str, tuple[str, Tool | None, Any]] = {}  # call id -> name, tool, shown input
    known = known or Known.now(ctx.cwd if ctx is not None else None)
    values, env, secrets = known.values, known.env, known.secrets()
    redact_output = redactor(env)
    redact_args = value_redactor(env)
    fresh_of = (marks or MarkTable()).checker(values | set(secrets)).fresh
    remaskers: dict[frozenset[str], Callable[[str], str]] = {}
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            for block in blocks:
                if block.get("type") == "tool_result":
                    call_id = block.get("tool_use_id", "")
                    output = result_text(block.get("content"))
                    fresh = fresh_of(call_id, output)
                    if fresh is None:
                        output = mask_text(redact_output(output), values)
                    elif fresh:
                        if fresh not in remaskers:
                            remaskers[fresh] = _remasker(fresh, values, secrets)
                        output = remaskers[fresh](output)
                    output = readable(output)
                    name, tool, shown = calls.get(call_id, ("tool", None, {}))
                    failed = bool(block.get("is_error"))
                    yield ToolCallResult(
                        call_id,
                        name,
                        "failed" if failed else "completed",
                        output,
                        denied=output.startswith(DENIED_MESSAGE),
                        checklist=tool.checklist(shown) if tool and not failed else None,
                    )
            if texts:
                yield UserMessage(readable("\n".join(texts)))
            continue
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                yield TextDelta(readable(block["text"]))
            elif kind == "thinking" and block.get("thinking"):
                yield ThinkingDelta(readable(block["thinking"]))
            elif kind == "tool_use":
                name = block.get("name", "tool")
                tool = tools.get(name)
                args = block.get("input") or {}
                title = readable(_title(tool, args, name))
                tool_kind = tool.kind if tool else "other"
                shown = readable_value(redact_args(args))
                calls[block["id"]] = (name, tool, shown)
                diff = _stored(tool.stored_diff, None, args) if tool else None
                yield ToolCallStarted(block["id"], name, title, tool_kind)
                yield ToolCallInput(
                    block["id"],
                    name,
                    title,
                    tool_kind,
                    shown,
                    locations=_locations(tool, args, ctx, diff),
                    diff=shown_diff(diff),
                )


def _remasker(
    fresh: frozenset[str], values: frozenset[str], secrets: dict[str, str]
) -> Callable[[str], str]:
    """Masks a stored result with the ``fresh`` values only: it was masked with the others
    and of credential shapes when it was written."""
    redact_fresh = values_redactor({v: name for v, name in secrets.items() if v in fresh})
    fresh_values = fresh & values
    return lambda text: mask_text(redact_fresh(text), fresh_values)


def _locations(
    tool: Tool | None, args: dict[str, Any], ctx: ToolContext | None, diff: Diff | None
) -> list[Location]:
    if tool is None or ctx is None:
        return []
    found = _stored(tool.locations, [], args, ctx, diff)
    return [Location(readable(loc.path), loc.line) for loc in found]


def _stored(method: Callable[..., Any], default: Any, *args: Any) -> Any:
    """What a tool makes of a stored input: any input may be stored (a failure: none)."""
    try:
        return method(*args)
    except Exception:
        return default


def shown_diff(diff: Diff | None) -> Diff | None:
    """A diff as front ends get it: secrets redacted, any bytes readable."""
    if diff is None:
        return None
    diff = redact_diff(diff)
    old = readable(diff.old_text) if diff.old_text is not None else None
    return Diff(readable(diff.path), old, readable(diff.new_text))


def _title(tool: Tool | None, args: dict[str, Any], default: str) -> str:
    return _stored(tool.title, default, args) if tool is not None else default
