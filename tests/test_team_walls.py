"""The team store is out of every sandbox's reach (issue 43): a sandboxed bash call runs as
the requester, so a store it could open it could write as them. Its SQLite file (the
default in the session store, or a custom path elsewhere) and a PostgreSQL server's socket
folder named by the URL are empty inside, while the agent outside keeps using the store.
Real bash calls (BashTool in a ToolContext, real bubblewrap) and a real PostgreSQL whose
socket lies outside /tmp (every sandbox's /tmp is its own anyway)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.guard.sandbox import hidden
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.sessions.audit import AuditLog
from iac_kernel.team import audit, reach
from iac_kernel.team.audit import close_trails, trail
from iac_kernel.team.store import STORE_ENV
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.bash import BashTool
from team_support import MEMBER_ROLE, Cluster, pg_database, start_cluster, stop_cluster

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="no bubblewrap")

#: Run inside the sandbox: read, rewrite and append to a SQLite store, each attempt's
#: outcome on one line (``argv[1]``: the file).
SQLITE_ATTEMPTS = r"""
import sqlite3, sys
path = sys.argv[1]
try:
    print("read", len(open(path, "rb").read()))
except OSError as exc:
    print("read refused", type(exc).__name__)
for what, sql in (
    ("count", "SELECT count(*) FROM iac_audit"),
    ("rewrite", "UPDATE iac_audit SET record = '{}'"),
    ("forge", "INSERT INTO iac_audit (seq, recorded_at, kind, actor, record, prev_sha256, sha256)"
              " VALUES (999, 0, 'x', 'x', '{}', '', '')"),
):
    try:
        conn = sqlite3.connect(path, timeout=1)
        rows = conn.execute(sql).fetchall()
        conn.commit()
        print(what, "done", rows)
    except Exception as exc:
        print(what, "refused", type(exc).__name__)
"""

#: Connect to a Unix socket (``argv[1]``), as a PostgreSQL client would.
CONNECT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as exc:
    print("refused", type(exc).__name__)
"""


@pytest.fixture(autouse=True)
def fresh_trails() -> Iterator[None]:
    close_trails()
    yield
    close_trails()


async def sandboxed(cwd: Path, command: str) -> str:
    """One bash call in its sandbox; its output."""
    ctx = ToolContext(cwd=cwd, settings=Settings())
    result = await BashTool().run({"command": command}, ctx)
    assert result.raw_output["sandbox"] == "bwrap"
    return result.content


def python(code: str, *args: object) -> str:
    return shlex.join([sys.executable, "-c", code, *map(str, args)])


def _database(url: str) -> str:
    return url.split("/")[3].split("?")[0]


def filled(legacy_root: Path, n: int = 3):
    """The store of the environment's URL, with ``n`` records the agent appended."""
    sink = trail(AuditLog(legacy_root))
    for i in range(n):
        assert sink.append({"kind": "command", "command": f"kubectl delete ns n{i}"}) is None
    return sink


