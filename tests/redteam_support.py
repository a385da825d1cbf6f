"""Shared helpers of the red-team tests of the guard (tests/test_guard_redteam*.py).

Each attempt answers the bash call's own question (when its text is flagged at all)
"allow once", as a user who trusts the command would, and rejects every exec-time
question; the command is hidden from the text check, so only the exec-time guard can
stop it. Known, unfixed bypasses are ``xfail(strict=True)`` (see :func:`case`).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from guard_support import Asker, Harness, gather_limited, logged, make_fakes
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE


def bypass(reason: str):
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"bypass: {reason}")


def case(command: str, why: str | None = None):
    """A command; ``why`` marks a known, unfixed bypass."""
    return pytest.param(command, id=command[:60], marks=[bypass(why)] if why else [])


def values(params) -> list[str]:
    return [p.values[0] for p in params]


def hidden(command: str) -> str:
    """``command`` as the text check cannot read it (an approval of the bash call's text
    then says nothing about what runs: only the exec-time guard can ask)."""
    encoded = base64.b64encode(command.encode()).decode()
    return f'eval "$(echo {encoded} | base64 -d)"'


def trusting_asker() -> Asker:
    """Allows the bash call's own question once, rejects every exec-time question."""
    return Asker(exec_answer=REJECT_ONCE, danger_answer=ALLOW_ONCE)


@dataclass
class Attempt:
    command: str
    #: The fake programs' recorded argvs (fake harnesses only).
    reached: list[list[str]]
    exec_questions: list = field(default_factory=list)
    content: str = ""


def fake_harness(root: Path) -> Harness:
    root.mkdir(parents=True)
    bin_dir, log = make_fakes(root)
    return Harness(root / "ws", bin_dir, log)


def real_harness(root: Path) -> Harness:
    """A harness whose PATH has no fakes: the real programs are the guarded ones."""
    empty, log = root / "nofakes", root / "log" / "calls"
    empty.mkdir(parents=True)
    log.parent.mkdir()
    log.touch()
    return Harness(root / "ws", empty, log)


async def attempt(root: Path, command: str) -> Attempt:
    """``command``, hidden, in its own fakes and cwd."""
    harness = fake_harness(root)
    ask = trusting_asker()
    result = await harness.run(hidden(command), ask, timeout=60)
    content = result.content if result is not None else "(refused by the gate)"
    return Attempt(command, logged(harness.log), ask.exec_questions(), content)


def batch(root: Path, commands: list[str]) -> dict[str, Attempt]:
    """:func:`attempt` for each command, a few at a time."""

    async def run() -> list[Attempt]:
        return await gather_limited([attempt(root / f"c{i}", c) for i, c in enumerate(commands)], 4)

    return {a.command: a for a in asyncio.run(run())}
