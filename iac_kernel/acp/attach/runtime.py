"""Runtime files: how a running kernel advertises its ACP endpoint to ``iac-kernel acp``.

Each kernel with an endpoint writes ``kernel-<pid>.json`` into a private runtime
directory (``~/.iac-code/run``, or ``$IAC_KERNEL_RUNTIME_DIR``; mode 0700, the file
0600, written atomically)::

    {"pid": 4242, "socket": "/home/me/.iac-code/run/kernel-4242.sock",
     "token": "...", "started": "2025-01-01T12:00:00Z",
     "sessions": ["<id of the session the kernel holds>"], "cwd": "/work/infra"}

The token is the endpoint's password: only the user can read the file. Readers skip
files they cannot parse and delete those of processes that no longer run (a kernel
killed with SIGKILL cannot clean up after itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ENV_VAR = "IAC_KERNEL_RUNTIME_DIR"
PREFIX = "kernel-"


class RuntimeDirError(RuntimeError):
    """The runtime directory cannot be made private (owned by someone else, say)."""


@dataclass
class EndpointInfo:
    """What a runtime file says about one kernel's endpoint."""

    pid: int
    socket: str
    token: str
    started: str
    sessions: list[str] = field(default_factory=list)
    cwd: str = ""

    @classmethod
    def from_dict(cls, data: Any) -> EndpointInfo | None:
        """The info in ``data``, or ``None`` when a field is missing or of the wrong type."""
        if not isinstance(data, dict):
            return None
        pid, sock, token = data.get("pid"), data.get("socket"), data.get("token")
        sessions = data.get("sessions", [])
        if type(pid) is not int or not isinstance(sock, str) or not isinstance(token, str):
            return None
        if not isinstance(sessions, list) or not all(isinstance(s, str) for s in sessions):
            return None
        return cls(
            pid=pid,
            socket=sock,
            token=token,
            started=str(data.get("started", "")),
            sessions=list(sessions),
            cwd=str(data.get("cwd", "")),
        )


def runtime_dir() -> Path:
    """``$IAC_KERNEL_RUNTIME_DIR``, else ``~/.iac-code/run``."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".iac-code" / "run"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700; refuse a directory of another user."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise RuntimeDirError(f"runtime directory {path} belongs to another user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def info_path(directory: Path, pid: int | None = None) -> Path:
    return directory / f"{PREFIX}{os.getpid() if pid is None else pid}.json"


def write_info(directory: Path, info: EndpointInfo) -> Path:
    """Write (or replace) the runtime file of ``info.pid``: mode 0600, atomically."""
    path = info_path(directory, info.pid)
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(info), handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def remove_info(directory: Path, pid: int | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        info_path(directory, pid).unlink()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not count)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and not ours to use
    if sys.platform.startswith("linux"):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state not in ("Z", "X")
    return True


def live_endpoints(directory: Path | None = None) -> list[EndpointInfo]:
    """The endpoints of running kernels (runtime files of dead ones are removed first)."""
    directory = directory or runtime_dir()
    remove_dead(directory)
    found = []
    for path in sorted(directory.glob(f"{PREFIX}*.json")):
        try:
            info = EndpointInfo.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        if info is not None and pid_alive(info.pid):
            found.append(info)
    return found


def remove_dead(directory: Path | None = None) -> int:
    """Remove the runtime files, their half-written copies and the sockets of kernels
    that no longer run (by the pid in the name); how many runtime files went.
    ``iac-kernel acp`` calls it at start, so a killed kernel's files do not linger
    until someone attaches."""
    directory = directory or runtime_dir()
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.glob(f"*{PREFIX}*"):  # kernel-N.json, kernel-N.sock, .kernel-N.json.tmp
        pid = path.name.lstrip(".").removeprefix(PREFIX).split(".")[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if path.suffix != ".sock" or stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()
                removed += path.suffix == ".json"
    return removed


def find_endpoint(
    session_id: str, holder_pid: int | None = None, directory: Path | None = None
) -> EndpointInfo | None:
    """The live endpoint of the kernel that holds ``session_id``.

    With ``holder_pid`` (the pid in the session's lock), only that process's endpoint
    counts: a runtime file left by another process cannot capture the session.
    """
    for info in live_endpoints(directory):
        if session_id in info.sessions and (holder_pid is None or info.pid == holder_pid):
            return info
    return None
