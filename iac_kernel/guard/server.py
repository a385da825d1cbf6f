"""The approval server of one bash call: launchers inside the sandbox connect to it.

For each connection: read the launcher's request (argv, cwd, environment) and its stdio
descriptors, classify the argv, run a registered review and ask the agent (through
``ask_exec``, i.e. the permission gate) for changing commands, then run the real program
with the launcher's stdio - in a sibling sandbox with the same mounts when bubblewrap is
in use - and send its exit status back. Anything but an approval is a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.guard import (
    callers,
    git_creds,
    gitconfig,
    hidden,
    realbin,
    redirect,
    reviews,
    target,
    tf_init,
)
from iac_kernel.guard.procs import signal_group
from iac_kernel.guard.racers import peer_pid
from iac_kernel.guard.rules import CHANGE, Verdict, classify, program_name
from iac_kernel.guard.sandbox import GUARD_MOUNT, Layout, is_pyenv_shim

log = logging.getLogger(__name__)

MAX_REQUEST = 8 * 1024 * 1024
HELPER = str(Path(__file__).with_name("exec_helper.py"))


@dataclass
class ExecRequest:
    """A guarded program asks to run: what the permission gate decides on."""

    program: str
    argv: list[str]
    cwd: str
    verdict: Verdict
    review: reviews.Review | None = None
    sandboxed: bool = True
    #: Filled by whoever asks: the question's exact text, the answer, who gave it, when.
    asked: dict[str, Any] = field(default_factory=dict)
    #: The environment that retargets the command (secret values as ``***``).
    env: dict[str, str] = field(default_factory=dict)
    #: What it resolves to: ``Target: terraform workspace prod``.
    target: list[str] = field(default_factory=list)
    #: The command changed that environment (an earlier question did not show it).
    retargeted: bool = False


#: ``ask_exec``: returns (allowed, message for the model when not allowed).
AskExec = Callable[[ExecRequest], Awaitable[tuple[bool, str]]]
#: Receives one audit record per reviewed call that asked for one (see ``Review.audit``).
AuditSink = Callable[[dict[str, Any]], None]


class Refused(Exception):
    """The program must not run; the message goes to the launcher's stderr."""


