"""The credential broker, agent side: placeholders for sandboxes, the real values for
the proxy.

:func:`prepare` finds the brokerable credentials (:mod:`.credentials`, :mod:`.formats`),
gives each a placeholder of the same shape and writes, in the agent's private folder
(``~/.iac-code/egress``, hidden from every sandbox, mode 0700):

* ``agents/<pid>/broker.json`` (0600; each agent process has its own folder): the table
  (:mod:`.addon_table`: placeholder -> real value and the hosts it belongs to), read by
  the proxy's addon (``addon_broker.py``, loaded by ``mitmdump``);
* ``agents/<pid>/placeholders/``: a copy of every brokered credential file
  (:mod:`.stores`) with each real value replaced, mounted over the real one for guarded
  programs; a file that cannot be parsed in full (or read: not UTF-8, too large, not a
  regular file), or whose copy still holds a real or secret-shaped value, gets an EMPTY
  copy instead, and the reason is logged (:attr:`Brokered.refused`): it fails closed,
  never open. Stores guarded programs do not need (``hide``) get an empty file or folder.

The result (:class:`Brokered`) gives a sandbox its environment (:meth:`Brokered.env`)
and its mounts (:meth:`Brokered.guarded_mounts`), and the proxy its table.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import secrets
import shutil
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from iac_kernel.egress import addon_table, credentials, stores
from iac_kernel.egress.credentials import AWS_HOSTS, Credential
from iac_kernel.egress.formats import FORMATS, Context, Format, Parsed, Unparsable, read_text
from iac_kernel.egress.secret_check import leftover

log = logging.getLogger(__name__)

#: The broker's mitmdump scripts (beside this module), in order: the swaps, the scrub.
ADDONS = ("addon_broker.py", "addon_scrub.py")
#: The credential stores that get placeholder copies (where they are, the variables that
#: move them and their formats: :data:`.stores.STORES`).
FILES = tuple(store for store in stores.STORES if store.treat == stores.BROKER)
#: Paths never mounted over (``TF_CLI_CONFIG_FILE=/dev/null`` is common).
_SYSTEM = (Path("/dev"), Path("/proc"), Path("/sys"))
#: A real value shorter than this is replaced only where it is a whole variable's value.
_SUBSTRING_MIN = 8


def private_dir() -> Path:
    """The broker's private folder (``$IAC_KERNEL_EGRESS_DIR``, else ``~/.iac-code/egress``)."""
    env = os.environ.get("IAC_KERNEL_EGRESS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".iac-code" / "egress"


def _install_key(folder: Path) -> bytes:
    path = folder / "placeholder.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        key = secrets.token_bytes(32)
        _write_private(path, key.hex())
        return key


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


@dataclass
class Brokered:
    """What :func:`prepare` made: the credentials with their placeholders, the files."""

    folder: Path
    #: real value -> placeholder, every brokered value.
    swaps: dict[str, str]
    entries: list[dict] = field(default_factory=list)
    #: host path of a real credential file or folder -> its placeholder copy (or an
    #: empty file or folder: a refused file, a hidden store).
    mounts: dict[Path, Path] = field(default_factory=dict)
    #: credential file -> why its copy is empty (also logged).
    refused: dict[Path, str] = field(default_factory=dict)
    #: what was found and not brokered (an entry with no host: never swapped).
    notes: list[str] = field(default_factory=list)
    #: The home folder the stores were found in.
    home: Path | None = None

    @property
    def own(self) -> Path:
        """This agent process's folder (its table and placeholder copies): two agents of
        one user never overwrite each other's; the key and the CA stay shared."""
        return self.folder / AGENTS / str(os.getpid())

    @property
    def table(self) -> Path:
        return self.own / "broker.json"

    @property
    def confdir(self) -> Path:
        """mitmproxy's confdir (the interception CA's key lives there)."""
        return self.folder / "mitmproxy"

    def substitute(self, text: str) -> str:
        """``text`` with every brokered real value (raw and URL-quoted) replaced."""
        for real, fake in sorted(self.swaps.items(), key=lambda kv: -len(kv[0])):
            if len(real) >= _SUBSTRING_MIN or text == real:
                text = text.replace(real, fake)
                if quote(real, safe="") != real:
                    text = text.replace(quote(real, safe=""), quote(fake, safe=""))
        return text

    def guarded_mounts(self, env: Mapping[str, str]) -> dict[Path, Path]:
        """What a guarded program of a call with ``env`` gets mounted: :attr:`mounts`,
        and an empty file or folder over every brokered or hidden store that ``env``
        names and the broker did not prepare (a variable only the call sets): such a
        store is hidden, never given as itself."""
        found = dict(self.mounts)
        home = self.home or Path(os.path.expanduser("~"))
        for store, where in stores.located(env, home):
            if store.treat == stores.GIVE:
                continue
            paths = where.paths if store.treat == stores.HIDE else [p for p, _f in where.files]
            for path in paths:
                if _system(path) or not os.path.lexists(path):
                    continue
                if any(m == path or m in path.parents for m in found):
                    continue
                found[path] = _empty_for(self.own / "placeholders", path)
        return found

    def env(self, secret_env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """(the variables of ``secret_env`` that held a brokered value, with placeholders
        instead; the others, which cannot be brokered)."""
        brokered, other = {}, {}
        for name, value in secret_env.items():
            swapped = self.substitute(value)
            (brokered if swapped != value else other)[name] = swapped
        return brokered, other


#: The active broker and, when :func:`current` prepared it, what it was prepared from.
_ACTIVE: list[tuple[Brokered, tuple | None]] = []
_PREPARING = threading.Lock()


def activate(made: Brokered | None) -> None:
    """Make ``made`` the broker of every guarded call from now on (None: no broker)."""
    _ACTIVE[:] = [(made, None)] if made is not None else []


@contextlib.contextmanager
def activated(made: Brokered | None) -> Iterator[Brokered | None]:
    """``made`` active for the block; afterwards what was active before, as it was (one
    that :func:`current` prepared is prepared again when its sources change)."""
    saved = list(_ACTIVE)
    activate(made)
    try:
        yield made
    finally:
        _ACTIVE[:] = saved


def active() -> Brokered | None:
    """The active broker (:func:`activate`), or None."""
    return _ACTIVE[0][0] if _ACTIVE else None


def current() -> Brokered:
    """The active broker, prepared from this process's environment and home (and made
    active) on first use, and prepared again when they changed since (a key exported or
    a credentials file edited after the first call is brokered too): the egress proxy
    calls it when it starts, and restarts when the broker changed."""
    with _PREPARING:  # calls start in threads: one prepares, the others take its result
        source = sources(os.environ)
        if not _ACTIVE or (_ACTIVE[0][1] is not None and _ACTIVE[0][1] != source):
            _ACTIVE[:] = [(prepare(os.environ), source)]
        return _ACTIVE[0][0]


def sources(env: Mapping[str, str]) -> tuple:
    """What :func:`prepare` reads: the brokerable variables of ``env`` and those that
    move a store, the home folder, each brokered file's identity (size, change time,
    inode) and whether each hidden store exists."""
    moves = stores.watched_variables()
    variables = [(n, v) for n, v in sorted(env.items()) if n in moves or credentials.watched(n, v)]
    home = Path(os.path.expanduser("~"))
    files: list[tuple[str, object]] = []
    for store, where in stores.located(env, home):
        if store.treat == stores.BROKER:
            files += [(str(path), _identity(path)) for path, _fmt in where.files]
        elif store.treat == stores.HIDE:  # existence only: a history changes at every command
            files += [(str(p), os.path.isdir(p)) for p in where.paths if os.path.lexists(p)]
    return (str(home), tuple(variables), tuple(files))


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def prepare(
    env: Mapping[str, str],
    home: Path | None = None,
    folder: Path | None = None,
    aws_hosts: list[str] | None = None,
) -> Brokered:
    """Find the brokerable credentials of ``env`` and of the stores under ``home`` (and
    where ``env`` moves them); write the table, the placeholder copies and the empty
    mounts (see the module doc). ``aws_hosts`` adds hosts AWS keys belong to besides
    AWS's own and ``AWS_ENDPOINT_URL*``."""
    home = Path(os.path.expanduser("~")) if home is None else home
    folder = private_dir() if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    key = _install_key(folder)
    _own_folder(folder)
    hosts = [*AWS_HOSTS, *credentials.endpoint_hosts(env), *(aws_hosts or [])]
    found = credentials.from_env(env, hosts)
    made = Brokered(folder, {}, home=home)
    reads = _read_stores(env, home, hosts)
    for read in reads:
        if read.parsed is not None:
            found += read.parsed.found
            made.notes += [f"{read.path}: {note}" for note in read.parsed.notes]
    for cred in found:
        made.entries.append(_entry(cred, key, made.swaps))
    intercepted = sorted({h for e in made.entries for h in e["hosts"]})
    _write_private(made.table, json.dumps({"credentials": made.entries}, indent=1))
    _placeholder_files(made, env, home, reads, intercepted)
    _hidden_stores(made, env, home)
    for note in made.notes:
        log.info("credential broker: %s", note)
    return made


#: The folder of the agents' own folders, by process id.
AGENTS = "agents"
_CLEANED: set[Path] = set()


def _own_folder(folder: Path) -> None:
    """Make this process's folder (0700), remove it at exit, and remove the folders of
    agents that are gone (their tables hold real values)."""
    own = folder / AGENTS / str(os.getpid())
    own.mkdir(parents=True, exist_ok=True)
    os.chmod(folder / AGENTS, 0o700)
    os.chmod(own, 0o700)
    if own in _CLEANED:
        return
    _CLEANED.add(own)
    atexit.register(shutil.rmtree, own, True)
    for entry in (folder / AGENTS).iterdir():
        if entry.name.isdigit() and entry != own and not _alive(int(entry.name)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _entry(cred: Credential, key: bytes, swaps: dict[str, str]) -> dict:
    """``cred``'s table entry, each real value with its placeholder (one per value)."""
    fakes = {}
    for name, real in cred.values.items():
        fakes[name] = swaps.setdefault(real, addon_table.placeholder_for(real, key, name))
    return addon_table.entry(
        cred.kind, cred.name, cred.hosts, cred.values, fakes, cred.body, cred.issues_for
    )


@dataclass
class _Read:
    """One credential file as read: its format, text and what parsing found (``parsed``
    None and ``reason``: refused, its copy is empty)."""

    path: Path
    fmt: Format
    context: Context
    text: str | None = None
    parsed: Parsed | None = None
    reason: str | None = None
    #: The folder copy it belongs in (None: mounted alone).
    folder: Path | None = None


def _read_stores(env: Mapping[str, str], home: Path, hosts: list[str]) -> list[_Read]:
    """Read and parse every brokered file that exists (each path once), and the files
    they name (a kubeconfig's ``tokenFile``)."""
    reads: dict[Path, _Read] = {}
    for store, where in stores.located(env, home):
        if store.treat != stores.BROKER:
            continue
        for path, name in where.files:
            if path in reads or _system(path) or not os.path.lexists(path):
                continue
            fmt = FORMATS[name]
            read = _Read(path, fmt, Context(list(hosts), env, path))
            read.folder = next((f for f in where.folders if f in path.parents), None)
            read.text, read.reason = read_text(path)
            if read.text is not None:
                try:
                    read.parsed = fmt.parse(read.text, read.context)
                except Unparsable as exc:
                    read.reason = str(exc)
            elif read.reason is None:  # a dangling symlink: nothing to read or hide
                continue
            reads[path] = read
    for read in list(reads.values()):
        for path, text in (read.parsed.files if read.parsed else {}).items():
            if _system(path) or not os.path.lexists(path):
                continue
            # a token file is a token, whatever else it looked like (~/.kube/token)
            token = _Read(path, FORMATS["token-file"], read.context, text)
            token.parsed = Parsed() if text is not None else None
            token.reason = None if text is not None else "cannot be read"
            token.folder = reads[path].folder if path in reads else None
            reads[path] = token
    # what a store keeps by design (a kubeconfig's client key beside it) stays as it is
    given = {os.path.realpath(p) for r in reads.values() if r.parsed for p in r.parsed.given}
    for path, read in list(reads.items()):
        maybe = read.fmt.name == "kubeconfig?" and (read.parsed is None or read.parsed.foreign)
        if maybe and os.path.realpath(path) in given:
            del reads[path]
    return list(reads.values())


def _system(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == s or s in real.parents for s in _SYSTEM)


def _placeholder_files(
    made: Brokered, env: Mapping[str, str], home: Path, reads: list[_Read], intercepted: list[str]
) -> None:
    """The placeholder copy of each file read, checked before it is mounted (see
    :func:`_copy`); a folder store (``~/.aws``, ``~/.docker``) becomes a folder holding
    only its copies (its caches hold live temporary credentials)."""
    root = made.own / "placeholders"
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    fakes = set(made.swaps.values())
    reals = sorted(made.swaps, key=len, reverse=True)
    folders: dict[Path, set[Path]] = {}
    for store in FILES:
        for folder in store.locate(env, home).folders:
            if os.path.isdir(folder) and not _system(folder):
                folders.setdefault(folder, set())
    for read in reads:
        text, reason = _copy(read, made.swaps, reals, fakes, intercepted)
        if text is None:
            continue  # not a credential file after all, nothing secret in it: as it is
        if reason is not None:
            made.refused[read.path] = reason
            log.warning(
                "credential broker: %s: %s; guarded programs get an empty copy", read.path, reason
            )
        dest = root / _relative(read.path, home)
        if reason is not None and os.path.isdir(read.path):
            # a folder where a file belongs: an empty folder (in the folder copy, or over it)
            if read.folder in folders:
                _clear(dest)
                dest.mkdir(parents=True)
                _open_parents(dest / "-", root)
                folders[read.folder].add(dest)
            else:
                made.mounts[read.path] = _empty_for(root, read.path)
            continue
        if dest.is_dir() and not dest.is_symlink():
            _clear(dest)  # a folder there at an earlier preparation
        _write_private(dest, text)
        os.chmod(dest, 0o644)
        _open_parents(dest, root)
        if read.folder in folders:
            folders[read.folder].add(dest)
        else:
            made.mounts[read.path] = dest
    for folder, written in folders.items():
        copy = root / _relative(folder, home)
        copy.mkdir(parents=True, exist_ok=True)
        _prune(copy, written)
        _open_parents(copy / "-", root)
        made.mounts[folder] = copy


def _copy(
    read: _Read, swaps: Mapping[str, str], reals: list[str], fakes: set[str], intercepted: list[str]
) -> tuple[str | None, str | None]:
    """(the text of ``read``'s placeholder copy, why it is empty or None). Empty:
    unreadable or unparsable; a copy that cannot be parsed again or whose values are not
    all placeholders; a copy holding a real value (raw, URL-quoted, JSON-escaped,
    base64) or a secret-shaped value that is no placeholder. (None, None): a file that
    turned out not to be a credential file and holds nothing secret-shaped."""
    empty = read.fmt.empty
    if read.reason is not None or read.parsed is None or read.text is None:
        return empty, read.reason or "cannot be read"
    parsed = read.parsed
    if parsed.foreign:
        reason = leftover(read.text, reals, fakes)
        return (None, None) if reason is None else (empty, f"not a credential file, but {reason}")
    context = dataclasses.replace(read.context, follow=False, intercepted=intercepted)
    try:
        text = read.fmt.rewrite(read.text, swaps, context)
        again = read.fmt.parse(text, context)
    except (Unparsable, ValueError, KeyError, TypeError) as exc:
        return empty, f"its copy cannot be parsed again ({exc})"
    for cred in again.found:
        if any(value not in fakes for value in cred.values.values()):
            return empty, f"{cred.name}: a value of its copy is no placeholder"
    reason = leftover(text, reals, fakes, parsed.kept)
    return (text, None) if reason is None else (empty, reason)


def _hidden_stores(made: Brokered, env: Mapping[str, str], home: Path) -> None:
    """An empty file or folder over every store guarded programs do not need."""
    root = made.own / "placeholders"
    for store, where in stores.located(env, home):
        if store.treat != stores.HIDE:
            continue
        for path in where.paths:
            if os.path.lexists(path) and not _system(path) and path not in made.mounts:
                made.mounts[path] = _empty_for(root, path)


def _empty_for(root: Path, path: Path) -> Path:
    """An empty folder (over a folder) or file (over anything else) to mount on ``path``."""
    if os.path.isdir(path):
        empty = root / ".empty" / "folder"
        empty.mkdir(parents=True, exist_ok=True)
        os.chmod(empty, 0o555)
    else:
        empty = root / ".empty" / "file"
        if not empty.is_file() or empty.stat().st_size:
            _write_private(empty, "")
        os.chmod(empty, 0o444)
    _open_parents(empty, root)
    return empty


def _relative(path: Path, home: Path) -> Path:
    """Where ``path``'s copy lives under the placeholders folder."""
    if home in path.parents:
        return path.relative_to(home)
    return Path("_root") / path.relative_to(path.anchor)


def _open_parents(path: Path, root: Path) -> None:
    """Make the folders between ``root`` and ``path`` readable (sandboxes mount them)."""
    for parent in path.parents:
        if parent == root or root not in parent.parents:
            break
        os.chmod(parent, 0o755)


def _clear(path: Path) -> None:
    """Remove ``path``, a file or a folder."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _prune(copy: Path, written: set[Path]) -> None:
    """Remove from a folder copy what this preparation did not write (a file that is
    gone since)."""
    for entry in sorted(copy.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if entry in written or any(entry in w.parents for w in written):
            continue
        _clear(entry)
