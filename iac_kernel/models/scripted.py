"""The offline scripted model: replays a script of assistant turns.

It stands in for a real model where no credentials are set (notebooks, demos, tests).
Only the model's words are scripted; the tools it calls run for real. The format
(exchanges matched on the prompt, turns, ``vars``, branches on how the last tool calls
ended) is described in notebooks/README.md, "Writing a script". Which turn plays is
derived from the conversation, so the model keeps no state.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from iac_kernel.events import Usage
from iac_kernel.models.base import (
    CHARS_PER_TOKEN,
    MessageDone,
    ModelError,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
    content_text,
    estimate_tokens,
)

SCRIPTED_MODEL_ID = "scripted"
_CHUNK = re.compile(r"\S+\s*|\s+")


class ScriptError(ValueError):
    """The script file is missing or malformed."""


@dataclass
class Script:
    name: str
    exchanges: list[dict[str, Any]]
    fallback: str
    source: str = ""
    patterns: list[re.Pattern[str] | None] = field(default_factory=list)
    #: name -> (pattern with one group, default value)
    variables: dict[str, tuple[re.Pattern[str], str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None) -> Script:
        """Load a script file; ``None`` loads the packaged default script."""
        if path is None:
            text = resources.files("iac_kernel.models.scripts").joinpath("default.json").read_text()
            source = "default"
        else:
            try:
                text = Path(path).expanduser().read_text()
            except OSError as exc:
                raise ScriptError(f"cannot read script {path}: {exc.strerror}") from None
            source = str(path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"script {source} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("exchanges", []), list):
            raise ScriptError(f"script {source} needs an object with an 'exchanges' list")
        exchanges = data.get("exchanges", [])
        patterns = []
        for i, exchange in enumerate(exchanges):
            if not isinstance(exchange, dict) or not isinstance(exchange.get("turns"), list):
                raise ScriptError(f"script {source}: exchange {i} needs a 'turns' list")
            _check_turns(exchange["turns"], f"script {source}: exchange {i}")
            match = exchange.get("match")
            try:
                patterns.append(re.compile(match, re.IGNORECASE | re.DOTALL) if match else None)
            except re.error as exc:
                raise ScriptError(f"script {source}: exchange {i} match: {exc}") from None
        return cls(
            name=str(data.get("name", source)),
            exchanges=exchanges,
            fallback=str(data.get("fallback", "(The scripted model has no answer for this.)")),
            source=source,
            patterns=patterns,
            variables=_load_vars(data.get("vars", {}), source),
        )


def _load_vars(spec: Any, source: str) -> dict[str, tuple[re.Pattern[str], str]]:
    if not isinstance(spec, dict):
        raise ScriptError(f"script {source}: 'vars' must be an object")
    variables = {}
    for name, var in spec.items():
        if not isinstance(var, dict) or not isinstance(var.get("pattern"), str):
            raise ScriptError(f"script {source}: var {name!r} needs a 'pattern' string")
        try:
            pattern = re.compile(var["pattern"], re.IGNORECASE)
        except re.error as exc:
            raise ScriptError(f"script {source}: var {name!r} pattern: {exc}") from None
        if pattern.groups < 1:
            raise ScriptError(f"script {source}: var {name!r} pattern needs a group")
        variables[str(name)] = (pattern, str(var.get("default", "")))
    return variables


def _fill(value: Any, values: dict[str, str]) -> Any:
    """``value`` with ``{{name}}`` replaced in every string (dicts and lists walked)."""
    if isinstance(value, str):
        for name, text in values.items():
            value = value.replace("{{" + name + "}}", text)
        return value
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def is_prompt(message: dict[str, Any]) -> bool:
    """A user message the user typed (not one carrying only tool results).

    After a cancelled turn the next prompt is merged into the message that closes the
    cancelled tool calls, so a message with text is a prompt even beside tool results.
    """
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    if any(block.get("type") == "text" and block.get("text") for block in content):
        return True
    return not any(block.get("type") == "tool_result" for block in content)


def latest_text(message: dict[str, Any]) -> str:
    """The last text block of a message: the newest prompt when roles were merged."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in content if b.get("type") == "text" and b.get("text")]
    return texts[-1] if texts else ""


