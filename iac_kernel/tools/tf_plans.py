"""Plans as data for the model: the terraform_plan and terraform_plan_detail tools, and
the plans a bash call saved.

``terraform_plan`` runs ``terraform|tofu plan -out=FILE`` in the workspace, reads
``show -json FILE`` and returns the compact summary table (the structured plan rides in
``raw_output["plan"]``, and every row in ``plan_rows`` for the plan card).
``terraform_plan_detail`` gives one address's
attribute changes from the latest plan (or a named plan file). A bash call that ran
``plan -out=FILE`` (itself, or through a script the guard saw) gets the same summary
appended and the same plan card (:func:`pick_up_plans`).

Given ``pull_request``, ``terraform_plan`` plans a request's head instead (issue 44, item
3): the head is checked out in a scratch worktree (:func:`iac_kernel.forge.review.checkout`,
git through the guard), ``init`` and ``plan -out`` run there through the guard as always,
and the plan is posted to the request as a comment carrying its hash, so that
``terraform_apply`` of that plan file with the same ``pull_request`` is bound to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
from pathlib import Path
from typing import Any

from iac_kernel.forge import review as pull_requests
from iac_kernel.forge.remote import ForgeError
from iac_kernel.guard.call import GuardedCall, SandboxRequired
from iac_kernel.terraform import cli, policy
from iac_kernel.terraform.commands import PlanTarget, plan_outputs, split_argv
from iac_kernel.terraform.plan import Plan, PlanFile, parse_plan
from iac_kernel.terraform.review import stale_message
from iac_kernel.terraform.sensitive import mask_text, values_from_show
from iac_kernel.terraform.summary import card_rows, detail_text, model_text
from iac_kernel.terraform.workspace import is_plan_file, remember, remember_plan_file
from iac_kernel.textsafe import code_span, printable
from iac_kernel.tools.base import (
    Category,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    resolve_path,
    shown_path,
)

#: (workspace root, plan path) -> the last plan read from that file.
_PLANS: dict[tuple[str, str], Plan] = {}
_LATEST: dict[str, str] = {}
PLAN_TIMEOUT = 1800.0
OUTPUT_TAIL = 3000


def record_plan(cwd: Path, path: Path, plan: Plan) -> None:
    """Remember ``plan`` as the latest of the session's workspace."""
    key = str(Path(cwd).resolve())
    _PLANS[(key, str(path.resolve()))] = plan
    _LATEST[key] = str(path.resolve())


def _real(path: Path) -> str:
    return os.path.realpath(path)


def latest_plan_path(cwd: Path) -> Path | None:
    latest = _LATEST.get(str(Path(cwd).resolve()))
    return Path(latest) if latest else None


def workdir_of(args: dict[str, Any], ctx: ToolContext) -> Path:
    workdir = resolve_path(ctx, args["dir"]) if args.get("dir") else ctx.cwd
    if not workdir.is_dir():
        raise ToolError(f"not a directory: {args.get('dir')}")
    return workdir


async def read_plan(
    executable: str, path: Path, workdir: Path, cwd: Path, refresh_only: bool = False
) -> tuple[Plan, set[str]]:
    """Parse a plan file (show -json, read once), attach checkov's result, remember its
    sensitive values; returns the plan and those values."""
    doc = await cli.show_json(executable, path, workdir)
    values = values_from_show(doc)  # collected once: parsing and masking use them
    file = PlanFile.of(path, shown_path(path, cwd))
    plan = parse_plan(doc, file, cli.program_name(executable), refresh_only, values)
    await policy.attach(plan, doc, workdir)
    sha = plan.file.sha256 if plan.file else ""
    remember(cwd, f"plan:{_real(path)}:{sha}", values)
    remember_plan_file(cwd, path, values)
    record_plan(cwd, path, plan)
    return plan, values


