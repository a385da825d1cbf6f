"""The sensitive values of one working directory, cached by file modification time.

Scanned under the session's cwd: every state file (any name holding ``.tfstate``:
backups, ``terraform.tfstate.<unix>.backup``, ``terraform.tfstate.d/*``), the state files
backends name (``backend "local" { path }``, ``.terraform/terraform.tfstate``), plan files
(zip archives holding a ``tfplan``: their embedded prior state, and ``show -json`` when
terraform or tofu is installed), and the configuration (:mod:`.config_scan`). A scan that
reaches :data:`MAX_ENTRIES` or :data:`MAX_DEPTH` says so (:func:`limit_note`). Tools that
already hold a plan's ``show -json`` register its values with :func:`remember`.

:class:`MaskedFiles` writes masked copies of the workspace's terraform files
(:mod:`.tffiles`) on demand: the shell of a bash call sees each copy bind-mounted
read-only over its original, and the file tools read the copy instead of the original
(only guarded terraform/tofu read the real file). Each file's verdict is cached by its
inode, size and times and by the sensitive values and names known, so a scan re-reads
only what changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from iac_kernel.guard.tfcover.held import MAX_DEPTH, MAX_ENTRIES, walk
from iac_kernel.terraform import config_scan, tffiles
from iac_kernel.terraform.cli import TerraformError, find_program, is_plan_file, show_json_sync
from iac_kernel.terraform.sensitive import keep, values_from_show, values_from_state

log = logging.getLogger(__name__)

SKIP_DIRS = {
    ".git",
    ".hg",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".terraform",
    ".ipynb_checkpoints",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
}
#: Larger files are not read as plans.
MAX_PLAN_BYTES = 64 * 1024 * 1024
#: A folder changed less than this long ago is listed again on every scan.
RACY_SECONDS = 2.0
#: Inside ``.terraform``: plugins and module sources, no state (it is entered for its
#: backend cache only).
SKIP_IN_DATA_DIR = {"providers", "modules"}
_Key = tuple[int, int, int, int, int]


def _plan_candidate(name: str) -> bool:
    lower = name.lower()
    return "plan" in lower or lower.endswith((".out", ".bin", ".zip"))


def plan_file_values(path: Path) -> set[str]:
    """A plan file's sensitive values: its embedded states', then ``show -json``'s."""
    try:
        found = set(getattr(tffiles.recognise(path.read_bytes()), "values", ()))
    except OSError:
        return set()
    try:  # sandboxed: ``show`` starts the workspace's provider plugins
        doc = show_json_sync(find_program(), path, path.parent, keep=True)
        found |= values_from_show(doc)
    except TerraformError as exc:
        log.debug("show -json of %s failed: %s", path, exc)
    return found


