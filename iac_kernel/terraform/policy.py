"""Policy checks on a plan with checkov (optional: used when checkov is installed).

checkov runs as a program (``IAC_KERNEL_CHECKOV`` names it, else ``checkov`` on PATH):
its pinned dependencies clash with ours (its ``bc-python-hcl2`` replaces the ``hcl2``
package we use), so it lives in its own environment, e.g. ``pipx install checkov``.
It reads the plan's ``show -json`` with ``--framework terraform_plan``, run in a private
directory: never in the workspace, whose ``.checkov.yaml`` could name an
``external-checks-dir`` of Python code (written by a sandboxed command) that checkov would
run on the host. Custom checks come only from ``IAC_KERNEL_CHECKOV_CHECKS`` (directories
the user trusts, separated by ``os.pathsep``). Results are cached by the plan file's hash:
the apply question reuses the plan's checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from iac_kernel.terraform.plan import Plan

CHECKOV_ENV = "IAC_KERNEL_CHECKOV"
CHECKS_ENV = "IAC_KERNEL_CHECKOV_CHECKS"
TIMEOUT = 300
#: Where installing checkov is explained: a page and its heading or bold item (a test
#: checks both exist).
INSTALL_DOC = ("docs/safety.md", "Policy")
NOT_INSTALLED = f"checkov is not installed (see {INSTALL_DOC[0]}, {INSTALL_DOC[1]})"
_CACHE: dict[str, tuple[list[dict[str, Any]], str]] = {}


OFF_WORDS = ("off", "0", "false", "no")
#: No note when checks are turned off: the card says nothing about policy then.
TURNED_OFF = ""


def checkov_program() -> str | None:
    """checkov's path: ``IAC_KERNEL_CHECKOV`` (a path or name; ``off`` disables), else PATH."""
    named = os.environ.get(CHECKOV_ENV)
    if named and named.lower() in OFF_WORDS:
        return None
    if named:
        return named if os.path.exists(named) else shutil.which(named)
    return shutil.which("checkov")


def parse_report(text: str) -> list[dict[str, Any]]:
    """Failed checks by resource address from checkov's ``-o json`` output."""
    start = text.find("{") if text.lstrip().startswith("{") else text.find("[")
    if start < 0:
        start = text.find("{")
    report = json.loads(text[start:])
    reports = report if isinstance(report, list) else [report]
    failed: list[dict[str, Any]] = []
    for item in reports:
        results = item.get("results") if isinstance(item, dict) else None
        for check in (results or {}).get("failed_checks") or []:
            failed.append(
                {
                    "check_id": check.get("check_id", ""),
                    "name": check.get("check_name", ""),
                    "address": check.get("resource_address") or check.get("resource", ""),
                    "guideline": check.get("guideline") or "",
                    "severity": check.get("severity") or "",
                }
            )
    failed.sort(key=lambda c: (c["address"], c["check_id"]))
    return failed


def _trusted_checks() -> list[str]:
    """``--external-checks-dir`` for each directory of ``IAC_KERNEL_CHECKOV_CHECKS``."""
    dirs = [d for d in os.environ.get(CHECKS_ENV, "").split(os.pathsep) if d.strip()]
    return [arg for d in dirs for arg in ("--external-checks-dir", d)]


def run_checkov(doc: dict[str, Any], cwd: Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """(failed checks, note): note is "" when checkov ran, else why there are no results.

    ``cwd`` (the workspace) is not used: checkov runs in a private directory."""
    program = checkov_program()
    if program is None:
        off = os.environ.get(CHECKOV_ENV, "").lower() in OFF_WORDS
        return [], TURNED_OFF if off else NOT_INSTALLED
    directory = Path(tempfile.mkdtemp(prefix="iac-kernel-checkov-"))
    os.chmod(directory, 0o700)  # the plan JSON holds sensitive values
    try:
        path = directory / "plan.json"
        path.write_text(json.dumps(doc))
        env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": ""}
        done = subprocess.run(
            [
                program,
                "-f",
                str(path),
                "--framework",
                "terraform_plan",
                "-o",
                "json",
                "--quiet",
                "--compact",
                "--skip-download",
                *_trusted_checks(),
            ],
            # Never the workspace: its .checkov.yaml could load code (module docstring).
            cwd=str(directory),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        try:
            failed = parse_report(done.stdout)
            return failed, "" if failed else "no failed checks"
        except (json.JSONDecodeError, ValueError, AttributeError):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [], f"checkov failed (exit {done.returncode}): {last[:300]}"
    except subprocess.TimeoutExpired:
        return [], f"checkov did not finish within {TIMEOUT}s"
    except OSError as exc:
        return [], f"checkov could not run: {exc.strerror or exc}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def attach_sync(plan: Plan, doc: dict[str, Any], cwd: Path | None = None) -> None:
    """Put checkov's result on ``plan`` (cached by the plan file's hash)."""
    key = plan.file.sha256 if plan.file is not None else None
    if key and key in _CACHE:
        plan.checks, plan.checks_note = _CACHE[key]
        return
    checks, note = run_checkov(doc, cwd)
    plan.checks, plan.checks_note = checks, note
    if key and (checks or note not in (NOT_INSTALLED, TURNED_OFF)):
        _CACHE[key] = (checks, note)


async def attach(plan: Plan, doc: dict[str, Any], cwd: Path | None = None) -> None:
    await asyncio.to_thread(attach_sync, plan, doc, cwd)
