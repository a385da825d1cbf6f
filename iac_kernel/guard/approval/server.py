"""The approval server of one bash call: launchers inside the sandbox connect to it.

For each connection: read the launcher's request (argv, cwd, environment) and its stdio
descriptors; the exec-time steps judge it (:mod:`.verdict`); observers see it, and a
changing command is reviewed and asked (through ``ask_exec``, i.e. the permission gate);
then the real program runs with the launcher's stdio - in a sibling sandbox with the
same mounts when bubblewrap is in use - and its exit status goes back. Anything but an
approval is a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.egress.decide import GuardedRun
from iac_kernel.egress.proxy import Route
from iac_kernel.guard.approval import reviews, wire
from iac_kernel.guard.approval.output_filter import Relay
from iac_kernel.guard.approval.request import (
    AskExec,
    AuditSink,
    ExecRequest,
    Trail,
    command_record,
    record,
)
from iac_kernel.guard.policy import git_creds, gitconfig, target
from iac_kernel.guard.policy.grammar import REFUSE, SKIP, Verdict, program_name
from iac_kernel.guard.policy.verdict import ORIGINALS, Exec, decide
from iac_kernel.guard.sandbox import hidden, processes
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, Layout, state_dir
from iac_kernel.guard.sandbox.reals import is_pyenv_shim
from iac_kernel.guard.sandbox.spawn import CannotStart, Refused, not_on_path, start_program
from iac_kernel.guard.tfcover import writes as tf_writes
from iac_kernel.guard.tfcover.cover import Cover
from iac_kernel.guard.tfcover.held import Held
from iac_kernel.peercred import peer_pid

log = logging.getLogger(__name__)
STDIO = ("stdin", "stdout", "stderr")


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
    #: Masks in the shell what a guarded terraform/tofu wrote, before its exit status
    #: goes back (None: nothing to mask, or reduced mode).
    cover: Cover | None = None
    _listener: socket.socket | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)
    _ask_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _accepting: asyncio.Task | None = None
    _asking_since: float | None = None
    #: The sandboxes (bwrap pids, also their process groups) of every running guarded
    #: program (git_creds.Run).
    _runs: dict[int, git_creds.Run] = field(default_factory=dict)
    #: Opens a guarded run's own egress route: ``(run, folder) -> Route | None`` (the
    #: relay socket in ``folder``, which only that run's sandbox sees). None: no proxy.
    open_run_route: Callable[[GuardedRun, Path], Awaitable[Route | None]] | None = None

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
        for pgid in list(self._runs):
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
        if self.cover is not None:
            self.cover.close()

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
            request, fds = await wire.read_request(conn)
            code = await self._handle(request, fds, conn)
            await wire.send(conn, {"exit": code})
        except CannotStart as exc:
            with contextlib.suppress(OSError):
                await wire.send(conn, {"cannot_start": str(exc), "exit": exc.code})
        except Refused as exc:
            with contextlib.suppress(OSError):
                await wire.send(conn, {"refused": str(exc)})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("guard request failed: %s", exc)
            with contextlib.suppress(OSError):
                await wire.send(conn, {"refused": f"bad request: {exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    async def _handle(self, request: dict, fds: list[int], conn: socket.socket) -> int:
        x = self._request(request, peer_pid(conn))
        verdict = await decide(x)
        trail = Trail()
        # The audit trail's record of a changing command (refused ones too) and of a push.
        changing = verdict.changing or (verdict.kind == REFUSE and x.rules.changing)
        if changing or (x.push and verdict.kind != SKIP):
            host_cwd = self.layout.host_path(x.cwd) if self.layout else x.cwd
            reason = verdict.reason or x.rules.reason or "git push: updates a remote"
            trail.command = command_record(x.program, x.argv, host_cwd, x.run_env, reason)
        if verdict.kind == REFUSE:
            await record(self.audit, trail, "refused", None, verdict.reason)
            raise Refused(verdict.reason)
        if verdict.kind == SKIP:
            return 0
        originals = {pid for pid, run in self._runs.items() if run[0] in ORIGINALS}
        if self.cover is not None and x.peer and processes.nearest(x.peer, originals) is None:
            # A process of the call's shell (not under a guarded terraform, which sees the
            # originals): what terraform writes is masked in its namespace too.
            await asyncio.to_thread(self.cover.watch, x.peer)
        entry = {"argv": x.argv, "cwd": x.cwd, "kind": verdict.kind, "outcome": "run"}
        self.log.append(entry)
        info = self._exec_info(x)
        argv, env = x.argv, x.run_env
        try:
            try:  # read-only commands too: what they print is masked from the start
                await asyncio.to_thread(reviews.noticed, info)
            except reviews.ObserverFailed as exc:
                raise Refused(str(exc)) from None
            if verdict.changing:
                stderr = dict(zip(request.get("fds", []), fds, strict=False)).get(2)
                argv, env = await self._approve(info, x.cwd, verdict, trail, conn, stderr)
                if wire.gone_or_signalled(conn):
                    raise Refused("the command that asked was stopped before it was approved")
            masking = await asyncio.to_thread(reviews.output_filter, info)
            numbers = request.get("fds", [])
            approved = verdict.changing or x.place.approved

            async def run(words: list[str]) -> int:
                return await self._run(x, words, env, numbers, fds, conn, masking, approved)

            if not verdict.changing and tf_writes.is_init(x.program, x.argv):
                code = await tf_writes.without_input(x.program, argv, numbers, fds, run)
            else:
                code = await run(argv)
        except Refused as exc:
            entry["outcome"] = "refused"
            await record(self.audit, trail, "refused", None, str(exc))
            raise
        except asyncio.CancelledError:
            outcome = "interrupted" if trail.asked else "cancelled"
            await record(self.audit, trail, outcome, None, f"the call ended ({outcome})")
            raise
        await record(self.audit, trail, "applied" if code == 0 else "failed", code, None)
        return code

    def _request(self, request: dict, pid: int | None) -> Exec:
        """A launcher's request as the exec-time steps see it."""
        program, argv, cwd = str(request["program"]), request["argv"], request["cwd"]
        env = hidden.without_loader_variables({**self.secret_env, **request["env"]})
        if program not in self.reals:
            raise not_on_path(program, env.get("PATH", ""), self.layout)
        # Local git commands run without credentials: the repository's own configuration
        # and hooks, which the call can write, can make git run anything; a helper git
        # runs itself is part of that git's run (git_creds.py).
        place = git_creds.placement(program, argv, pid, self._runs)
        run_env = env if place.reveal else hidden.without_loader_variables(request["env"])
        base = env if place.nested else self.base_env
        git = self._git_reader(argv[0]) if program == "git" else None
        layout = self.layout
        return Exec(program, argv, cwd, env, run_env, base, place, layout, self.guard_dir, pid, git)

    def _exec_info(self, x: Exec) -> reviews.ExecInfo:
        """What reviews and observers see of one exec (host paths)."""
        layout = self.layout
        return reviews.ExecInfo(
            x.program,
            list(x.argv),
            layout.host_path(x.cwd) if layout else x.cwd,
            self.guard_dir,
            GUARD_MOUNT if layout else str(self.guard_dir),
            dict(x.run_env),
            host_path=layout.host_path if layout else os.path.normpath,
            sandbox_cwd=x.cwd,
        )

    async def _approve(
        self,
        info: reviews.ExecInfo,
        cwd: str,
        verdict: Verdict,
        trail: Trail,
        conn: socket.socket | None = None,
        stderr: int | None = None,
    ) -> tuple[list[str], dict]:
        """Review and ask for one changing exec (``cwd`` as the sandbox sees it; its
        launcher's connection and stderr, for a review that holds it)."""
        program, argv, env, host_cwd = info.program, list(info.argv), info.env, info.cwd
        shown = " ".join([program, *argv[1:]])
        review = await asyncio.to_thread(reviews.review, info)
        trail.review = review
        if review is not None and review.refuse:
            raise Refused(review.refuse)
        if self.ask_exec is None:
            raise Refused(
                f"`{shown}` needs the user's approval ({verdict.reason}), "
                "but no one is there to approve it"
            )
        request = ExecRequest(program, list(argv), cwd, verdict, review, self.layout is not None)
        trail.request = request
        request.env = target.retargeting_env(env)
        request.target = target.describe(program, argv, host_cwd, env, self.base_env)
        request.retargeted = request.env != target.retargeting_env(self.base_env) or (
            target.trust_store(env) != target.trust_store(self.base_env)
        )
        problem = None
        async with self._ask_lock:
            self._asking_since = time.monotonic()
            try:
                allowed, message = await self.ask_exec(request)
                if allowed and review is not None and review.hold is not None:
                    # Other people's answers: not counted against the timeout either.
                    problem = await self._held(review.hold, conn, stderr)
            finally:
                self.waited += time.monotonic() - self._asking_since
                self._asking_since = None
        if not allowed:
            raise Refused(f"`{shown}` was not approved: {message}")
        if problem:
            raise Refused(problem)
        if review is not None and review.recheck is not None:
            problem = await asyncio.to_thread(review.recheck)
            if problem:
                raise Refused(problem)
        if review is None:
            return list(argv), env
        return list(review.argv or argv), dict(review.env) if review.env is not None else env

    @staticmethod
    async def _held(
        hold: Callable[[Callable[[str], None]], Awaitable[str | None]],
        conn: socket.socket | None,
        stderr: int | None,
    ) -> str | None:
        """A review's hold, its lines written to the command's stderr; it ends (a
        refusal) when the launcher goes away or relays a signal."""

        def say(text: str) -> None:
            if stderr is not None:
                with contextlib.suppress(OSError):
                    os.write(stderr, text.encode(errors="replace"))

        task = asyncio.ensure_future(hold(say))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=1.0)
                if not task.done() and conn is not None and wire.gone_or_signalled(conn):
                    return "the command that asked was stopped while it waited for approval"
            try:
                return task.result()
            except Exception as exc:  # a wait that cannot end in an approval refuses
                log.exception("guard: a review's hold failed")
                return f"the wait for approval failed: {exc}"
        finally:
            task.cancel()

    def _git_reader(self, invoked: str) -> gitconfig.GitConfigReader:
        """Reads the configuration of the git that ``invoked`` would run."""
        git = gitconfig.config_git(self._pick_real("git", invoked), self.reals["git"])
        return gitconfig.GitConfigReader(git, self.layout, self.bwrap)

    def _pick_real(self, program: str, invoked: str) -> str:
        reals = self.reals[program]
        path = self.layout.host_path(invoked) if self.layout else invoked
        real = os.path.realpath(path) if os.path.isabs(path) else ""
        if real in reals and is_pyenv_shim(real):  # run what the shim would run
            real = next((r for r in reals if not is_pyenv_shim(r)), real)
        return real if real in reals else reals[0]

    async def _run(
        self,
        x: Exec,
        argv: list[str],
        env: dict,
        numbers: list,
        fds: list,
        conn: socket.socket,
        masking: Any = None,
        approved: bool = False,
    ) -> int:
        """Start the real program of ``x`` as ``argv`` with ``env`` and the launcher's
        stdio ``fds`` (its fd ``numbers``); ``fds`` are closed here and the list emptied
        (the caller must not close them). ``masking``: a filter maker its stdout and stderr
        go through (``Relay``); ``approved``: the user approved this run (its cloud
        operations are not asked again at the wire)."""
        program, cwd, reveal = x.program, x.cwd, x.place.reveal
        stdio = dict(zip(numbers, fds, strict=False))
        relay = Relay(stdio, masking) if masking is not None else None
        if relay is not None:
            stdio = {**stdio, **relay.child}
        real = self._pick_real(program, argv[0])
        # A dashed git helper (`git-receive-pack`) keeps its name: git dispatches on it.
        dashed = program == "git" and program_name(argv[0]).startswith("git-")
        run_argv = [program_name(argv[0]) if dashed else program, *argv[1:]]
        std = {k: stdio.get(i, asyncio.subprocess.DEVNULL) for i, k in enumerate(STDIO)}
        held: list[Held] = []
        route: tuple[Path, Route] | None = None
        try:
            held = await self._hold(program, argv, cwd, env)
            # Only a run that holds the credentials gets a relay of its own; one run
            # without them (a local git command) goes out like the shell.
            if reveal:
                route = await self._run_route(GuardedRun(program, tuple(run_argv), approved))
            proc = await start_program(
                real,
                run_argv,
                std,
                env,
                cwd,
                self.layout,
                self.bwrap,
                guarded=reveal,
                original=program in ORIGINALS,
                run_route=(route[0], route[1].port) if route else None,
            )
        except BaseException:  # it never started
            await self._close_run_route(route)
            if relay is not None:
                relay.close()
            if held:
                await asyncio.to_thread(self.cover.release, held)  # type: ignore[union-attr]
            raise
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        if relay is not None:
            relay.start()
        self._runs[proc.pid] = (program, reveal, approved)
        processes.started(proc.pid)
        with contextlib.suppress(OSError):
            await wire.send(conn, {"started": True})
        watcher = asyncio.create_task(self._watch(conn, proc))
        try:
            code = await proc.wait()
            if relay is not None:  # all it printed is out before its exit status
                await asyncio.to_thread(relay.join)
            return code
        finally:
            watcher.cancel()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await self._close_run_route(route)
            self._runs.pop(proc.pid, None)
            processes.ended(proc.pid)
            if program in ORIGINALS and self.cover is not None:
                # Before the exit status goes back: the shell then finds masked copies.
                try:
                    await asyncio.to_thread(self.cover.settle, held)
                except Exception:  # a bug here must not lose the exit status
                    log.exception("guard: masking what terraform wrote failed")

    async def _run_route(self, run: GuardedRun) -> tuple[Path, Route] | None:
        """The run's own relay, in a folder of the guard's state (hidden in every sandbox)
        that only this run's sandbox mounts: the shell cannot connect to it, so only this
        run's processes can make the broker swap a credential."""
        if self.open_run_route is None or self.layout is None:
            return None
        folder = Path(tempfile.mkdtemp(prefix="run-", dir=state_dir()))
        os.chmod(folder, 0o755)
        try:
            route = await self.open_run_route(run, folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if route is None:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return folder, route

    @staticmethod
    async def _close_run_route(route: tuple[Path, Route] | None) -> None:
        if route is not None:
            await route[1].close()
            shutil.rmtree(route[0], ignore_errors=True)

    async def _hold(self, program: str, argv: list[str], cwd: str, env: dict) -> list[Held]:
        """Cover in the shell what a guarded terraform/tofu may write, before it starts
        (a refusal when one cannot be covered)."""
        if program not in ORIGINALS or self.cover is None:
            return []
        held, problems = await asyncio.to_thread(self.cover.hold, argv, cwd, env)
        if problems:
            raise Refused("a file terraform may write cannot be masked: " + "; ".join(problems))
        return held

    async def _watch(self, conn: socket.socket, proc: asyncio.subprocess.Process) -> None:
        """Relay the launcher's signals; kill the program when the launcher goes away."""
        async for signum in wire.relayed_signals(conn):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                # To the program's group, sparing bwrap and its init (they would kill it).
                processes.signal_group(proc.pid, signum, self.layout is not None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
