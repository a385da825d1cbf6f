"""The team store: one SQLAlchemy database for approval records and the audit trail.

Where: the URL of ``IAC_KERNEL_TEAM_STORE`` (an admin's setting, never a session's),
else SQLite at ``<session store>/team.sqlite`` (0600, in the store folder that every
sandbox has hidden). SQLite is made and upgraded on first use. PostgreSQL is made and
upgraded only by its owner (``iac-kernel team init OWNER_URL``), which grants the users'
role what the agent needs and no more: audit rows may be read and added, never changed or
deleted, so the hash chain is a second wall, not the only one. The agent itself never
migrates PostgreSQL: an uninitialised or older schema is one readable error.

Writers serialise where it matters: SQLite opens every transaction with ``BEGIN
IMMEDIATE`` (one writer at a time, others wait), PostgreSQL locks the row a decision is
about (``SELECT ... FOR UPDATE``). Schema changes are Alembic migrations shipped in
``migrations/`` and run through Alembic's API on a connection this module hands them.
"""

from __future__ import annotations

import functools
import grp
import json
import os
import pwd
import re
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from iac_kernel.team.reach import DEFAULT_FILE as DEFAULT_FILE
from iac_kernel.team.reach import STORE_ENV as STORE_ENV
from iac_kernel.team.reach import default_file, make_sqlite_file

if TYPE_CHECKING:
    from alembic.config import Config
#: Alembic's version table (named so the schema can share a database with others).
VERSION_TABLE = "iac_alembic_version"
MIGRATIONS = Path(__file__).with_name("migrations")
#: The users' role ``team init`` grants to when none is named.
USERS_ROLE = "iac_kernel_users"
#: What the users' role may do to each table on PostgreSQL, and nothing else.
GRANTS = {
    "iac_approvals": "SELECT, INSERT, UPDATE",
    "iac_approval_votes": "SELECT, INSERT",
    "iac_audit": "SELECT, INSERT",
    # Appenders lock the head row (FOR UPDATE needs UPDATE) and move it on.
    "iac_audit_head": "SELECT, UPDATE",
    VERSION_TABLE: "SELECT",
}
_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

