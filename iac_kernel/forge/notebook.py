"""The session as a notebook, committed beside the change under ``.iac-kernel/runs/``.

It is made from the session's history as a replay shows it (prompts, answers, tool calls
and their results, already masked with what is known now: the agent loop supplies those
events), then every text is masked once more here: the environment's secret values and
credential shapes (:func:`~iac_kernel.redact.redact`) and the workspace's sensitive
values (:func:`~iac_kernel.terraform.sensitive.mask_text`). With a plan it ends with the
plan's whole table (the body of a large plan links here for it).

One code cell per prompt (the prompt is its source, as in an iac-kernel notebook), the
turn's answer and tool calls as its Markdown outputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from iac_kernel.events import TextDelta, ToolCallInput, ToolCallResult, UserMessage
from iac_kernel.forge.body import cell, fenced, plan_line, row
from iac_kernel.redact import redact
from iac_kernel.terraform.plan import Plan
from iac_kernel.terraform.sensitive import mask_text
from iac_kernel.textsafe import readable

#: Longest tool result kept in a cell's output (the head and the tail are kept).
RESULT_CHARS = 20_000
KERNELSPEC = {"name": "iac-kernel", "display_name": "IaC Agent", "language": "markdown"}


def _clip(text: str, limit: int = RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n\n[… {len(text) - limit} characters cut …]\n\n{text[-half:]}"


def session_notebook(
    events: Iterable[Any],
    values: Iterable[str] = (),
    plan: Plan | None = None,
    title: str = "",
) -> bytes:
    """The notebook's bytes (nbformat 4, validated); see the module doc."""
    import nbformat  # here: its jsonschema import takes a second and a half

    sensitive = frozenset(values)

    def clean(text: str) -> str:
        return mask_text(redact(readable(text)), sensitive)

    cells: list[Any] = []
    if title:
        cells.append(nbformat.v4.new_markdown_cell(f"# {clean(title)}"))
    current: Any = None
    pieces: list[str] = []

    def flush() -> None:
        if current is not None and pieces:
            text = "".join(pieces).strip()
            if text:
                current.outputs.append(_markdown_output(clean(text)))
        pieces.clear()

    for event in events:
        if isinstance(event, UserMessage):
            flush()
            current = nbformat.v4.new_code_cell(clean(event.text))
            cells.append(current)
        elif current is None:
            continue
        elif isinstance(event, TextDelta):
            pieces.append(event.text)
        elif isinstance(event, ToolCallInput):
            flush()
            shown = json.dumps(event.input, ensure_ascii=False, indent=1, default=str)
            pieces.append(f"**{event.title}**\n\n{fenced(_clip(shown, 4000))}\n")
            flush()
        elif isinstance(event, ToolCallResult):
            flush()
            status = "" if event.status == "completed" else f" ({event.status})"
            pieces.append(f"Result{status}:\n\n{fenced(_clip(event.output))}\n")
            flush()
    flush()
    if plan is not None:
        cells.append(nbformat.v4.new_markdown_cell(clean(plan_table(plan))))
    book = nbformat.v4.new_notebook(cells=cells)
    book.metadata["kernelspec"] = dict(KERNELSPEC)
    book.metadata["language_info"] = {"name": "markdown"}
    nbformat.validate(book)
    return nbformat.writes(book).encode()


def plan_table(plan: Plan) -> str:
    """The whole plan as a Markdown table, destroys and replacements first."""
    sha = plan.file.sha256 if plan.file is not None else "(unknown)"
    lines = [
        "## The plan this change was proposed with",
        "",
        f"{plan_line(plan)} Plan file SHA-256 `{sha}`.",
        "",
        "| action | address | why |",
        "|---|---|---|",
    ]
    lines += [row(resource) for resource in plan.changed]
    if plan.checks:
        lines += ["", "Failed policy checks:", ""]
        lines += [
            f"- `{cell(c.get('check_id'))}` on `{cell(c.get('address'))}`" for c in plan.checks
        ]
    return "\n".join(lines)


def _markdown_output(text: str) -> Any:
    import nbformat

    return nbformat.v4.new_output("display_data", data={"text/markdown": text, "text/plain": text})


Events = Callable[[], list[Any]]
