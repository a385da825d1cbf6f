"""Approval rules in TOML (iac_kernel/team/rules.py): matching, validation that blocks,
and workspace files that can add requirements but never loosen the admin's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.team.rules import Change, RulesError, load, parse, rules_for

ADMIN = """
[[rule]]
name = "production needs a second person"
when = { workspace = "prod*" }
approvers = 1

[[rule]]
name = "databases deleted"
when = { actions = ["delete", "replace"], resource_types = ["aws_db_*", "aws_rds_*"] }
approvers = 2
group = "dba"

[[rule]]
name = "big changes"
when = { min_changes = 50 }
approvers = 1

[[rule]]
name = "policy failures"
when = { failed_checks = ["CKV_AWS_*"] }
approvers = 1
group = "security"

[[rule]]
name = "identity changes"
when = { operations = ["iam:Create*", "iam:Attach*Policy"] }
approvers = 1
group = "security"
"""


@pytest.fixture
def admin(tmp_path: Path) -> Path:
    path = tmp_path / "admin" / "approvals.toml"
    path.parent.mkdir()
    path.write_text(ADMIN)
    return path


def write_workspace(folder: Path, text: str) -> Path:
    path = folder / ".iac-kernel" / "approvals.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_each_condition_matches_what_it_names(admin: Path) -> None:
    rules = load(admin)
    assert not rules.problems
    quiet = rules.evaluate(Change.of("dev", [("aws_s3_bucket", "create")]))
    assert not quiet.needed and quiet.rules == ()
    prod = rules.evaluate(Change.of("prod-eu", [("aws_s3_bucket", "create")]))
    assert prod.approvers == 1 and prod.rules == ("production needs a second person",)
    assert prod.text() == "1 approval"
    # A database created is not a database deleted; a replaced one is.
    assert not rules.evaluate(Change.of("dev", [("aws_db_instance", "create")])).needed
    db = rules.evaluate(
        Change.of("dev", [("aws_db_instance", "replace"), ("aws_s3_bucket", "delete")])
    )
    assert db.approvers == 2 and db.groups == {"dba": 2} and db.text() == "2 approvals by dba"
    # Counts: 49 updates pass, 50 need someone.
    rows = [("aws_instance", "update")] * 49
    assert not rules.evaluate(Change.of("dev", rows)).needed
    assert rules.evaluate(Change.of("dev", [*rows, ("aws_instance", "create")])).rules == (
        "big changes",
    )
    # Failed checks and cloud operations (case as IAM matches it).
    checks = rules.evaluate(Change.of("dev", failed_checks={"CKV_AWS_20"}))
    assert checks.groups == {"security": 1}
    assert not rules.evaluate(Change.of("dev", failed_checks={"CKV_GCP_1"})).needed
    ops = rules.evaluate(Change.of("dev", operations={"iam:createaccesskey"}))
    assert ops.rules == ("identity changes",)
    assert not rules.evaluate(Change.of("dev", operations={"s3:PutObject"})).needed


def test_the_strongest_requirement_of_all_matches_wins(admin: Path) -> None:
    need = load(admin).evaluate(
        Change.of(
            "prod",
            [("aws_db_instance", "delete")],
            failed_checks={"CKV_AWS_16"},
        )
    )
    assert need.approvers == 2
    assert need.groups == {"dba": 2, "security": 1}
    assert set(need.rules) == {
        "production needs a second person",
        "databases deleted",
        "policy failures",
    }
    assert need.text() == "2 approvals (2 by dba, 1 by security)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[rule]]\nname = 'x'\napprovers = 1\nwhen = { workspace = 'prod' \n", "not valid TOML"),
        ("[[rule]]\nname = 'x'\napprovers = 1\nwhom = 'me'\n", "rule #1 'x': unknown key 'whom'"),
        (
            "[[rule]]\nname = 'x'\napprovers = '1'\n",
            "rule #1 'x': approvers: expects a whole number, 1 or more",
        ),
        ("[[rule]]\nname = 'x'\napprovers = 0\n", "approvers: expects a whole number, 1 or more"),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\nwhen = { actions = ['destroy'] }\n",
            "rule #1 'x': when.actions: 'destroy' is not one of delete, replace, update, create",
        ),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\nwhen = { operations = ['iam'] }\n",
            "when.operations: 'iam' is not service:operation",
        ),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\nwhen = { resource_types = ['aws_[db'] }\n",
            "when.resource_types: 'aws_[db' is not a name pattern",
        ),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\nwhen = { workspace = ['prod', 3] }\n",
            "when.workspace: expects a string or a list of strings",
        ),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\nwhen = { environment = 'prod' }\n",
            "when.environment: unknown condition",
        ),
        (
            "[[rule]]\nname = 'x'\napprovers = 1\n[[rule]]\nname = 'x'\napprovers = 2\n",
            "rule #2 'x': name used twice",
        ),
        ("[[rule]]\napprovers = 1\n", "rule #1: name: expects a non-empty string"),
        ("disable = true\n", "unknown key 'disable'"),
    ],
)
def test_a_malformed_file_is_one_line_and_blocks(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "approvals.toml"
    path.write_text(text)
    with pytest.raises(RulesError) as caught:
        parse(text, str(path))
    message = str(caught.value)
    assert expected in message and str(path) in message and "\n" not in message
    need = load(path).evaluate(Change.of("dev", [("aws_s3_bucket", "create")]))
    assert need.blocked and need.needed
    assert need.text().startswith("rules unreadable: approval rules ")
    assert expected in need.text()


def test_a_missing_admin_file_blocks_and_no_file_asks_nothing(tmp_path: Path) -> None:
    missing = load(tmp_path / "nowhere.toml").evaluate(Change.of("prod"))
    assert missing.blocked and "the file is missing" in missing.text()
    assert not load(None, tmp_path).evaluate(Change.of("prod", [("x", "delete")])).needed


def test_a_workspace_rule_cannot_loosen_an_admin_rule(admin: Path, tmp_path: Path) -> None:
    folder = tmp_path / "infra"
    write_workspace(
        folder,
        """
