"""The egress proxy's own Python environment: mitmproxy and botocore, apart from ours.

mitmproxy pins old releases of libraries Jupyter needs newer (tornado, h11,
cryptography), so it cannot share the agent's environment. It lives in a virtual
environment of its own under ``$IAC_KERNEL_EGRESS_ENV`` (default
``~/.cache/iac-kernel/egress``), made by ``iac-kernel demo``, by ``iac-kernel egress
install``, or on first use (:func:`ensure_environment`). It takes the newest mitmproxy the
newest Python on this machine can run (:func:`choose_engine`): 12.1.2 or later (the fix
of a request-smuggling bug in its HTTP/2 to HTTP/1 translation) on Python 3.12 or newer,
else 11.0.2, the last release for Python 3.11, which the proxy runs with HTTP/2 off.
This module imports nothing of it: the proxy runs as a separate process (``mitmdump``)
with our addons.
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

#: The proxy engine on Python 3.12 and newer: the request-smuggling fix and later.
MITMPROXY_CURRENT = "mitmproxy>=12.1.2"
#: The last release for Python 3.11 (run with HTTP/2 off, see :data:`HTTP2_FIXED`).
MITMPROXY_PY311 = "mitmproxy==11.0.2"
#: botocore re-signs AWS requests with Signature V4.
BOTOCORE = "botocore>=1.34"
#: The first Python :data:`MITMPROXY_CURRENT` runs on.
CURRENT_PYTHON = (3, 12)
#: The oldest Python considered (the agent's own minimum).
OLDEST_PYTHON = (3, 11)
#: The first mitmproxy whose HTTP/2 to HTTP/1 translation is safe to leave on.
HTTP2_FIXED = (12, 1, 2)
#: The status line when the proxy cannot run (the reason follows it).
INSTALL_HINT = "no egress proxy: sandboxes have no network"
#: After a failed install, how long first uses wait before trying again (seconds).
RETRY_AFTER = 600.0
#: The longest an install may take (seconds): a stalled index must not hold calls forever.
INSTALL_TIMEOUT = 900.0

_STAMP = "iac-kernel-requirements.txt"
_PROBE = "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"
_PYTHON_NAME = re.compile(r"python3(?:\.(\d+))?")
_DIST_INFO = re.compile(r"mitmproxy-(\d+(?:\.\d+)*)\.dist-info")


class EgressInstallError(RuntimeError):
    """The environment could not be made; the message is one line saying why."""


@dataclass(frozen=True)
class Engine:
    """The interpreter that makes the environment and the mitmproxy it takes."""

    python: str
    version: tuple[int, int]

    @property
    def mitmproxy(self) -> str:
        return MITMPROXY_CURRENT if self.version >= CURRENT_PYTHON else MITMPROXY_PY311

    @property
    def requirements(self) -> tuple[str, ...]:
        return (self.mitmproxy, BOTOCORE)

    def describe(self) -> str:
        pin = self.mitmproxy.removeprefix("mitmproxy")
        release = f"{pin[2:]} or later" if pin.startswith(">=") else pin.removeprefix("==")
        return f"mitmproxy {release} on Python {self.version[0]}.{self.version[1]}"


@dataclass(frozen=True)
class Installed:
    """What an installed environment runs."""

    root: Path
    python_version: str
    #: mitmproxy's version, () when it cannot be read.
    mitmproxy: tuple[int, ...]

    @property
    def http2_safe(self) -> bool:
        return self.mitmproxy >= HTTP2_FIXED

    def describe(self) -> str:
        version = ".".join(map(str, self.mitmproxy)) or "(unknown version)"
        text = f"mitmproxy {version} on Python {self.python_version}"
        return text if self.http2_safe else f"{text} with HTTP/2 off (fixed in 12.1.2)"


def environment_dir() -> Path:
    """Where the egress environment lives (``$IAC_KERNEL_EGRESS_ENV`` moves it)."""
    env = os.environ.get("IAC_KERNEL_EGRESS_ENV")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "iac-kernel" / "egress"


def _stamp(requirements: tuple[str, ...]) -> str:
    return "\n".join(requirements) + "\n"


#: Every stamp an environment may carry (one per engine line).
_STAMPS = {_stamp((pin, BOTOCORE)) for pin in (MITMPROXY_CURRENT, MITMPROXY_PY311)}


def egress_python() -> Path | None:
    """The environment's Python when it is completely installed, else None."""
    root = environment_dir()
    python = root / "bin" / "python"
    try:
        ready = python.exists() and (root / _STAMP).read_text() in _STAMPS
    except OSError:
        return None
    return python if ready else None


