"""bash: run a shell command in the working directory, in its own process group."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import signal
import sys
from typing import Any

from iac_kernel.egress import environment
from iac_kernel.egress.proxy import proxy
from iac_kernel.guard.call import GuardedCall, SandboxRequired, guarded_programs
from iac_kernel.guard.sandbox import processes
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.danger import REVIEWED_PROGRAMS, Question, judge, literal_commands
from iac_kernel.tools.procgroup import (
    group_alive,
    kill_group,
    stop_group,
    stop_leftovers,
    wait_exit,
)
from iac_kernel.tools.tf_masking import mounts
from iac_kernel.tools.tf_plans import pick_up_plans

#: The longest ``timeout`` a call may ask for (a long ``terraform apply``), unless the
#: bash_timeout setting is longer still.
MAX_TIMEOUT = 1800.0
#: After the command's shell exits, how long to wait for the output pipe to close.
DRAIN_SECONDS = 2.0
_POLL = 0.05
#: What programs print when a name does not resolve or a host is unreachable (curl, wget,
#: git, Python, Go, Node, ssh, pip): in a sandbox without the egress route, that call
#: tried the network.
_NO_NETWORK = re.compile(
    r"could not resolve|couldn't resolve|unable to resolve|temporary failure"
    r"|name or service not known|nodename nor servname|no such host|getaddrinfo"
    r"|EAI_AGAIN|ENOTFOUND|network is unreachable|failed to establish a new connection"
    r"|dial tcp|failed to connect to",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class OutputCapture:
    """Combined output of a command: the head and tail kept, the middle counted."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 200)
        self.head_size = self.limit // 2
        self.head = ""
        self.tail = ""
        self.total = 0
        # surrogateescape: any byte is kept (the store escapes it; front ends show \xNN)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        #: Live output (``ToolContext.on_output``): each decoded chunk, ANSI codes removed.
        self.on_text: Any = None

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        if self.on_text is not None:
            self.on_text(_ANSI.sub("", text))
        self.total += len(text)
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-(self.limit - self.head_size) :]

    @property
    def cut(self) -> int:
        """Characters left out of the middle."""
        return max(self.total - self.limit, 0)

    def text(self) -> str:
        if not self.cut:
            return _ANSI.sub("", self.head + self.tail)
        return (
            _ANSI.sub("", self.head) + f"\n\n[... {self.cut} characters of output cut; "
            f"showing the first {len(self.head)} and last {len(self.tail)} ...]\n\n"
            + _ANSI.sub("", self.tail)
        )


def exec_reviewed(settings: Any) -> frozenset[str]:
    """Guarded programs whose apply/destroy the guard reviews and asks at exec time (one
    question, with the plan): the call-time question leaves them to it."""
    return frozenset(guarded_programs(settings)) & REVIEWED_PROGRAMS


def _require_dir(path: object) -> None:
    if not os.path.isdir(str(path)):
        raise ToolError(f"working directory not found: {path}")


async def _pump(stream: asyncio.StreamReader, capture: OutputCapture) -> None:
    while chunk := await stream.read(65_536):
        capture.feed(chunk)
    capture.feed(b"", final=True)