[[rule]]
name = "databases deleted"      # the admin's name, asking less
when = { actions = ["delete"], resource_types = ["aws_db_*"] }
approvers = 1

[[rule]]
name = "production needs a second person"
when = { workspace = "nothing-matches-this" }
approvers = 1
""",
    )
    rules = load(admin, folder)
    assert not rules.problems
    need = rules.evaluate(Change.of("prod", [("aws_db_instance", "delete")]))
    assert need.approvers == 2 and need.groups == {"dba": 2}
    assert "databases deleted" in need.rules
    assert "databases deleted (workspace)" in need.rules
    assert "production needs a second person" in need.rules
    # Trying to switch the admin's rules off is a malformed file: it blocks, never loosens.
    write_workspace(folder, "[[rule]]\nname = 'big changes'\napprovers = 0\n")
    assert load(admin, folder).evaluate(Change.of("dev")).blocked
    write_workspace(folder, "[[rule]]\nname = 'x'\napprovers = 1\nenabled = false\n")
    assert load(admin, folder).evaluate(Change.of("dev")).blocked


def test_a_workspace_adds_a_requirement(admin: Path, tmp_path: Path) -> None:
    folder = tmp_path / "infra"
    write_workspace(
        folder,
        '[[rule]]\nname = "any destroy"\nwhen = { actions = ["delete"] }\napprovers = 1\n',
    )
    need = load(admin, folder).evaluate(Change.of("dev", [("aws_s3_bucket", "delete")]))
    assert need.rules == ("any destroy (workspace)",)


def test_a_linked_workspace_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "infra"
    (folder / ".iac-kernel").mkdir(parents=True)
    os.symlink("/dev/zero", folder / ".iac-kernel" / "approvals.toml")
    need = load(None, folder).evaluate(Change.of("dev"))
    assert need.blocked and "cannot be read" in need.text()


def test_rules_for_reads_the_admin_file_from_the_environment(admin: Path, tmp_path: Path) -> None:
    env = {"IAC_KERNEL_APPROVAL_RULES": str(admin)}
    assert rules_for(tmp_path, env).evaluate(Change.of("prod")).approvers == 1
    assert not rules_for(tmp_path, {}).evaluate(Change.of("prod")).needed
