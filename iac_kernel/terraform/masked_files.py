"""Masked copies of the terraform files of a workspace (:mod:`.tffiles`), made on demand.

The shell of a bash call sees each copy bind-mounted read-only over its original, and
the file tools read the copy instead of the original: only guarded terraform/tofu read
the real file. Files are recognised by content; each file's verdict is cached by its
inode, size and times and by the sensitive values and names known, so a scan re-reads
only what changed.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from iac_kernel.terraform import tffiles
from iac_kernel.terraform.workspace import (
    MAX_DEPTH,
    MAX_ENTRIES,
    remember,
    sensitive_names,
    sensitive_values,
)

#: Folders never holding terraform's files worth a look (``.terraform`` is entered for
#: its backend cache only: providers and modules are skipped).
SKIP_DIRS = {".git", ".hg", "node_modules", ".venv", "venv", "__pycache__", ".tox"}
SKIP_DIRS |= {".mypy_cache", ".ruff_cache", ".ipynb_checkpoints"}
#: Inside ``.terraform``: plugins and module sources, no state.
SKIP_IN_DATA_DIR = {"providers", "modules"}

_Key = tuple[int, int, int, int, int]


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
    found: list[Path] = []
    seen = 0
    stack = [(root, 0)]
    while stack and seen < MAX_ENTRIES:
        directory, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    skip = SKIP_IN_DATA_DIR if directory.name == ".terraform" else SKIP_DIRS
                    if entry.name not in skip and entry.name not in SKIP_DIRS and depth < MAX_DEPTH:
                        stack.append((Path(entry.path), depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    found.append(Path(entry.path))
            except OSError:
                continue
    return found
