"""Fixtures of the team store tests: a throwaway PostgreSQL cluster on a Unix socket, OS
users to act as different people, and a store URL per test (SQLite and PostgreSQL).

PostgreSQL refuses to run as root, so as root the cluster runs as an OS user made for it
(``iacpg``) through ``runuser``; the socket lives in a temporary folder and TCP is off.
Other OS users (``iacalice``, ``iacbob``) run small Python processes: their identity is
their real uid, which is what the team store believes.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import RULES_ENV, Requirement
from iac_kernel.team.store import Identity, TeamStore, init_store, open_store

PG_USER = "iacpg"
ALICE, BOB = "iacalice", "iacbob"
PLATFORM = "iacplatform"
OWNER_ROLE, USERS_ROLE, MEMBER_ROLE = "iac_owner", "iac_kernel_users", "iac_member"

BOB_ID = Identity("bob", groups=frozenset({"platform"}))
#: Where the test records' plans would apply (no folder of this machine).
BINDING = {
    "folder": "/srv/infra",
    "workspace": "prod",
    "data_dir": None,
    "cli_config": None,
    "var_files": [],
    "lineage": None,
}
#: A rule every change of the test workspace (workspace "default") that destroys matches.
DEFAULT_RULE = """
[[rule]]
name = "default needs platform"
when = { workspace = "def*", actions = ["delete", "replace"] }
approvers = 1
group = "platform"
"""


def initdb() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    which = shutil.which("initdb")
    return Path(found[-1]) if found else (Path(which) if which else None)


def _version(path: str) -> int:
    try:
        return int(Path(path).parent.parent.name)
    except ValueError:
        return 0


def ensure_user(name: str, groups: tuple[str, ...] = ()) -> None:
    """An OS user without login or home (made once; a parallel run may make it first)."""
    for group in groups:
        _admin(["groupadd", "-f", group])
    if not _exists(name):
        # 9: made meanwhile by a parallel run
        _admin(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], 9)
    for group in groups:
        _admin(["gpasswd", "-a", name, group])


def _admin(argv: list[str], *also_fine: int) -> None:
    """Run a user-database command, again while another holds /etc/passwd's lock."""
    for _ in range(20):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode in (0, *also_fine):
            return
        time.sleep(0.25)
    raise RuntimeError(f"{argv[0]}: {done.stderr.strip()}")


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def as_user(user: str | None, argv: list[str]) -> list[str]:
    return argv if user is None else ["runuser", "-u", user, "--", *argv]


def python_as(user: str, argv: list[str], stash: Path) -> list[str]:
    """``argv`` (a run of this Python) as ``user``. This Python may live in a folder other
    users cannot enter (pyenv in a 0700 ``/root``): then the run gets a private mount
    namespace where that folder is an empty 0755 tmpfs with only the needed part bound back
    (through mount points in ``stash``, an empty folder the caller removes)."""
    needed = {os.path.realpath(p) for p in (sys.executable, sys.prefix, sys.base_prefix)}
    binds: dict[str, str] = {}
    for path in needed:
        parts = Path(path).parts
        for depth in range(2, len(parts)):
            folder = Path(*parts[:depth])
            if not os.stat(folder).st_mode & 0o001:
                binds[str(folder / parts[depth])] = str(folder)
                break
    if not binds:
        return as_user(user, argv)
    script = []
    for i, inner in enumerate(sorted(binds)):
        script += [f"mkdir {stash}/{i}", f"mount --bind {inner} {stash}/{i}"]
    for blocked in sorted(set(binds.values())):
        script.append(f"mount -t tmpfs -o mode=755 tmpfs {blocked}")
    for i, inner in enumerate(sorted(binds)):
        script += [f"mkdir -p {inner}", f"mount --bind {stash}/{i} {inner}"]
    script.append('exec runuser -u "$0" -- "$@"')
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-ec",
        " && ".join(script),
        user,
        *argv,
    ]


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make OS users (useradd) and run processes as them")


