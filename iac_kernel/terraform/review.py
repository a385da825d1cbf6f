"""Apply exactly the reviewed plan: an approval bound to the plan file's bytes.

:func:`review_plan_file` reads the plan file once, keeps those bytes as a private copy
and summarises the copy (``show -json`` of it: the question shows exactly what will be
applied). After the approval, :meth:`ApprovedPlan.recheck` refuses when the original
file no longer has the approved hash, and the apply runs the private copy, so a file
swapped at any moment is never what gets applied.

An apply's audit record (``docs/audit.md``) holds what was reviewed (:func:`plan_fields`)
and the state's mark before and after (:func:`.binding.state_mark`), masked
(:func:`masked`) before it is stored: environment secrets, ``-var`` values
(:func:`var_scrubber`) and every sensitive value the workspace holds.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.redact import redact_value
from iac_kernel.terraform import policy
from iac_kernel.terraform.cli import TerraformError, program_name, show_json_sync
from iac_kernel.terraform.plan import Plan, PlanFile, parse_plan, summary_line
from iac_kernel.terraform.sensitive import MASK, keep, mask_value, values_from_show
from iac_kernel.terraform.summary import card_rows, question_text
from iac_kernel.terraform.workspace import sensitive_values

NO_PLAN_WARNING = (
    "⚠️ No reviewed plan backs this apply: {program} will compute a new plan and apply it "
    "in one step, and what it applies may differ from anything shown before. Prefer "
    "`{program} plan -out=tfplan`, review the plan, then `{program} apply tfplan`."
)
CHANGED = (
    "Refused: the plan file {path} changed after it was reviewed (approved sha256 {old}, "
    "now {new}). Nothing was applied. Show the new plan and ask again."
)
STALE = (
    "The saved plan is stale: the state changed after this plan was made (another apply or "
    "a state change ran in between). Terraform applied nothing. Make a new plan, review "
    "it, and apply that one."
)


@dataclass
class ApprovedPlan:
    """A plan file as reviewed: its hash, a private copy of its bytes, and its summary."""

    original: Path
    shown_path: str
    sha256: str
    copy: Path
    plan: Plan
    sensitive: set[str] = field(default_factory=set)
    #: For the audit record: what the caller knows (form, command, state before), and
    #: what to add when the record is written (the state after).
    audit_base: dict[str, Any] = field(default_factory=dict)
    after: Callable[[], dict[str, Any]] | None = None
    #: What the apply acts on, fixed at question time (a ``binding.Binding``), if bound.
    binding: Any = None

    def audit_record(self) -> dict[str, Any]:
        """The reviewed part of this apply's audit record (plan hash, summary, policy)."""
        record = {**self.audit_base, **plan_fields(self.plan)}
        if self.after is not None:
            record.update(self.after())
        return record

    def recheck(self) -> str | None:
        """None while the original still has the approved bytes; else the refusal."""
        try:
            now = hashlib.sha256(self.original.read_bytes()).hexdigest()
        except OSError:
            now = "(missing)"
        if now == self.sha256:
            return None
        return CHANGED.format(path=self.shown_path, old=self.sha256[:12], new=now[:12])

    def question(self) -> str:
        """Destroys and replacements first, then the plan (see :func:`question_text`)."""
        return f"{counts_line(self.plan, self.shown_path)}\n{question_text(self.plan)}"

    def summary(self) -> dict[str, Any]:
        """What front ends show with the question: the text, the structured plan, every
        changing row in compact form (``rows``: for the notebook's plan card) and the
        workspace the apply changes (a typed confirmation names it)."""
        summary = {
            "kind": "terraform_apply",
            "text": self.question(),
            "plan": self.plan.to_dict(),
            "rows": card_rows(self.plan),
        }
        state = self.audit_base.get("state_before")
        if isinstance(state, dict) and state.get("workspace"):
            summary["workspace"] = state["workspace"]
        return summary

    def cleanup(self) -> None:
        shutil.rmtree(self.copy.parent, ignore_errors=True)


