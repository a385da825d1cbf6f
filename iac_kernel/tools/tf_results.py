"""Terraform-aware handling of every tool result, called once by the agent loop.

* Sensitive values are masked (``(sensitive)``) in the result's text, raw output, full
  output and diff: the workspace's known values (:mod:`iac_kernel.terraform.workspace`)
  and those of any state / plan / output JSON the result itself prints.
* A result that printed or read Terraform state or plan JSON (``read_file`` of a
  ``.tfstate``, ``cat``, ``grep``, ``terraform show -json``, ``state pull``, ``output
  -json``) says so in its first line and in ``raw_output["terraform_state"]``: such a read
  is always visible on its card.
* A ``bash`` call that ran ``terraform|tofu plan -out=FILE`` gets the plan's summary
  table appended and the structured plan in ``raw_output["plan"]`` (a plan card).
* "Saved plan is stale" becomes a clear failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
from pathlib import Path
from typing import Any

from iac_kernel.masking import shapes
from iac_kernel.redact import longest_secret, redact
from iac_kernel.terraform import cli, policy
from iac_kernel.terraform.commands import PlanTarget, find_commands, plan_outputs, split_argv
from iac_kernel.terraform.plan import PlanFile, parse_plan
from iac_kernel.terraform.review import stale_message
from iac_kernel.terraform.sensitive import (
    MASK,
    StreamMasker,
    mask_text,
    mask_value,
    values_from_show,
    values_from_state,
    values_in_text,
)
from iac_kernel.terraform.summary import model_text
from iac_kernel.terraform.workspace import (
    known_values,
    limit_note,
    remember,
    remember_plan_file,
    sensitive_values,
)
from iac_kernel.tools.base import ToolResult
from iac_kernel.tools.tf_plans import record_plan

log = logging.getLogger(__name__)

STATE_SUFFIXES = (".tfstate", ".tfstate.backup")
STATE_MARKERS = ('"sensitive_attributes"', '"terraform_version"', '"prior_state"')
#: terraform subcommands whose output may carry sensitive values no file on disk holds
#: (remote state): their live output is held back and masked as a whole.
HOLD_SUBCOMMANDS = {"output", "show", "state", "console"}
STREAMING_TOOLS = {"bash", "terraform_plan", "terraform_apply"}


def _all_values(cwd: Path, text: str, args: dict[str, Any]) -> set[str]:
    """The workspace's values, those printed in ``text``, and those of state files the
    call names (a state outside the working directory, or cut short in the output)."""
    found = set(sensitive_values(cwd)) | values_in_text(text)
    for path in _named_state_files(args, cwd):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            found |= values_from_state(json.loads(path.read_text(errors="replace") or "{}"))
    return found


def _named_state_files(args: dict[str, Any], cwd: Path) -> list[Path]:
    words = [str(args.get(k, "")) for k in ("path", "file_path")]
    command = args.get("command")
    if isinstance(command, str):
        words += command.replace(";", " ").replace("|", " ").replace("&", " ").split()
    names = [w.strip("'\"") for w in words if w.strip("'\"").endswith(STATE_SUFFIXES)]
    return [p for p in ((cwd / n) for n in names) if p.is_file()][:20]


def live_masker(name: str, args: dict[str, Any], cwd: Path) -> StreamMasker | None:
    """The masker for a call's live output (None for tools that print nothing live)."""
    if name not in STREAMING_TOOLS:
        return None
    command = str(args.get("command", "")) if isinstance(args, dict) else ""
    hold = "tfstate" in command or any(
        tf.subcommand in HOLD_SUBCOMMANDS for tf in find_commands(command)
    )

    def found(values: set[str]) -> None:  # the final, maybe cut, result masks them too
        remember(cwd, f"printed:{hash(frozenset(values))}", values)

    # The known values now, a fresh scan before each chunk goes out (in the pump's thread).
    return StreamMasker(
        known_values(cwd),
        hold_all=hold,
        on_found=found,
        refresh=lambda: sensitive_values(cwd),
        redact=redact,
        redact_hold=max(longest_secret(), shapes.HOLD),
    )


