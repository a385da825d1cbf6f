"""The guard's exec-time review of ``terraform|tofu apply`` (commands run through bash).

Registered with :mod:`iac_kernel.guard.reviews` when the tools are built. For ``apply
PLANFILE`` the question shows the plan's summary (deletes first, failed checks), the
plan's bytes are copied into the guard's private directory (read-only in the sandbox),
terraform is pointed at that copy, and the approval is re-checked right before the exec:
a plan file changed meanwhile is refused, and in any case the approved bytes are what
terraform applies. An apply without a plan file, and ``destroy``, carry a warning.
"""

from __future__ import annotations

import os
from pathlib import Path

from iac_kernel.guard import reviews
from iac_kernel.guard.reviews import ExecInfo, Review
from iac_kernel.terraform import cli
from iac_kernel.terraform.commands import VALUE_FLAGS, apply_plan_file, split_argv
from iac_kernel.terraform.review import apply_warning, review_plan_file
from iac_kernel.terraform.workspace import remember

PROGRAMS = ("terraform", "tofu")


def review_exec(info: ExecInfo) -> Review | None:
    """The review of one guarded terraform/tofu exec (None: nothing to add)."""
    tf = split_argv([info.program, *info.argv[1:]])
    if tf is None:
        return None
    cwd = Path(info.cwd)
    workdir = tf.workdir(cwd)
    if tf.subcommand == "destroy" or (tf.subcommand == "apply" and tf.flag("-destroy")):
        text = apply_warning(tf.program, destroy=True, where=str(workdir))
        return Review(text=text, summary={"kind": "terraform_destroy", "text": text})
    if tf.subcommand != "apply":
        return None
    plan_file = apply_plan_file(tf, cwd)
    if plan_file is None:
        text = apply_warning(tf.program)
        return Review(text=text, summary={"kind": "terraform_apply", "text": text, "plan": None})
    executable = cli.find_program(tf.program)
    approved = review_plan_file(
        executable, plan_file, workdir, _shown(plan_file, cwd), copy_dir=Path(info.private_dir)
    )
    remember(cwd, f"plan:{plan_file.resolve()}:{approved.sha256}", approved.sensitive)
    inside = os.path.join(
        info.sandbox_private_dir,
        os.path.relpath(approved.copy, Path(info.private_dir)),
    )
    return Review(
        text=approved.question(),
        summary=approved.summary(),
        argv=_with_plan(list(info.argv), inside),
        recheck=approved.recheck,
    )


def _with_plan(argv: list[str], plan: str) -> list[str]:
    """``argv`` with its last positional argument (the plan file) replaced by ``plan``."""
    index = None
    skip = False
    seen_subcommand = False
    for i, arg in enumerate(argv[1:], start=1):
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            skip = name in VALUE_FLAGS and "=" not in arg
            continue
        if not seen_subcommand:
            seen_subcommand = True
            continue
        index = i
    if index is None:
        raise ValueError("no plan file argument to replace")
    return [*argv[:index], plan, *argv[index + 1 :]]


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path)


def register() -> None:
    reviews.register(PROGRAMS, review_exec)
