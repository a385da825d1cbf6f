"""Which scripted turn plays next, with branches on the outcome of the last tool calls.

An exchange's ``turns`` list may hold, in place of a turn, a branch::

    {"on": {"done":   TURN or [TURN, ...],
            "failed": TURN or [TURN, ...],
            "denied": TURN or [TURN, ...],
            "else":   TURN or [TURN, ...]}}

The outcome is read from the tool results that answered the previous turn's tool calls,
the worst one winning: ``denied`` (the user or a rule refused a call: its result starts
with "Permission denied", or "Rejected by the user" when the user rejected it with a
note), then ``failed`` (an error result), then ``done``. A branch in
the first position (nothing ran yet) counts as ``done``. A missing outcome plays ``else``;
without ``else`` the model says which outcome it got and stops.

A single TURN plays in the branch's place and the exchange goes on with the turns after
the branch; a list of turns replaces the rest of the exchange (so a denied path can end,
or take another route, without reaching the turns written for the done path). Branches
nest: a list may hold branches of its own.
"""

from __future__ import annotations

from typing import Any

OUTCOMES = ("done", "failed", "denied")
BRANCH_KEYS = (*OUTCOMES, "else")
#: Prefixes of the tool result the permission gate gives a refused call (agent/permissions.py):
#: a plain rejection or a rule, and a rejection with the user's note.
DENIED_PREFIXES = ("Permission denied", "Rejected by the user")


class BranchError(ValueError):
    """A malformed ``on`` branch in a script."""


def check_turns(turns: Any, where: str) -> None:
    """Validate a turns list, branches included; raises :class:`BranchError`."""
    if not isinstance(turns, list):
        raise BranchError(f"{where}: 'turns' must be a list")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise BranchError(f"{where}: turn {i} must be an object")
        if "on" not in turn:
            continue
        branches = turn["on"]
        if not isinstance(branches, dict) or not branches:
            raise BranchError(f"{where}: turn {i}: 'on' must be a non-empty object")
        unknown = sorted(set(branches) - set(BRANCH_KEYS))
        if unknown:
            raise BranchError(
                f"{where}: turn {i}: unknown outcome {unknown[0]!r} in 'on' "
                f"(use {', '.join(BRANCH_KEYS)})"
            )
        for key, branch in branches.items():
            inner = f"{where}: turn {i} on {key}"
            if isinstance(branch, list):
                check_turns(branch, inner)
            elif isinstance(branch, dict):
                check_turns([branch], inner)
            else:
                raise BranchError(f"{inner}: must be a turn object or a list of turns")


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    return str(content)


def outcome_of(message: dict[str, Any] | None) -> str:
    """The worst outcome among a user message's tool results (``done`` without any)."""
    if message is None or not isinstance(message.get("content"), list):
        return "done"
    worst = "done"
    for block in message["content"]:
        if block.get("type") != "tool_result":
            continue
        if result_text(block).lstrip().startswith(DENIED_PREFIXES):
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


def pick(turns: list[dict[str, Any]], messages: list[dict[str, Any]], prompt: int) -> Any:
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
            entry, queue = _take_branch(entry, outcome_of(results), queue)
        if step == len(assistants):
            return entry
    return None