class WorkspaceIndex:
    """Sensitive values under one directory; files re-read only when they change."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[Path, tuple[int, int, frozenset[str]]] = {}
        #: folder -> ((inode, mtime), listing): unchanged folders are not listed again.
        self._listings: dict[Path, tuple[tuple[int, int, int], Any]] = {}
        self._config_cache: tuple[Any, frozenset[str], list[Path], frozenset[str]] | None = None
        #: Whether the last scan hit :data:`MAX_ENTRIES` or :data:`MAX_DEPTH`.
        self.limited = False
        #: Variables the configuration declares sensitive (their ``-var`` values are masked).
        self.names: frozenset[str] = frozenset()
        #: What the last scan found (:meth:`known`).
        self.last: frozenset[str] = frozenset()
        self._remembered: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def remember(self, key: str, values: set[str]) -> None:
        """Values a tool already collected (a plan's ``show -json``), kept for the session."""
        with self._lock:
            self._remembered[key] = frozenset(values)

    def known_file(self, path: Path, values: set[str]) -> None:
        """A plan file whose ``show -json`` a tool already read: the scan takes these
        values while the file is unchanged instead of running ``show -json`` again."""
        try:
            stat = path.stat()
        except OSError:
            return
        with self._lock:
            self._files[path] = (stat.st_mtime_ns, stat.st_size, frozenset(values))

    def values(self) -> frozenset[str]:
        with self._lock:
            found: set[str] = set(_GIVEN)
            for values in self._remembered.values():
                found |= values
            hits, tf_files, var_files = self._scan()
            config, backends, self.names = self._config(tf_files, var_files)
            found |= config
            for path in backends:
                hits.append((path, "state"))
            for path, kind in hits:
                if kind == "backend":
                    states, secrets = config_scan.backend_cache(path)
                    found |= keep(secrets)
                    hits += [(state, "state") for state in states]
                else:
                    found |= self._file_values(path, kind)
            self.last = frozenset(found)
            return self.last

    def known(self) -> frozenset[str]:
        """The values of the last scan and those remembered since, without scanning."""
        with self._lock:
            found = set(self.last) | _GIVEN
            for values in self._remembered.values():
                found |= values
            return frozenset(found)

    def limit_note(self) -> str:
        """What the last scan left out (empty when it read everything)."""
        if not self.limited:
            return ""
        return (
            f"[sensitive-value scan stopped at {MAX_ENTRIES} workspace entries or depth "
            f"{MAX_DEPTH}: values in files beyond are not known and not masked]"
        )

    def _scan(self) -> tuple[list[tuple[Path, str]], list[Path], list[Path]]:
        hits: list[tuple[Path, str]] = []
        tf_files: list[Path] = []
        var_files: list[Path] = []
        self.limited = False
        seen = 0
        stack = [(self.root, 0)]
        while stack:
            if seen >= MAX_ENTRIES:
                self.limited = True
                break
            directory, depth = stack.pop()
            listing = self._listing(directory)
            if listing is None:
                continue
            count, subdirs, files = listing
            seen += count
            for name in subdirs:
                if name == ".terraform":
                    cache = directory / name / "terraform.tfstate"
                    if cache.is_file():
                        hits.append((cache, "backend"))
                elif depth < MAX_DEPTH:
                    stack.append((directory / name, depth + 1))
                else:
                    self.limited = True
            for name, kind in files:
                if kind == "tf":
                    tf_files.append(directory / name)
                elif kind == "var":
                    var_files.append(directory / name)
                else:
                    hits.append((directory / name, kind))
        return hits, tf_files, var_files

    def _listing(self, directory: Path) -> tuple[int, list[str], list[tuple[str, str]]] | None:
        """The folders to enter and the files of interest in ``directory``: read again
        only when the folder changed (its mtime or ctime), and always while that change is
        recent (a change in the same clock tick as the last read would not show)."""
        try:
            stat = directory.stat()
        except OSError:
            return None
        # ctime too: setting a folder's mtime back (utime) changes its ctime.
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)
        cached = self._listings.get(directory)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return None
        subdirs: list[str] = []
        files: list[tuple[str, str]] = []
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name == ".terraform" or name not in SKIP_DIRS:
                        subdirs.append(name)
                    continue
                if not entry.is_file():
                    continue
            except OSError:
                continue
            if ".tfstate" in name:  # .tfstate, .tfstate.backup, .tfstate.<unix>.backup
                files.append((name, "state"))
            elif name.endswith((".tf", ".tf.json")):
                files.append((name, "tf"))
            elif name.endswith((".tfvars", ".tfvars.json")):
                files.append((name, "var"))
            elif _plan_candidate(name):
                files.append((name, "plan?"))
        listing = (len(entries), subdirs, files)
        if time.time() - max(stat.st_mtime, stat.st_ctime) > RACY_SECONDS:
            self._listings[directory] = (key, listing)
        else:
            self._listings.pop(directory, None)
        return listing

    def _file_values(self, path: Path, kind: str) -> frozenset[str]:
        try:
            stat = path.stat()
        except OSError:
            return frozenset()
        cached = self._files.get(path)
        if cached and cached[:2] == (stat.st_mtime_ns, stat.st_size):
            return cached[2]
        values: set[str] = set()
        if kind == "state":
            try:
                values = values_from_state(json.loads(path.read_text(errors="replace") or "{}"))
            except (OSError, ValueError, AttributeError):
                values = set()
        elif stat.st_size <= MAX_PLAN_BYTES and is_plan_file(path):
            values = plan_file_values(path)
        result = frozenset(values)
        self._files[path] = (stat.st_mtime_ns, stat.st_size, result)
        return result

    def _config(
        self, tf_files: list[Path], var_files: list[Path]
    ) -> tuple[frozenset[str], list[Path], frozenset[str]]:
        """The configuration's values, re-read only when a file, ``TF_VAR_*`` or
        ``TF_ENCRYPTION`` changed."""
        parts: list[Any] = [
            tuple(
                sorted(
                    (k, v)
                    for k, v in os.environ.items()
                    if k.startswith("TF_VAR_") or k == "TF_ENCRYPTION"
                )
            )
        ]
        for path in sorted(tf_files) + sorted(var_files):
            try:
                stat = path.stat()
            except OSError:
                continue
            parts.append((str(path), stat.st_mtime_ns, stat.st_size))
        key = tuple(parts)
        if self._config_cache is None or self._config_cache[0] != key:
            values, states, names = config_scan.config_values(tf_files, var_files)
            self._config_cache = (key, frozenset(values), states, frozenset(names))
        return self._config_cache[1], list(self._config_cache[2]), self._config_cache[3]


