"""``iac-kernel approvals``, ``audit verify`` and ``team init`` (iac_kernel/team/commands.py),
and two OS users on one machine: the approver is never the requester, whatever the
environment says."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from iac_kernel.cli import main
from iac_kernel.team import audit
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, open_store, os_identity
from team_support import (  # noqa: F401 (fixtures)
    ALICE,
    BOB,
    PLATFORM,
    ensure_user,
    needs_root,
    pg_cluster,
    pg_database,
    run_as,
    team_url,
)

PLAN = "c" * 64
BINDING = {
    "folder": "/srv/infra",
    "workspace": "prod",
    "data_dir": "/srv/infra/.terraform",
    "cli_config": None,
    "var_files": [],
    "lineage": None,
}


@pytest.fixture
def store_env(team_url: str, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", team_url)
    return team_url


def requested(url: str, requester: str = "somebody-else") -> str:
    store = open_store(url)
    try:
        record = Approvals(store).request(
            Identity(requester),
            PLAN,
            BINDING,
            "Plan: 1 to destroy.",
            Requirement(approvers=1, rules=("prod",)),
        )
        return record.id
    finally:
        store.close()


def test_list_show_approve_as_json(store_env: str, capsys: pytest.CaptureFixture) -> None:
    record_id = requested(store_env)
    assert main(["approvals", "list", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert {
        "id",
        "requester",
        "status",
        "plan_sha256",
        "summary",
        "rule",
        "approvals",
        "expires_at",
    } <= set(line)
    assert line["id"] == record_id and line["status"] == "pending"
    assert main(["approvals", "list"]) == 0
    assert f"{record_id}  waiting for 1 approval  by somebody-else" in capsys.readouterr().out
    assert main(["approvals", "approve", record_id, "--note", "fine"]) == 0
    out = capsys.readouterr().out
    assert f"approved by {os_identity().name}" in out and ": fine" in out
    assert main(["approvals", "show", record_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "approved" and shown["approvals"][0]["note"] == "fine"
    assert main(["audit", "verify"]) == 0
    assert "intact: 2 records" in capsys.readouterr().out


def test_reject_and_cancel(store_env: str, capsys: pytest.CaptureFixture) -> None:
    record_id = requested(store_env)
    assert main(["approvals", "reject", record_id, "--note", "not now"]) == 0
    assert "rejected by" in capsys.readouterr().out
    mine = requested(store_env, requester=os_identity().name)
    assert main(["approvals", "cancel", mine]) == 0
    assert main(["approvals", "list"]) == 0
    assert main(["approvals", "list", "--all", "--json"]) == 0
    statuses = [
        json.loads(x)["status"] for x in capsys.readouterr().out.splitlines() if x.startswith("{")
    ]
    assert sorted(statuses) == ["cancelled", "rejected"]


def test_an_unknown_id_is_one_line_and_changes_nothing(
    store_env: str, capsys: pytest.CaptureFixture
) -> None:
    requested(store_env)
    store = open_store(store_env)
    before = len(audit.entries(store))
    for argv in (
        ["approvals", "approve", "nope"],
        ["approvals", "show", "nope"],
        ["approvals", "reject", "nope", "--note", "x"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == "iac-kernel approvals: no approval record 'nope'\n"
    assert len(audit.entries(store)) == before
    store.close()


def test_my_own_record_is_refused_at_the_terminal(
    store_env: str, capsys: pytest.CaptureFixture
) -> None:
    record_id = requested(store_env, requester=os_identity().name)
    assert main(["approvals", "approve", record_id]) == 2
    err = capsys.readouterr().err
    assert "cannot approve or reject it; another person must" in err and err.count("\n") == 1


def test_an_unreachable_store_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv(
        "IAC_KERNEL_TEAM_STORE", f"postgresql://alice:s3cret@/team?host={tmp_path}/none"
    )
    assert main(["approvals", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iac-kernel approvals: team store postgresql+psycopg://alice:***@")
    assert "unreachable" in err and err.count("\n") == 1 and "s3cret" not in err
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", "not a url s3cret")
    assert main(["audit", "verify"]) == 2
    err = capsys.readouterr().err
    assert "not a database URL" in err and "s3cret" not in err


def test_audit_verify_names_the_broken_record(
    store_env: str, capsys: pytest.CaptureFixture
) -> None:
    store = open_store(store_env)
    for i in range(3):
        audit.append(store, {"kind": "bash", "n": i}, Identity("alice"))
    store.close()
    url = sa.make_url(store_env)
    if url.get_backend_name() != "sqlite":
        url = url.set(username="iac_owner")
    with sa.create_engine(url, poolclass=sa.pool.NullPool).begin() as conn:
        conn.execute(sa.text("DELETE FROM iac_audit WHERE seq = 2"))
    assert main(["audit", "verify"]) == 1
    assert "BROKEN: record 2 was removed" in capsys.readouterr().err


def test_team_init_grants_the_users_role(pg_cluster, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    owner_url, _ = pg_database(pg_cluster)
    # Again, as the admin would after an upgrade: idempotent, same grants.
    assert main(["team", "init", owner_url, "--users-role", "iac_kernel_users"]) == 0
    out = capsys.readouterr().out
    assert "is at the current schema" in out
    assert "iac_kernel_users: SELECT, INSERT on iac_audit" in out
    assert main(["team", "init", owner_url, "--users-role", "x; DROP TABLE iac_audit"]) == 2
    assert "not a plain role name" in capsys.readouterr().err


def _shared_sqlite() -> tuple[str, Path]:
    folder = Path(tempfile.mkdtemp(prefix="iac-team-"))
    os.chmod(folder, 0o1777)
    url = f"sqlite:///{folder / 'team.sqlite'}"
    open_store(url).close()
    os.chmod(folder / "team.sqlite", 0o666)
    return url, folder


REQUEST = """
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import open_store, os_identity
binding = dict(folder="/srv/infra", workspace="prod", data_dir="d", cli_config=None,
               var_files=[], lineage=None)
