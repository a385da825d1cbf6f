"""Turn stored messages back into agent events, to replay a session to a front end.

Events carry what the live turn showed: readable text (lone surrogates from undecodable
bytes shown as ``\\xNN``, see :mod:`iac_kernel.textsafe`) and diffs with secrets redacted.
Tool results are masked again with what is known now (credential shapes, secret
environment values, the workspace's sensitive values): a record stored before a value was
known to be sensitive is not replayed with it. A result whose mark says it was masked by
this code with every value known now (:mod:`iac_kernel.masking.marks`) is shown as
stored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.agent.permissions import DENIED_MESSAGE
from iac_kernel.events import (
    AgentEvent,
    Diff,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    UserMessage,
)
from iac_kernel.masking.marks import MarkTable
from iac_kernel.redact import redact_diff, redactor, secret_values, value_redactor
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
    With ``marks`` (the log's), a result masked with everything known now (``known``, by
    default read now) is not masked again.
    """
    names: dict[str, str] = {}
    known = known or Known.now(ctx.cwd if ctx is not None else None)
    values, env = known.values, known.env
    redact_output = redactor(env)
    redact_args = value_redactor(env)
    clean = (marks or MarkTable()).checker(values | set(known.secrets())).clean
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            for block in blocks:
                if block.get("type") == "tool_result":
                    call_id = block.get("tool_use_id", "")
                    output = result_text(block.get("content"))
                    if not clean(call_id, output):
                        output = mask_text(redact_output(output), values)
                    output = readable(output)
                    yield ToolCallResult(
                        call_id,
                        names.get(call_id, "tool"),
                        "failed" if block.get("is_error") else "completed",
                        output,
                        denied=output.startswith(DENIED_MESSAGE),
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
                tool = tools.get(block.get("name", ""))
                args = block.get("input") or {}
                title = readable(_title(tool, args, block.get("name", "tool")))
                tool_kind = tool.kind if tool else "other"
                names[block["id"]] = block.get("name", "tool")
                yield ToolCallStarted(block["id"], block.get("name", "tool"), title, tool_kind)
                yield ToolCallInput(
                    block["id"],
                    block.get("name", "tool"),
                    title,
                    tool_kind,
                    readable_value(redact_args(args)),
                    locations=[readable(p) for p in _locations(tool, args, ctx)],
                    diff=shown_diff(_stored_diff(block.get("name", ""), args)),
                )


def _locations(tool: Tool | None, args: dict[str, Any], ctx: ToolContext | None) -> list[str]:
    if tool is None or ctx is None:
        return []
    try:
        return [str(path) for path in tool.paths(args, ctx)]
    except Exception:
        return []


def _stored_diff(name: str, args: dict[str, Any]) -> Diff | None:
    """The change an edit call made, from its stored input alone.

    The file may have changed since, so the replay shows what the call asked for: the
    whole new content of a write, the replaced snippet of an edit.
    """
    path = args.get("path")
    if not isinstance(path, str):
        return None
    if name == "write_file" and isinstance(args.get("content"), str):
        return Diff(path, None, args["content"])
    if name == "edit_file" and isinstance(args.get("new_string"), str):
        old = args.get("old_string")
        return Diff(path, old if isinstance(old, str) else None, args["new_string"])
    return None


def shown_diff(diff: Diff | None) -> Diff | None:
    """A diff as front ends get it: secrets redacted, any bytes readable."""
    if diff is None:
        return None
    diff = redact_diff(diff)
    old = readable(diff.old_text) if diff.old_text is not None else None
    return Diff(readable(diff.path), old, readable(diff.new_text))


def _title(tool: Tool | None, args: dict[str, Any], default: str) -> str:
    if tool is None:
        return default
    try:
        return tool.title(args)
    except Exception:
        return default
