"""pull_request: the session's change leaves as a pull request (GitHub, GitHub Enterprise)
or a merge request (GitLab), carrying the reviewed plan (issue 44, item 1).

Before the question (:meth:`PullRequestTool.review`), everything that can refuse does:
the repository and its remote, the forge (from the remote's URL), the token bound to the
forge's API host (and that the forge accepts it and shows the project), the branch (it
must exist neither here nor on the remote), the files the session changed (its
``write_file`` / ``edit_file`` calls: :func:`session_changes`), the saved plan if one is
named (read and summarised like ``terraform_apply`` reads it: sandboxed, its hash and
binding fixed), the approval rule that applies, the session notebook and the body. Then
the commit is made (no ref, index or working file changes: :mod:`iac_kernel.forge.gitrun`)
and the question shows its diff. The run pushes exactly that commit as the new branch,
through the guard, and opens the request; if the forge then refuses, the pushed branch is
removed again. Bad input is one line; nothing is pushed halfway.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.forge import body as bodies
from iac_kernel.forge import gitrun
from iac_kernel.forge.clients import (
    ForgeClient,
    Opened,
    Token,
    api_token,
    client_for,
    note_opened,
)
from iac_kernel.forge.notebook import session_notebook
from iac_kernel.forge.remote import GITLAB, ForgeError
from iac_kernel.redact import redact
from iac_kernel.team.rules import ACTIONS, Change, rules_for
from iac_kernel.terraform import cli
from iac_kernel.terraform.binding import bind
from iac_kernel.terraform.review import ApprovedPlan, review_plan_file
from iac_kernel.terraform.sensitive import mask_text
from iac_kernel.terraform.summary import card_rows
from iac_kernel.terraform.workspace import is_plan_file, sensitive_values
from iac_kernel.tools.base import (
    Category,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    shown_path,
)
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_masking import mounts
from iac_kernel.tools.tf_plans import DIR_SCHEMA, PROGRAM_SCHEMA, TerraformPlanTool, workdir_of

#: Longest diff the question shows (the commit holds it all; ``git show`` has the rest).
QUESTION_DIFF_CHARS = 60_000
#: The default branch prefix.
BRANCH_PREFIX = "iac-kernel/"


def session_changes(
    messages: list[dict[str, Any]], tools: dict[str, Tool], cwd: Path
) -> list[Path]:
    """The files the session changed: the paths of its tool calls that record a change
    (``Tool.stored_diff``: write_file, edit_file) and did not fail, in first-change order."""
    failed = {
        block.get("tool_use_id")
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("is_error")
    }
    ctx = ToolContext(cwd=cwd, settings=None)
    found: dict[Path, None] = {}
    for message in messages:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") != "tool_use" or block.get("id") in failed:
                continue
            tool = tools.get(str(block.get("name")))
            args = block.get("input") if isinstance(block.get("input"), dict) else {}
            try:
                if tool is None or tool.stored_diff(args) is None:
                    continue
                for path in tool.paths(args, ctx):
                    found.setdefault(path, None)
            except Exception:  # a stored input may be anything
                continue
    return list(found)


def request_prompt(title: str = "") -> str:
    """What ``%pr [TITLE]`` asks the agent: the tool's call, with the summary the body
    needs written from the session (the tool's name typed once, here)."""
    named = f' titled "{title}"' if title else ""
    return (
        f"Open a pull request{named} of the files this session changed with the "
        f"`{PullRequestTool.name}` tool. Write the summary for the reviewers from this "
        "session: what changed and why. If a saved plan of this change was made, name it."
    )


#: ``%pr review NUMBER`` / ``%pr apply NUMBER``: the second word names a request.
_REQUEST_REF = re.compile(r"^(?:[#!]?\d+|https?://\S+)$")


def subcommand_prompt(args: str) -> str | None:
    """What ``%pr review NUMBER [DIR]`` and ``%pr apply NUMBER [PLAN]`` ask the agent (the
    tools' names typed once, in their classes); None for any other ``%pr`` (a title)."""
    words = args.split()
    if len(words) < 2 or len(words) > 3 or words[0] not in ("review", "apply"):
        return None
    if not _REQUEST_REF.match(words[1]):
        return None
    ref, extra = words[1], (words[2] if len(words) == 3 else "")
    quoted = json.dumps(int(ref.lstrip("#!")) if ref.lstrip("#!").isdigit() else ref)
    if words[0] == "review":
        where = f', "dir": {json.dumps(extra)}' if extra else ""
        return (
            f"Review pull request {ref}: plan its head with the `{TerraformPlanTool.name}` tool "
            f'({{"pull_request": {quoted}{where}}}), which checks it out in a scratch worktree '
            "and posts the plan to the request. Then tell me what the plan changes."
        )
    plan = (
        f"the saved plan {extra}"
        if extra
        else "the saved plan this session made or reviewed for it (the one whose SHA-256 it "
        "carries)"
    )
    return (
        f"Apply {plan} as pull request {ref} was reviewed: call the "
        f"`{TerraformApplyTool.name}` tool with that plan file, its folder as `dir` and "
        f'"pull_request": {quoted}. It is refused unless the request was approved by another '
        "person and merged with exactly this plan."
    )


def slug(text: str, limit: int = 40) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].rstrip("-") or "change"