async def pick_up_plans(command: str, cwd: Path, result: ToolResult) -> None:
    """What follows a bash call: the summary and plan card of each plan file it saved
    (named on its command line, or of any terraform/tofu ``plan`` the guard saw run), and
    "saved plan is stale" as a clear failure."""
    with contextlib.suppress(Exception):
        for target in _plan_targets(command, cwd, result.raw_output):
            if not target.path.is_file():
                continue
            executable = cli.find_program(target.program)
            plan, _ = await read_plan(
                executable, target.path, target.workdir, cwd, target.refresh_only
            )
            result.content = f"{result.content}\n\n{model_text(plan)}"
            raw = result.raw_output if isinstance(result.raw_output, dict) else {}
            result.raw_output = {**raw, "plan": plan.to_dict()}
            result.plan_rows = card_rows(plan)
    stale = stale_message(result.content)
    if stale:
        result.content = f"{stale}\n\n{result.content}"
        result.is_error = True


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


PROGRAM_SCHEMA = {
    "type": "string",
    "enum": ["terraform", "tofu"],
    "description": "terraform or tofu (default: whichever is installed, terraform first).",
}
DIR_SCHEMA = {
    "type": "string",
    "description": "The Terraform root module directory, relative to the working directory.",
}


class TerraformPlanTool(Tool):
    name = "terraform_plan"
    description = (
        "Make a saved plan: runs `terraform plan -out=FILE` (or tofu) in a root module and "
        "returns a compact summary (counts, a table of changing addresses with deletes and "
        "replaces first, output changes, drift, failed policy checks). The user sees a plan "
        "card. Use mode `refresh-only` to check for drift. Apply the saved file with "
        "terraform_apply after the user reviewed it; ask terraform_plan_detail for one "
        "address's attribute changes. With pull_request, plans that pull/merge request's "
        "head (checked out in a scratch worktree) and posts the plan to it as a comment; "
        "terraform_apply with the same pull_request then applies that plan once reviewed."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "dir": DIR_SCHEMA,
            "out": {"type": "string", "description": "Plan file name (default tfplan)."},
            "mode": {"type": "string", "enum": ["normal", "refresh-only", "destroy"]},
            "var_files": {"type": "array", "items": {"type": "string"}},
            "vars": {"type": "object", "description": "Variable values: {name: value}."},
            "targets": {"type": "array", "items": {"type": "string"}},
            "program": PROGRAM_SCHEMA,
            "pull_request": {
                **pull_requests.PULL_REQUEST_SCHEMA,
                "description": "Plan this pull/merge request's head instead of the folder "
                "(its number or address) and post the plan to it as a comment.",
            },
        },
        "required": [],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE
    shows_contents = True

    def title(self, args: dict[str, Any]) -> str:
        mode = args.get("mode") if isinstance(args, dict) else None
        where = args.get("dir") if isinstance(args, dict) else None
        return (
            self.name
            + (f" {mode}" if mode and mode != "normal" else "")
            + (f": {where}" if where else "")
        )

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return _named_paths(args, ctx, "out")

    def ask_reason(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """What the plan runs and reads, and that it changes nothing."""
        if not isinstance(args, dict):
            return None
        program = args.get("program") if args.get("program") in ("terraform", "tofu") else None
        name = args.get("out") if isinstance(args.get("out"), str) and args["out"] else "tfplan"
        mode = args.get("mode") if args.get("mode") in ("refresh-only", "destroy") else None
        command = f"{program or 'terraform'} plan -out={name}" + (f" -{mode}" if mode else "")
        where = args.get("dir") if isinstance(args.get("dir"), str) and args["dir"] else None
        place = f"in {code_span(printable(where))}" if where else "in this folder"
        ref = args.get("pull_request")
        if ref is not None:
            return (
                f"It fetches the head of pull request {code_span(printable(str(ref)))} into a "
                "scratch worktree (in the repository's git folder), runs terraform init and "
                f"{code_span(printable(command))} {place} of it in the sandbox (the request's "
                "code runs there like any command), and posts the plan to the request as a "
                "comment. It changes no infrastructure."
            )
        return (
            f"It runs {code_span(printable(command))} {place}: terraform and the workspace's "
            "provider plugins read the state and query the real resources through the "
            f"providers' APIs, then write the plan file {code_span(printable(name))}. "
            "It changes no infrastructure; applying the plan is asked on its own."
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        if args.get("pull_request") is not None:
            return await self._plan_pull_request(args, ctx)
        result, _plan, _values = await self._plan(args, ctx)
        return result

    async def _plan_pull_request(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Plan a request's head in its scratch worktree and post the plan to it."""
        try:
            executable = cli.find_program(args.get("program"), {**ctx.env} or None)
            made = await pull_requests.checkout(
                args["pull_request"], workdir_of(args, ctx), pull_requests.Where.of(ctx)
            )
        except (cli.TerraformError, ForgeError) as exc:
            raise ToolError(str(exc)) from None
        # Everything below runs in the worktree, as the same guarded calls as ever.
        inner = dataclasses.replace(ctx, cwd=made.root)
        program = cli.program_name(executable)
        init = [program, *_chdir(made.folder, made.root), "init", "-input=false", "-no-color"]
        try:
            done = await guarded_run(init, inner, PLAN_TIMEOUT)
        except SandboxRequired as exc:
            raise ToolError(str(exc)) from None
        if done.returncode != 0:
            tail = done.output[-OUTPUT_TAIL:]
            raise ToolError(
                f"{program} init of {made.pull.name} failed ({done.returncode}):\n{tail}"
            )
        result, plan, values = await self._plan({**args, "dir": str(made.folder)}, inner)
        if plan is None or plan.file is None:
            return result
        text = pull_requests.plan_comment(made, plan, values)
        try:
            posted = await made.pull.comment(text)
        except ForgeError as exc:
            result.content += f"\n\nThe plan could not be posted to {made.pull.name}: {exc}"
            result.is_error = True
            return result
        apply_args = {
            "plan": plan.file.path,
            "dir": str(made.folder),
            "pull_request": made.pull.number,
        }
        result.content = (
            f"Planned {made.pull.name} at {made.facts.head[:12]} in {made.folder} and posted "
            f"the plan (sha256 {plan.file.sha256[:12]}) to it: {posted}\n"
            f"Once it is approved and merged, apply exactly this plan with terraform_apply "
            f"{json.dumps(apply_args)}.\n\n{result.content}"
        )
        raw = result.raw_output if isinstance(result.raw_output, dict) else {}
        result.raw_output = {
            **raw,
            "pull_request": {
                "number": made.pull.number,
                "head": made.facts.head,
                "comment": posted,
                "plan_file": str(made.folder / plan.file.path),
                "plan_sha256": plan.file.sha256,
            },
        }
        return result

    async def _plan(
        self, args: dict[str, Any], ctx: ToolContext
    ) -> tuple[ToolResult, Plan | None, set[str]]:
        """``plan -out`` in the call's folder: the result, and the plan read with its
        sensitive values (None: it failed)."""
        try:
            executable = cli.find_program(args.get("program"), {**ctx.env} or None)
        except cli.TerraformError as exc:
            raise ToolError(str(exc)) from None
        workdir = workdir_of(args, ctx)
        name = str(args.get("out") or "tfplan")
        out = workdir / name
        mode = args.get("mode") or "normal"
        program = cli.program_name(executable)
        # Run by name inside the guard (as bash would), relative to the session's cwd.
        argv = [program, *_chdir(workdir, ctx.cwd), "plan", "-input=false", "-no-color"]
        argv.append(f"-out={name}")
        if mode != "normal":
            argv.append(f"-{mode}")
        argv += [f"-var-file={f}" for f in args.get("var_files") or []]
        argv += [f"-var={k}={_var(v)}" for k, v in (args.get("vars") or {}).items()]
        argv += [f"-target={t}" for t in args.get("targets") or []]
        try:
            with cli.show_when_written(executable, out, workdir):  # beside terraform's end
                done = await guarded_run(argv, ctx, PLAN_TIMEOUT)
        except (cli.TerraformError, SandboxRequired) as exc:
            raise ToolError(str(exc)) from None
        if done.returncode != 0:
            plan = Plan(program=program, errored=True, errors=cli.errors_of(done.output))
            if not plan.errors:
                plan.errors = [cli.first_error(done.output)]
            tail = done.output[-OUTPUT_TAIL:]
            failed = ToolResult(
                f"{model_text(plan)}\n\n{program} plan exited {done.returncode}:\n{tail}",
                is_error=True,
                raw_output={"plan": plan.to_dict(), "exit_code": done.returncode},
            )
            return failed, None, set()
        try:
            plan, values = await read_plan(
                executable, out, workdir, ctx.cwd, mode == "refresh-only"
            )
        except cli.TerraformError as exc:
            raise ToolError(str(exc)) from None
        text = mask_text(model_text(plan), values)
        raw = {"plan": plan.to_dict(), "exit_code": 0}
        return ToolResult(text, raw_output=raw, plan_rows=card_rows(plan)), plan, values


def _named_paths(args: Any, ctx: ToolContext, key: str) -> list[Path]:
    """The ``dir`` and the file ``key`` names in it (for the outside-cwd rule)."""
    if not isinstance(args, dict):
        return []
    where, name = args.get("dir"), args.get(key)
    base = resolve_path(ctx, where) if isinstance(where, str) and where.strip() else None
    found = [base] if base is not None else []
    if isinstance(name, str) and name.strip():
        found.append((base or ctx.cwd) / name)
    return found


def _chdir(workdir: Path, cwd: Path) -> list[str]:
    relative = os.path.relpath(workdir, cwd)
    return [] if relative == "." else [f"-chdir={relative}"]


async def guarded_run(argv: list[str], ctx: ToolContext, seconds: float) -> cli.Completed:
    """``argv`` through the same guarded execution as bash (sandbox, launchers, exec-time
    approval of changing commands), in the session's working directory."""
    env = cli.automation_env(ctx.env)
    async with GuardedCall(
        ctx.cwd, ctx.settings, env, ctx.ask_exec, ask_egress=ctx.ask_egress
    ) as guard:
        return await cli.run(guard.wrap(argv), ctx.cwd, guard.env, seconds)


def _var(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class TerraformPlanDetailTool(Tool):
    name = "terraform_plan_detail"
    description = (
        "One resource address's detail from a saved plan: action, reason, and each "
        "attribute change before -> after (sensitive values masked). Defaults to the latest "
        "plan made in this session."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "address": {"type": "string", "minLength": 1},
            "plan": {"type": "string", "description": "Plan file (default: the latest)."},
            "dir": DIR_SCHEMA,
            "program": PROGRAM_SCHEMA,
        },
        "required": ["address"],
        "additionalProperties": False,
    }
    kind = "read"
    category = Category.READ

    subject = "address"
    shows_contents = True

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return _named_paths(args, ctx, "plan")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        workdir = workdir_of(args, ctx)
        path = (workdir / args["plan"]) if args.get("plan") else latest_plan_path(ctx.cwd)
        if path is None:
            raise ToolError(f"no plan yet in this session: make one with {TerraformPlanTool.name}")
        if not path.is_file() or not is_plan_file(path):
            raise ToolError(f"not a saved plan file: {shown_path(path, ctx.cwd)}")
        plan = _PLANS.get((_real(ctx.cwd), _real(path)))
        if plan is None or plan.file is None or plan.file.sha256 != PlanFile.of(path).sha256:
            try:
                executable = cli.find_program(args.get("program"))
                plan, _values = await read_plan(executable, path, path.parent, ctx.cwd)
            except cli.TerraformError as exc:
                raise ToolError(str(exc)) from None
        return ToolResult(
            detail_text(plan, args["address"]),
            raw_output={"address": args["address"], "plan_file": shown_path(path, ctx.cwd)},
        )
