"""The text of an exec-time question for ``terraform|tofu apply|destroy`` with no saved
plan: what its flags will do, the command line as terraform reads it, the values it
takes from the environment (:mod:`.tf_guard` asks it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iac_kernel.terraform.apply_args import ApplyLine
from iac_kernel.terraform.review import NO_PLAN_WARNING
from iac_kernel.textsafe import code_span, printable


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


def shown_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path)