class ScriptedModel:
    """A :class:`~iac_kernel.models.base.Model` that replays a :class:`Script`."""

    context_window = 200_000

    def __init__(self, script: Script):
        self.script = script
        self.model_id = SCRIPTED_MODEL_ID

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.purpose == "compaction":
            turn: dict[str, Any] = {"text": _summary(request)}
        else:
            turn = self._pick_turn(request.messages)
        if turn.get("error"):
            raise ModelError(str(turn["error"]), retryable=False)
        delay = float(turn.get("delay", 0))
        trace = turn.get("trace")
        content = _turn_content(turn, len(request.messages))
        output_budget = request.max_tokens * CHARS_PER_TOKEN
        stop_reason = turn.get("stop_reason") or (
            "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        )
        done: list[dict[str, Any]] = []
        used_chars = 0
        for block in content:
            if block["type"] in ("text", "thinking"):
                key = block["type"]
                streamed = ""
                for chunk in _CHUNK.findall(block[key]):
                    if used_chars + len(chunk) > output_budget:
                        stop_reason = "max_tokens"
                        break
                    used_chars += len(chunk)
                    streamed += chunk
                    if delay:
                        await asyncio.sleep(delay)
                    if trace and key == "text":
                        _trace(str(trace), len(streamed))
                    yield TextChunk(chunk) if key == "text" else ThinkingChunk(chunk)
                done.append({**block, key: streamed})
                if stop_reason == "max_tokens":
                    break
            elif block["type"] == "tool_use":
                yield ToolUseBegin(block["id"], block["name"])
                if delay:
                    await asyncio.sleep(delay)
                yield ToolUseEnd(block["id"], block["name"], block["input"])
                done.append(block)
        usage_spec = turn.get("usage") or {}
        usage = Usage(
            input_tokens=int(usage_spec.get("input_tokens", estimate_tokens(request.messages))),
            output_tokens=int(usage_spec.get("output_tokens", estimate_tokens(done))),
            cache_read_tokens=int(usage_spec.get("cache_read_tokens", 0)),
        )
        yield MessageDone(content=done, stop_reason=stop_reason, usage=usage)

    def _pick_turn(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompts = [i for i, m in enumerate(messages) if is_prompt(m)]
        if not prompts:
            return {"text": self.script.fallback}
        last = prompts[-1]
        text = latest_text(messages[last])
        turn_index = sum(1 for m in messages[last:] if m.get("role") == "assistant")
        exchange = None
        for candidate, pattern in zip(self.script.exchanges, self.script.patterns, strict=True):
            if pattern is not None and pattern.search(text):
                exchange = candidate
                break
        position = len(prompts) - 1
        if exchange is None and position < len(self.script.exchanges):
            if self.script.patterns[position] is None:
                exchange = self.script.exchanges[position]
        if exchange is None:
            return {"text": self.script.fallback} if turn_index == 0 else {"text": ""}
        turn = _pick(exchange["turns"], messages, last)
        if turn is None:
            return {"text": ""}
        if not self.script.variables:
            return turn
        return _fill(turn, self._values(messages))

    def _values(self, messages: list[dict[str, Any]]) -> dict[str, str]:
        texts = [_user_text(m) for m in reversed(messages) if m.get("role") == "user"]
        values = {}
        for name, (pattern, default) in self.script.variables.items():
            values[name] = default
            for text in texts:
                found = pattern.search(text)
                if found:
                    values[name] = found.group(1)
                    break
        return values


def _trace(path: str, streamed: int) -> None:
    """One line of a turn's ``trace`` file: now, and the characters streamed so far."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{time.monotonic():.6f} {streamed}\n")


def _user_text(message: dict[str, Any]) -> str:
    """A user message's text: the prompt, or the text of its tool results."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [
        content_text(block.get("content"))
        if block.get("type") == "tool_result"
        else block.get("text", "")
        for block in content
        if block.get("type") in ("text", "tool_result")
    ]
    return "\n".join(parts)


def _turn_content(turn: dict[str, Any], salt: int) -> list[dict[str, Any]]:
    """The turn's blocks in Messages API form, with tool_use ids unique in the conversation."""
    if "content" in turn:
        blocks = [dict(b) for b in turn["content"]]
    else:
        blocks = []
        if turn.get("thinking"):
            blocks.append({"type": "thinking", "thinking": turn["thinking"], "signature": ""})
        if turn.get("text"):
            blocks.append({"type": "text", "text": turn["text"]})
        for use in turn.get("tool_use", []):
            blocks.append({"type": "tool_use", "name": use["name"], "input": use.get("input", {})})
    for k, block in enumerate(blocks):
        if block.get("type") == "thinking":
            block.setdefault("signature", "")
        if block.get("type") == "tool_use":
            block.setdefault("id", f"toolu_scripted_{salt:04d}_{k}")
            block.setdefault("input", {})
        if block.get("type") not in ("text", "thinking", "tool_use"):
            raise ModelError(f"scripted turn has an unknown block type {block.get('type')!r}")
    return blocks


def _summary(request: ModelRequest) -> str:
    """A deterministic summary for compaction calls: the prompts and tools seen so far."""
    transcript = content_text(request.messages[-1].get("content")) if request.messages else ""
    earlier = re.search(r"^The user asked: (.*)$", transcript, re.MULTILINE)
    prompts = earlier.group(1).split("; ") if earlier else []
    prompts += re.findall(r"^USER: (.*)$", transcript, re.MULTILINE)
    tools = set(re.findall(r"^TOOL CALL: (\w+)", transcript, re.MULTILINE))
    used = re.search(r"^Tools used: (.*)$", transcript, re.MULTILINE)
    tools = sorted(tools | set(used.group(1).split(", ") if used else []))
    lines = ["Summary of the earlier conversation (scripted model)."]
    if prompts:
        lines.append("The user asked: " + "; ".join(p[:120] for p in prompts))
    if tools:
        lines.append("Tools used: " + ", ".join(tools))
    return "\n".join(lines)


# --- branches on the outcome of the last tool calls ------------------------------------------

OUTCOMES = ("done", "failed", "denied")
BRANCH_KEYS = (*OUTCOMES, "else")
#: Prefixes of the tool result the permission gate gives a refused call (agent/permissions.py):
#: a plain rejection or a rule, and a rejection with the user's note.
DENIED_PREFIXES = ("Permission denied", "Rejected by the user")


def _check_turns(turns: Any, where: str) -> None:
    """Validate a turns list, branches included; raises :class:`ScriptError`."""
    if not isinstance(turns, list):
        raise ScriptError(f"{where}: 'turns' must be a list")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise ScriptError(f"{where}: turn {i} must be an object")
        if "on" not in turn:
            continue
        branches = turn["on"]
        if not isinstance(branches, dict) or not branches:
            raise ScriptError(f"{where}: turn {i}: 'on' must be a non-empty object")
        unknown = sorted(set(branches) - set(BRANCH_KEYS))
        if unknown:
            raise ScriptError(
                f"{where}: turn {i}: unknown outcome {unknown[0]!r} in 'on' "
                f"(use {', '.join(BRANCH_KEYS)})"
            )
        for key, branch in branches.items():
            inner = f"{where}: turn {i} on {key}"
            if isinstance(branch, list):
                _check_turns(branch, inner)
            elif isinstance(branch, dict):
                _check_turns([branch], inner)
            else:
                raise ScriptError(f"{inner}: must be a turn object or a list of turns")


def _outcome_of(message: dict[str, Any] | None) -> str:
    """The worst outcome among a user message's tool results (``done`` without any)."""
    if message is None or not isinstance(message.get("content"), list):
        return "done"
    worst = "done"
    for block in message["content"]:
        if block.get("type") != "tool_result":
            continue
        if content_text(block.get("content")).lstrip().startswith(DENIED_PREFIXES):
            return "denied"
        if block.get("is_error"):
            worst = "failed"
    return worst


def _results_after(messages: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
    """The user message answering the assistant message at ``index`` (its tool results)."""
    for message in messages[index + 1 :]:
        if message.get("role") == "user":
            return message
        if message.get("role") == "assistant":
            return None
    return None


def _take_branch(
    entry: dict[str, Any], outcome: str, rest: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Resolve a branch entry: the turn to play now and the turns that follow it."""
    while "on" in entry:
        branches = entry["on"]
        branch = branches.get(outcome, branches.get("else"))
        if branch is None:
            return {"text": f"The tool call ended as **{outcome}**; stopping here."}, []
        if isinstance(branch, list):
            if not branch:
                return {"text": ""}, []
            entry, rest = branch[0], list(branch[1:])
        else:
            entry = branch
    return entry, rest


def _pick(turns: list[dict[str, Any]], messages: list[dict[str, Any]], prompt: int) -> Any:
    """The turn to play after ``messages`` whose latest prompt is at index ``prompt``.

    Returns ``None`` when the exchange has no turn left.
    """
    assistants = [
        i for i in range(prompt + 1, len(messages)) if messages[i].get("role") == "assistant"
    ]
    queue = list(turns)
    for step in range(len(assistants) + 1):
        if not queue:
            return None
        entry, queue = queue[0], queue[1:]
        if "on" in entry:
            previous = assistants[step - 1] if step > 0 else None
            results = _results_after(messages, previous) if previous is not None else None
            entry, queue = _take_branch(entry, _outcome_of(results), queue)
        if step == len(assistants):
            return entry
    return None