_INDEXES: dict[Path, WorkspaceIndex] = {}
_INDEXES_LOCK = threading.Lock()
#: Values given to sensitive variables on a command line (``-var tok=...``, ``TF_VAR_tok``),
#: seen by the guard at exec time: masked in every workspace of this process, since the
#: call that passed them may print them from anywhere (a refusal quoting its argv, too).
_GIVEN: frozenset[str] = frozenset()


def index_for(cwd: Path) -> WorkspaceIndex:
    root = Path(cwd).resolve()
    with _INDEXES_LOCK:
        index = _INDEXES.get(root)
        if index is None:
            index = _INDEXES[root] = WorkspaceIndex(root)
        return index


def sensitive_values(cwd: Path) -> frozenset[str]:
    """Every sensitive value known for the workspace at ``cwd``."""
    return index_for(cwd).values()


def remember(cwd: Path, key: str, values: set[str]) -> None:
    index_for(cwd).remember(key, values)


def remember_given(values: set[str]) -> None:
    """Values given to sensitive variables: masked in every workspace from now on."""
    global _GIVEN
    with _INDEXES_LOCK:  # replaced whole: readers take the frozenset as it is
        _GIVEN = _GIVEN | keep(values)


def remember_plan_file(cwd: Path, path: Path, values: set[str]) -> None:
    """``path``'s values come from a ``show -json`` already read (see ``known_file``)."""
    index_for(cwd).known_file(Path(path).resolve(), values)


def known_values(cwd: Path) -> frozenset[str]:
    """The values known for ``cwd`` without a new scan (cheap: for text shown before a
    call runs; what a call prints is masked with a fresh scan)."""
    return index_for(cwd).known()


def limit_note(cwd: Path) -> str:
    """What the workspace's last scan left out, for cards and questions ("" if nothing)."""
    return index_for(cwd).limit_note()


def sensitive_names(cwd: Path) -> frozenset[str]:
    """Variables the workspace's configuration declares sensitive (as of the last scan)."""
    return index_for(cwd).names


class MaskedFiles:
    """Masked copies written to ``out_dir`` (a folder only the agent reads)."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self._cache: dict[Path, tuple[_Key, Path | None]] = {}
        self._lock = threading.Lock()

    def copy_for(self, path: Path, cwd: Path) -> Path | None:
        """The masked copy to show instead of ``path`` (None: show the file itself)."""
        known = sensitive_values(cwd)
        return self._copy(Path(os.path.realpath(path)), cwd, known, sensitive_names(cwd))

    def mounts(self, cwd: Path, under: Path | None = None) -> list[tuple[Path, Path]]:
        """``(copy, original)`` for every sensitive terraform file under ``under``
        (default: ``cwd``), masked with what is known of the workspace at ``cwd``."""
        root = Path(os.path.realpath(cwd))
        known = sensitive_values(root)
        names = sensitive_names(root)
        found: list[tuple[Path, Path]] = []
        for path in _files(Path(os.path.realpath(under)) if under is not None else root):
            copy = self._copy(path, root, known, names)
            if copy is not None:
                found.append((copy, path))
        return found

    def _copy(
        self, path: Path, cwd: Path, known: frozenset[str], names: frozenset[str]
    ) -> Path | None:
        try:
            st = path.stat()
        except OSError:
            return None
        if not path.is_file() or st.st_size > tffiles.MAX_BYTES:
            return None
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, hash((known, names)))
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and cached[0] == key and (cached[1] is None or cached[1].exists()):
            return cached[1]
        copy = self._make(path, cwd, known, names)
        with self._lock:
            self._cache[path] = (key, copy)
        return copy

    def _make(
        self, path: Path, cwd: Path, known: frozenset[str], names: frozenset[str]
    ) -> Path | None:
        try:
            with path.open("rb") as fh:
                head = fh.read(64)
                if not tffiles.may_be(head, fh.seek(0, os.SEEK_END)):
                    return None  # most files: 64 bytes read, no more
                fh.seek(0)
                data = fh.read()
        except OSError:
            return None
        found = tffiles.recognise(data, names)
        if found is None:
            return None
        if found.values:  # a renamed state's values are masked everywhere from now on
            remember(cwd, f"file:{path}", set(found.values))
        out = tffiles.masked(data, names, known)
        if out is None:
            return None
        self.out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy = self.out_dir / hashlib.sha256(out).hexdigest()
        if not copy.exists():
            tmp = copy.with_suffix(f".{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(out)
            os.chmod(tmp, 0o444)
            os.replace(tmp, copy)
        return copy


def _files(root: Path) -> list[Path]:
    """Regular files under ``root`` (symlinks not followed), within the scan limits."""

    def enter(folder: str, name: str) -> bool:
        if os.path.basename(folder) == ".terraform" and name in SKIP_IN_DATA_DIR:
            return False
        return name == ".terraform" or name not in SKIP_DIRS

    return [Path(e.path) for e in walk([str(root)], enter) if e.is_file(follow_symlinks=False)]