async def test_a_sqlite_store_in_a_writable_folder_cannot_be_read_or_rewritten(
    tmp_path: Path, isolated_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's own folder inside the working folder (which the sandbox may write):
    an empty folder inside, so a rewrite or a forged record lands nowhere."""
    ws = tmp_path / "ws"
    db = ws / ".team" / "team.sqlite"
    monkeypatch.setenv(STORE_ENV, f"sqlite:///{db}")
    sink = filled(isolated_store)
    out = await sandboxed(ws, f"ls -A .team; echo listed; {python(SQLITE_ATTEMPTS, db)}")
    lines = out.splitlines()
    assert lines[0] == "listed", out  # nothing there
    assert "read refused FileNotFoundError" in lines
    assert "rewrite refused OperationalError" in lines and "forge refused OperationalError" in lines
    # Outside, the agent's store is whole and still in use.
    assert [e.seq for e in sink.entries()] == [1, 2, 3] and audit.verify(sink.store()).ok
    assert sink.append({"kind": "command", "command": "helm uninstall web"}) is None
    # The wall is what stops it: without it the same call reads and rewrites the store.
    monkeypatch.setattr(hidden, "store_paths", lambda *_a, **_k: [])
    exposed = await sandboxed(ws, python(SQLITE_ATTEMPTS, db))
    assert "count done [(4,)]" in exposed and "rewrite done []" in exposed, exposed
    assert audit.verify(sink.store()).problem == "record 1 was altered (its hash differs)"


async def test_a_sqlite_store_elsewhere_cannot_be_read(
    outside_tmp: Path, tmp_path: Path, isolated_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside the folders a sandbox may write, the file is read-only inside anyway; the
    wall keeps its records (approvals, the trail) from being read too."""
    folder = outside_tmp / "team"
    db = folder / "team.sqlite"
    monkeypatch.setenv(STORE_ENV, f"sqlite:///{db}")
    sink = filled(isolated_store)
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await sandboxed(ws, f"ls -A {folder}; echo listed; {python(SQLITE_ATTEMPTS, db)}")
    lines = out.splitlines()
    assert lines[0] == "listed" and "read refused FileNotFoundError" in lines, out
    assert "count refused OperationalError" in lines and "rewrite refused OperationalError" in lines
    assert len(sink.entries()) == 3 and audit.verify(sink.store()).ok
    monkeypatch.setattr(hidden, "store_paths", lambda *_a, **_k: [])
    assert "count done [(3,)]" in await sandboxed(ws, python(SQLITE_ATTEMPTS, db))


async def test_a_custom_sqlite_file_among_other_files_is_an_empty_file_inside(
    outside_tmp: Path, tmp_path: Path, isolated_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = outside_tmp / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("readable\n")
    db = shared / "team.sqlite"
    monkeypatch.setenv(STORE_ENV, f"sqlite:///{db}")
    sink = filled(isolated_store)
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await sandboxed(ws, f"cat {shared}/notes.txt; {python(SQLITE_ATTEMPTS, db)}")
    lines = out.splitlines()
    assert lines[0] == "readable" and "read 0" in lines, out
    assert "count refused OperationalError" in lines  # an empty file: no table
    assert "rewrite refused OperationalError" in lines and "forge refused OperationalError" in lines
    assert len(sink.entries()) == 3 and audit.verify(sink.store()).ok


async def test_the_default_store_in_the_session_store_is_hidden(
    outside_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = outside_tmp / "sessions"  # not under /tmp, whose sandbox copy is empty anyway
    monkeypatch.setenv("IAC_KERNEL_SESSIONS_DIR", str(sessions))
    monkeypatch.delenv(STORE_ENV, raising=False)
    sink = filled(sessions)
    db = sessions / reach.DEFAULT_FILE
    assert db.exists()
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await sandboxed(ws, f"ls -A {sessions}; echo listed; {python(SQLITE_ATTEMPTS, db)}")
    lines = out.splitlines()
    assert lines[0] == "listed" and "read refused FileNotFoundError" in lines, out
    assert "rewrite refused OperationalError" in lines
    assert len(sink.entries()) == 3 and audit.verify(sink.store()).ok


@pytest.fixture(scope="module")
def pg_outside() -> Iterator[Cluster]:
    """A PostgreSQL cluster whose socket folder lies outside /tmp."""
    cluster = start_cluster("/var/tmp")
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


async def test_a_postgresql_socket_folder_named_by_the_url_is_empty_inside(
    pg_outside: Cluster, tmp_path: Path, isolated_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _owner, member = pg_database(pg_outside)
    assert f"host={pg_outside.socket}" in member
    socket_file = pg_outside.socket / ".s.PGSQL.5432"
    ws = tmp_path / "ws"
    ws.mkdir()
    psql = shlex.join(
        ["psql", "-h", str(pg_outside.socket), "-U", MEMBER_ROLE, "-d", _database(member)]
    )
    attempts = (
        f"{python(CONNECT, socket_file)}; ls -A {pg_outside.socket}; echo listed; "
        f"{psql} -c \"INSERT INTO iac_audit VALUES (999, 0, 'x', 'x', '{{}}', '', '', NULL)\" "
        "2>&1 | head -c 300; echo"
    )
    # Without the store pointing there, the socket is reachable from a sandbox: a Unix
    # socket is connectable through a read-only mount (the network namespace is no wall).
    monkeypatch.delenv(STORE_ENV, raising=False)
    assert (await sandboxed(ws, python(CONNECT, socket_file))).splitlines()[0] == "connected"
    monkeypatch.setenv(STORE_ENV, member)
    sink = filled(isolated_store)
    out = await sandboxed(ws, attempts)
    lines = out.splitlines()
    assert lines[0] == "refused FileNotFoundError", out
    assert lines[1] == "listed" and "No such file or directory" in out, out
    # Outside, the agent appends and the chain is whole: nothing was forged.
    assert sink.append({"kind": "command", "command": "helm uninstall web"}) is None
    assert [e.seq for e in sink.entries()] == [1, 2, 3, 4] and audit.verify(sink.store()).ok


def test_the_paths_a_url_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv("PGHOST", raising=False)

    def paths(url: str, **env: str) -> set[Path]:
        found = set(reach.store_paths({STORE_ENV: url, **env}, "/nowhere"))
        return found - {Path("/nowhere/team.sqlite")}  # this process's default

    assert paths("postgresql://me@/iac?host=/srv/pg/sock") == {Path("/srv/pg/sock")}
    assert paths("postgresql://me@/iac?host=/a,db.example.com&host=/b") == {Path("/a"), Path("/b")}
    assert paths("postgresql://me@%2Fsrv%2Fpg/iac") == {Path("/srv/pg")}
    assert paths("postgresql://me@db.example.com/iac") == set()  # TCP: no path
    assert paths("postgresql://me@/iac") == {Path("/var/run/postgresql"), Path("/run/postgresql")}
    assert paths("postgresql://me@/iac", PGHOST="/opt/pg") == {Path("/opt/pg")}
    assert paths("sqlite:////srv/team/t.db") == {Path("/srv/team/t.db")}
    assert paths("::no url::") == set()  # no one can use that store


def test_a_custom_store_is_there_to_hide_before_its_first_record(
    outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandbox started before the first record is written must not find the folder
    open and the file made later in it."""
    db = outside_tmp / "team" / "team.sqlite"
    monkeypatch.setenv(STORE_ENV, f"sqlite:///{db}")
    found = hidden.control_plane(Settings(), dict(os.environ))
    assert db.parent in found and db in found  # the folder holds only the store
    assert db.stat().st_mode & 0o777 == 0o600 and db.parent.stat().st_mode & 0o777 == 0o700
    sink = trail(AuditLog(outside_tmp / "sessions"))
    assert sink.append({"kind": "command", "command": "helm uninstall web"}) is None
    assert audit.verify(sink.store()).count == 1  # the empty file became the store
