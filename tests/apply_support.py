"""Running one tool call through a real session (scripted model, real guard, real
terraform) and reading the audit log it leaves: for the apply-form and audit tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core_support import write_script
from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.permissions import Answer, PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.events import ToolCallResult
from iac_kernel.sessions.audit import AuditLog, in_folder

APPROVER = "test front end"


@dataclass
class Run:
    """What one call did: the questions asked, its result, the audit records."""

    asked: list[PermissionRequest] = field(default_factory=list)
    result: ToolCallResult | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exec_questions(self) -> list[PermissionRequest]:
        """Questions asked at exec time (by the guard, for the exact argv)."""
        return [r for r in self.asked if "argv" in r.input]


def run_call(
    ws: Path,
    tool: str,
    tool_input: dict[str, Any],
    answer: Callable[[PermissionRequest], str],
    *,
    mode: str = "bypass",
    before: list[tuple[str, dict[str, Any]]] = (),
) -> Run:
    """One ``tool`` call in a new session in ``ws``; ``answer`` answers each question
    (it may change files while "the user reads"). ``before``: calls made first, in the
    same session (their questions are in ``asked`` too)."""
    calls = [*before, (tool, tool_input)]
    turns = [{"tool_use": [{"name": name, "input": args}]} for name, args in calls]
    script = write_script(
        ws.parent / f"script-{len(list(ws.parent.glob('script-*')))}.json",
        [{"turns": [*turns, {"text": "done"}]}],
    )
    settings = Settings.from_env()
    settings.model = f"scripted:{script}"
    settings.mode = mode
    manager = SessionManager(settings, holder="a test", origin="kernel")
    run = Run()

    async def ask(request: PermissionRequest) -> str:
        run.asked.append(request)
        return Answer(answer(request), by=APPROVER)

    def emit(event: Any) -> None:
        if isinstance(event, ToolCallResult):
            run.result = event

    async def go() -> None:
        session = manager.new(str(ws))
        try:
            await session.prompt([{"type": "text", "text": "go"}], emit, ask)
        finally:
            await manager.close_all()

    asyncio.run(go())
    run.records = [r for r in trail_records(settings.sessions_dir) if in_folder(r, str(ws))]
    return run


def trail_records(sessions_dir: Path) -> list[dict[str, Any]]:
    """Every record of the audit trail (the team store beside this session store)."""
    from iac_kernel.team.audit import trail

    return [entry.public() for entry in trail(AuditLog(sessions_dir)).entries()]


def trail_bytes(sessions_dir: Path) -> bytes:
    """The audit trail as its records read and as its files hold it (the team store's
    SQLite file, and the older audit.jsonl if any)."""
    files = [sessions_dir / "team.sqlite", sessions_dir / "audit.jsonl"]
    data = json.dumps(trail_records(sessions_dir), ensure_ascii=False).encode()
    return data + b"".join(p.read_bytes() for p in files if p.exists())


def store_bytes(settings_dir: Path) -> bytes:
    """Every byte of every file in the session store."""
    return b"".join(p.read_bytes() for p in sorted(settings_dir.rglob("*")) if p.is_file())


def audit_lines(settings_dir: Path) -> list[dict[str, Any]]:
    path = settings_dir / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
