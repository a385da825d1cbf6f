"""Trust for a project's ``.mcp.json``: its servers start only after the user trusted
that exact file content.

A bash call runs sandboxed, but the session's folder is writable inside the sandbox, so
a call can write ``.mcp.json``; the servers it names would start on the host, outside
the sandbox, with the next session. So a project file's servers start only when the
sha256 of its bytes is recorded as trusted for its path. The record lives next to the
sessions directory (``~/.iac-code/mcp-trust.json`` by default: read-only inside the
sandbox), never in the session's folder; a store inside the folder is not honoured.
Servers an ACP client passes (``mcpServers``) and ``%mcp add`` lines are the user's or
the client's own choice and are not subject to this.

The trust covers what the servers run, not only the file that names it: every file inside
the folder that a server executes (its command, and its arguments and env values that name
a file or folder inside the folder, ``-m module`` included) is hashed with the file's
bytes, so a bash call that rewrites ``srv.py`` makes the file untrusted again.

A notebook session starts its project file's servers when it becomes current
(:func:`follow_session`, a kernel state listener), in the background (the session's next
turn waits for them), and only when the user trusted the file's exact content. A new or
changed file starts nothing: the next turn and ``%mcp`` say how to review and trust it
(``%mcp trust``). A malformed file is a problem the next turn reports, not an error that
stops the kernel.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.mcp.config import PROJECT_FILE, McpConfigError, ServerSpec, from_project_bytes
from iac_kernel.mcp.manager import McpManager

STORE_NAME = "mcp-trust.json"
#: At most this many files of a folder a server runs are hashed (more: never trusted).
MAX_FILES = 2000
#: How many hex digits of the sha256 the user types to trust a file.
SHORT = 12


@dataclass(frozen=True)
class ProjectFile:
    """One read of a folder's ``.mcp.json``: its path and exact bytes."""

    folder: Path
    path: Path
    data: bytes
    #: (path relative to the folder, sha256 of its bytes) of every workspace file the
    #: servers run, sorted; part of :attr:`sha256`.
    covered: tuple[tuple[str, str], ...] = ()

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.data)
        for rel, sha in self.covered:
            digest.update(f"\0{rel}\0{sha}".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    @property
    def short(self) -> str:
        return self.sha256[:SHORT]

    def specs(self) -> list[ServerSpec]:
        """The servers of exactly these bytes (McpConfigError when malformed)."""
        return from_project_bytes(self.data, self.folder)


def read_project(folder: str | Path) -> ProjectFile | None:
    """The folder's ``.mcp.json`` as read now, or None when there is none."""
    folder = Path(folder)
    path = folder / PROJECT_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError:
        data = b""  # unreadable: never trusted (an empty file has its own hash)
    # Keyed by the folder's real path, not the file's: a .mcp.json symlinked to a trusted
    # file elsewhere is a new file here (its relative commands would run from here).
    try:
        covered = covered_files(from_project_bytes(data, folder), folder)
    except McpConfigError:
        covered = ()
    return ProjectFile(folder, Path(os.path.realpath(folder)) / PROJECT_FILE, data, covered)


def covered_files(specs: list[ServerSpec], folder: Path) -> tuple[tuple[str, str], ...]:
    """(relative path, sha256) of each file inside ``folder`` the stdio servers run."""
    root = Path(os.path.realpath(folder))
    found: dict[str, str] = {}
    for spec in specs:
        if spec.transport != "stdio":
            continue
        base = Path(spec.cwd or folder)
        words = [spec.command, *spec.args, *spec.env.values()]
        words += [f"{a}.py" for a in _modules(spec.args)] + _modules(spec.args)
        for word in words:
            for part in str(word).split(os.pathsep):
                _cover(base, part.partition("=")[2] if part.startswith("-") else part, root, found)
    return tuple(sorted(found.items()))


def _modules(args: list[str]) -> list[str]:
    """``python -m pkg.mod``: the module as a path (``pkg/mod``)."""
    return [b.replace(".", "/") for a, b in itertools.pairwise(args) if a == "-m"]


def _cover(base: Path, word: str, root: Path, found: dict[str, str]) -> None:
    if not word or len(found) > MAX_FILES:
        return
    path = Path(os.path.realpath(base / os.path.expanduser(word)))
    if path != root and root not in path.parents:
        return
    files = [path] if path.is_file() else []
    if path.is_dir() and path != root:
        files = [p for p in sorted(path.rglob("*")) if p.is_file() and ".git" not in p.parts]
    for file in files[: MAX_FILES + 1]:
        rel = str(file.relative_to(root))
        try:
            found[rel] = hashlib.sha256(file.read_bytes()).hexdigest()
        except OSError:
            found[rel] = "unreadable"
    if len(files) > MAX_FILES:
        found["(too many files)"] = "never trusted"


def store_path(session: Any) -> Path:
    """Where trusted hashes are kept: next to the session's sessions directory."""
    sessions = getattr(getattr(session, "settings", None), "sessions_dir", None)
    if sessions is None:
        from iac_kernel.config import Settings

        sessions = Settings().sessions_dir
    return Path(sessions).expanduser().parent / STORE_NAME


def _honoured(store: Path, folder: Path) -> bool:
    """A store inside the session's folder could be written by a bash call: ignored."""
    real_store, real_folder = Path(os.path.realpath(store)), Path(os.path.realpath(folder))
    return real_folder != real_store and real_folder not in real_store.parents


def _load(store: Path) -> dict[str, str]:
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    trusted = data.get("trusted") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in trusted.items()} if isinstance(trusted, dict) else {}


