"""bash: output, exit codes, timeouts, cancellation and process-group cleanup."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path

import pytest

from guard_support import alive_with
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.bash import BashTool, OutputCapture

tool = BashTool()


def with_settings(ctx: ToolContext, **changes) -> ToolContext:
    return dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, **changes))


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie waiting to be reaped counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in (b"Z", b"X")


def unique_sleep() -> str:
    """A ``sleep`` duration no other process uses (a marker for :func:`alive_with`)."""
    return f"60.{random.randrange(10**8, 10**9)}"


#: Each process-group test runs in the sandbox and outside it (``sandbox: false``).
BOTH = pytest.mark.parametrize("boxed", [True, False], ids=["sandbox", "no-sandbox"])


def gone(pidfile: Path, marker: str, boxed: bool) -> bool:
    """The process is gone: by host PID outside the sandbox, by marker inside."""
    if boxed:
        return not alive_with(marker)
    return not alive(int(pidfile.read_text())) and not alive_with(marker)


def has_text(path: Path) -> bool:
    return path.exists() and bool(path.read_text().strip())


async def wait_for_file(path: Path) -> None:
    """Wait until the command has written ``path`` (it is running and set up)."""
    for _ in range(400):
        if has_text(path):
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{path} never appeared")


async def test_captures_stdout_and_stderr(tool_ctx: ToolContext):
    result = await tool.run({"command": "echo out; echo err >&2"}, tool_ctx)
    assert not result.is_error
    assert result.content == "out\nerr"
    assert result.raw_output["exit_code"] == 0


async def test_runs_in_cwd_with_extra_env(tool_ctx: ToolContext):
    ctx = dataclasses.replace(tool_ctx, env={"TF_WORKSPACE": "staging"})
    result = await tool.run({"command": 'pwd; echo "$TF_WORKSPACE"; echo "$PATH"'}, ctx)
    lines = result.content.splitlines()
    assert lines[0] == str(tool_ctx.cwd)
    assert lines[1] == "staging"
    assert lines[2]  # os.environ is inherited


async def test_stdin_is_dev_null(tool_ctx: ToolContext):
    result = await tool.run({"command": 'read -r answer; echo "read exit $?"'}, tool_ctx)
    assert result.content == "read exit 1"


async def test_no_output(tool_ctx: ToolContext):
    result = await tool.run({"command": "true"}, tool_ctx)
    assert result.content == "(no output)"


async def test_non_zero_exit_is_an_error_result_with_output(tool_ctx: ToolContext):
    result = await tool.run({"command": "echo 'Error: Invalid provider'; exit 3"}, tool_ctx)
    assert result.is_error
    assert result.content == "Error: Invalid provider\n[exit code 3]"
    assert result.raw_output["exit_code"] == 3


async def test_huge_output_keeps_head_and_tail(tool_ctx: ToolContext):
    ctx = with_settings(tool_ctx, output_limit=1000)
    result = await tool.run({"command": "seq 1 100000"}, ctx)
    assert not result.is_error
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("99999\n100000")
    assert "characters of output cut" in result.content
    assert len(result.content) < 1300
    total = len("\n".join(str(i) for i in range(1, 100001))) + 1
    assert result.raw_output["output_chars"] == total
    assert result.raw_output["cut_chars"] == total - 1000


def test_output_capture_counts_what_it_cuts():
    capture = OutputCapture(200)
    for _ in range(10):
        capture.feed(b"a" * 100)
    capture.feed(b"", final=True)
    assert capture.total == 1000
    assert capture.cut == 800
    assert capture.text().startswith("a" * 100 + "\n\n[... 800 characters")


def test_output_capture_decodes_split_utf8():
    capture = OutputCapture(1000)
    data = "é€".encode()
    for byte in data:
        capture.feed(bytes([byte]))
    capture.feed(b"", final=True)
    assert capture.text() == "é€"


async def test_ansi_colours_are_stripped(tool_ctx: ToolContext):
    result = await tool.run({"command": r"printf '\033[1m\033[31mError:\033[0m bad\n'"}, tool_ctx)
    assert result.content == "Error: bad"


@BOTH
async def test_timeout_kills_the_whole_group(tool_ctx: ToolContext, boxed: bool):
    ctx = with_settings(tool_ctx, bash_timeout=0.5, bash_grace=0.3)
    pidfile = ctx.cwd / "child.pid"
    nap = unique_sleep()
    command = f"sleep {nap} & echo $! > {pidfile}; echo started; wait"
    result = await tool.run({"command": command, "sandbox": boxed}, ctx)
    assert result.is_error
    assert result.raw_output["timed_out"] is True
    assert result.raw_output["sandbox"] == ("bwrap" if boxed else "reduced")
    assert "started" in result.content
    assert "timed out after 0.5s" in result.content
    assert gone(pidfile, nap, boxed)


async def test_timeout_argument_overrides_the_default(tool_ctx: ToolContext):
    ctx = with_settings(tool_ctx, bash_timeout=120, bash_grace=0.2)
    result = await tool.run({"command": "sleep 60", "timeout": 0.3}, ctx)
    assert result.raw_output["timed_out"] is True
    assert "timed out after 0.3s" in result.content


@BOTH
async def test_background_processes_are_stopped_when_the_command_ends(
    tool_ctx: ToolContext, boxed: bool
):
    ctx = with_settings(tool_ctx, bash_grace=0.3)
    pidfile = ctx.cwd / "bg.pid"
    nap = unique_sleep()
    command = f"sleep {nap} & echo $! > {pidfile}; echo done"
    result = await tool.run({"command": command, "sandbox": boxed}, ctx)
    assert result.content.startswith("done")
    assert not result.is_error
    if not boxed:  # in the sandbox they die with its PID namespace, before we look
        assert "background processes" in result.content
    assert gone(pidfile, nap, boxed)


@BOTH
async def test_cancel_sends_sigint_first(tool_ctx: ToolContext, boxed: bool):
    ctx = with_settings(tool_ctx, bash_grace=2.0)
    marker = ctx.cwd / "marker"
    pidfile = ctx.cwd / "shell.pid"
    # Like terraform: on SIGINT, clean up (release the lock), then exit.
    command = (
        f"trap 'echo int >> {marker}; exit 130' INT; "
        f"trap 'echo term >> {marker}; exit 143' TERM; "
        # `wait` returns at once on a trapped signal (a foreground sleep can swallow it).
        f"echo $$ > {pidfile}; while true; do sleep 1 & wait $!; done"
    )
    task = asyncio.create_task(tool.run({"command": command, "sandbox": boxed}, ctx))
    await wait_for_file(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert marker.read_text().splitlines() == ["int"]
    assert gone(pidfile, str(pidfile), boxed)


@BOTH
async def test_cancel_escalates_to_sigkill(tool_ctx: ToolContext, boxed: bool):
    ctx = with_settings(tool_ctx, bash_grace=0.3)
    marker = ctx.cwd / "marker"
    pidfile = ctx.cwd / "shell.pid"
    # Traps that note the signal and carry on: only SIGKILL ends this.
    command = (
        f"trap 'echo int >> {marker}' INT; trap 'echo term >> {marker}' TERM; "
        # `wait` returns at once on a trapped signal (a foreground sleep can swallow it).
        f"echo $$ > {pidfile}; while true; do sleep 1 & wait $!; done"
    )
    task = asyncio.create_task(tool.run({"command": command, "sandbox": boxed}, ctx))
    await wait_for_file(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert marker.read_text().splitlines() == ["int", "term"]
    assert gone(pidfile, str(pidfile), boxed)


@BOTH
async def test_cancel_stops_children_that_ignore_signals(tool_ctx: ToolContext, boxed: bool):
    ctx = with_settings(tool_ctx, bash_grace=0.2)
    pidfile = ctx.cwd / "child.pid"
    nap = unique_sleep()
    command = f"(trap '' INT TERM; sleep {nap}) & echo $! > {pidfile}; wait"
    task = asyncio.create_task(tool.run({"command": command, "sandbox": boxed}, ctx))
    await wait_for_file(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(pidfile, nap, boxed)


async def test_missing_cwd_is_a_tool_error(tool_ctx: ToolContext):
    ctx = dataclasses.replace(tool_ctx, cwd=tool_ctx.cwd / "gone")
    with pytest.raises(ToolError, match="working directory not found"):
        await tool.run({"command": "true"}, ctx)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required field 'command'"),
        ({"command": ["ls"]}, "'command' must be a string"),
        ({"command": "ls", "timeout": 0}, "'timeout' must be > 0"),
        ({"command": "ls", "timeout": "10"}, "'timeout' must be a number"),
    ],
)
async def test_schema_errors(tool_ctx: ToolContext, args: dict, message: str):
    with pytest.raises(ToolError, match=message):
        await tool.run(args, tool_ctx)


def test_title_and_danger():
    assert tool.title({"command": "terraform plan\n-out=x"}) == "bash: terraform plan"
    assert tool.per_call_reason({"command": "cd envs/prod && terraform apply -auto-approve"})
    assert tool.per_call_reason({"command": "terraform plan"}) is None
    assert tool.per_call_reason({"command": 42}) is None