metadata = sa.MetaData()
approvals = sa.Table(
    "iac_approvals",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("requester", sa.String(255), nullable=False),
    sa.Column("plan_sha256", sa.String(64), nullable=False),
    sa.Column("binding", sa.Text, nullable=False),
    sa.Column("binding_sha256", sa.String(64), nullable=False),
    sa.Column("live_key", sa.String(64), unique=True),
    sa.Column("workspace", sa.String(255), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("card", sa.Text),
    sa.Column("rule", sa.Text, nullable=False),
    sa.Column("required", sa.Integer, nullable=False),
    sa.Column("groups", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("decided_at", sa.Float),
    sa.Column("spent_at", sa.Float),
)
votes = sa.Table(
    "iac_approval_votes",
    metadata,
    sa.Column("approval_id", sa.String(32), primary_key=True),
    sa.Column("approver", sa.String(255), primary_key=True),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("approver_groups", sa.Text, nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("at", sa.Float, nullable=False),
)
audit = sa.Table(
    "iac_audit",
    metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("prev_sha256", sa.String(64), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("import_key", sa.String(80), unique=True),
)
audit_head = sa.Table(
    "iac_audit_head",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
)


class TeamStoreError(RuntimeError):
    """The store cannot be used (unreachable, uninitialised, refused); one readable line."""


@dataclass(frozen=True)
class Identity:
    """Who acts, as an authenticator established it (the OS for a process, later the
    hub's OAuth or a bearer token's owner): never built from a caller's text."""

    name: str
    via: str = "os"
    groups: frozenset[str] = field(default_factory=frozenset)


def os_identity() -> Identity:
    """The process's real user, from its real uid (never ``$USER`` or ``$LOGNAME``),
    with the groups the system gives that user."""
    uid = os.getuid()
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return Identity(f"uid:{uid}")
    gids = set(os.getgrouplist(entry.pw_name, entry.pw_gid))
    names = set()
    for gid in gids:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.add(str(gid))
    return Identity(entry.pw_name, "os", frozenset(names))


#: Where JupyterHub tells a single-user server (and the kernels it starts) its API and
#: the server's own token: the token authenticates its owner to the hub.
HUB_API_ENV, HUB_TOKEN_ENV = "JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN"


@functools.cache
def process_identity() -> Identity:
    """Who runs this process: under JupyterHub the hub user that the server's token
    belongs to (asked of the hub: a ``JUPYTERHUB_USER`` anyone can set names no one),
    else :func:`os_identity`. Hub users sharing one OS account are told apart this way;
    a hub that cannot be asked is an error, never a fallback to the shared account."""
    api, token = os.environ.get(HUB_API_ENV), os.environ.get(HUB_TOKEN_ENV)
    if not (api and token):
        return os_identity()
    request = urllib.request.Request(
        api.rstrip("/") + "/user", headers={"Authorization": f"token {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            model = json.load(answer)
    except (OSError, ValueError) as exc:
        raise TeamStoreError(f"could not ask JupyterHub who this is ({api}): {exc}") from None
    found = hub_identity(model)
    if found is None:
        raise TeamStoreError(f"JupyterHub ({api}) did not say whose token this server holds")
    return found


def hub_identity(model: object) -> Identity | None:
    """The identity in a JupyterHub user model (its name, with its groups when the token's
    scopes show them); None when the model names no user."""
    name = model.get("name") if isinstance(model, dict) else None
    if not isinstance(name, str) or not name:
        return None
    groups = model.get("groups")  # type: ignore[union-attr]
    names = frozenset(str(g) for g in groups) if isinstance(groups, list) else frozenset()
    return Identity(name, "jupyterhub", names)


def store_url(
    env: Mapping[str, str] | None = None, sessions_dir: str | os.PathLike[str] | None = None
) -> URL:
    """The store's URL: ``IAC_KERNEL_TEAM_STORE``, else SQLite in the session store
    (``sessions_dir``, default the settings')."""
    env = os.environ if env is None else env
    raw = env.get(STORE_ENV, "").strip()
    if not raw:
        return URL.create("sqlite", database=str(default_file(sessions_dir)))
    return parse_url(raw, STORE_ENV)


def parse_url(raw: str | URL, what: str = "team store") -> URL:
    """A database URL; ``postgresql://`` means psycopg 3 (SQLAlchemy's default is psycopg2)."""
    try:
        url = sa.make_url(raw)
    except sa.exc.ArgumentError:
        raise TeamStoreError(  # never echoed: it may hold a password
            f"{what}: not a database URL (sqlite:///PATH or postgresql://USER@HOST/DB)"
        ) from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def shown(url: URL) -> str:
    """The URL without its password, for messages."""
    return url.render_as_string(hide_password=True)


class TeamStore:
    """An open store: the engine, and transactions that serialise writers."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = engine.url
        self.is_sqlite = engine.url.get_backend_name() == "sqlite"

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One transaction, committed at the end; a database failure is one line."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.IntegrityError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise TeamStoreError(f"team store {shown(self.url)}: {_first_line(exc)}") from None

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: URL | str | None = None, migrate: bool | None = None) -> TeamStore:
    """The store at ``url`` (default :func:`store_url`), reachable and at the current
    schema. SQLite is upgraded here (``migrate`` defaults to true for it); PostgreSQL
    only with ``migrate=True``, which :func:`init_store` passes as the owner."""
    url = store_url() if url is None else parse_url(url)
    engine = _engine(url)
    store = TeamStore(engine)
    if migrate is None:
        migrate = store.is_sqlite
    try:
        with engine.connect() as conn:
            current = _current_revision(conn)
        if current != _head() and migrate:
            _upgrade(engine)
        elif current != _head():
            engine.dispose()
            what = "not initialised" if current is None else f"at schema {current}, not {_head()}"
            raise TeamStoreError(
                f"team store {shown(url)} is {what}: its owner runs "
                "`iac-kernel team init OWNER_URL`"
            )
    except sa.exc.SQLAlchemyError as exc:
        engine.dispose()
        how = " is unreachable" if isinstance(exc, sa.exc.OperationalError) else ""
        raise TeamStoreError(f"team store {shown(url)}{how}: {_first_line(exc)}") from None
    return store


def init_store(owner_url: URL | str, users_role: str = USERS_ROLE) -> TeamStore:
    """Make or upgrade the schema as its owner; on PostgreSQL grant ``users_role``
    (made when missing, without login) exactly :data:`GRANTS`."""
    if not _ROLE.match(users_role):
        raise TeamStoreError(f"--users-role {users_role!r}: not a plain role name")
    store = open_store(owner_url, migrate=True)
    if store.is_sqlite:
        return store
    quote = store.engine.dialect.identifier_preparer.quote
    role = quote(users_role)
    with store.transaction() as conn:
        exists = conn.execute(
            sa.text("SELECT 1 FROM pg_roles WHERE rolname = :role"), {"role": users_role}
        ).first()
        if not exists:
            conn.exec_driver_sql(f"CREATE ROLE {role} NOLOGIN")
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {quote(schema)} TO {role}")
        for table, rights in GRANTS.items():
            conn.exec_driver_sql(f"REVOKE ALL ON {quote(table)} FROM {role}")
            conn.exec_driver_sql(f"GRANT {rights} ON {quote(table)} TO {role}")
    return store


def _engine(url: URL) -> Engine:
    if url.get_backend_name() != "sqlite":
        try:
            return sa.create_engine(url, pool_pre_ping=True, connect_args=_pg_args(url))
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise TeamStoreError(f"team store {shown(url)}: {_first_line(exc)}") from None
    if url.database and url.database != ":memory:":
        _sqlite_file(Path(url.database))
    # No pool: a connection is cheap to open, and a pooled one would keep the file open
    # in every process that ever wrote a record.
    engine = sa.create_engine(url, connect_args={"timeout": 60}, poolclass=sa.pool.NullPool)
    sa.event.listen(engine, "connect", _sqlite_connect)
    sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


def _pg_args(url: URL) -> dict[str, Any]:
    return {"connect_timeout": 10} if url.get_backend_name() == "postgresql" else {}


def _sqlite_file(path: Path) -> None:
    """Make the file 0600 (its folder 0700 when new); refuse a symbolic link."""
    if path.is_symlink():
        raise TeamStoreError(f"team store {path} is a symbolic link; refused")
    try:
        make_sqlite_file(path)
    except OSError as exc:
        raise TeamStoreError(f"team store {path}: cannot be made ({exc.strerror})") from None


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling would defer BEGIN; _sqlite_begin emits it.
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys = ON")


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


# Alembic is imported where it is used: most processes only append and read.


def _current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["version_table"] = VERSION_TABLE
    return config


@functools.cache
def _head() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head()


def _upgrade(engine: Engine) -> None:
    from alembic import command

    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    """``2026-12-07T17:00:00Z`` (UTC), or ``None``."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
