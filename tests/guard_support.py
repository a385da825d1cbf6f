"""Shared helpers for the guard tests: fake CLIs that record their argv, and a harness
that runs bash calls through the real permission gate with scripted answers."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ONCE,
    PermissionGate,
    PermissionRequest,
)
from iac_kernel.config import Settings
from iac_kernel.guard.policy.rules import DEFAULT_PROGRAMS, classify
from iac_kernel.tools.base import ToolContext, ToolResult
from iac_kernel.tools.bash import BashTool
from iac_kernel.tools.danger import literal_commands

PY_BIN = os.path.dirname(sys.executable)

FAKE = """#!/bin/sh
# A fake {name}: records its exact argv (one line, fields joined by |) and exits 0.
# One write per call: fakes run in parallel append to the same log.
line='{name}'; for a in "$@"; do line="$line|$a"; done
printf '%s\\n' "$line" >> {log}
echo "fake {name} ran"
"""


def make_fakes(root: Path) -> tuple[Path, Path]:
    """A bin directory of fake guarded CLIs and the log file they append to."""
    bin_dir, log_dir = root / "fakebin", root / "fakelog"
    bin_dir.mkdir()
    log_dir.mkdir()
    log = log_dir / "calls"
    log.touch()
    for name in DEFAULT_PROGRAMS:
        path = bin_dir / name
        path.write_text(FAKE.format(name=name, log=log))
        path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir, log


def alive_with(marker: str) -> list[int]:
    """Host PIDs of live (non-zombie) processes whose command line contains ``marker``.

    Inside the sandbox PIDs are those of its own namespace, so tests find the host
    processes by a unique marker in their command line instead.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def logged(log: Path) -> list[list[str]]:
    """Every recorded call: [program, *args]."""
    return [line.split("|") for line in log.read_text().splitlines() if line]


def changing_calls(log: Path) -> list[list[str]]:
    return [argv for argv in logged(log) if classify(argv[0], argv).changing]


@dataclass
class Asker:
    """Scripted answers. Exec-time questions get ``exec_answer``. A bash call the text
    check flags gets ``danger_answer``, or by default: rejected when its commands are
    literal (nothing hidden; the gate alone must stop them), allowed once when the text
    hides what runs (so the exec-time guard must stop it). Routine questions get
    ``routine`` ("allow always" where offered)."""

    exec_answer: str = REJECT_ONCE
    danger_answer: str | None = None
    routine: str = ALLOW_ONCE
    requests: list[PermissionRequest] = field(default_factory=list)

    async def __call__(self, request: PermissionRequest) -> str:
        self.requests.append(request)
        if "argv" in request.input:
            return self.exec_answer
        if BashTool().per_call_reason(request.input) is not None:
            if self.danger_answer is not None:
                return self.danger_answer
            return REJECT_ONCE if literal_commands(request.input["command"]) else ALLOW_ONCE
        return self.routine if self.routine in request.options else ALLOW_ONCE

    def exec_questions(self) -> list[PermissionRequest]:
        return [r for r in self.requests if "argv" in r.input]

    def per_call_questions(self) -> list[PermissionRequest]:
        return [
            r
            for r in self.requests
            if ALLOW_ALWAYS not in r.options
            and ("argv" in r.input or BashTool().per_call_reason(r.input) is not None)
        ]


@dataclass
class Harness:
    """Runs bash calls like the agent loop: gate check, then the tool with ask_exec."""

    cwd: Path
    bin_dir: Path
    log: Path
    mode: str = "bypass"
    gate: PermissionGate = field(default_factory=PermissionGate)
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.gate.mode = self.mode
        self.settings.sandbox_writable_paths = str(self.log.parent)

    async def run(
        self, command: str, ask: Asker, cwd: Path | None = None, **extra
    ) -> ToolResult | None:
        """None when the gate refused the bash call itself."""
        tool = BashTool()
        args = {"command": command, **extra}
        call_id = f"call-{id(ask)}-{len(ask.requests)}"
        ctx = ToolContext(
            cwd=cwd or self.cwd,
            settings=self.settings,
            env={"PATH": os.pathsep.join([str(self.bin_dir), PY_BIN, os.environ["PATH"]])},
        )
        ctx.ask_exec = self.gate.exec_asker(call_id, "bash", ask)
        ctx.ask_egress = self.gate.egress_asker(call_id, BashTool.name, ask)
        request = PermissionRequest(call_id, "bash", command, "execute", args, [], "")
        decision = await self.gate.check(tool, args, ctx, request, ask)
        if not decision.allowed:
            return None
        return await tool.run(args, ctx)


async def gather_limited(coros, limit: int = 6):
    """Run coroutines with at most ``limit`` at once (bash calls are processes)."""
    semaphore = asyncio.Semaphore(limit)

    async def one(coro):
        async with semaphore:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))