def review_plan_file(
    executable: str,
    plan_file: Path,
    workdir: Path,
    shown_path: str | None = None,
    copy_dir: Path | None = None,
    env: dict[str, str] | None = None,
) -> ApprovedPlan:
    """Copy the plan's bytes privately and summarise the copy (see the module docstring)."""
    data = plan_file.read_bytes()
    if copy_dir is not None:
        copy_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="approved-plan-", dir=copy_dir))  # 0700
    if copy_dir is not None:
        os.chmod(directory, 0o755)  # the sandbox user must read it (the dir is read-only there)
    copy = directory / "approved.tfplan"
    copy.write_bytes(data)
    os.chmod(copy, 0o444)
    shown = shown_path or str(plan_file)
    try:  # sandboxed: ``show`` starts the workspace's provider plugins
        doc = show_json_sync(executable, copy, workdir, env)
    except TerraformError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise TerraformError(f"cannot read the plan {shown}: {exc}") from None
    file = PlanFile.of(plan_file, shown, data)
    plan = parse_plan(doc, file, program_name(executable))
    policy.attach_sync(plan, doc, workdir)
    return ApprovedPlan(plan_file, shown, file.sha256, copy, plan, values_from_show(doc))


def counts_line(plan: Plan, shown: str) -> str:
    """Destroys and replacements first: ``Apply of p.tfplan: 2 to destroy (1 replaced) ...``."""
    counts = plan.counts
    replace = counts.get("replace", 0)
    destroy = counts.get("delete", 0) + replace
    text = f"{'⚠️ ' if destroy else ''}Apply of the saved plan {shown}: {destroy} to destroy"
    if replace:
        text += f" ({replace} of them replaced)"
    add = counts.get("create", 0) + replace
    return text + f", {counts.get('update', 0)} to change, {add} to add."


def stale_message(output: str) -> str | None:
    """:data:`STALE` when terraform refused a stale saved plan."""
    return STALE if "Saved plan is stale" in output else None


def plan_fields(plan: Plan) -> dict[str, Any]:
    """The reviewed plan: file, hash, summary, counts (destroys first), policy results."""
    return {
        "plan_file": plan.file.path if plan.file else None,
        "plan_sha256": plan.file.sha256 if plan.file else None,
        "summary": summary_line(plan),
        "counts": {k: plan.counts.get(k, 0) for k in ("delete", "replace", "update", "create")},
        "policy": {
            "failed": [{k: c.get(k) for k in ("address", "check_id", "name")} for c in plan.checks],
            "note": plan.checks_note or "",
        },
    }


def var_scrubber(assignments: Iterable[str]) -> Callable[[Any], Any] | None:
    """What removes the values of ``-var NAME=VALUE`` from a record: ``NAME=(sensitive)``
    in command lines (quoted or not), the bare value wherever it is long enough to mask.
    A value expanded at exec time (``-var "pw=$(cat f)"``) is in no file the workspace
    scan reads, and a variable given on the command line may be a secret whatever its
    declaration says."""
    swaps: dict[str, str] = {}
    values: set[str] = set()
    for assignment in assignments:
        name, eq, value = assignment.partition("=")
        if not eq or not value:
            continue
        values.add(value)
        for prefix in ("", "-var=", "--var="):
            shown = f"{prefix}{name}={MASK}"
            swaps[shlex.quote(prefix + assignment)] = shown
            swaps[prefix + assignment] = shown
    if not swaps:
        return None
    order = sorted(swaps, key=len, reverse=True)
    kept = keep(values)

    def text(value: str) -> str:
        for form in order:
            value = value.replace(form, swaps[form])
        return value

    def scrub(record: Any) -> Any:
        return mask_value(_strings(record, text), kept)

    return scrub


def _strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strings(v, fn) for v in value]
    return value


def masked(record: dict[str, Any], cwd: Path, extra: set[str] | None = None) -> dict[str, Any]:
    """``record`` with environment secrets and the workspace's sensitive values masked."""
    values = set(sensitive_values(cwd)) | (extra or set())
    return mask_value(redact_value(record), values)