def installed() -> Installed | None:
    """What the installed environment runs (None: not installed)."""
    if egress_python() is None:
        return None
    root = environment_dir()
    python_version = "?"
    try:
        for line in (root / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):
                python_version = value.strip()
    except OSError:
        pass
    found: tuple[int, ...] = ()
    for info in root.glob("lib/python3*/site-packages/mitmproxy-*.dist-info"):
        match = _DIST_INFO.fullmatch(info.name)
        if match:
            found = max(found, tuple(int(part) for part in match.group(1).split(".")))
    return Installed(root, python_version, found)


# -- choosing the interpreter --------------------------------------------------------


def _candidates(path: str) -> list[str]:
    """``python3`` and ``python3.N`` (N at least 11) on ``path``, newest name first."""
    found: list[tuple[int, str]] = []
    for folder in path.split(os.pathsep):
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            match = _PYTHON_NAME.fullmatch(name)
            if match is None:
                continue
            minor = int(match.group(1)) if match.group(1) else 99  # unknown: try it
            if minor >= OLDEST_PYTHON[1]:
                found.append((minor, os.path.join(folder, name)))
    found.sort(key=lambda item: -item[0])
    return [program for _, program in found]


@functools.lru_cache(maxsize=64)
def _probe(program: str) -> tuple[int, int] | None:
    """The version of ``program`` when it runs and can make a virtual environment."""
    try:
        done = subprocess.run(
            [program, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", done.stdout.strip()) if done.returncode == 0 else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def choose_engine(path: str | None = None) -> Engine:
    """The newest Python here (``path``: default ``$PATH``, and this interpreter) that can
    make a virtual environment, with the mitmproxy line it runs."""
    running = (sys.version_info[0], sys.version_info[1])
    best = Engine(sys.executable, running)
    usable = importlib.util.find_spec("ensurepip") is not None
    for program in _candidates(os.environ.get("PATH", os.defpath) if path is None else path):
        version = _probe(os.path.realpath(program))
        if version is None or version < OLDEST_PYTHON:
            continue
        if not usable or version > best.version:
            best, usable = Engine(program, version), True
    return best  # when none is usable, this interpreter: its venv error says why


# -- installing ----------------------------------------------------------------------

_LOCK = threading.Lock()
#: Environment folder -> (when, why) of its last failed install in this process.
_FAILED: dict[Path, tuple[float, str]] = {}


def install_problem() -> str | None:
    """Why the last install of this environment failed in this process (None: it did
    not, or long enough ago that the next first use tries again)."""
    failed = _FAILED.get(environment_dir())
    if failed is None or time.monotonic() - failed[0] > RETRY_AFTER:
        return None
    return failed[1]


def will_install() -> bool:
    """Whether the next first use installs the environment (missing, no recent failure)."""
    return egress_python() is None and install_problem() is None


def _install_step(argv: list[str]) -> subprocess.CompletedProcess:
    """One step of the install (venv, pip), its output kept for the error line."""
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=INSTALL_TIMEOUT,
    )


def ensure_environment(
    progress: Callable[[str], None] | None = None, *, again: bool = False
) -> Path:
    """Make (or repair) the environment and return its Python; ``progress`` gets one line
    before a (long) install. ``again``: try now even after a recent failure, and move to
    a newer engine when one is here. Raises :class:`EgressInstallError` (one line)."""
    found = egress_python()
    if found is not None and not again:
        return found
    root = environment_dir()
    with _LOCK:
        problem = install_problem()
        if problem is not None and not again:
            raise EgressInstallError(problem)
        try:
            return _install_locked(root, progress, again)
        except EgressInstallError as exc:
            failure = exc
        except subprocess.TimeoutExpired:
            took = f"installing the egress proxy took longer than {INSTALL_TIMEOUT:.0f}s"
            failure = EgressInstallError(took)
        except OSError as exc:
            failure = EgressInstallError(
                f"cannot make the egress proxy environment in {root}: {exc}"
            )
        _FAILED[root] = (time.monotonic(), str(failure))
        raise failure from None


def _install_locked(root: Path, progress: Callable[[str], None] | None, again: bool) -> Path:
    """The install, under a file lock beside ``root`` (other agents install there too)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    lock_path = root.parent / f".{root.name}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be installing: wait
        found = egress_python()
        if found is not None and not again:
            _FAILED.pop(root, None)
            return found
        engine = choose_engine()
        if found is not None and (root / _STAMP).read_text() == _stamp(engine.requirements):
            return found  # already the newest engine this machine runs
        _check_replaceable(root)
        if progress is not None:
            progress(f"Installing the sandboxes' egress proxy ({engine.describe()}) in {root}…")
        made = _install_step([engine.python, "-m", "venv", "--clear", str(root)])
        if made.returncode != 0:
            raise EgressInstallError(
                f"could not make the egress proxy environment with {engine.python}: "
                + _last_line(made.stderr, "venv failed")
            )
        pip = [str(root / "bin" / "python"), "-m", "pip", "install"]
        done = _install_step([*pip, "--disable-pip-version-check", *engine.requirements])
        if done.returncode != 0:
            raise EgressInstallError(
                f"could not install {engine.describe()}: "
                + _pip_problem(done.stdout + "\n" + done.stderr, engine)
            )
        (root / _STAMP).write_text(_stamp(engine.requirements))
        _FAILED.pop(root, None)
    python = egress_python()
    if python is None:
        raise EgressInstallError(f"the egress proxy environment in {root} is incomplete")
    return python


def _check_replaceable(root: Path) -> None:
    """``venv --clear`` empties ``root``: only an empty folder or a virtual environment."""
    if not root.exists():
        return
    if not root.is_dir() or (any(root.iterdir()) and not (root / "pyvenv.cfg").is_file()):
        raise EgressInstallError(
            f"{root} is not empty and is no virtual environment: set IAC_KERNEL_EGRESS_ENV "
            "to another folder"
        )


_UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|ConnectTimeout|ProxyError"
    r"|Max retries exceeded|Temporary failure in name resolution|Name or service not known"
    r"|connection broken by"
)
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def _pip_problem(output: str, engine: Engine) -> str:
    """pip's failure in one line: an unreachable index is named as such."""
    if "SSLError" in output:
        return "the package index's TLS certificate was not trusted (pip's cert setting)"
    no_index = os.environ.get("PIP_NO_INDEX", "").lower() not in ("", "0", "false", "no", "off")
    index = None if no_index else os.environ.get("PIP_INDEX_URL")
    if _UNREACHABLE.search(output):
        reason = _ERRNO.search(output)
        why = f" ({reason.group(1).strip()})" if reason else ""
        return f"the package index{f' {index}' if index else ''} cannot be reached{why}"
    if "No matching distribution found" in output:
        # pip says nothing of a refused connection when it does not retry: look.
        listed = None if no_index else re.search(r"Looking in indexes: ([^\s,]+)", output)
        unreachable = _unreachable(listed.group(1) if listed else index)
        if unreachable is not None:
            return f"the package index {unreachable}"
        return f"pip found no {engine.mitmproxy} (its index: PIP_INDEX_URL, PIP_NO_INDEX, pip.conf)"
    return _last_line(output, "pip failed")


def _unreachable(url: str | None) -> str | None:
    """``URL cannot be reached (why)`` when a direct connection to ``url`` fails (None:
    it answers, or pip goes through a proxy, or there is no index)."""
    proxies = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
    if not url or any(os.environ.get(n) or os.environ.get(n.lower()) for n in proxies):
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=5).close()
    except (OSError, ValueError) as exc:
        return f"{url} cannot be reached ({getattr(exc, 'strerror', None) or exc})"
    return None


def _last_line(text: str, default: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or [default])[-1].removeprefix("ERROR: ")