@dataclass
class PullRequestReview:
    """What the question shows and the run does: the commit, the branch, the request."""

    prepared: gitrun.Prepared
    title: str
    body: str
    client: ForgeClient
    token: Token
    draft: bool
    plan: ApprovedPlan | None = None
    rule: str = ""
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        p = self.prepared
        remote = p.remote
        noun = self.client.noun
        lines = [
            f"Pushes commit `{p.commit[:12]}` as the new branch `{p.branch}` to `{remote.name}` "
            f"({remote.host}) and opens a {noun} into `{p.base}` on {remote.forge_name} "
            f"({remote.api_url}, token {self.token.name}).",
            f"Title: {self.title}",
            "Files: " + ", ".join(f"`{f}`" for f in p.files),
        ]
        if p.notebook_path:
            lines.append(f"Session notebook: `{p.notebook_path}` (masked)")
        if p.left_out:
            lines.append("Left out: " + "; ".join(p.left_out))
        if p.others:
            shown = ", ".join(f"`{f}`" for f in p.others[:20])
            more = f" and {len(p.others) - 20} more" if len(p.others) > 20 else ""
            lines.append(f"Not included (changed outside this session): {shown}{more}")
        if self.plan is not None:
            lines.append(f"Plan: {self.plan.shown_path}, sha256 {self.plan.sha256}")
        if self.rule:
            lines.append(f"Approval: {self.rule}")
        diff = p.diff
        if len(diff) > QUESTION_DIFF_CHARS:
            cut = len(diff) - QUESTION_DIFF_CHARS
            diff = (
                diff[:QUESTION_DIFF_CHARS] + f"\n… {cut} more characters (git show {p.commit[:12]})"
            )
        return "\n".join(lines) + "\n\n" + bodies.fenced(diff, "diff")

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"kind": "pull_request", "text": self.text()}
        if self.plan is not None:  # the plan card beside the question
            summary["plan"] = self.plan.plan.to_dict()
            summary["rows"] = card_rows(self.plan.plan)
        return summary

    def audit_record(self) -> dict[str, Any]:
        p = self.prepared
        record = {
            "kind": "pull_request",
            "forge": p.remote.forge,
            "remote": p.remote.host,
            "project": p.remote.project,
            "branch": p.branch,
            "base": p.base,
            "commit": p.commit,
            "files": list(p.files),
        }
        if self.plan is not None:
            record["plan_file"] = self.plan.shown_path
            record["plan_sha256"] = self.plan.sha256
        return record


