"""terraform_apply: apply exactly the saved plan the user reviewed.

Before the question, :meth:`TerraformApplyTool.review` copies the plan file's bytes
privately and summarises that copy (replacements and deletes first, failed policy
checks); the question shows the summary. After the approval the original must still have
the approved hash (else the call is refused), and the private copy is what terraform
applies, so a plan file swapped while the question waits is never applied.

A team's approval rules (``team/rules.py``, docs/approvals.md) are evaluated on the
reviewed plan before the question: a rules file that cannot be used refuses the apply,
and a plan no rule matches applies exactly as without rules. A plan a rule holds back
(:class:`GatedPlan`) goes, once the user allowed it, through the same gate as an apply
typed in bash (:class:`~iac_kernel.terraform.gate.Gate`): bound to an approval record
(the plan's hash and :meth:`~iac_kernel.terraform.binding.Binding.approval_inputs`) asked
by the session's owner, the call waits, saying what it waits for, until other people
approved it, then spends the approval and applies the same private copy. Cancelling the
turn leaves the record: applying the same plan again finds it.

Given ``pull_request``, the apply is bound to that reviewed request
(:class:`~iac_kernel.forge.review.PullRequestApply`: approved by another person, merged,
carrying this plan's hash, its merged configuration the plan's), its approvals are votes
on the same record, and the result is posted to it as a comment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.egress import inside
from iac_kernel.egress.decide import GuardedRun
from iac_kernel.egress.proxy import open_route
from iac_kernel.forge import review as pull_requests
from iac_kernel.forge.remote import ForgeError
from iac_kernel.guard.confine import confine
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, unusable_reason
from iac_kernel.team.rules import Requirement
from iac_kernel.terraform import cli, gate
from iac_kernel.terraform.binding import bind, lineage_check
from iac_kernel.terraform.gate import requirement_of
from iac_kernel.terraform.review import ApprovedPlan, review_plan_file, stale_message
from iac_kernel.terraform.sensitive import mask_text, mask_value
from iac_kernel.terraform.workspace import is_plan_file, remember, sensitive_values
from iac_kernel.tools.base import (
    Category,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    resolve_path,
    shown_path,
)
from iac_kernel.tools.tf_masking import mask_shown
from iac_kernel.tools.tf_plans import (
    DIR_SCHEMA,
    PROGRAM_SCHEMA,
    TerraformPlanTool,
    workdir_of,
)

APPLY_TIMEOUT = 3600.0
NO_REVIEW = (
    "Not applied: no reviewed plan backs this call (the plan file could not be read before "
    "the question: {why}). Make a plan with " + TerraformPlanTool.name + " and apply that file."
)


@dataclass
class GatedPlan(ApprovedPlan):
    """A reviewed plan that approval rules hold back: after the user allows it, the
    apply also waits for ``requirement``."""

    requirement: Requirement = field(default_factory=Requirement)
    #: The reviewed pull/merge request the apply is bound to, if one was given.
    pull: pull_requests.PullRequestApply | None = None

    @classmethod
    def of(
        cls,
        approved: ApprovedPlan,
        requirement: Requirement,
        pull: pull_requests.PullRequestApply | None = None,
    ) -> GatedPlan:
        fixed = {f.name: getattr(approved, f.name) for f in dataclasses.fields(ApprovedPlan)}
        return cls(**fixed, requirement=requirement, pull=pull)

    def question(self) -> str:
        text = f"{super().question()}\n{gate.needs_text(self.requirement)}"
        return text if self.pull is None else f"{text}\n{self.pull.question()}"

    def summary(self) -> dict[str, Any]:
        summary = super().summary()
        summary["approval"] = gate.card_fields(self.requirement)
        return summary


class TerraformApplyTool(Tool):
    name = "terraform_apply"
    description = (
        f"Apply a saved plan file (made by {TerraformPlanTool.name} or `terraform plan -out=FILE`) "
        "after the user reviewed it. The user is asked each time, with the plan's summary; "
        "exactly the reviewed bytes are applied, and a plan file changed after the question "
        "is refused. A stale plan (the state changed since) fails: plan again. When the "
        "team's approval rules hold the plan back, the call then waits until other people "
        "approve it (or refuses when they reject it)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "plan": {"type": "string", "minLength": 1, "description": "The saved plan file."},
            "dir": DIR_SCHEMA,
            "program": PROGRAM_SCHEMA,
            "pull_request": {
                **pull_requests.PULL_REQUEST_SCHEMA,
                "description": "Apply only as that pull/merge request was reviewed: approved "
                "by another person, merged, carrying this plan's hash (its number or address).",
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE
    subject = "plan"
    shows_contents = True

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        plan = args.get("plan") if isinstance(args, dict) else None
        return isinstance(plan, str) and bool(plan.strip()), None  # every apply, per call

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        plan = args.get("plan") if isinstance(args, dict) else None
        if not isinstance(plan, str) or not plan.strip():
            return []
        base = resolve_path(ctx, args["dir"]) if args.get("dir") else ctx.cwd
        return [base / plan]

    async def review(self, args: dict[str, Any], ctx: ToolContext) -> ApprovedPlan | None:
        """Read and summarise the plan before the question (see the module docstring)."""
        args = self.check(args)
        workdir = workdir_of(args, ctx)
        path = workdir / args["plan"]
        if not path.is_file() or not is_plan_file(path):
            raise ToolError(f"not a saved plan file: {args['plan']}")
        try:
            executable = cli.find_program(args.get("program"))
        except cli.TerraformError as exc:
            raise ToolError(str(exc)) from None
        approved = await asyncio.to_thread(
            review_plan_file, executable, path, workdir, shown_path(path, ctx.cwd)
        )
        remember(ctx.cwd, f"plan:{path.resolve()}:{approved.sha256}", approved.sensitive)
        env = {**os.environ, **ctx.env}
        # The folder (symlinks resolved), workspace and data folder are fixed now.
        binding = await asyncio.to_thread(
            bind, approved.plan.program, None, "apply", str(workdir), env, []
        )
        approved.binding = binding
        approved.audit_base = {
            **self.refusal_record(args, ""),
            "command": f"{approved.plan.program} apply -input=false {approved.shown_path}",
            "workdir": str(binding.host_workdir),
            "state_before": binding.state,
        }
        approved.after = lambda: lineage_check(binding.state, binding.state_now())
        try:
            requirement = await asyncio.to_thread(requirement_of, approved.plan, binding)
        except BaseException:
            approved.cleanup()
            raise
        if requirement.blocked:
            approved.cleanup()
            raise ToolError(gate.blocked_text(requirement))
        if args.get("pull_request") is not None:
            try:
                pull = await pull_requests.PullRequestApply.bind(
                    args["pull_request"], approved, requirement, pull_requests.Where.of(ctx)
                )
            except ForgeError as exc:
                approved.cleanup()
                raise ToolError(str(exc)) from None
            except BaseException:
                approved.cleanup()
                raise
            return GatedPlan.of(approved, pull.requirement, pull)
        return GatedPlan.of(approved, requirement) if requirement.needed else approved

    def refusal_record(self, args: dict[str, Any], error: str) -> dict[str, Any]:
        plan = args.get("plan") if isinstance(args, dict) else None
        return {"kind": "terraform_apply", "form": "tool", "plan_file": plan}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        approved = getattr(ctx, "review", None)
        if isinstance(approved, GatedPlan) and approved.pull is not None:
            return await approved.pull.reported(self._run(args, ctx), approved)
        return await self._run(args, ctx)

    async def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        approved = getattr(ctx, "review", None)
        if not isinstance(approved, ApprovedPlan):
            why = getattr(ctx, "review_error", None) or "no review was made"
            raise ToolError(NO_REVIEW.format(why=why))
        try:
            workdir = workdir_of(args, ctx)
            if approved.original.resolve() != (workdir / args["plan"]).resolve():
                raise ToolError("Not applied: the reviewed plan is not the file this call names.")
            refusal = approved.recheck() or approved.binding.changed()
            workdir = approved.binding.host_workdir
            if refusal:
                return ToolResult(refusal, is_error=True, raw_output=_raw(approved, "refused"))
            if isinstance(approved, GatedPlan):
                refusal = await _team_approval(approved, ctx)
                if refusal:
                    raw = _raw(approved, "refused")
                    return ToolResult(refusal, is_error=True, raw_output=raw)
            executable = cli.find_program(args.get("program"))
            done = await _apply(executable, approved, workdir, ctx)
        except cli.TerraformError as exc:
            raise ToolError(str(exc)) from None
        finally:
            approved.cleanup()
        values = set(sensitive_values(ctx.cwd)) | approved.sensitive
        inside = f"{GUARD_MOUNT}/{approved.copy.name}"
        output = done.output.replace(str(approved.copy), approved.shown_path)
        output = mask_text(output.replace(inside, approved.shown_path), values)
        stale = stale_message(output)
        if stale:
            return ToolResult(
                f"{stale}\n\n{output}",
                is_error=True,
                raw_output=_raw(approved, "stale", done.returncode),
            )
        if done.returncode != 0:
            return ToolResult(
                f"Apply of {approved.shown_path} failed (exit {done.returncode}):\n{output}",
                is_error=True,
                raw_output=_raw(approved, "failed", done.returncode),
            )
        head = (
            f"Applied the reviewed plan {approved.shown_path} "
            f"(sha256 {approved.sha256[:12]}): {approved.plan.to_dict()['summary']}"
        )
        return ToolResult(f"{head}\n\n{output}", raw_output=_raw(approved, "applied", 0))


async def _apply(
    executable: str, approved: ApprovedPlan, workdir: Path, ctx: ToolContext
) -> cli.Completed:
    """Apply the private copy, in the sandbox (writable: the working directory and the
    user's writable paths) when bubblewrap works: the workspace's provider plugins run
    there, as they would for an apply through bash."""
    args = ["apply", "-input=false", "-no-color"]
    env = cli.automation_env(approved.binding.env(ctx.env))
    share = approved.copy.parent
    # The sandbox's only way to the cloud APIs: the egress proxy (issue 31).
    route = None
    if unusable_reason() is None:
        # The approved apply is a guarded run of its own: its cloud operations use the
        # brokered credentials without a second question.
        run = GuardedRun("terraform", ("terraform", *args), approved=True)
        route = await open_route(
            share / inside.SOCKET_NAME, ctx.settings, ctx.ask_egress, run=run, audit=ctx.audit
        )
    try:
        confined = confine(
            executable,
            [*args, f"{GUARD_MOUNT}/{approved.copy.name}"],
            workdir,
            env,
            share=share,
            writable=True,
            settings=ctx.settings,
            egress_port=route.port if route else None,
        )
        if confined is None:  # reduced mode: bash runs unsandboxed too
            run = [executable, *args, str(approved.copy)]
            return await cli.run(run, workdir, env, APPLY_TIMEOUT)
        try:
            return await cli.run(
                confined.argv, workdir, confined.env, APPLY_TIMEOUT, confined.pass_fds, True
            )
        finally:
            confined.close()
    finally:
        if route is not None:
            await route.close()


async def _team_approval(approved: GatedPlan, ctx: ToolContext) -> str | None:
    """The team's gate (:class:`~iac_kernel.terraform.gate.Gate`, shared with applies
    typed in bash): make or find the approval record of this plan and binding, wait
    until it is decided, and spend it on this apply; returns why not."""
    card = await asyncio.to_thread(_card, approved, ctx)
    pull = approved.pull
    held = pull.gate(approved, card) if pull else gate.Gate(approved, approved.requirement, card)
    refusal = await held.wait(lambda text: _say(ctx, text))
    if refusal:
        return refusal
    # The wait may have been long: what the approvers saw must still be what runs.
    refusal = await asyncio.to_thread(
        lambda: approved.recheck() or approved.binding.changed() or held.spend()
    )
    if refusal:
        return refusal
    approved.audit_base["approval"] = held.audit()
    _say(ctx, held.applying_text())
    return None


def _card(approved: ApprovedPlan, ctx: ToolContext) -> dict[str, Any]:
    """The plan card the user saw with the question, masked as it was shown."""
    return mask_value(mask_shown(approved.summary(), ctx.cwd, fresh=False), approved.sensitive)


def _say(ctx: ToolContext, text: str) -> None:
    """A line of the running call's status (its card, the ACP tool call's content)."""
    if ctx.on_output is not None:
        ctx.on_output(text)


def _raw(approved: ApprovedPlan, outcome: str, code: int | None = None) -> dict[str, Any]:
    raw = {"outcome": outcome, "plan_file": approved.shown_path, "sha256": approved.sha256}
    return raw if code is None else {**raw, "exit": code}