@dataclass
class ApprovalServer:
    """Serves one bash call's launchers."""

    reals: dict[str, list[str]]
    ask_exec: AskExec | None
    #: Host directory for private files (read-only inside the sandbox at GUARD_MOUNT).
    guard_dir: Path
    #: The sandbox layout, or None in reduced mode (programs run directly).
    layout: Layout | None = None
    bwrap: str | None = None
    #: Seconds spent waiting for the user's answers (not counted against the timeout).
    waited: float = 0.0
    #: Secret-bearing variables taken out of the shell's environment: a guarded program
    #: the guard runs gets them back (the shell's own value of a name wins).
    secret_env: dict[str, str] = field(default_factory=dict)
    #: The environment the bash call started with (what "set by the command" compares to).
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    #: Every request seen: (argv, verdict kind, outcome); for the tool's raw output.
    log: list[dict] = field(default_factory=list)
    #: Where audit records of reviewed calls go (None: not recorded).
    audit: AuditSink | None = None
    _listener: socket.socket | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)
    _groups: set[int] = field(default_factory=set)
    _ask_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _accepting: asyncio.Task | None = None
    _asking_since: float | None = None

    def paused(self) -> float:
        """Seconds spent waiting for answers so far, including a question still open."""
        since = self._asking_since
        return self.waited + (time.monotonic() - since if since is not None else 0.0)

    async def start(self, path: Path) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept())

    async def close(self) -> None:
        """Stop serving; kill every program still running for this call."""
        for pgid in list(self._groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        tasks = [t for t in [self._accepting, *self._tasks] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._listener is not None:
            self._listener.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            conn, _ = await loop.sock_accept(self._listener)
            conn.setblocking(False)
            task = asyncio.create_task(self._serve(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            request, fds = await self._read_request(conn)
            code = await self._handle(request, fds, conn)
            await _send(conn, {"exit": code})
        except Refused as exc:
            with contextlib.suppress(OSError):
                await _send(conn, {"refused": str(exc)})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("guard request failed: %s", exc)
            with contextlib.suppress(OSError):
                await _send(conn, {"refused": f"bad request: {exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    async def _read_request(self, conn: socket.socket) -> tuple[dict, list[int]]:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(conn.fileno())
        header, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
        while len(header) < 4:
            more = await loop.sock_recv(conn, 4 - len(header))
            if not more:
                raise ValueError("short header")
            header += more
        (length,) = struct.unpack("!I", header)
        if length > MAX_REQUEST:
            raise ValueError("request too large")
        data = b""
        while len(data) < length:
            chunk = await loop.sock_recv(conn, min(65536, length - len(data)))
            if not chunk:
                raise ValueError("short request")
            data += chunk
        request = json.loads(data)
        if not isinstance(request.get("argv"), list) or not request["argv"]:
            raise ValueError("argv missing")
        request["argv"] = [str(a) for a in request["argv"]]
        request["env"] = {str(k): str(v) for k, v in dict(request.get("env") or {}).items()}
        request["cwd"] = str(request.get("cwd") or "/")
        return request, list(fds)

    async def _handle(self, request: dict, fds: list[int], conn: socket.socket) -> int:
        if not await asyncio.to_thread(self._own_process, conn):
            raise Refused("this guard serves the processes of its own call only")
        program = str(request["program"])
        argv, cwd = request["argv"], request["cwd"]
        env = {**self.secret_env, **request["env"]}
        env = {k: v for k, v in env.items() if not _loader_variable(k)}
        if program not in self.reals:
            raise Refused(f"{program} is not a guarded program here")
        verdict = classify(program, argv, env)
        # Local git commands run without credentials: the repository's own configuration
        # and hooks, which the call can write, can make git run anything (git_creds.py).
        reveal = program != "git" or git_creds.needs_credentials(argv)
        if not reveal:
            env = {k: v for k, v in request["env"].items() if not _loader_variable(k)}
        if program == "git" and not verdict.changing:
            git = gitconfig.config_git(self._pick_real(program, argv[0]), self.reals[program])
            reader = gitconfig.GitConfigReader(git, self.layout, self.bwrap)
            verdict = await git_creds.git_verdict(
                argv, cwd, env, reader, self.layout, reveal, verdict, peer_pid(conn)
            )
        redirected = redirect.reason(program, argv, env, self.base_env)
        if redirected:
            shown = f"{verdict.reason}; {redirected}" if verdict.changing else redirected
            verdict = Verdict(CHANGE, shown)
        if not verdict.changing and self.layout is not None:
            # Values the command set itself count too (`GIT_CONFIG_GLOBAL=~/.aws/...`).
            words = [*argv[1:], *(v for k, v in env.items() if self.base_env.get(k) != v)]
            named = hidden.names_a_secret(words, self.layout.host_path(cwd), self.layout.secrets)
            if named is not None:
                verdict = Verdict(CHANGE, f"{program} reads {named}: a credential store")
        entry = {"argv": argv, "cwd": cwd, "kind": verdict.kind, "outcome": "run"}
        self.log.append(entry)
        run_argv = argv
        trail: dict[str, Any] = {}
        try:
            if verdict.changing:
                run_argv, env = await self._approve(program, argv, cwd, env, verdict, trail)
            if verdict.changing and _gone_or_signalled(conn):
                raise Refused("the command that asked was stopped before it was approved")
            numbers = request.get("fds", [])
            if not verdict.changing and tf_init.is_init(program, argv):

                async def run(words: list[str]) -> int:
                    return await self._run(program, words, cwd, env, numbers, fds, conn, reveal)

                code = await tf_init.without_input(program, run_argv, numbers, fds, run)
            else:
                code = await self._run(program, run_argv, cwd, env, numbers, fds, conn, reveal)
        except Refused as exc:
            entry["outcome"] = "refused"
            await self._record(trail, "refused", None, str(exc))
            raise
        except asyncio.CancelledError:
            asked = trail.get("request") is not None and trail["request"].asked
            outcome = "interrupted" if asked else "cancelled"
            await self._record(trail, outcome, None, f"the call ended ({outcome})")
            raise
        await self._record(trail, "applied" if code == 0 else "failed", code, None)
        return code

    def _own_process(self, conn: socket.socket) -> bool:
        """True when the peer runs in this call's sandbox (or a sibling the server
        started): it sees this call's guard folder at GUARD_MOUNT. Another session's
        sandbox that can see this call's socket (another TMPDIR) sees its own there."""
        if self.layout is None:
            return True
        pid = peer_pid(conn)
        try:
            seen = os.stat(f"/proc/{pid}/root{GUARD_MOUNT}") if pid else None
            own = os.stat(self.guard_dir)
        except OSError:
            return False
        return seen is not None and (seen.st_dev, seen.st_ino) == (own.st_dev, own.st_ino)

    async def _record(
        self, trail: dict[str, Any], outcome: str, code: int | None, message: str | None
    ) -> None:
        """The audit record of a reviewed call (when its review asked for one)."""
        review = trail.get("review")
        if self.audit is None or review is None or review.audit is None:
            return
        asked = trail.get("request").asked if trail.get("request") is not None else {}
        if outcome == "refused" and asked and not asked.get("allowed"):
            outcome = "cancelled" if asked.get("answer") == "cancelled" else "rejected"
        record = {**review.audit, **asked, "outcome": outcome, "exit": code}
        if message:
            record["message"] = message
        if review.after is not None and outcome not in ("rejected", "cancelled"):
            with contextlib.suppress(Exception):
                record.update(await asyncio.to_thread(review.after))
        if review.scrub is not None:
            record = review.scrub(record)
        try:
            await asyncio.to_thread(self.audit, record)
        except Exception:
            log.exception("could not write the audit record")

    async def _approve(
        self,
        program: str,
        argv: list[str],
        cwd: str,
        env: dict,
        verdict: Verdict,
        trail: dict[str, Any],
    ) -> tuple[list[str], dict]:
        shown = " ".join([program, *argv[1:]])
        host_cwd = self.layout.host_path(cwd) if self.layout else cwd
        inside = GUARD_MOUNT if self.layout else str(self.guard_dir)
        info = reviews.ExecInfo(program, list(argv), host_cwd, self.guard_dir, inside, dict(env))
        if self.layout is not None:
            info = dataclasses.replace(info, host_path=self.layout.host_path)
        review = await asyncio.to_thread(reviews.review, info)
        trail["review"] = review
        if review is not None and review.refuse:
            raise Refused(review.refuse)
        if self.ask_exec is None:
            raise Refused(
                f"`{shown}` needs the user's approval ({verdict.reason}), "
                "but no one is there to approve it"
            )
        request = ExecRequest(program, list(argv), cwd, verdict, review, self.layout is not None)
        trail["request"] = request
        request.env = target.retargeting_env(env)
        request.target = target.describe(program, argv, host_cwd, env)
        request.retargeted = request.env != target.retargeting_env(self.base_env)
        async with self._ask_lock:
            self._asking_since = time.monotonic()
            try:
                allowed, message = await self.ask_exec(request)
            finally:
                self.waited += time.monotonic() - self._asking_since
                self._asking_since = None
        if not allowed:
            raise Refused(f"`{shown}` was not approved: {message}")
        if review is not None and review.recheck is not None:
            problem = await asyncio.to_thread(review.recheck)
            if problem:
                raise Refused(problem)
        if review is None:
            return list(argv), env
        return list(review.argv or argv), dict(review.env) if review.env is not None else env

    def _pick_real(self, program: str, invoked: str) -> str:
        reals = self.reals[program]
        path = self.layout.host_path(invoked) if self.layout else invoked
        real = os.path.realpath(path) if os.path.isabs(path) else ""
        if real in reals and is_pyenv_shim(real):  # run what the shim would run
            real = next((r for r in reals if not is_pyenv_shim(r)), real)
        return real if real in reals else reals[0]

    async def _run(
        self,
        program: str,
        argv: list[str],
        cwd: str,
        env: dict,
        numbers: list,
        fds: list,
        conn,
        reveal: bool = True,
    ) -> int:
        """Start the real program with the launcher's stdio ``fds`` (its fd ``numbers``);
        ``fds`` are closed here and the list emptied (the caller must not close them)."""
        stdio = dict(zip(numbers, fds, strict=False))
        real = self._pick_real(program, argv[0])
        # A dashed git helper (`git-receive-pack`) keeps its name: git dispatches on it.
        dashed = program == "git" and program_name(argv[0]).startswith("git-")
        run_argv = [program_name(argv[0]) if dashed else program, *argv[1:]]
        std = {k: stdio.get(i, asyncio.subprocess.DEVNULL) for i, k in enumerate(("i", "o", "e"))}
        if self.layout is not None and self.bwrap:
            fd, script = realbin.exec_fd(real)
            extra = ["--clearenv"]
            for key, value in env.items():
                if key and "=" not in key:
                    extra += ["--setenv", key, value]
            command = self.layout.bwrap_args(self.bwrap, chdir=cwd, extra=extra, guarded=reveal)
            command += [sys.executable, "-IS", HELPER, str(fd), "1" if script else "0"]
            command += run_argv
            try:
                proc = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=std["i"],
                    stdout=std["o"],
                    stderr=std["e"],
                    pass_fds=(fd,),
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                    start_new_session=True,
                )
            finally:
                os.close(fd)
        else:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *run_argv,
                    executable=real,
                    cwd=cwd,
                    env=env,
                    stdin=std["i"],
                    stdout=std["o"],
                    stderr=std["e"],
                    start_new_session=True,
                )
            except OSError as exc:
                raise Refused(f"cannot start {program}: {exc.strerror or exc}") from None
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        self._groups.add(proc.pid)
        callers.started(proc.pid)
        with contextlib.suppress(OSError):
            await _send(conn, {"started": True})
        watcher = asyncio.create_task(self._watch(conn, proc))
        try:
            return await proc.wait()
        finally:
            watcher.cancel()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            self._groups.discard(proc.pid)
            callers.ended(proc.pid)

    async def _watch(self, conn: socket.socket, proc: asyncio.subprocess.Process) -> None:
        """Relay the launcher's signals; kill the program when the launcher goes away."""
        loop = asyncio.get_running_loop()
        buffer = b""
        while True:
            try:
                chunk = await loop.sock_recv(conn, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    signum = int(json.loads(line)["signal"])
                    self._signal(proc.pid, signum)

    def _signal(self, pgid: int, signum: int) -> None:
        """Signal the program's group, sparing bwrap and its init (they would kill it)."""
        signal_group(pgid, signum, self.layout is not None)


#: Variables that make the dynamic loader run other code inside the real program.
_LOADER_VARIABLES = {"GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH"}
_LOADER_VARIABLES |= {"MALLOC_TRACE", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS"}
#: Variables that make a shell or a pyenv shim run other code first: a script CLI's
#: children inherit the descriptor of the real script, so that code could exec it.
_LOADER_VARIABLES |= {"BASH_ENV", "ENV", "PYENV_HOOK_PATH"}


def _loader_variable(name: str) -> bool:
    return name.startswith("LD_") or name in _LOADER_VARIABLES


def _gone_or_signalled(conn: socket.socket) -> bool:
    """True when the launcher hung up or relayed a signal while its question was open."""
    try:
        conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True  # EOF, or a relayed signal waiting to be read


async def _send(conn: socket.socket, message: dict) -> None:
    await asyncio.get_running_loop().sock_sendall(conn, json.dumps(message).encode() + b"\n")