class PullRequestTool(Tool):
    name = "pull_request"
    description = (
        "Propose the files this session changed (its write_file/edit_file calls) as a pull "
        "request (GitHub, GitHub Enterprise) or merge request (GitLab), chosen from the git "
        "remote's URL. Makes a new branch with exactly those files and the session's "
        "notebook, shows the user the diff, pushes it and opens the request with a body for "
        "the reviewers: your summary, the saved plan's table (destroys first), its SHA-256 "
        "and bound inputs, checkov findings and the approval rule. Name the saved plan "
        "(made with terraform_plan) the change was reviewed with. Returns the address."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "description": "The request's title."},
            "summary": {
                "type": "string",
                "minLength": 1,
                "description": "What changed and why, for the reviewers (Markdown).",
            },
            "plan": {
                "type": "string",
                "description": "The saved plan file the change was planned with (optional).",
            },
            "dir": DIR_SCHEMA,
            "program": PROGRAM_SCHEMA,
            "branch": {"type": "string", "description": "The new branch (default: derived)."},
            "base": {"type": "string", "description": "Target branch (default: the project's)."},
            "remote": {"type": "string", "description": "The git remote (default: origin)."},
            "draft": {"type": "boolean", "default": False, "description": "Open as a draft."},
        },
        "required": ["title", "summary"],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE
    subject = "title"

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        title = args.get("title") if isinstance(args, dict) else None
        if not isinstance(title, str) or not title.strip():
            return False, None  # not a call that can run (its check says why)
        review = ctx.review if isinstance(ctx.review, PullRequestReview) else None
        where = review.prepared.remote.host if review else "the remote"
        return True, f"It pushes a new branch to {where} and opens a request for review."

    async def review(self, args: dict[str, Any], ctx: ToolContext) -> PullRequestReview:
        args = self.check(args)
        changed = ctx.session_changes() if ctx.session_changes is not None else None
        if changed is None:
            raise ToolError("this session's changes are not known here: nothing to propose")
        env = {**os.environ, **ctx.env}
        try:
            return await self._prepare(args, ctx, changed, env)
        except ForgeError as exc:
            raise ToolError(str(exc)) from None

    async def _prepare(
        self, args: dict[str, Any], ctx: ToolContext, changed: list[Path], env: dict[str, str]
    ) -> PullRequestReview:
        plan = await self._plan(args, ctx, env) if args.get("plan") else None
        # The guarded call is the repository's: git writes its objects under its top folder.
        top = gitrun.find_root(Path(ctx.cwd))
        git = gitrun.Git(top, ctx.settings, env, ctx.ask_exec, ctx.ask_egress, None, mounts)
        async with git:
            root, head, branch = await gitrun.repository(git, top)
            remote = await gitrun.find_remote(git, branch, env, args.get("remote"))
            token = api_token(remote)
            client = await asyncio.to_thread(client_for, remote, token)
            default_base = await asyncio.to_thread(client.check)
            base = args.get("base") or default_base
            new = gitrun.valid_branch(
                args.get("branch") or f"{BRANCH_PREFIX}{slug(args['title'])}-{int(time.time())}"
            )
            taken = await gitrun.branch_taken(git, remote, new)
            if taken:
                raise ForgeError(f"{taken}: name another branch")
            wanted = _relative(changed, root)
            if not wanted:
                raise ForgeError(
                    "this session changed no file in the repository (write_file or edit_file): "
                    "nothing to propose"
                )
            files, left_out, others = await gitrun.changed_paths(git, wanted)
            if not files:
                raise ForgeError(
                    "none of the files this session changed differs from HEAD: "
                    + "; ".join(left_out[:5])
                )
            notebook_path = f"{gitrun.RUNS_DIR}/{new.replace('/', '-')}.ipynb"
            values = set(sensitive_values(Path(ctx.cwd))) | (plan.sensitive if plan else set())
            events = ctx.session_events() if ctx.session_events is not None else []
            notebook = await asyncio.to_thread(
                session_notebook, events, values, plan.plan if plan else None, args["title"]
            )
            rule = _rule_text(plan, Path(ctx.cwd))
            link = _blob_url(remote, new, notebook_path)
            message = f"{args['title']}\n\n{_masked(args['summary'], values)}\n"
            commit, diff = await gitrun.make_commit(
                git, head, files, message, {notebook_path: notebook}
            )
            body = bodies.build(
                bodies.BodyParts(
                    title=args["title"],
                    summary=_masked(args["summary"], values),
                    files=files,
                    plan=plan.plan if plan else None,
                    bound=bodies.bound_lines(plan.binding, root) if plan else (),
                    rule=rule,
                    notebook=link,
                    commit=commit,  # the plan marker: an apply given this request reads it
                )
            )
        prepared = gitrun.Prepared(
            root, remote, head, base, new, commit, files, diff, left_out, others, notebook_path
        )
        return PullRequestReview(
            prepared, args["title"], body, client, token, bool(args.get("draft")), plan, rule
        )

    async def _plan(
        self, args: dict[str, Any], ctx: ToolContext, env: dict[str, str]
    ) -> ApprovedPlan:
        """The saved plan, read like terraform_apply reads it (sandboxed ``show``)."""
        workdir = workdir_of(args, ctx)
        path = workdir / args["plan"]
        if not path.is_file() or not is_plan_file(path):
            raise ToolError(f"not a saved plan file: {args['plan']}")
        try:
            executable = cli.find_program(args.get("program"))
            approved = await asyncio.to_thread(
                review_plan_file, executable, path, workdir, shown_path(path, ctx.cwd)
            )
        except cli.TerraformError as exc:
            raise ToolError(str(exc)) from None
        approved.cleanup()  # the bytes are not applied here: only their hash and summary
        approved.binding = await asyncio.to_thread(
            bind, approved.plan.program, None, "apply", str(workdir), env, []
        )
        return approved

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.check(args)
        review = ctx.review
        if not isinstance(review, PullRequestReview):
            raise ToolError("Not run: no reviewed commit backs this call.")
        prepared = review.prepared
        env = {**os.environ, **ctx.env}
        asker = _PushAsker(ctx.ask_egress, api_host_of(prepared))
        git = gitrun.Git(prepared.root, ctx.settings, env, ctx.ask_exec, asker, ctx.audit, mounts)
        try:
            async with git:
                await gitrun.push(git, prepared)
                try:
                    opened = await asyncio.to_thread(
                        review.client.open,
                        prepared.branch,
                        prepared.base,
                        review.title,
                        review.body,
                        review.draft,
                    )
                except ForgeError as exc:
                    problem = await gitrun.unpush(git, prepared)
                    after = (
                        f"the branch {prepared.branch} was removed again"
                        if problem is None
                        else f"the branch {prepared.branch} stays on {prepared.remote.name} "
                        f"({problem}): delete it"
                    )
                    raise ToolError(f"{exc}; {after}") from None
        except ForgeError as exc:
            raise ToolError(str(exc)) from None
        note_opened(opened)  # the status item shows it
        return _opened_result(review, opened)


