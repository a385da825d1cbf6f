"""Where the team store can be reached through this machine's filesystem: the paths every
sandbox hides (:func:`iac_kernel.guard.sandbox.hidden.control_plane`).

A sandbox runs as the requester, so a store it could open it could write as the requester.
SQLite is a file (in a folder of its own, the folder: SQLite keeps a journal beside it
while it writes); a PostgreSQL on
this machine is a Unix socket, connectable through a read-only mount, in the folders its URL
names (``?host=/path``, or a ``host`` that is a path), else those of ``PGHOST``, else
libpq's default folders. A store reached over TCP has no path here: a sandbox's network is
its own, and the egress proxy refuses private addresses unless ``egress_allow_private``
names them.

Without ``IAC_KERNEL_TEAM_STORE`` only the standard library is used (the default file lies
in the session store); a URL is read with SQLAlchemy's own parser, the one the store is
opened with, imported then.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote

#: The store's URL (an environment variable: a session never changes it).
STORE_ENV = "IAC_KERNEL_TEAM_STORE"
#: The default SQLite file, in the session store's folder.
DEFAULT_FILE = "team.sqlite"
#: Files SQLite keeps beside a database while it writes (rollback journal, WAL mode).
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")
#: Where libpq looks for a server's socket when a URL names no host (Debian's folder;
#: upstream's ``/tmp`` is private in every sandbox anyway).
DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/run/postgresql")


def default_file(sessions_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<session store>/team.sqlite``: the store with nothing set."""
    if sessions_dir is None:
        from iac_kernel.config import Settings

        sessions_dir = Settings().sessions_dir
    return Path(sessions_dir).expanduser() / DEFAULT_FILE


def store_paths(
    env: Mapping[str, str] | None = None,
    sessions_dir: str | os.PathLike[str] | None = None,
    make: bool = False,
) -> list[Path]:
    """The paths through which the store of ``env`` (and of this process, which is the
    one the agent writes to) can be opened: files and socket folders, whether or not
    they exist yet. A URL that cannot be read names none (no one can use that store).
    ``make``: make a SQLite file set elsewhere that is not there yet (empty, as the
    store makes it), so that a sandbox started before the first record has it hidden."""
    raws = {os.environ.get(STORE_ENV, "").strip()}
    if env is not None:
        raws.add(env.get(STORE_ENV, "").strip())
    found: list[Path] = []
    for raw in sorted(raws):
        found += _paths(raw, sessions_dir, env if env is not None else os.environ, make)
    return list(dict.fromkeys(found))


def _paths(
    raw: str, sessions_dir: str | os.PathLike[str] | None, env: Mapping[str, str], make: bool
) -> list[Path]:
    if not raw:
        return sqlite_paths(default_file(sessions_dir))
    import sqlalchemy as sa

    try:
        url = sa.make_url(raw)
    except sa.exc.ArgumentError:
        return []
    backend = url.get_backend_name()
    if backend == "sqlite":
        name = url.database or ""
        if name.startswith("file:"):  # a URI filename (``?uri=true``)
            name = unquote(name[len("file:") :].partition("?")[0])
        if name in ("", ":memory:"):
            return []
        if make:
            with contextlib.suppress(OSError):  # then the agent cannot make it either
                make_sqlite_file(Path(os.path.abspath(os.path.expanduser(name))))
        return sqlite_paths(name)
    if backend == "postgresql":
        return socket_dirs(url.host, url.query.get("host"), env)
    return []


def make_sqlite_file(path: Path) -> None:
    """Make a SQLite store's file, empty and 0600 (its folder 0700 when new), unless it
    is there; never through a symbolic link (``OSError``)."""
    if os.path.lexists(path):
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def sqlite_paths(database: str | os.PathLike[str]) -> list[Path]:
    """A SQLite file (relative: to this process's folder, as SQLite opens it) and its
    folder when the folder holds nothing else: a sandbox that may write that folder (a
    store inside the working folder) then sees an empty one and cannot leave a journal
    there that SQLite would replay into the store. The journals are not hidden one by
    one: one there when a sandbox starts may be gone when it mounts (the sandbox would
    fail), and hiding one never stops a sandbox that may write the folder from making it."""
    path = Path(os.path.abspath(os.path.expanduser(database)))
    own = {path.name, *(path.name + suffix for suffix in SQLITE_SIDECARS)}
    found = [path]
    try:
        if set(os.listdir(path.parent)) <= own:
            found.append(path.parent)
    except OSError:
        pass
    return found


def socket_dirs(
    host: str | None, query_host: str | Iterable[str] | None, env: Mapping[str, str]
) -> list[Path]:
    """The folders of the Unix sockets libpq would try for these URL parts: every
    ``host`` that is a path (``?host=/a,/b``, repeated ``host=``, a path as the URL's
    host), else ``PGHOST``'s, else the defaults when nothing names a host at all."""
    given: list[str] = []
    for value in [query_host] if isinstance(query_host, str) else list(query_host or ()):
        given += value.split(",")
    if host:
        given.append(unquote(host))
    if not given:
        pghost = env.get("PGHOST") or os.environ.get("PGHOST") or ""
        given = pghost.split(",") if pghost else list(DEFAULT_SOCKET_DIRS)
    return [Path(item.strip()) for item in given if item.strip().startswith("/")]