record = Approvals(open_store()).request(os_identity(), "d" * 64, binding, "Plan: 1 to destroy.",
                                         Requirement(approvers=1, groups={"iacplatform": 1}))
print(record.id)
"""
APPROVE = """
import sys
from iac_kernel.cli import main
sys.exit(main(["approvals", "approve", "%s"]))
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_os_users_the_approver_is_not_the_requester(kind: str, request) -> None:
    needs_root()
    ensure_user(ALICE)
    ensure_user(BOB, groups=(PLATFORM,))
    folder = None
    if kind == "sqlite":
        url, folder = _shared_sqlite()
    else:
        url = pg_database(request.getfixturevalue("pg_cluster"))[1]
    try:
        env = {"IAC_KERNEL_TEAM_STORE": url, "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
        made = run_as(ALICE, REQUEST, env)
        assert made.returncode == 0, made.stderr
        record_id = made.stdout.strip()
        # alice, with USER=root in her environment, approves her own record: refused.
        mine = run_as(ALICE, APPROVE % record_id, env)
        assert mine.returncode == 2
        assert f"{ALICE} asked for it and cannot approve" in mine.stderr
        # root is not in the group the record needs.
        assert main_as_root(url, record_id) == 2
        theirs = run_as(BOB, APPROVE % record_id, env)
        assert theirs.returncode == 0, theirs.stderr
        assert f"approved by {BOB}" in theirs.stdout
        store = open_store(url)
        record = Approvals(store).get(record_id)
        assert record.requester == ALICE and record.status == "approved"
        assert [v.approver for v in record.approvals] == [BOB]
        assert [e.actor for e in audit.entries(store)] == [ALICE, BOB]
        store.close()
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def main_as_root(url: str, record_id: str) -> int:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IAC_KERNEL_TEAM_STORE", url)
        return main(["approvals", "approve", record_id])