class BashTool(Tool):
    name = "bash"
    description = (
        "Run a command with `bash -c` in the working directory and return its combined "
        "stdout and stderr (long output keeps its head and tail) and exit code. stdin is "
        "/dev/null, so interactive prompts fail: pass flags such as `-input=false`. "
        "The command is stopped after `timeout` seconds; background processes it leaves "
        "are stopped when it ends. It runs in a sandbox: only the working directory and /tmp "
        "(private to the call) are writable. Commands that change real infrastructure "
        "(terraform apply/destroy, kubectl apply, helm upgrade, forced pushes, ...) need the "
        "user's approval for each call, however they are started."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line.", "minLength": 1},
            "timeout": {
                "type": "number",
                "description": f"Seconds before the command is stopped (max {MAX_TIMEOUT:.0f}).",
                "exclusiveMinimum": 0,
            },
            "description": {
                "type": "string",
                "description": "A few words on what the command does, for the user.",
            },
            "sandbox": {
                "type": "boolean",
                "description": "false runs the command outside the sandbox (only when it "
                "must write outside the working directory; always asks the user).",
                "default": True,
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE
    subject = "command"
    prints_live = shows_contents = True

    def question(self, args: dict[str, Any], ctx: ToolContext | None = None) -> Question:
        """The gate's question about this call, decided in one place
        (:func:`~iac_kernel.tools.danger.judge`)."""
        command = args.get("command") if isinstance(args, dict) else None
        if not isinstance(command, str):
            return Question()
        if args.get("sandbox") is False:
            return Question(
                "This command runs OUTSIDE the sandbox: it can write anywhere and its "
                "processes can outlive the call; approve this call."
            )
        if ctx is None:
            return judge(command)
        return judge(command, exec_reviewed(ctx.settings), unusable_reason() is None)

    def gate_reason(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        reason = self.question(args, ctx).reason
        return reason is not None, reason

    def per_call_reason(self, args: dict[str, Any]) -> str | None:
        """Why the call is asked per call (without the session's settings), or None."""
        return self.question(args).reason

    def asked_at_exec(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        return self.question(args, ctx).at_exec

    remembers_prefixes = True

    def command_prefixes(
        self, args: dict[str, Any], ctx: ToolContext | None = None
    ) -> list[str] | None:
        return self.question(args, ctx).prefixes

    def literal_commands(self, args: dict[str, Any]) -> list[list[str]]:
        command = args.get("command") if isinstance(args, dict) else None
        return literal_commands(command) if isinstance(command, str) else []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        settings = ctx.settings
        max_timeout = max(MAX_TIMEOUT, float(settings.bash_timeout))
        timeout = min(float(args.get("timeout", settings.bash_timeout)), max_timeout)
        _require_dir(ctx.cwd)
        env = {**os.environ, **ctx.env}
        if "PATH" not in ctx.env:  # an explicit PATH from the caller is kept as given
            # The kernel's own environment first: its python, pip and tools.
            env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        sandboxed = args.get("sandbox", True) is not False and unusable_reason() is None
        if sandboxed and ctx.on_output is not None and environment.will_install():
            # First use: making the proxy's environment takes a while; say so live.
            ctx.on_output("[installing the egress proxy for the sandbox's network, once…]\n")
        guard = GuardedCall(
            ctx.cwd,
            settings,
            env,
            ctx.ask_exec,
            sandbox=args.get("sandbox", True) is not False,
            audit=ctx.audit,
            overlays=mounts,
            ask_egress=ctx.ask_egress,
        )
        try:
            await guard.__aenter__()
        except SandboxRequired as exc:
            raise ToolError(f"{self.name} is refused: {exc}") from None
        try:
            result = await self._run(args["command"], ctx, guard, timeout)
        finally:
            await guard.__aexit__(None, None, None)
        assert guard.server is not None
        result.raw_output["sandbox"] = "bwrap" if guard.sandboxed else "reduced"
        if guard.sandboxed and guard.route is None and _NO_NETWORK.search(result.content):
            # The program's own error names a DNS failure; say why there is no network.
            if getattr(settings, "sandbox_network", "proxy") != "none":
                why = proxy().failure or environment.INSTALL_HINT
                hint = environment.INSTALL_HINT
                why = why if why.startswith(hint) else f"{hint} ({why})"
                result.content += f"\n[{why}]"
                result.raw_output["network"] = why
        if guard.server.log:
            result.raw_output["guarded"] = guard.server.log
        await pick_up_plans(args["command"], ctx.cwd, result)  # a card for each plan saved
        return result

    async def _run(
        self, command: str, ctx: ToolContext, guard: GuardedCall, limit: float
    ) -> ToolResult:
        grace = float(ctx.settings.bash_grace)
        capture = OutputCapture(int(ctx.settings.output_limit))
        capture.on_text = ctx.on_output
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *guard.wrap(["bash", "-c", command]),
                cwd=str(ctx.cwd),
                env=guard.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        )
        try:
            # Shielded: a cancel while asyncio connects the pipes must still stop the
            # command, which is already running by then.
            proc = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                started = await spawn
                await stop_group(started, started.pid, grace, guard.sandboxed)
            raise
        except FileNotFoundError as exc:
            _require_dir(ctx.cwd)
            raise ToolError(f"cannot run the command: {exc.filename} is not installed") from None
        except OSError as exc:
            raise ToolError(f"cannot run the command: {exc.strerror or exc}") from None
        # The endpoint refuses this call's processes (guard/sandbox/processes.py).
        processes.started(proc.pid)
        try:
            return await self._wait(proc, capture, ctx, guard, limit, grace)
        finally:
            processes.ended(proc.pid)

    async def _wait(
        self,
        proc: asyncio.subprocess.Process,
        capture: OutputCapture,
        ctx: ToolContext,
        guard: GuardedCall,
        limit: float,
        grace: float,
    ) -> ToolResult:
        assert proc.stdout is not None
        pgid = proc.pid  # start_new_session: the shell (or bwrap) leads a new group
        boxed = guard.sandboxed
        reader = asyncio.create_task(_pump(proc.stdout, capture))
        timed_out = False
        notes: list[str] = []
        try:
            try:
                await wait_exit(proc, limit, lambda: guard.waited)
            except TimeoutError:
                timed_out = True
                await stop_group(proc, pgid, grace, boxed)
            if await stop_leftovers(proc, pgid, grace, boxed) and not timed_out:
                notes.append("[background processes left by the command were stopped]")
            done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
            if not done:
                reader.cancel()
                notes.append("[stopped reading: a detached process still holds the output]")
        except asyncio.CancelledError:
            try:
                await stop_group(proc, pgid, grace, boxed)
            finally:
                if group_alive(pgid):
                    kill_group(pgid)
                reader.cancel()
            raise
        returncode = proc.returncode if proc.returncode is not None else -1
        return self._result(capture, returncode, timed_out, limit, notes)

    @staticmethod
    def _result(
        capture: OutputCapture, returncode: int, timed_out: bool, timeout: float, notes: list[str]
    ) -> ToolResult:
        output = capture.text().rstrip("\n")
        parts = [output] if output else ["(no output)"]
        parts += notes
        if timed_out:
            parts.append(f"[command timed out after {timeout:g}s and was stopped]")
        elif returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = f"signal {-returncode}"
            parts.append(f"[command killed by {name}]")
        elif returncode:
            parts.append(f"[exit code {returncode}]")
        return ToolResult(
            "\n".join(parts),
            is_error=timed_out or returncode != 0,
            raw_output={
                "exit_code": returncode,
                "timed_out": timed_out,
                "output_chars": capture.total,
                "cut_chars": capture.cut,
            },
        )