def is_trusted(project: ProjectFile, store: Path) -> bool:
    """The user trusted exactly this content at this path."""
    if not _honoured(store, project.folder):
        return False
    return _load(store).get(str(project.path)) == project.sha256


def trust(project: ProjectFile, store: Path) -> None:
    """Record ``project``'s content as trusted (written atomically, private to the user)."""
    if not _honoured(store, project.folder):
        raise OSError(f"the trust store {store} is inside the session's folder")
    trusted = _load(store)
    trusted[str(project.path)] = project.sha256
    store.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mcp-trust-", dir=store.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"trusted": trusted}, fh, indent=1, sort_keys=True)
        os.replace(tmp, store)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def untrusted_notice(project: ProjectFile) -> str:
    """What the user is told (once) when a project file's servers were not started."""
    return (
        f"MCP servers in `{PROJECT_FILE}` not started: this file is new or changed since you "
        "last trusted it (a command run in this folder can write it). Review its commands "
        "with `%mcp trust` (`/mcp trust` in an editor) and trust it to start them."
    )


def show_servers(project: ProjectFile) -> list[str]:
    """One Markdown line per server: how it would start (env values not shown)."""
    lines = []
    for spec in project.specs():
        if spec.transport == "stdio":
            shown = " ".join([spec.command, *spec.args])
            line = f"- `{spec.name}` runs `{shown}`"
            if spec.env:
                line += " with env " + ", ".join(f"`{k}`" for k in sorted(spec.env))
        else:
            line = f"- `{spec.name}` connects to {spec.transport} `{spec.url}`"
        lines.append(line)
    for rel, sha in project.covered:
        lines.append(f"- runs the folder's `{rel}` (sha256 {sha[:SHORT]}): covered by this trust")
    return lines


def follow_session(session: Any) -> None:
    """Start the trusted ``.mcp.json`` servers of a session that has no MCP manager yet."""
    if session is None or getattr(session, "closed", True) or session.mcp is not None:
        return
    manager = McpManager(session.tools)
    session.mcp = manager
    project = read_project(session.cwd)
    if project is None:
        return
    try:
        specs = project.specs()
    except McpConfigError as exc:
        manager.problems.append(f"MCP servers not started: {exc}")
        return
    if not specs:
        return
    if not is_trusted(project, store_path(session)):
        manager.problems.append(untrusted_notice(project))
        return
    manager.start_soon(specs)
