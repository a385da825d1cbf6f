"""The audit trail as the agent and ``iac-kernel audit`` use it (iac_kernel/team/audit.py's
Trail): records in the team store, the older audit.jsonl imported once and kept, a store
that cannot be reached losing nothing, ``iac-kernel audit verify`` naming the first
record altered or removed (SQLite and a real PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from iac_kernel.cli import main
from iac_kernel.sessions.audit import AuditLog
from iac_kernel.team import audit
from iac_kernel.team.audit import Trail, close_trails, trail
from iac_kernel.team.store import STORE_ENV
from team_support import pg_cluster, team_url  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def fresh_trails() -> Iterator[None]:
    """Every test opens its own stores; none stays open after it."""
    close_trails()
    yield
    close_trails()


def records(n: int, **extra: object) -> list[dict]:
    return [{"kind": "terraform_apply", "outcome": "applied", "n": i, **extra} for i in range(n)]


def owner_engine(url: str) -> sa.Engine:
    """Rights the users' role lacks: the owner on PostgreSQL, the file itself on SQLite."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        parsed = parsed.set(username="iac_owner")
    return sa.create_engine(parsed, poolclass=sa.pool.NullPool)


def test_audit_verify_names_an_edited_then_a_deleted_record(
    team_url: str,  # noqa: F811
    isolated_store: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(STORE_ENV, team_url)
    sink = trail(AuditLog(isolated_store))
    for record in records(5):
        assert sink.append(record) is None
    assert main(["audit", "verify"]) == 0
    assert "intact: 5 records" in capsys.readouterr().out
    owner = owner_engine(team_url)
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE iac_audit SET record = '{}' WHERE seq = 4"))
    assert main(["audit", "verify"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("BROKEN: record 4 was altered (its hash differs)") and "\n" not in err
    with owner.begin() as conn:
        conn.execute(sa.text("DELETE FROM iac_audit WHERE seq = 2"))
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().err.strip().endswith("BROKEN: record 2 was removed")
    owner.dispose()


def test_the_old_jsonl_is_imported_once_and_kept(
    isolated_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = AuditLog(isolated_store)
    old = records(3, cwd="/srv/infra")
    for record in [*old, old[0]]:  # the same record twice is two records
        legacy.append(record)
    before = legacy.path.read_bytes()
    assert main(["audit", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["n"] for r in listed] == [0, 1, 2, 0] and [r["seq"] for r in listed] == [1, 2, 3, 4]
    # Another process (the kernel, the CLI again) imports nothing twice.
    env = {**os.environ, "IAC_KERNEL_SESSIONS_DIR": str(isolated_store)}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "iac_kernel.cli", "audit", "--json", "--cwd", "/srv/infra"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 4
    assert Trail(legacy).append({"kind": "command", "command": "kubectl delete ns a"}) is None
    entries = trail(legacy).entries()
    assert [e.record.get("n") for e in entries] == [0, 1, 2, 0, None]
    assert legacy.path.read_bytes() == before  # never rewritten, never removed
    assert audit.verify(trail(legacy).store()).ok


@pytest.mark.parametrize("broken", ["sqlite-cannot-be-made", "postgresql-unreachable"])
def test_a_store_that_cannot_be_used_loses_nothing(
    broken: str,
    isolated_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store's folder should be")
    url = (
        f"sqlite:///{blocker}/team.sqlite"
        if broken.startswith("sqlite")
        else f"postgresql://nobody@/team?host={tmp_path / 'no-server'}"
    )
    monkeypatch.setenv(STORE_ENV, url)
    legacy = AuditLog(isolated_store)
    sink = trail(legacy)
    said = sink.append({"kind": "command", "command": "helm uninstall web"})
    assert said is not None and "\n" not in said
    assert said.startswith("audit trail: team store ") and str(legacy.path) in said
    assert sink.append({"kind": "command", "command": "helm uninstall api"}) is None  # said once
    assert [r["command"] for r in legacy.records()] == ["helm uninstall web", "helm uninstall api"]
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iac-kernel audit: team store ") and err.count("\n") == 1
    if not broken.startswith("sqlite"):
        return
    # The store comes back: what was kept goes in first, in order, then the new record.
    blocker.unlink()
    monkeypatch.setattr(audit, "RETRY_AFTER", 0.0)
    assert sink.append({"kind": "command", "command": "kubectl delete ns shop"}) is None
    shown = [e.record["command"] for e in sink.entries()]
    assert shown == ["helm uninstall web", "helm uninstall api", "kubectl delete ns shop"]
    assert sink.problem is None and audit.verify(sink.store()).ok


def test_a_malformed_store_url_is_one_line(
    isolated_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(STORE_ENV, "::no url at all::")
    legacy = AuditLog(isolated_store)
    said = trail(legacy).append({"kind": "command", "command": "git push origin main"})
    assert said is not None and "IAC_KERNEL_TEAM_STORE: not a database URL" in said
    assert [r["command"] for r in legacy.records()] == ["git push origin main"]
    for argv in (["audit"], ["audit", "verify"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "not a database URL" in err and err.count("\n") == 1, err
        assert "::no url at all::" not in err  # never echoed: it may hold a password
