"""The model's ``update_plan`` checklist in the notebook: one Markdown task list per turn,
updated in place as the model updates its plan (ACP clients get it as ``plan`` updates).
Only what the model sent is shown."""

from __future__ import annotations

from typing import Any

from iac_kernel.events import ToolCallResult

MARKS = {"completed": "[x]", "in_progress": "[ ]", "pending": "[ ]"}


def steps_of(event: ToolCallResult) -> list[dict[str, Any]] | None:
    """The steps of a completed ``update_plan`` call, or ``None``."""
    if event.name != "update_plan" or event.status != "completed":
        return None
    raw = event.raw_output
    steps = raw.get("steps") if isinstance(raw, dict) else None
    return steps if isinstance(steps, list) and steps else None


def bundle(steps: list[dict[str, Any]]) -> dict[str, str]:
    """``text/markdown`` (a task list; the running step in bold) and ``text/plain``."""
    done = sum(1 for s in steps if s.get("status") == "completed")
    head = f"**Plan** ({done} of {len(steps)} done)"
    lines, plain = [head, ""], [f"Plan ({done} of {len(steps)} done)"]
    for step in steps:
        status, text = str(step.get("status")), str(step.get("step", "")).replace("\n", " ")
        shown = f"**{text}** _(in progress)_" if status == "in_progress" else text
        lines.append(f"- {MARKS.get(status, '[ ]')} {shown}")
        plain.append(
            f"{'✓' if status == 'completed' else '→' if status == 'in_progress' else '·'} {text}"
        )
    return {"text/markdown": "\n".join(lines), "text/plain": "\n".join(plain)}
