"""The sensitive values of one working directory, cached by file modification time.

Scanned under the session's cwd: state files (``*.tfstate``, ``*.tfstate.backup``,
``terraform.tfstate.d/*``), plan files (zip archives holding a ``tfplan``: their embedded
prior state, and ``show -json`` when terraform or tofu is installed), ``*.tf`` variables
declared ``sensitive = true`` with their defaults and the values ``*.tfvars`` /
``*.tfvars.json`` / ``TF_VAR_*`` give them. Tools that already hold a plan's
``show -json`` register its values with :func:`remember`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import zipfile
from pathlib import Path
from typing import Any

from iac_kernel.terraform.cli import TerraformError, find_program, show_json_sync
from iac_kernel.terraform.sensitive import keep, leaves, values_from_show, values_from_state

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
MAX_ENTRIES = 20_000
MAX_DEPTH = 8
MAX_PLAN_BYTES = 64 * 1024 * 1024


def is_plan_file(path: Path) -> bool:
    """True for a Terraform / OpenTofu saved plan (a zip with a ``tfplan`` member)."""
    try:
        with path.open("rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            return "tfplan" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def _plan_candidate(name: str) -> bool:
    lower = name.lower()
    return "plan" in lower or lower.endswith((".out", ".bin", ".zip"))


def plan_file_values(path: Path) -> set[str]:
    """A plan file's sensitive values: its embedded prior state, then ``show -json``."""
    found: set[str] = set()
    try:
        with zipfile.ZipFile(path) as archive:
            for member in ("tfstate", "tfstate-prev"):
                if member in archive.namelist():
                    found |= values_from_state(json.loads(archive.read(member) or b"{}"))
    except (OSError, zipfile.BadZipFile, json.JSONDecodeError, ValueError):
        pass
    try:
        program = find_program()
    except TerraformError:
        return found
    try:  # sandboxed: ``show`` starts the workspace's provider plugins
        found |= values_from_show(show_json_sync(program, path, path.parent))
    except TerraformError as exc:
        log.debug("show -json of %s failed: %s", path, exc)
    return found


def _unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value[1:-1]
    if isinstance(value, dict):
        return {k: _unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    return value


def config_values(directory: Path, tf_files: list[Path], var_files: list[Path]) -> set[str]:
    """Values of the variables ``*.tf`` in ``directory`` declare sensitive."""
    import hcl2

    names: set[str] = set()
    found: list[str] = []
    for path in tf_files:
        try:
            text = path.read_text(errors="replace")
            if "sensitive" not in text:  # parsing is slow; most files declare nothing
                continue
            doc = hcl2.loads(text)
        except Exception:  # a file python-hcl2 cannot parse is skipped, not fatal
            continue
        for block in doc.get("variable") or []:
            for name, body in block.items():
                if isinstance(body, dict) and body.get("sensitive") in (True, "true"):
                    names.add(name.strip('"'))
                    found += leaves(_unquote(body.get("default")))
    if not names:
        return set()
    for path in var_files:
        try:
            text = path.read_text(errors="replace")
            doc = json.loads(text) if path.name.endswith(".json") else _unquote(hcl2.loads(text))
        except Exception:
            continue
        for name in names:
            if isinstance(doc, dict) and name in doc:
                found += leaves(doc[name])
    for name in names:
        if f"TF_VAR_{name}" in os.environ:
            found.append(os.environ[f"TF_VAR_{name}"])
    return keep(found)


class WorkspaceIndex:
    """Sensitive values under one directory; files re-read only when they change."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[Path, tuple[int, int, frozenset[str]]] = {}
        self._dirs: dict[Path, tuple[tuple[Any, ...], frozenset[str]]] = {}
        self._remembered: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def remember(self, key: str, values: set[str]) -> None:
        """Values a tool already collected (a plan's ``show -json``), kept for the session."""
        with self._lock:
            self._remembered[key] = frozenset(values)

    def values(self) -> frozenset[str]:
        with self._lock:
            found: set[str] = set()
            for values in self._remembered.values():
                found |= values
            for path, kind in self._scan():
                found |= self._file_values(path, kind)
            found |= self._config_values()
            return frozenset(found)

    def _scan(self) -> list[tuple[Path, str]]:
        hits: list[tuple[Path, str]] = []
        self._tf_dirs: dict[Path, tuple[list[Path], list[Path]]] = {}
        seen = 0
        stack = [(self.root, 0)]
        while stack and seen < MAX_ENTRIES:
            directory, depth = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                seen += 1
                name = entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS and depth < MAX_DEPTH:
                            stack.append((Path(entry.path), depth + 1))
                        continue
                    if not entry.is_file():
                        continue
                except OSError:
                    continue
                path = Path(entry.path)
                if name.endswith((".tfstate", ".tfstate.backup")):
                    hits.append((path, "state"))
                elif name.endswith(".tf"):
                    self._tf_dirs.setdefault(path.parent, ([], []))[0].append(path)
                elif name.endswith((".tfvars", ".tfvars.json")):
                    self._tf_dirs.setdefault(path.parent, ([], []))[1].append(path)
                elif _plan_candidate(name):
                    hits.append((path, "plan?"))
        return hits

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
            except (OSError, json.JSONDecodeError, AttributeError):
                values = set()
        elif stat.st_size <= MAX_PLAN_BYTES and is_plan_file(path):
            values = plan_file_values(path)
        result = frozenset(values)
        self._files[path] = (stat.st_mtime_ns, stat.st_size, result)
        return result

    def _config_values(self) -> set[str]:
        found: set[str] = set()
        env_key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("TF_VAR_")))
        for directory, (tf_files, var_files) in getattr(self, "_tf_dirs", {}).items():
            parts: list[Any] = [env_key]
            for path in sorted(tf_files + var_files):
                try:
                    stat = path.stat()
                except OSError:
                    continue
                parts.append((str(path), stat.st_mtime_ns, stat.st_size))
            key = tuple(parts)
            cached = self._dirs.get(directory)
            if cached is None or cached[0] != key:
                cached = (key, frozenset(config_values(directory, tf_files, var_files)))
                self._dirs[directory] = cached
            found |= cached[1]
        return found


_INDEXES: dict[Path, WorkspaceIndex] = {}
_INDEXES_LOCK = threading.Lock()


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
