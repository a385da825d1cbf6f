"""The guard's exec-time review of ``terraform|tofu apply|destroy`` (commands run through
bash, scripts included): the one question such a command gets.

Registered with :mod:`iac_kernel.guard.approval.reviews` when the tools are built. The review
reads the exact argv and environment the program would get, replays how terraform
builds its arguments (:mod:`iac_kernel.terraform.commands`: ``TF_CLI_ARGS`` and
``TF_CLI_ARGS_apply``, ``--``, Go flag spellings), and then:

* a command line terraform would reject, or a saved plan file that is not there (yet),
  is refused without a question: nothing reviewed could back it;
* with a saved plan, the plan's bytes are copied into the guard's private directory
  (read-only in the sandbox) and summarised (destroys and replaces first, failed
  checks); terraform is pointed at that copy (the environment's arguments moved into
  the argv), and the approval is re-checked right before the exec: a plan file changed
  meanwhile is refused, and in any case the approved bytes are what terraform applies;
* without one, the question says so and what the flags will do (destroy, auto-approve,
  targets, replacements, refresh-only).

A team's approval rules (docs/approvals.md) go through the same gate as the
``terraform_apply`` tool's (:mod:`iac_kernel.terraform.gate`): a saved plan a rule holds
back is, once the user allowed it, bound to an approval record (the plan's hash and the
binding's inputs); the exec waits (``Review.hold``, saying what it waits for on the
command's stderr) until other people approved it, and the approval is spent right before
terraform starts on the approved copy. An apply without a saved plan cannot be bound: it
is refused where a rule could hold back a change of its workspace. A rules file that
cannot be used refuses every apply. Without rules nothing of this happens.

Each review asks for an audit record (``Review.audit``) with the state's lineage and
serial before and after.

Every terraform/tofu exec, read-only ones too (:func:`observe_exec`), makes the values it
gives to variables its configuration declares sensitive known secrets before it runs:
``plan`` prints a value its validation rejects, ``console`` what it is asked; so are the
backend secrets its ``-backend-config KEY=VALUE`` words give and its ``TF_ENCRYPTION``'s.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from iac_kernel.guard.approval import reviews
from iac_kernel.guard.approval.reviews import ExecInfo, Review
from iac_kernel.masking.shapes import HOLD
from iac_kernel.redact import redact
from iac_kernel.terraform import cli, config_scan, gate
from iac_kernel.terraform.binding import BOUND, Binding, bind, lineage_check, state_line, state_mark
from iac_kernel.terraform.commands import ApplyLine, resolve, split_argv, var_assignments
from iac_kernel.terraform.review import (
    NO_PLAN_WARNING,
    counts_line,
    plan_fields,
    review_plan_file,
    var_scrubber,
)
from iac_kernel.terraform.sensitive import StreamMasker, keep, mask_value
from iac_kernel.terraform.summary import question_text
from iac_kernel.terraform.workspace import (
    is_plan_file,
    remember,
    remember_given,
    sensitive_names,
    sensitive_values,
)
from iac_kernel.textsafe import code_span, printable
from iac_kernel.tools.base import shown_path
from iac_kernel.tools.tf_masking import mask_shown

PROGRAMS = ("terraform", "tofu")
#: The var files terraform reads by itself in its working directory.
AUTO_VAR_FILES = (
    "terraform.tfvars",
    "terraform.tfvars.json",
    "*.auto.tfvars",
    "*.auto.tfvars.json",
)
#: A var file larger than this is not read for given values (terraform reads it anyway).
MAX_VAR_FILE_BYTES = 4 * 1024 * 1024
REJECTED_LINE = (
    "Refused: {program} would reject this command line ({why}); nothing was applied. "
    "Terraform reads: {shown}."
)
TEST_TEXT = (
    "terraform test applies the configuration for real for each run block whose command is "
    "apply (the default), with the providers' real credentials, and destroys it at the end; "
    "a failed destroy leaves resources behind. The workspace's own state is not used."
)
NO_PLAN_FILE = (
    "Refused: the saved plan {path} is not there (or is not a plan file) now, so no "
    "reviewed plan backs this apply; a file that appears later is never applied unreviewed. "
    "Nothing was applied. Make the plan first (`{program} plan -out={path}`), then apply it."
)


def review_exec(info: ExecInfo) -> Review | None:
    """The review of one guarded terraform/tofu exec (None: nothing to add)."""
    line = resolve(list(info.argv), info.env, info.program)
    if line is None:
        return _test_review(info) or _bound_review(info)
    assignments = var_assignments([*info.argv, *line.args, *_env_words(line.env_args)])
    review = _review(info, line)
    if review.audit is not None:  # no -var value in the record, even on a rejected line
        review.scrub = var_scrubber(assignments)
    return review


def _test_review(info: ExecInfo) -> Review | None:
    """``terraform test``: said for what it does, and an audit record (kind
    ``terraform_test``) with the question, the answer and the exit status."""
    command = split_argv([info.program, *info.argv[1:]])
    if command is None or command.subcommand != "test":
        return None
    workdir = _workdir(info, command.chdir)
    names = ("TF_CLI_ARGS", "TF_CLI_ARGS_test")
    env_args = {name: info.env[name] for name in names if info.env.get(name)}
    audit = {
        "kind": "terraform_test",
        "form": "bash",
        "program": info.program,
        "command": printable(shlex.join([info.program, *info.argv[1:]])),
        "env_args": env_args,
        "workdir": str(workdir),
    }
    scrub = var_scrubber(var_assignments([*info.argv, *_env_words(env_args)]))
    return Review(text=TEST_TEXT, audit=audit, scrub=scrub, covered_by_literal=True)


def _bound_review(info: ExecInfo) -> Review | None:
    """``import``, ``state rm|mv|push|replace-provider``, ``taint``, ``untaint``,
    ``force-unlock``, ``workspace delete``: run where the question said (folder,
    workspace, data folder, CLI config, var files fixed now), or refused."""
    command = split_argv([info.program, *info.argv[1:]])
    if command is None or command.subcommand not in BOUND:
        return None
    cli_args = {k: v for k, v in info.env.items() if k.startswith("TF_CLI_ARGS")}
    binding = _bind(info, command.chdir, command.subcommand, [*command.args, *_env_words(cli_args)])
    text = f"{printable(binding.shown())}\n{printable(state_line(binding.state))}"
    return Review(
        text=text,
        argv=binding.argv(list(info.argv)),
        env=binding.env(info.env),
        recheck=binding.changed,
        # A question about the literal command covers it unless a symlink makes its
        # folder other than the one its text names: then it is asked with the folder.
        covered_by_literal=not binding.through_link,
        # The guard's record of the command (no review record here): no -var value.
        scrub=var_scrubber(var_assignments([*info.argv, *_env_words(cli_args)])),
    )


def _bind(
    info: ExecInfo, chdir: str | None, sub: str, words: list[str], state: str | None = None
) -> Binding:
    return bind(
        info.program,
        chdir,
        sub,
        info.inner_cwd,
        info.env,
        words,
        host_path=info.host_path,
        private_dir=Path(info.private_dir),
        sandbox_private_dir=info.sandbox_private_dir,
        state_flag=state,
    )


def observe_exec(info: ExecInfo) -> None:
    """Any terraform/tofu exec (``plan``, ``console``, ``test``, ``import`` as well as
    ``apply``): the values it gives to variables its configuration declares sensitive
    become known secrets before anything (a question, a refusal quoting the argv, the
    program's own output: a failed validation prints the value) can show them."""
    command = split_argv([info.program, *info.argv[1:]])
    if command is None:
        return
    cli_args = {k: v for k, v in info.env.items() if k.startswith("TF_CLI_ARGS")}
    words = [*info.argv[1:], *_env_words(cli_args)]
    given = given_values(info, _workdir(info, command.chdir), words)
    remember_given(given | keep(config_scan.exec_given_secrets(words, info.env)))


def given_values(info: ExecInfo, workdir: Path, words: list[str]) -> set[str]:
    """What ``words`` (the argv and the environment's arguments), ``TF_VAR_`` variables
    and the var files terraform reads (``-var-file``, the ``*.auto.tfvars`` of
    ``workdir``, which the call may have just written) give to the variables the
    configuration in ``workdir`` declares sensitive."""
    assignments = var_assignments(words)
    from_env = [k for k in info.env if k.startswith("TF_VAR_")]
    var_files = _var_files(info, workdir, words)
    if not (assignments or from_env or var_files):
        return set()  # nothing given: no scan (`terraform version` in a big folder)
    sensitive_values(workdir)  # a scan now: the names as the configuration says today
    names = sensitive_names(workdir)
    if not names:
        return set()
    given: list[str] = []
    for name, _, value in (a.partition("=") for a in assignments):
        if name in names:
            given += config_scan.given_leaves(value)
    for key in from_env:
        if key[7:] in names:
            given += config_scan.given_leaves(info.env[key])
    for path in var_files:
        given += config_scan.var_file_values(path, names)
    return keep(given)


def _var_files(info: ExecInfo, workdir: Path, words: list[str]) -> list[Path]:
    """The var files terraform reads in ``workdir`` with ``words``, as the host sees them."""
    named = [w for i, w in enumerate(words) if i and words[i - 1] in ("-var-file", "--var-file")]
    named += [w.partition("=")[2] for w in words if w.startswith(("-var-file=", "--var-file="))]
    paths = [Path(info.host_path(n)) if os.path.isabs(n) else workdir / n for n in named]
    for pattern in AUTO_VAR_FILES:
        paths += sorted(workdir.glob(pattern))
    found = []
    for path in paths:
        try:
            if path.is_file() and path.stat().st_size <= MAX_VAR_FILE_BYTES:
                found.append(path)
        except OSError:
            continue
    return found


def _env_words(values: dict[str, str]) -> list[str]:
    """The words of ``TF_CLI_ARGS``-style values, split the way terraform splits them
    (quotes kept together: ``-var 'tok=a b'`` gives ``tok=a b``)."""
    words: list[str] = []
    for value in values.values():
        try:
            words += shlex.split(value)
        except ValueError:
            words += value.split()
    return words


def _workdir(info: ExecInfo, chdir: str | None) -> Path:
    """The configuration's folder as the host sees it (``-chdir`` taken into account)."""
    if chdir and os.path.isabs(chdir):
        return Path(info.host_path(chdir))
    return Path(info.cwd) / chdir if chdir else Path(info.cwd)


def _review(info: ExecInfo, line: ApplyLine) -> Review:
    cwd = Path(info.cwd)
    workdir = _workdir(info, line.chdir)
    state_flag = (line.option("state") or [None])[-1]
    if state_flag and os.path.isabs(state_flag):
        state_flag = info.host_path(state_flag)
    state_out = (line.option("state-out") or [state_flag])[-1]
    if state_out and os.path.isabs(state_out):
        state_out = info.host_path(state_out)
    env = dict(info.env)  # where terraform reads its workspace, as the host sees it
    if os.path.isabs(env.get("TF_DATA_DIR", "")):
        env["TF_DATA_DIR"] = info.host_path(env["TF_DATA_DIR"])
    audit: dict[str, Any] = {
        "kind": "terraform_destroy" if line.destroy else "terraform_apply",
        "form": "bash",
        "program": line.program,
        "command": line.shown(),
        "env_args": dict(line.env_args),
        "workdir": str(workdir),
        "state_before": state_mark(workdir, env, state_flag),
    }

    if line.error:
        why = REJECTED_LINE.format(
            program=line.program, why=printable(line.error), shown=reads(line)
        )
        return Review(refuse=why, audit=audit)
    if line.no_op:
        text = f"{reads(line)} prints terraform's {line.no_op}; it applies nothing."
        return Review(text=text, summary={"kind": "terraform_apply", "text": text, "plan": None})
    binding = _bind(info, line.chdir, line.subcommand, line.args, state_flag)
    audit.update(workdir=str(binding.host_workdir), state_before=binding.state)

    def after() -> dict[str, Any]:
        return lineage_check(binding.state, binding.state_now(state_out))

    where = printable(binding.shown())
    if line.plan is None:
        unbound = gate.unbound_refusal(
            line.program,
            binding.host_workdir,
            binding.workspace,
            destroy=line.destroy,
            refresh_only=line.refresh_only,
        )
        if unbound:
            audit.update(plan_file=None, summary="no saved plan", flags=flags(line))
            return Review(refuse=unbound, audit=audit)
        text = flags_text(line, binding.host_workdir, cwd)
        text += f"\n{printable(state_line(binding.state))}\n{where}"
        summary = {"kind": audit["kind"], "text": text, "plan": None, "flags": flags(line)}
        summary["workspace"] = audit["state_before"].get("workspace")
        audit.update(plan_file=None, summary="no saved plan", flags=flags(line))
        return Review(
            text=text,
            summary=summary,
            audit=audit,
            after=after,
            argv=binding.argv(list(info.argv)),
            env=binding.env(info.env),
            recheck=binding.changed,
        )
    plan_file = Path(info.host_path(line.plan)) if os.path.isabs(line.plan) else None
    plan_file = plan_file or binding.host_workdir / line.plan
    shown = line.plan if os.path.isabs(line.plan) else shown_path(plan_file, cwd)
    if not plan_file.is_file() or not is_plan_file(plan_file):
        audit.update(plan_file=shown)
        refusal = NO_PLAN_FILE.format(path=shown, program=line.program)
        return Review(refuse=refusal, audit=audit)
    executable = cli.find_program(line.program)
    approved = review_plan_file(
        executable, plan_file, workdir, shown, copy_dir=Path(info.private_dir)
    )
    remember(cwd, f"plan:{plan_file.resolve()}:{approved.sha256}", approved.sensitive)
    approved.binding = binding
    requirement = gate.requirement_of(approved.plan, binding)
    if requirement.blocked:
        audit.update(plan_file=shown)
        return Review(refuse=f"Refused: {gate.blocked_text(requirement)}", audit=audit)
    inside = os.path.join(
        info.sandbox_private_dir, os.path.relpath(approved.copy, Path(info.private_dir))
    )
    head = [counts_line(approved.plan, printable(shown)), f"Terraform reads: {reads(line)}."]
    head += [*env_lines(line), printable(state_line(binding.state))]
    ignored = line.ignored_with_plan()
    if ignored:
        head.append(
            f"Ignored with a saved plan: {', '.join(ignored)} (terraform applies the plan "
            "as saved)."
        )
    needs = [gate.needs_text(requirement)] if requirement.needed else []
    text = "\n".join([*head, question_text(approved.plan), where, *needs])
    summary = {**approved.summary(), "text": text}
    summary["workspace"] = audit["state_before"].get("workspace")
    audit.update(plan_fields(approved.plan))
    held = None
    if requirement.needed:
        summary["approval"] = gate.card_fields(requirement)
        card = mask_value(mask_shown(summary, cwd), approved.sensitive)  # as the question shows it
        held = _Held(gate.Gate(approved, requirement, card), audit)

    def recheck() -> str | None:
        problem = approved.recheck() or binding.changed()
        return problem or (held.spend() if held is not None else None)

    return Review(
        text=text,
        summary=summary,
        argv=dataclasses.replace(line, chdir=binding.workdir).run_argv(inside),
        env=binding.env({k: v for k, v in info.env.items() if k not in line.env_names()}),
        recheck=recheck,
        audit=audit,
        after=after,
        hold=held.wait if held is not None else None,
    )


class _Held:
    """A bash apply's way through the team's gate: the wait (``Review.hold``, after the
    user allowed it), then the spend in the recheck right before the exec."""

    def __init__(self, held: gate.Gate, audit: dict[str, Any]) -> None:
        self.gate = held
        self.audit = audit
        self.say: gate.Say | None = None

    async def wait(self, say: gate.Say) -> str | None:
        self.say = say
        return await self.gate.wait(say)

    def spend(self) -> str | None:
        problem = self.gate.spend()
        if problem is None:
            self.audit["approval"] = self.gate.audit()
            if self.say is not None:
                self.say(self.gate.applying_text())
        return problem


# -- the question's text for an apply with no saved plan -------------------------------


def flags(line: ApplyLine) -> dict[str, Any]:
    return {
        "destroy": line.destroy,
        "auto_approve": line.auto_approve,
        "refresh_only": line.refresh_only,
        "targets": line.option("target"),
        "replace": line.option("replace"),
    }


def flags_text(line: ApplyLine, workdir: Path, cwd: Path) -> str:
    """The question for an apply with no saved plan: what the flags will do."""
    where = (
        printable(shown_path(workdir, cwd)) if workdir.resolve() != cwd.resolve() else "this folder"
    )
    program = line.program
    if line.destroy:
        lines = [
            f"⚠️ DESTROY: destroys every resource in the state of {where}; no reviewed "
            "plan backs it."
        ]
    elif line.refresh_only:
        lines = [
            "Refresh only: writes the real infrastructure's attributes into the state; "
            "changes no resource. No reviewed plan backs it."
        ]
        if line.subcommand == "refresh":
            lines[0] += (
                f" `{program} refresh` is `{program} apply -refresh-only -auto-approve`: "
                "it writes the state without asking."
            )
    else:
        lines = [NO_PLAN_WARNING.format(program=program)]
    targets = line.option("target")
    if targets:
        lines.append(f"-target: only {printable(', '.join(targets))} (and what they depend on).")
    replace = line.option("replace") if line.subcommand != "refresh" else []
    if replace:
        lines.append(f"-replace: destroys and re-creates {printable(', '.join(replace))}.")
    if line.subcommand != "refresh":  # its first line says it does not ask
        lines.append(
            "-auto-approve: terraform applies without showing its plan or asking again."
            if line.auto_approve
            else 'No -auto-approve: terraform shows its plan and waits for "yes" on its input.'
        )
    lines.append(f"Terraform reads: {reads(line)}.")
    return "\n".join(lines + env_lines(line))


def reads(line: ApplyLine) -> str:
    """The effective command line for a question: one line, as it reads."""
    return code_span(printable(line.shown()))


def env_lines(line: ApplyLine) -> list[str]:
    return [f"From the environment: {name}={value!r}." for name, value in line.env_args.items()]


#: Subcommands that print one JSON document or values: held whole, so the values of a
#: remote state they print (never on disk) are masked too.
HELD = {"show", "output", "state", "console"}
#: How often a running command's values are looked up again (a scan of the workspace).
REFRESH_SECONDS = 1.0


def output_masker(info: ExecInfo) -> Callable[[], StreamMasker] | None:
    """terraform/tofu's own stdout and stderr, masked inside the exec (issue 32): the
    workspace's sensitive values (looked up again while it runs: an apply creates
    some), the values this exec gives, and secret environment values and shapes."""
    command = split_argv([info.program, *info.argv[1:]])
    workdir = _workdir(info, command.chdir if command else None)
    hold = command is not None and command.subcommand in HELD
    env = dict(info.env)
    scans = _Scans(workdir)

    def make() -> StreamMasker:
        return StreamMasker(
            (),
            hold_all=hold,
            refresh=scans.values,
            ready=scans.ready,
            redact=lambda text: redact(text, env),
            redact_hold=HOLD,
        )

    return make


class _Scans:
    """The workspace scans behind one exec's output maskers, in the background: the
    first beside the program's start (it may show a plan file the workspace holds),
    another when output comes :data:`REFRESH_SECONDS` after the last began. Nothing is
    released before a scan is done (the maskers hold their text meanwhile)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.latest = self._start()

    def _start(self) -> Future[frozenset[str]]:
        self.started = time.monotonic()
        future: Future[frozenset[str]] = Future()
        threading.Thread(target=_scan_into, args=(future, self.workdir), daemon=True).start()
        return future

    def ready(self) -> bool:
        """Whether the latest scan is done (a new one begins when it is old enough)."""
        with self.lock:
            if self.latest.done() and time.monotonic() - self.started >= REFRESH_SECONDS:
                self.latest = self._start()
            return self.latest.done()

    def values(self) -> frozenset[str]:
        """The latest scan's values, waiting for it (raises as it did: nothing is
        released then)."""
        with self.lock:
            latest = self.latest
        return latest.result()


def _scan_into(result: Future[frozenset[str]], workdir: Path) -> None:
    try:
        result.set_result(sensitive_values(workdir))
    except BaseException as exc:  # the maskers re-raise it: their output is not released
        result.set_exception(exc)


def register() -> None:
    reviews.register(PROGRAMS, review_exec)
    reviews.observe(PROGRAMS, observe_exec)
    reviews.filter_output(PROGRAMS, output_masker)
