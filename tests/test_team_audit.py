"""The audit trail's hash chain in the team store (iac_kernel/team/audit.py), on SQLite and
a real PostgreSQL: tampering found by verify, concurrent writers, the old audit.jsonl
imported once, and the users' role unable to change or delete a row."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from iac_kernel.sessions.audit import AuditLog
from iac_kernel.team import audit
from iac_kernel.team.store import Identity, TeamStoreError, open_store
from team_support import (  # noqa: F401 (fixtures)
    MEMBER_ROLE,
    pg_cluster,
    pg_database,
    stores,
    team_url,
)

ME = Identity("alice")
#: Writers that are processes of their own (the rest of 20 are threads): enough to show
#: locking across processes without paying many interpreter start-ups.
PROCESSES = 4

WRITER = """
import sys
from iac_kernel.team import audit
from iac_kernel.team.store import Identity, open_store
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    audit.append(store, {"kind": "terraform_apply", "writer": sys.argv[2], "n": i}, Identity("w"))
"""


def filled(opener, url: str, n: int = 5):
    store = opener(url)
    for i in range(n):
        audit.append(store, {"kind": "terraform_apply", "n": i, "command": f"apply {i}"}, ME)
    return store


def test_an_intact_chain_verifies(team_url: str, stores) -> None:  # noqa: F811
    store = filled(stores, team_url)
    result = audit.verify(store)
    assert result.ok and result.count == 5
    records = audit.entries(store)
    assert [r.record["n"] for r in records] == list(range(5))
    assert records[0].actor == "alice"


def test_an_edited_row_is_named(team_url: str, stores) -> None:  # noqa: F811
    store = filled(stores, team_url)
    owner = _owner(team_url)
    with owner.begin() as conn:
        conn.execute(
            sa.text("UPDATE iac_audit SET record = :r WHERE seq = 3"),
            {"r": json.dumps({"kind": "terraform_apply", "n": 2, "command": "apply nothing"})},
        )
    result = audit.verify(store)
    assert not result.ok and result.seq == 3
    assert result.problem == "record 3 was altered (its hash differs)"


def test_a_rehashed_row_is_named(team_url: str, stores) -> None:  # noqa: F811
    store = filled(stores, team_url)
    owner = _owner(team_url)
    with owner.begin() as conn:
        row = conn.execute(sa.text("SELECT * FROM iac_audit WHERE seq = 2")).one()
        text = audit.canonical({"kind": "terraform_apply", "n": 1, "command": "harmless"})
        digest = audit.chain_hash(row.prev_sha256, 2, row.recorded_at, row.kind, row.actor, text)
        conn.execute(
            sa.text("UPDATE iac_audit SET record = :r, sha256 = :h WHERE seq = 2"),
            {"r": text, "h": digest},
        )
    result = audit.verify(store)
    assert result.seq == 2 and "record 2 was altered or replaced" in result.problem


def test_a_deleted_row_is_named(team_url: str, stores) -> None:  # noqa: F811
    store = filled(stores, team_url)
    owner = _owner(team_url)
    with owner.begin() as conn:
        conn.execute(sa.text("DELETE FROM iac_audit WHERE seq = 2"))
    result = audit.verify(store)
    assert result.seq == 2 and result.problem == "record 2 was removed"


def test_the_newest_rows_deleted_are_named(team_url: str, stores) -> None:  # noqa: F811
    store = filled(stores, team_url)
    owner = _owner(team_url)
    with owner.begin() as conn:
        conn.execute(sa.text("DELETE FROM iac_audit WHERE seq >= 4"))
    result = audit.verify(store)
    assert result.seq == 4 and "record 4 was removed (the trail held 5 records)" in result.problem


def _owner(store_url: str) -> sa.Engine:
    """A connection with the rights the users' role lacks: the owner on PostgreSQL (an
    insider), the file itself on SQLite."""
    url = sa.make_url(store_url)
    if url.get_backend_name() == "sqlite":
        return sa.create_engine(url, poolclass=sa.pool.NullPool)
    return sa.create_engine(url.set(username="iac_owner"), poolclass=sa.pool.NullPool)


def test_twenty_concurrent_writers_lose_nothing(team_url: str, stores) -> None:  # noqa: F811
    """20 writers at once (processes and threads, each with its own connection)."""
    store = stores(team_url)  # made and migrated once, before the writers start
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, team_url, f"p{i}", "10"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    errors: list[Exception] = []

    def thread_writer(i: int) -> None:
        mine = open_store(team_url)  # a connection of its own, as another process has
        try:
            for n in range(10):
                audit.append(mine, {"kind": "bash", "writer": f"t{i}", "n": n}, ME)
        except Exception as exc:
            errors.append(exc)
        finally:
            mine.close()

    threads = [threading.Thread(target=thread_writer, args=(i,)) for i in range(20 - PROCESSES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read()
    assert not errors
    records = audit.entries(store)
    assert len(records) == 200
    seen = {(r.record["writer"], r.record["n"]) for r in records}
    assert len(seen) == 200
    assert [r.seq for r in records] == list(range(1, 201))
    assert audit.verify(store).ok


def test_a_new_sqlite_store_is_made_once_by_racing_processes(tmp_path: Path, stores) -> None:  # noqa: F811
    url = f"sqlite:///{tmp_path / 'new' / 'team.sqlite'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, f"p{i}", "2"], stderr=subprocess.PIPE, text=True
        )
        for i in range(PROCESSES)
    ]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read()
    store = stores(url)
    assert audit.verify(store).count == 2 * PROCESSES
    assert oct(os.stat(tmp_path / "new" / "team.sqlite").st_mode & 0o777) == "0o600"
    assert oct(os.stat(tmp_path / "new").st_mode & 0o777) == "0o700"


def test_old_jsonl_records_are_imported_once(team_url: str, tmp_path: Path, stores) -> None:  # noqa: F811
    log = AuditLog(tmp_path / "sessions")
    old = [{"kind": "terraform_apply", "outcome": "applied", "n": i} for i in range(3)]
    for record in [*old, old[0]]:  # the same record twice is two records
        log.append(record)
    store = stores(team_url)
    audit.append(store, {"kind": "bash", "command": "kubectl apply"}, ME)
    assert audit.import_records(store, log.records(), ME) == 4
    assert audit.import_records(store, log.records(), ME) == 0
    log.append({"kind": "terraform_apply", "outcome": "rejected"})  # written meanwhile
    assert audit.import_records(store, log.records(), ME) == 1
    stored = [r.record for r in audit.entries(store)]
    assert stored[1:] == [*old, old[0], {"kind": "terraform_apply", "outcome": "rejected"}]
    assert audit.verify(store).ok


def test_racing_imports_add_each_record_once(tmp_path: Path, stores) -> None:  # noqa: F811
    log = AuditLog(tmp_path / "sessions")
    for i in range(30):
        log.append({"kind": "terraform_apply", "n": i})
    store = stores(f"sqlite:///{tmp_path / 'team.sqlite'}")
    counts: list[int] = []
    threads = [
        threading.Thread(
            target=lambda: counts.append(audit.import_records(store, log.records(), ME))
        )
        for _ in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(counts) == [0, 0, 0, 0, 30]
    assert [r.record["n"] for r in audit.entries(store)] == list(range(30))


def test_the_users_role_cannot_update_or_delete_audit_rows(pg_cluster, stores) -> None:  # noqa: F811
    owner_url, member_url = pg_database(pg_cluster)
    store = filled(stores, member_url, 3)  # the member appends (INSERT) and reads (SELECT)
    member = sa.create_engine(member_url, poolclass=sa.pool.NullPool)
    for sql in (
        "UPDATE iac_audit SET record = '{}' WHERE seq = 2",
        "DELETE FROM iac_audit WHERE seq = 3",
        "UPDATE iac_approvals SET status = 'approved'",  # allowed: no row, no harm
        "DELETE FROM iac_approvals",
        "DELETE FROM iac_approval_votes",
        "UPDATE iac_approval_votes SET decision = 'approve'",
        "DROP TABLE iac_audit",
        "TRUNCATE iac_audit",
    ):
        with member.connect() as conn:
            try:
                conn.execute(sa.text(sql))
                conn.commit()
                refused = False
            except sa.exc.ProgrammingError as exc:
                refused = "permission denied" in str(exc) or "must be owner" in str(exc)
        allowed = sql.startswith("UPDATE iac_approvals ")
        assert refused == (not allowed), sql
    assert audit.verify(store).ok and audit.verify(store).count == 3
    grants = pg_cluster.psql(
        "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
        "WHERE grantee = 'iac_kernel_users' ORDER BY 1, 2",
        database=sa.make_url(owner_url).database,
    ).split()
    assert "iac_audit|INSERT" in grants and "iac_audit|SELECT" in grants
    assert not [
        g
        for g in grants
        if g.startswith("iac_audit|") and g.split("|")[1] not in ("INSERT", "SELECT")
    ]


def test_an_uninitialised_postgres_store_is_one_line(pg_cluster) -> None:  # noqa: F811
    name = "empty_" + secrets.token_hex(4)
    pg_cluster.psql(f"CREATE DATABASE {name} OWNER iac_owner")
    with pytest.raises(TeamStoreError) as caught:
        open_store(pg_cluster.url(MEMBER_ROLE, name))
    message = str(caught.value)
    assert "is not initialised" in message and "iac-kernel team init" in message
    assert "\n" not in message
    # and the agent made nothing there: the owner's init is the only way in
    assert (
        pg_cluster.psql(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'iac_%'", database=name
        ).strip()
        == "0"
    )
