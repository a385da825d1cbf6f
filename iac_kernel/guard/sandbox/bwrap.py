"""The bubblewrap sandbox of one bash call: probe, layout and the ``bwrap`` argv.

Inside: the whole filesystem read-only, except the session's cwd, a private /tmp (a
host directory removed after the call) and the user's ``sandbox_writable_paths``; its
own PID namespace (nothing outlives the call); no capabilities; its own network namespace,
whose only way out is the egress proxy (:mod:`iac_kernel.egress`) when the call has one.
Every copy of a guarded program found on PATH has a guard launcher bind-mounted over it.
The agent's control plane and, for the shell, the credential stores are empty mounts
(:mod:`.hidden`).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import iac_kernel
from iac_kernel.egress import inside
from iac_kernel.egress.environment import INSTALL_HINT, environment_dir, install_problem
from iac_kernel.team.rules import RULES_ENV

#: Where the call's private temporary folder appears in the sandbox: its TMPDIR, the only
#: temporary folder a call can write (a TMPDIR pointing elsewhere is read-only inside and
#: would break mktemp, terraform and Python's tempfile).
TMP_MOUNT = "/tmp"
#: What every process in the sandbox finds in its environment (``--setenv``); the callers
#: put it in the shell's environment too, so comparisons with the call's start see it.
SANDBOX_ENV = MappingProxyType({"TMPDIR": TMP_MOUNT})
#: Where the call's guard directory (socket, private files) appears in the sandbox.
GUARD_MOUNT = "/tmp/.iac-guard"
#: Where the launcher directory appears in the sandbox (first on PATH).
LAUNCHER_MOUNT = "/tmp/.iac-guard-bin"
#: Where a guarded program's sandbox sees its own run's folder (its relay socket): over
#: an empty folder of the guard folder, so the call's shell sees only that empty folder.
RUN_FOLDER = "run"
RUN_MOUNT = f"{GUARD_MOUNT}/{RUN_FOLDER}"

#: The agent's own code: this package's folder.
PACKAGE = os.path.dirname(os.path.realpath(iac_kernel.__file__))

REDUCED_STATUS = "guard: reduced, install bubblewrap"
SANDBOX_STATUS = "guard: sandbox (bubblewrap)"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str | None, extra: tuple[str, ...] = ()) -> str | None:
    """Why ``bwrap`` (with the ``extra`` options) cannot run a sandbox here, or None."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *extra]
    args += ["--unshare-pid", "--die-with-parent", "--cap-drop", "ALL", "true"]
    try:
        done = subprocess.run(args, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run: {exc}"
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip().splitlines()
        return "bwrap cannot create a sandbox here: " + (text[-1] if text else "unknown error")
    return None


#: No new user namespace inside the sandbox: in one, a process could mount another call's
#: guard folder where its own belongs and pass the approval socket's origin check.
NO_USERNS = ("--unshare-user", "--disable-userns")


def _userns_args(bwrap: str | None) -> tuple[str, ...]:
    """:data:`NO_USERNS` where this bwrap and kernel allow it (bwrap 0.8 and later)."""
    return NO_USERNS if bwrap is not None and _probe(bwrap, NO_USERNS) is None else ()


def userns_disabled() -> bool:
    """Whether sandboxes here forbid new user namespaces (probed once)."""
    return bool(_userns_args(bwrap_path()))


def unusable_reason() -> str | None:
    """Why bubblewrap cannot sandbox bash here (None when it can). Probed once."""
    return _probe(bwrap_path())


def status_text() -> str:
    """One line for the user: the sandbox works, or the guard is reduced and why."""
    reason = unusable_reason()
    if reason is not None:
        return f"{REDUCED_STATUS} ({reason})"
    # The egress proxy is installed on first use: only a failed install is news here.
    problem = install_problem()
    return SANDBOX_STATUS if problem is None else f"{SANDBOX_STATUS}; {INSTALL_HINT}; {problem}"


def state_dir() -> Path:
    """This user's private host directory for launchers and private binary copies."""
    path = Path(tempfile.gettempdir()) / f"iac-guard-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


_PROCESS_DIR: tuple[int, Path] | None = None


def process_dir() -> Path:
    """This process's own folder in :func:`state_dir` (``proc-<pid>-<random>``): its
    launchers live there, written with this interpreter in their ``#!`` line, so another
    install or kernel never rewrites them. Removed when the process exits; folders of
    processes that died without exiting are removed by the next process that makes one."""
    global _PROCESS_DIR
    pid = os.getpid()
    if _PROCESS_DIR is not None and _PROCESS_DIR[0] == pid and _PROCESS_DIR[1].is_dir():
        return _PROCESS_DIR[1]
    root = state_dir()
    _remove_dead(root)
    path = Path(tempfile.mkdtemp(prefix=f"proc-{pid}-", dir=root))
    os.chmod(path, 0o755)  # launchers are read by the sandbox's processes
    (path / "pidns").write_text(_pid_namespace())
    if _PROCESS_DIR is None:
        atexit.register(_remove_own)
    _PROCESS_DIR = (pid, path)
    return path


def _remove_own() -> None:
    if _PROCESS_DIR is not None and _PROCESS_DIR[0] == os.getpid():  # not a forked child
        shutil.rmtree(_PROCESS_DIR[1], ignore_errors=True)


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _remove_dead(root: Path) -> None:
    """Remove the ``proc-<pid>-*`` folders of processes that are gone (only those made in
    this PID namespace: a pid means nothing in another one)."""
    namespace = _pid_namespace()
    for entry in os.scandir(root):
        parts = entry.name.split("-")
        if len(parts) != 3 or parts[0] != "proc" or not parts[1].isdigit():
            continue
        try:
            if Path(entry.path, "pidns").read_text() != namespace:
                continue
        except FileNotFoundError:
            pass  # still being made (its process is alive), or from before the marker
        except OSError:
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:  # alive (another user's pid: not ours to judge)
            continue


@dataclass
class Layout:
    """Everything one sandboxed call mounts."""

    cwd: Path
    #: Host directory behind the sandbox's /tmp.
    tmp_dir: Path
    #: Host directory behind GUARD_MOUNT (socket, private copies), read-only inside.
    guard_dir: Path
    #: Host directory of launchers, behind LAUNCHER_MOUNT.
    launcher_dir: Path
    #: program -> real files (launchers are mounted over each of them).
    reals: dict[str, list[str]] = field(default_factory=dict)
    writable: list[Path] = field(default_factory=list)
    #: Host directories hidden inside the sandbox (private binary copies).
    masks: list[Path] = field(default_factory=list)
    #: The agent's control plane (:mod:`.hidden`): empty in every sandbox of the call.
    hidden: list[Path] = field(default_factory=list)
    #: Credential stores: empty for the shell, shown to guarded programs the guard runs.
    secrets: list[Path] = field(default_factory=list)
    #: Credential file or folder -> its placeholder copy (egress/broker.py), mounted over
    #: it for guarded programs.
    placeholders: dict[Path, Path] = field(default_factory=dict)
    #: False: the shell gets no network (``sandbox_network = none``).
    network: bool = True
    #: (masked copy, original): terraform's sensitive files, shown masked and read-only
    #: to every process but the guarded terraform/tofu (``originals``).
    overlays: list[tuple[Path, Path]] = field(default_factory=list)
    #: The port of the egress forwarder inside (None: no route out at all).
    egress_port: int | None = None

    def bwrap_args(
        self,
        bwrap: str,
        chdir: str | None = None,
        extra: Sequence[str] = (),
        guarded: bool = False,
        originals: bool = False,
        run_route: tuple[Path, int] | None = None,
    ) -> list[str]:
        """``bwrap`` and its options (``extra`` last), up to and including ``--`` (and,
        with the egress route, the forwarder that then runs the command).
        ``guarded``: the sandbox of a guarded program the guard runs (credentials and
        the network are its own); ``run_route``: that run's own relay folder and
        forwarder port (the only route on which brokered credentials work), mounted at
        :data:`RUN_MOUNT` in this sandbox alone."""
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--bind", str(self.tmp_dir), TMP_MOUNT]
        for path in own_paths_under_tmp():  # our code and Python, if installed under /tmp
            args += ["--ro-bind", path, path]
        for path in [*self.writable, self.cwd]:
            if path.exists():
                args += ["--bind", str(path), str(path)]
        for path in own_code_under([*self.writable, self.cwd, Path(TMP_MOUNT)]):
            args += ["--ro-bind", path, path]  # the agent's code, even in a writable folder
        args += admin_rules_mounts([*self.writable, self.cwd])
        for path in self._hidden():
            args += ["--tmpfs", str(path)]
        args += ["--ro-bind", str(self.guard_dir), GUARD_MOUNT]
        args += ["--ro-bind", str(self.launcher_dir), LAUNCHER_MOUNT]
        for program, reals in sorted(self.reals.items()):
            for real in reals:
                args += ["--ro-bind", str(self.launcher_dir / program), real]
        for mask in self.masks:
            args += ["--tmpfs", str(mask)]
        for copy, original in [] if originals else self.overlays:
            if os.path.lexists(self.host_path(str(original))):  # gone: nothing to cover
                args += ["--ro-bind", str(copy), str(original)]
        for key, value in SANDBOX_ENV.items():
            args += ["--setenv", key, value]
        args += self._empty_mounts([*self.hidden, *([] if guarded else self.secrets)])
        for real, placeholder in sorted(self.placeholders.items()) if guarded else ():
            if os.path.lexists(real) and placeholder.exists():
                args += ["--ro-bind", str(placeholder), str(real)]
        args += self._empty_mounts([state_dir()])  # last: the empty file lives there
        args += ["--unshare-net", *_userns_args(bwrap), "--unshare-pid", "--die-with-parent"]
        if run_route is not None:
            args += ["--ro-bind", str(run_route[0]), RUN_MOUNT]
        args += ["--cap-drop", "ALL", "--chdir", chdir or str(self.cwd), *extra]
        if run_route is not None:
            return [*args, *inside.route_args(run_route[1], RUN_MOUNT)]
        if self.egress_port is None or not self.routed(guarded):
            return [*args, "--"]
        # After ``extra``: a --clearenv keeps the proxy variables.
        return [*args, *inside.route_args(self.egress_port, GUARD_MOUNT)]

    def routed(self, guarded: bool = False) -> bool:
        """Whether the sandbox has the egress route (``guarded``: a guarded program's;
        the shell's only when the call has network)."""
        return self.egress_port is not None and (guarded or self.network)

    def proxy_env(self) -> dict[str, str]:
        """The proxy variables the shell's sandbox sets (none without the route): the
        caller puts them in the shell's environment too, as it does :data:`SANDBOX_ENV`."""
        if self.egress_port is None or not self.routed():
            return {}
        return inside.proxy_env(self.egress_port, GUARD_MOUNT)

    def _empty_mounts(self, paths: Sequence[Path]) -> list[str]:
        """Empty mounts over ``paths``: a tmpfs over a folder, an empty file over anything
        else. Skipped: a path holding the cwd or a writable path, and one under /tmp that
        no bind shows (the private /tmp hides it)."""
        # The guard's own folders are mounted elsewhere (/tmp, GUARD_MOUNT ...) before
        # this: their host folder is hidden like the rest (other calls' files live there).
        needed = [self.cwd, *self.writable]
        binds = self._binds()
        args: list[str] = []
        folders: list[Path] = []
        for path in sorted(set(paths), key=lambda p: len(p.parts)):
            text = str(path)
            if any(n == path or path in n.parents for n in needed):
                continue
            if any(f == path or f in path.parents for f in folders):
                continue  # already under an empty folder (a mount there would show it)
            if (text == "/tmp" or text.startswith("/tmp/")) and not any(
                b == path or b in path.parents for b in binds
            ):
                continue
            if path.is_dir() and not path.is_symlink():
                args += ["--tmpfs", text]
                folders.append(path)
            elif os.path.lexists(path) and not path.is_symlink():
                args += ["--ro-bind", str(empty_file()), text]
        return args

    def _hidden(self) -> list[Path]:
        """The guard's own host folders, hidden inside: the state folder (other calls'
        sockets and folders) and this call's folders, wherever they are - a writable bind
        covering them (TMPDIR under the session's folder, a session in /tmp) would let a
        command rewrite an approved plan's private copy while its question waits. A
        folder holding the session's folder or a writable path is left visible."""
        binds = [Path(os.path.realpath(p)) for p in [*self.writable, self.cwd]]
        own = [state_dir(), self.guard_dir, self.launcher_dir, self.tmp_dir]
        found: list[Path] = []
        for path in sorted({Path(os.path.realpath(p)) for p in own}, key=lambda p: len(p.parts)):
            if any(path.is_relative_to(f) for f in found):
                continue
            if not any(b.is_relative_to(path) for b in binds):
                found.append(path)
        return found

    def host_path(self, path: str) -> str:
        """The host path behind a path seen inside the sandbox."""
        norm = os.path.normpath(path)
        for inner, outer in ((GUARD_MOUNT, self.guard_dir), (TMP_MOUNT, self.tmp_dir)):
            if norm == inner or norm.startswith(inner + "/"):
                if any(norm == str(w) or norm.startswith(f"{w}/") for w in self._binds()):
                    return norm
                return str(outer) + norm[len(inner) :]
        return norm

    def inside_path(self, host: str) -> str | None:
        """Where the sandbox shows the host path ``host`` (None: not a writable place)."""
        norm = os.path.normpath(host)

        def under(folder: Path | str) -> str | None:
            real = os.path.realpath(folder)
            return real if norm == real or norm.startswith(real + "/") else None

        real = under(self.tmp_dir)
        if real is not None:
            return TMP_MOUNT + norm[len(real) :]
        covered = [*self._hidden(), *self.masks, *self.hidden, *self.secrets, state_dir()]
        if any(under(p) is not None for p in covered):
            return None  # the guard's own folders, hidden or emptied inside
        for path in self._binds():
            real = under(path)
            if real is not None:
                return str(path) + norm[len(real) :]
        return None

    def _binds(self) -> list[Path]:
        return [*self.writable, self.cwd, *map(Path, own_paths_under_tmp())]


def empty_file() -> Path:
    """An empty read-only file in this user's state folder (mounted over hidden files)."""
    path = state_dir() / "empty"
    if not path.is_file() or path.stat().st_size:
        tmp = state_dir() / f".empty-{os.getpid()}"
        tmp.write_bytes(b"")
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    return path


def own_code_under(binds: Sequence[Path]) -> list[str]:
    """The agent's own code that lies in one of ``binds`` (writable folders): this package,
    the interpreter's prefixes (its venv) and the egress proxy's environment, which the
    host runs (a lazily imported module, a proxy addon). Mounted read-only over
    themselves after the writable binds; the package also when a bind lies inside it."""
    roots = [os.path.realpath(b) for b in binds]

    def within(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip("/") + "/")

    found: list[str] = []
    for path in (PACKAGE, sys.prefix, sys.base_prefix, sys.exec_prefix, environment_dir()):
        real = os.path.realpath(path)
        under = any(within(real, r) or (path is PACKAGE and within(r, real)) for r in roots)
        if under and real not in found and os.path.isdir(real):
            found.append(real)
    return found


def admin_rules_mounts(binds: Sequence[Path]) -> list[str]:
    """bwrap options that keep the admin's approval rules file (``IAC_KERNEL_APPROVAL_RULES``
    of this process, never the command's: team/rules.py) as it is when it lies in one of
    ``binds`` (writable folders); elsewhere the read-only root keeps it so already. On the
    way from the bind to the file, the first folder holding no writable place (else the
    file itself) is bound read-only over itself; each folder before it (it holds the cwd
    or a writable path) is bound onto itself, a mount point that cannot be renamed away
    with the file in it. Not covered, as no mount can hold them: a file the admin named
    that does not exist yet, or a symbolic link on its way, directly in a folder holding
    the cwd or a writable path (a call could make the one or replace the other)."""
    raw = os.environ.get(RULES_ENV, "").strip()
    if not raw:
        return []
    named = Path(os.path.abspath(os.path.expanduser(raw)))
    roots = [Path(os.path.realpath(b)) for b in binds if os.path.isdir(b)]
    args: list[str] = []
    done: set[Path] = set()
    for target in dict.fromkeys((named, Path(os.path.realpath(named)))):
        for root in roots:
            if target == root or not target.is_relative_to(root):
                continue
            current = root
            for part in target.relative_to(root).parts:
                current = current / part
                if not os.path.lexists(current) or current in done:
                    break
                done.add(current)
                holds = any(r == current or r.is_relative_to(current) for r in roots)
                if holds and current.is_dir() and not current.is_symlink():
                    args += ["--bind", str(current), str(current)]
                    continue
                args += ["--ro-bind", str(current), str(current)]
                break
    return args


@functools.lru_cache(maxsize=1)
def own_paths_under_tmp() -> tuple[str, ...]:
    """The folder holding this package (a checkout, or site-packages) and the interpreter's
    prefixes when they lie under /tmp: the sandbox's private /tmp would hide them, and the
    guard's helpers (and a checkout's runbook tools) run from them inside the sandbox."""
    found: list[str] = []
    for path in (os.path.dirname(PACKAGE), sys.prefix, sys.exec_prefix, sys.base_prefix):
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and real not in found:
            found.append(real)
    return tuple(found)


_NOTICED: set[str] = set()


def reduced_notice(session_id: str) -> str | None:
    """The reduced-guard notice, once per session (None when the sandbox works or the
    session was already told)."""
    reason = unusable_reason()
    if reason is None or session_id in _NOTICED:
        return None
    _NOTICED.add(session_id)
    return (
        f"{REDUCED_STATUS} ({reason}). Bash commands run without a sandbox: guarded "
        "programs still ask before changing commands when found on PATH, but writes "
        "outside the working directory are not blocked."
    )