@dataclass
class Cluster:
    """A running cluster: its socket folder and the OS user it runs as (None: ourselves)."""

    root: Path
    socket: Path
    os_user: str | None

    def url(self, role: str, database: str) -> str:
        return f"postgresql+psycopg://{role}@/{database}?host={self.socket}"

    def psql(self, sql: str, database: str = "postgres", role: str | None = None) -> str:
        bindir = initdb().parent
        role = role or self.os_user or pwd.getpwuid(os.getuid()).pw_name
        argv = [str(bindir / "psql"), "-h", str(self.socket), "-U", role, "-d", database]
        done = subprocess.run(
            as_user(self.os_user, [*argv, "-v", "ON_ERROR_STOP=1", "-Atc", sql]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode:
            raise RuntimeError(f"psql: {done.stderr.strip()}")
        return done.stdout


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster on a Unix socket (no TCP), trust authentication."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def start_cluster(parent: str | None = None) -> Cluster:
    """Start a throwaway cluster in a new folder under ``parent`` (default: the temporary
    folder), with the owner, users' and member roles made; skips without PostgreSQL."""
    binary = initdb()
    if binary is None:
        pytest.skip("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
    user = None
    if os.geteuid() == 0:
        ensure_user(PG_USER)
        user = PG_USER
    root = Path(tempfile.mkdtemp(prefix="iac-pg-", dir=parent))
    os.chmod(root, 0o755)  # other OS users reach the socket inside
    socket = root / "sock"
    socket.mkdir()
    if user:
        shutil.chown(root, user)
        shutil.chown(socket, user)
    data = root / "data"
    bindir = binary.parent
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run(
        as_user(
            user,
            [
                str(binary),
                "-D",
                str(data),
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-U",
                user or pwd.getpwuid(os.getuid()).pw_name,
            ],
        ),
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    options = f"-c listen_addresses='' -k {socket} -c fsync=off -c max_connections=200"
    subprocess.run(
        as_user(
            user,
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(root / "log"),
                "-w",
                "-o",
                options,
                "start",
            ],
        ),
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    cluster = Cluster(root, socket, user)
    try:
        cluster.psql(
            f"CREATE ROLE {OWNER_ROLE} LOGIN CREATEROLE; CREATE ROLE {USERS_ROLE} NOLOGIN; "
            f"CREATE ROLE {MEMBER_ROLE} LOGIN IN ROLE {USERS_ROLE}"
        )
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    """Stop ``cluster`` at once and remove its folder."""
    bindir = initdb().parent
    data = cluster.root / "data"
    subprocess.run(
        as_user(
            cluster.os_user, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
        ),
        capture_output=True,
        timeout=120,
    )
    shutil.rmtree(cluster.root, ignore_errors=True)


def pg_database(cluster: Cluster) -> tuple[str, str]:
    """A new database owned by the owner role, made at the current schema by ``team
    init``; returns (owner URL, a users'-role member's URL)."""
    name = "t_" + secrets.token_hex(6)
    cluster.psql(f"CREATE DATABASE {name} OWNER {OWNER_ROLE}")
    init_store(cluster.url(OWNER_ROLE, name), USERS_ROLE).close()
    return cluster.url(OWNER_ROLE, name), cluster.url(MEMBER_ROLE, name)


@pytest.fixture
def stores() -> Iterator[Callable[[str], TeamStore]]:
    """``open_store``, every store it opened closed after the test (no pooled
    connections outlive it)."""
    opened: list[TeamStore] = []

    def opener(url: str) -> TeamStore:
        opened.append(open_store(url))
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def team_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store's URL, as the agent's users reach it (on PostgreSQL: a member of
    the users' role, not the owner; the database is dropped after the test)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'team.sqlite'}"
        return
    cluster = request.getfixturevalue("pg_cluster")
    url = pg_database(cluster)[1]
    yield url
    cluster.psql(f"DROP DATABASE {url.split('/')[3].split('?')[0]} WITH (FORCE)")


def run_as(user: str | None, code: str, env: dict[str, str], timeout: float = 120):
    """Run ``python -c code`` as an OS user (``USER``/``LOGNAME`` say root on purpose:
    the identity must come from the uid)."""
    with tempfile.TemporaryDirectory(prefix="iac-bind-") as stash:
        return subprocess.run(
            python_as(user, [sys.executable, "-c", code], Path(stash)),
            capture_output=True,
            text=True,
            env={**os.environ, "USER": "root", "LOGNAME": "root", **env},
            timeout=timeout,
            cwd="/",
        )


def admin_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    """Write ``text`` as the administrator's approval rules and point the kernel at them."""
    path = tmp_path / "admin" / "approvals.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    monkeypatch.setenv(RULES_ENV, str(path))
    return path


def new_record(
    book: Approvals,
    who: Identity,
    summary: str,
    need: Requirement,
    card: Mapping[str, object] | None = None,
) -> Approval:
    """A new pending record of ``who`` for :data:`BINDING` (its own random plan hash, so
    never an earlier one)."""
    return book.request(who, secrets.token_hex(32), BINDING, summary, need, card=card)


def records(url: str, statuses: tuple[str, ...] | None = None) -> list[Approval]:
    """The approval records of the store at ``url`` (those in ``statuses``, or all)."""
    store = open_store(url)
    try:
        return Approvals(store).list(statuses)
    finally:
        store.close()


class Approver(threading.Thread):
    """Waits (in its own thread, with its own store connection) for the first pending
    record, then calls ``act(book, record)`` while the apply waits."""

    def __init__(self, url: str, act: Callable[[Approvals, Approval], None]) -> None:
        super().__init__(daemon=True)
        self.url, self.act = url, act
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            store = open_store(self.url)
            try:
                book = Approvals(store)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    pending = book.list(("pending",))
                    if pending:
                        self.act(book, pending[0])
                        return
                    time.sleep(0.05)
                raise AssertionError("no pending approval record appeared")
            finally:
                store.close()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def done(self) -> None:
        """Wait for the thread; what it raised fails the test."""
        self.join(30)
        assert self.error is None, self.error
