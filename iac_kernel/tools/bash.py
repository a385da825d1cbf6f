"""bash: run a shell command in the working directory, in its own process group."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import signal
from typing import Any

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.danger import dangerous_reason
from iac_kernel.tools.paths import short
from iac_kernel.tools.validate import check

#: The longest ``timeout`` a call may ask for (a long ``terraform apply``), unless the
#: bash_timeout setting is longer still.
MAX_TIMEOUT = 1800.0
#: After the command's shell exits, how long to wait for the output pipe to close.
DRAIN_SECONDS = 2.0
_POLL = 0.05
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class OutputCapture:
    """Combined output of a command: the head and tail kept, the middle counted."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 200)
        self.head_size = self.limit // 2
        self.head = ""
        self.tail = ""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
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


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` is running (zombies count as gone)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        names = None
    if names is None or not os.path.exists("/proc/self/stat"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait_gone(proc: asyncio.subprocess.Process, pgid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for the shell and every process of its group to exit."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if proc.returncode is not None and not group_alive(pgid):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL)


async def stop_group(proc: asyncio.subprocess.Process, pgid: int, grace: float) -> None:
    """SIGINT (so terraform can release its state lock), then SIGTERM, then SIGKILL.

    Each step waits ``grace`` seconds for the whole process group to exit.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        if proc.returncode is not None and not group_alive(pgid):
            return
        _signal_group(pgid, sig)
        if await _wait_gone(proc, pgid, grace):
            return
    _signal_group(pgid, signal.SIGKILL)
    await _wait_gone(proc, pgid, 5.0)


async def _stop_leftovers(proc: asyncio.subprocess.Process, pgid: int, grace: float) -> bool:
    """The shell exited; stop background processes it left in its group. True if any."""
    if not group_alive(pgid):
        return False
    _signal_group(pgid, signal.SIGTERM)
    if not await _wait_gone(proc, pgid, min(grace, 1.0)):
        _signal_group(pgid, signal.SIGKILL)
        await _wait_gone(proc, pgid, 5.0)
    return True


async def _wait_exit(proc: asyncio.subprocess.Process) -> None:
    """Wait for the shell itself to exit.

    Not ``proc.wait()``: in Python 3.11 that also waits for the output pipe to close,
    which a background child holding the pipe delays until it exits.
    """
    delay = 0.002
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, _POLL)


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
        "are stopped when it ends. Commands that change real infrastructure "
        "(terraform apply/destroy, state changes, deletes) always need the user's approval."
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
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE

    def title(self, args: dict[str, Any]) -> str:
        return f"bash: {short(args.get('command', ''))}"

    def is_dangerous(self, args: dict[str, Any]) -> bool:
        command = args.get("command") if isinstance(args, dict) else None
        return isinstance(command, str) and dangerous_reason(command) is not None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = check(self, args)
        settings = ctx.settings
        max_timeout = max(MAX_TIMEOUT, float(settings.bash_timeout))
        timeout = min(float(args.get("timeout", settings.bash_timeout)), max_timeout)
        grace = float(settings.bash_grace)
        capture = OutputCapture(int(settings.output_limit))
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                args["command"],
                cwd=str(ctx.cwd),
                env={**os.environ, **ctx.env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            if exc.filename in (None, "bash"):
                raise ToolError("cannot run the command: bash is not installed") from None
            raise ToolError(f"working directory not found: {ctx.cwd}") from None
        except OSError as exc:
            raise ToolError(f"cannot run the command: {exc.strerror or exc}") from None
        assert proc.stdout is not None
        pgid = proc.pid  # start_new_session: the shell leads a new group
        reader = asyncio.create_task(_pump(proc.stdout, capture))
        timed_out = False
        notes: list[str] = []
        try:
            try:
                async with asyncio.timeout(timeout):
                    await _wait_exit(proc)
            except TimeoutError:
                timed_out = True
                await stop_group(proc, pgid, grace)
            if await _stop_leftovers(proc, pgid, grace) and not timed_out:
                notes.append("[background processes left by the command were stopped]")
            done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
            if not done:
                reader.cancel()
                notes.append("[stopped reading: a detached process still holds the output]")
        except asyncio.CancelledError:
            try:
                await stop_group(proc, pgid, grace)
            finally:
                if group_alive(pgid):
                    _signal_group(pgid, signal.SIGKILL)
                reader.cancel()
            raise
        returncode = proc.returncode if proc.returncode is not None else -1
        return self._result(capture, returncode, timed_out, timeout, notes)

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
