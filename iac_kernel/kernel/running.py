"""The notebook turns running in this kernel, and interrupting them.

Interrupt. The kernelspec uses ``interrupt_mode: signal``. ipykernel would turn SIGINT
into a KeyboardInterrupt somewhere inside the event loop, which cannot stop an awaited
turn and can kill the loop; the kernel installs its own SIGINT handler for its whole
life instead, and it calls :meth:`RunningTurns.interrupt`. That cancels every running
turn (thread-safely, on the turn's own loop): the session ends the turn with stop reason
``cancelled`` and keeps a valid history, open permission prompts close, and the cell ends
with an ``error`` reply whose only output is one line, ``Cancelled: The turn was
interrupted…``. An error (not ``ok``) matches what Jupyter users expect from the
interrupt button: "Run all" stops at that cell. The kernel stays alive. A SIGINT with no
turn running is ignored.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from iac_kernel.agent.session import AgentSession
from iac_kernel.events import Usage
from iac_kernel.kernel.call_displays import CallDisplays


@dataclass(eq=False)
class RunningTurn:
    """One cell's turn while it runs."""

    session: AgentSession
    loop: asyncio.AbstractEventLoop
    interrupted: bool = False
    #: The execute_request running the turn, and the notebook cell it came from.
    msg_id: str = ""
    cell_id: str | None = None
    #: The cell's execution count (a page loaded mid-turn shows it when the turn ends).
    execution_count: int = 0
    #: The turn's usage so far (after each model call).
    usage: Usage | None = None
    #: Each tool call's displays in their latest form (the status comm's ``call_card``).
    displays: CallDisplays = field(default_factory=CallDisplays)

    def cancel(self) -> None:
        self.interrupted = True
        self.session.cancel()


class RunningTurns:
    """The running turns; safe to read from any thread (SIGINT, the status comm)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: set[RunningTurn] = set()

    def add(self, turn: RunningTurn) -> None:
        with self._lock:
            self._turns.add(turn)

    def discard(self, turn: RunningTurn) -> None:
        with self._lock:
            self._turns.discard(turn)

    def snapshot(self) -> list[RunningTurn]:
        with self._lock:
            return list(self._turns)

    def runs(self, session: AgentSession) -> bool:
        """True when a notebook turn runs in ``session`` (not an editor's)."""
        return any(turn.session is session for turn in self.snapshot())

    def call_card(
        self, call_id: str | None, display_id: str | None
    ) -> tuple[str, list[dict]] | None:
        """The displays of a call of a running turn, named by its id or by one of its
        display ids: ``(call id, outputs)``, or None when no running turn has it."""
        for turn in self.snapshot():
            found = turn.displays.find(call_id, display_id)
            if found is not None:
                return found
        return None

    def interrupt(self) -> bool:
        """Cancel every running turn on its own loop; False when none runs."""
        running = self.snapshot()
        for turn in running:
            turn.loop.call_soon_threadsafe(turn.cancel)
        return bool(running)