def api_host_of(prepared: gitrun.Prepared) -> str:
    """The push's host as the egress proxy names it (no port)."""
    return prepared.remote.host.partition(":")[0]


class _PushAsker:
    """``ctx.ask_egress`` during the approved push: the remote's host and its
    ``git-receive-pack`` (the push the user just approved with the diff) need no second
    question; anything else is asked as before."""

    def __init__(self, ask: Any, host: str) -> None:
        self.ask = ask
        self.host = host

    async def __call__(self, host: str, port: int) -> tuple[bool, str]:
        if host.lower() == self.host:
            return True, ""
        if self.ask is None:
            return False, f"{host} is not the remote's host"
        return await self.ask(host, port)

    async def operation(self, operation: dict[str, Any], run: Any) -> tuple[bool, str]:
        url = str(operation.get("url") or "").partition("?")[0]
        same = str(operation.get("host") or "").lower() == self.host
        if same and run.program == "git" and url.endswith("/git-receive-pack"):
            return True, ""
        ask: Callable[..., Awaitable[tuple[bool, str]]] | None = getattr(
            self.ask, "operation", None
        )
        if ask is None:
            return False, "no one is there to approve it"
        return await ask(operation, run)


def _opened_result(review: PullRequestReview, opened: Opened) -> ToolResult:
    p = review.prepared
    noun = opened.noun
    number = f"!{opened.number}" if p.remote.forge == GITLAB else f"#{opened.number}"
    text = (
        f"Opened {noun} {number}: {opened.url}\n"
        f"Branch {p.branch} (commit {p.commit[:12]}) into {p.base} on {p.remote.forge_name}; "
        f"{len(p.files)} file(s)"
        + (f", plan sha256 {review.plan.sha256[:12]}" if review.plan else "")
        + "."
    )
    raw = {
        "outcome": "opened",
        "url": opened.url,
        "number": opened.number,
        "forge": p.remote.forge,
        "branch": p.branch,
        "base": p.base,
        "commit": p.commit,
        "files": list(p.files),
    }
    if review.plan is not None:
        raw["plan_sha256"] = review.plan.sha256
    return ToolResult(text, raw_output=raw)


def _relative(paths: list[Path], root: Path) -> list[str]:
    real_root = Path(os.path.realpath(root))
    found = []
    for path in paths:
        try:
            found.append(str(Path(os.path.realpath(path)).relative_to(real_root)))
        except ValueError:
            continue  # outside the repository: never committed
    return found


def _masked(text: str, values: set[str]) -> str:
    return mask_text(redact(text), values)


def _rule_text(plan: ApprovedPlan | None, cwd: Path) -> str:
    """The approval rule that applies to the plan's change, in words."""
    if plan is None:
        return "No plan was named: the rules are evaluated when a plan is applied."
    binding = plan.binding
    workspace = binding.workspace if binding is not None else ""
    rows = [(r.type, r.action) for r in plan.plan.changed if r.action in ACTIONS]
    change = Change.of(workspace, rows, [str(c.get("check_id")) for c in plan.plan.checks])
    folder = binding.host_workdir if binding is not None else cwd
    needed = rules_for(folder).evaluate(change)
    if needed.blocked:
        return f"Blocked: {needed.text()}"
    if not needed.needed:
        return "No approval rule applies to this change."
    return f"{needed.text()} (rules: {', '.join(needed.rules)})"


def _blob_url(remote: Any, branch: str, path: str) -> str:
    middle = "/-/blob/" if remote.forge == GITLAB else "/blob/"
    return f"{remote.web_url}{middle}{branch}/{path}"