def mask_diff(diff: Any, cwd: Path) -> Any:
    """A file diff (``path``, ``old_text``, ``new_text``) with sensitive values masked."""
    if diff is None:
        return None
    values = sensitive_values(cwd)
    if not values:
        return diff
    old = diff.old_text
    return type(diff)(
        diff.path,
        mask_text(old, values) if old is not None else None,
        mask_text(diff.new_text, values),
    )


async def after_tool_call(
    name: str, args: dict[str, Any], cwd: Path, result: ToolResult
) -> ToolResult:
    """The result as it may reach the model, front ends and the store (see module doc)."""
    args = args if isinstance(args, dict) else {}
    if name == "bash":
        with contextlib.suppress(Exception):
            await _pick_up_plans(str(args.get("command", "")), cwd, result)
        stale = stale_message(result.content)
        if stale:
            result.content = f"{stale}\n\n{result.content}"
            result.is_error = True
    full = getattr(result, "full_output", None)
    values = await asyncio.to_thread(_all_values, cwd, result.content + (full or ""), args)
    before = result.content
    result.content = mask_text(result.content, values)
    if result.masked_with is not None:  # redacted before: now these values too
        result.masked_with = result.masked_with | frozenset(values)
    if _reads_state(name, args, before):
        count = sum(before.count(v) for v in values)
        note = f"[Terraform state/plan data: {count} sensitive value(s) shown as {MASK}]"
        result.content = f"{note}\n{result.content}"
        raw = result.raw_output if isinstance(result.raw_output, dict) else {}
        result.raw_output = {**raw, "terraform_state": {"masked": count}}
    note = limit_note(cwd)
    if note and name in STREAMING_TOOLS | {"read_file", "grep"}:
        result.content = f"{note}\n{result.content}"
    result.raw_output = mask_value(result.raw_output, values)
    if isinstance(full, str):
        result.full_output = mask_text(full, values)  # type: ignore[attr-defined]
    if result.diff is not None:
        result.diff = mask_diff(result.diff, cwd)
    return result


def _reads_state(name: str, args: dict[str, Any], text: str) -> bool:
    path = str(args.get("path", "") or args.get("file_path", ""))
    if name == "read_file" and path.endswith(STATE_SUFFIXES):
        return True
    return any(marker in text for marker in STATE_MARKERS)


def _plan_targets(command: str, cwd: Path, raw_output: Any) -> list[PlanTarget]:
    """Plan files the command line names, and those of every terraform/tofu the guard saw
    run (a plan made by a script or ``make`` too), once each."""
    targets = plan_outputs(command, cwd)
    guarded = raw_output.get("guarded") if isinstance(raw_output, dict) else None
    for entry in guarded if isinstance(guarded, list) else []:
        tf = split_argv(list(entry.get("argv") or [])) if isinstance(entry, dict) else None
        if tf is not None and tf.subcommand == "plan":
            targets += plan_outputs(
                shlex.join([tf.program, *entry["argv"][1:]]), Path(str(entry.get("cwd") or cwd))
            )
    unique: dict[Path, PlanTarget] = {}
    for target in targets:
        unique.setdefault(target.path, target)
    return list(unique.values())


async def _pick_up_plans(command: str, cwd: Path, result: ToolResult) -> None:
    """Summarise plan files a bash ``plan -out`` wrote (see the module docstring)."""
    for target in _plan_targets(command, cwd, result.raw_output):
        if not target.path.is_file():
            continue
        executable = cli.find_program(target.program)
        doc = await cli.show_json(executable, target.path, target.workdir)
        shown = _shown(target.path, cwd)
        values = values_from_show(doc)
        file = PlanFile.of(target.path, shown)
        plan = parse_plan(doc, file, target.program, target.refresh_only, values)
        await policy.attach(plan, doc, target.workdir)
        remember(cwd, f"plan:{target.path}:{plan.file.sha256 if plan.file else ''}", values)
        remember_plan_file(cwd, target.path, values)
        record_plan(cwd, target.path, plan)
        result.content = f"{result.content}\n\n{model_text(plan)}"
        raw = result.raw_output if isinstance(result.raw_output, dict) else {}
        result.raw_output = {**raw, "plan": plan.to_dict()}


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path)
