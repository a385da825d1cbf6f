"""What a guarded program's request to run is, as the permission gate and the audit see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from iac_kernel.guard import reviews
from iac_kernel.guard.rules import Verdict


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
