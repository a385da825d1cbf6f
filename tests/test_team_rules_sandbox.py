"""The approval rules against a sandboxed bash call (issue 43: "a rules file the sandbox
tries to write"). The admin's file (``IAC_KERNEL_APPROVAL_RULES``) stays as the admin
wrote it wherever it lies: outside the folders a call may write, the read-only root keeps
it; inside one (the working folder, a ``sandbox_writable_paths`` folder), it is bound
read-only over itself, with its folder, and a folder on its way that holds the working
folder cannot be renamed away. The workspace's ``.iac-kernel/approvals.toml`` is the
sandbox's to edit, and an edit only adds: a real terraform apply after an edit that tries
to loosen the admin's rule still waits for the admin's two approvers.

Real bash calls (BashTool in a ToolContext, real bubblewrap) and real terraform
(``terraform_data``, offline).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.config import Settings
from iac_kernel.guard.sandbox import bwrap
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.team import rules
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import RULES_ENV, WORKSPACE_FILE, Change
from iac_kernel.team.store import Identity
from iac_kernel.terraform import gate
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.bash import BashTool
from team_support import Approver, records
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401
from test_team_apply import Turn

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="no bubblewrap")

ADMIN = """
[[rule]]
name = "default needs two"
when = { workspace = "default" }
approvers = 2
"""
FORGED = """
[[rule]]
name = "forged"
when = { workspace = "nothing-matches" }
approvers = 1
"""
#: A workspace file that tries to loosen the admin's rule: same name, fewer approvers,
#: a workspace pattern that matches nothing.
LOOSER = """
[[rule]]
name = "default needs two"
when = { workspace = "nothing-matches" }
approvers = 1
"""
STRICTER = """
[[rule]]
name = "three for this folder"
approvers = 3
"""
BOB = Identity("bob")
CAROL = Identity("carol")


@dataclass
class Place:
    """Where the admin's file lies for one case: the call's working folder, the settings'
    writable paths, the file, and what a call tries to put in its place."""

    cwd: Path
    writable: str
    rules: Path
    #: Shell commands of the attempts; each one's outcome goes on its own line.
    attempts: list[str]
    #: Where the attempts move folders to.
    moved: list[Path] = field(default_factory=list)


def place(kind: str, root: Path) -> Place:
    """``elsewhere``: a folder no call may write; ``cwd``: a folder in the working folder;
    ``around``: the file's folder, and the one above it, hold the working folder, inside a
    writable path."""
    if kind == "elsewhere":
        cwd, writable, rules_dir = root / "ws", "", root / "etc-iac"
    elif kind == "cwd":
        cwd, writable, rules_dir = root / "ws", "", root / "ws" / "admin"
    else:
        cwd, writable = root / "shared" / "org" / "team" / "infra", str(root / "shared")
        rules_dir = root / "shared" / "org" / "team"
    cwd.mkdir(parents=True)
    rules_dir.mkdir(parents=True, exist_ok=True)
    path = rules_dir / "approvals.toml"
    path.write_text(ADMIN)
    forged = f"printf %s {shlex.quote(FORGED)}"
    attempts = [
        f"{forged} > {path}",
        f"{forged} > {cwd}/new.toml && mv -f {cwd}/new.toml {path}",
        f"rm -f {path} && {forged} > {path}",
        f"mv {rules_dir} {rules_dir}.moved && mkdir {rules_dir} && {forged} > {path}",
    ]
    moved = [Path(f"{rules_dir}.moved")]
    if kind == "around":  # the folder above the file's, renamed with the file in it
        above = rules_dir.parent
        attempts.append(f"mv {above} {above}.moved && mkdir -p {rules_dir} && {forged} > {path}")
        moved.append(Path(f"{above}.moved"))
    return Place(cwd, writable, path, attempts, moved)


async def sandboxed(where: Place, command: str) -> str:
    """One bash call in its sandbox; its output."""
    ctx = ToolContext(cwd=where.cwd, settings=Settings(sandbox_writable_paths=where.writable))
    result = await BashTool().run({"command": command}, ctx)
    assert result.raw_output["sandbox"] == "bwrap"
    return result.content


def attempts_script(where: Place) -> str:
    """Every attempt, then the file as the sandbox reads it."""
    lines = [
        f"if ( {a} ) 2>/dev/null; then echo changed; else echo refused; fi" for a in where.attempts
    ]
    return "; ".join([*lines, f"echo ---; cat {where.rules}"])


def in_force(where: Place) -> tuple[int, tuple[str, ...]]:
    """What the rules in force (read as the gate reads them) ask of a change of
    workspace ``default`` in the working folder: approvers and rule names."""
    ruleset = rules.rules_for(where.cwd)
    assert ruleset.problems == ()
    need = ruleset.evaluate(Change.of("default", [("terraform_data", "create")]))
    return need.approvers, need.rules


@pytest.mark.parametrize("kind", ["elsewhere", "cwd", "around"])
async def test_a_sandboxed_call_cannot_write_or_replace_the_admins_rules_file(
    kind: str, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = place(kind, outside_tmp)
    monkeypatch.setenv(RULES_ENV, str(where.rules))
    out = await sandboxed(where, attempts_script(where))
    outcomes, _, shown = out.partition("---\n")
    assert outcomes.split() == ["refused"] * len(where.attempts), out
    # Read-only, not hidden: the call still reads the rules it works under.
    assert shown.strip() == ADMIN.strip()
    assert where.rules.read_text() == ADMIN
    assert in_force(where) == (2, ("default needs two",))
    assert not [m for m in where.moved if m.exists()]


@pytest.mark.parametrize("kind", ["cwd", "around"])
async def test_the_read_only_mounts_are_what_keep_a_file_in_a_writable_folder(
    kind: str, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without :func:`bwrap.admin_rules_mounts` the same call replaces the admin's rules
    with its own, and no rule holds the change back any more."""
    where = place(kind, outside_tmp)
    monkeypatch.setenv(RULES_ENV, str(where.rules))
    monkeypatch.setattr(bwrap, "admin_rules_mounts", lambda _binds: [])
    out = await sandboxed(where, f"{where.attempts[0]}; echo done")
    assert out.strip().endswith("done") and where.rules.read_text() == FORGED
    assert in_force(where) == (0, ())


async def test_a_missing_admin_file_cannot_be_made_in_a_read_only_folder(
    outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin named a file not there yet (every apply is blocked as missing): a call
    that makes it, to choose its own rules, is refused."""
    where = place("cwd", outside_tmp)
    where.rules.unlink()
    monkeypatch.setenv(RULES_ENV, str(where.rules))
    out = await sandboxed(where, f"{where.attempts[0]} && echo changed || echo refused")
    assert out.strip().splitlines()[-1] == "refused", out
    assert not where.rules.exists()
    assert "the file is missing" in rules.rules_for(where.cwd).problems[0]


# -- the workspace's own file: the sandbox may edit it, and an edit only adds -----------------


@pytest.fixture
def planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with a saved plan that creates one ``terraform_data`` (workspace
    ``default``), the admin's rule asking two approvers, a SQLite team store."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.tf").write_text('resource "terraform_data" "a" {\n  input = "one"\n}\n')
    tf(ws, "plan", "-input=false", "-out=tfplan")
    admin = tmp_path / "admin" / "approvals.toml"
    admin.parent.mkdir()
    admin.write_text(ADMIN)
    monkeypatch.setenv(RULES_ENV, str(admin))
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", f"sqlite:///{tmp_path / 'team.sqlite'}")
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.05)
    return ws


def write_workspace_rules(text: str) -> str:
    """The bash command that writes the workspace's rules file."""
    write = f"printf %s {shlex.quote(text)} > {WORKSPACE_FILE}"
    return f"mkdir -p {WORKSPACE_FILE.parent} && {write} && echo written"


@needs_terraform
async def test_a_workspace_rule_the_sandbox_writes_cannot_loosen_the_admins(
    planned: Path, tmp_path: Path
) -> None:
    where = Place(planned, "", planned / WORKSPACE_FILE, [])
    assert (await sandboxed(where, write_workspace_rules(LOOSER))).strip() == "written"
    assert (planned / WORKSPACE_FILE).read_text() == LOOSER  # the sandbox's to edit
    assert in_force(where) == (2, ("default needs two",))

    url = f"sqlite:///{tmp_path / 'team.sqlite'}"
    seen: dict[str, Any] = {}

    def act(book: Approvals, record: Approval) -> None:
        seen["first"] = book.approve(record.id, BOB, note="one of two")
        time.sleep(0.5)  # ten looks at the store by the waiting apply
        seen["after_one"] = book.get(record.id)
        seen["applied_early"] = (planned / "terraform.tfstate").exists()
        book.approve(record.id, CAROL, note="two of two")

    approver = Approver(url, act)
    approver.start()
    turn = Turn(planned, tmp_path, plan="tfplan")
    await turn.run()
    approver.join(10)
    assert approver.error is None, approver.error
    # One approval was not enough: the admin's rule asks two, whatever the workspace says.
    assert seen["after_one"].status == "pending"
    assert seen["after_one"].waiting_text() == "waiting for 1 approval"
    assert seen["applied_early"] is False
    (result,) = turn.results
    assert result.status == "completed", result.output
    (record,) = records(url)
    assert record.required == 2 and record.rule == "default needs two"
    assert record.status == "spent"
    assert [v.approver for v in record.approvals] == ["bob", "carol"]
    assert "waiting for 2 approvals" in turn.status
    assert '"terraform_data"' in (planned / "terraform.tfstate").read_text()


async def test_a_workspace_rule_the_sandbox_writes_adds_a_requirement(
    planned: Path,
) -> None:
    where = Place(planned, "", planned / WORKSPACE_FILE, [])
    assert in_force(where) == (2, ("default needs two",))
    assert (await sandboxed(where, write_workspace_rules(STRICTER))).strip() == "written"
    assert in_force(where) == (3, ("default needs two", "three for this folder (workspace)"))
