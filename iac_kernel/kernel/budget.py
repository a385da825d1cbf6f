"""The byte budget of a turn's streaming text updates (see :mod:`.display`).

It grows with the text shown (``ratio`` x its bytes) and with time from the turn's first
text; an update the budget cannot pay for yet waits for the time that pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from iac_kernel.kernel.publish import ENVELOPE

#: Streaming updates may cost ALLOWANCE + ``ratio`` x the text shown + PER_SECOND bytes a
#: second from the turn's first text (leaving room for the final messages and the footer
#: under 3x the text + 6 KB a second).
ALLOWANCE = 2000
RATIO = 0.9
PER_SECOND = 5400
#: With deltas the text travels twice (deltas, final): the third share pays messages.
LIVE_RATIO = 2.0
#: With deltas, bytes a second of streaming the updates may spend (the target is 6,000
#: with at least one second counted: the rest is margin).
LIVE_PER_SECOND = 5900
#: With deltas, the first update's content besides its envelope (the budget pays it at
#: once, with the final's reserve; the time share then ramps to LIVE_PER_SECOND at one
#: second, see ByteBudget.ramp, so it never exceeds ``LIVE_PER_SECOND * max(t, 1)``).
FIRST_DELTA = 250
#: Bytes kept back for a final update's content besides its text (display id, metadata:
#: the session info on the turn's last display is about 460).
FINAL_RESERVE = 600


class ByteBudget:
    """How many bytes the streaming updates of one turn may still spend."""

    @classmethod
    def live(
        cls, clock: Callable[[], float] = time.monotonic, envelope: int = ENVELOPE
    ) -> ByteBudget:
        """The budget of a turn streamed as deltas: at most the target (3x the text, 6 KB
        a second, one second at least) less the final update's text and a margin, at any
        moment; each update is charged its real size."""
        # At once: the first update (envelope and a short delta) and the final's reserve.
        allowance = 2 * envelope + FIRST_DELTA + FINAL_RESERVE
        return cls(allowance, LIVE_RATIO, per_second=LIVE_PER_SECOND, clock=clock, ramp=1.0)

    def __init__(
        self,
        allowance: int = ALLOWANCE,
        ratio: float = RATIO,
        *,
        per_second: float = PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
        ramp: float = 0.0,
    ):
        self.allowance = allowance
        self.ratio = ratio
        self.per_second = per_second
        self.clock = clock
        #: With a ramp, the time share goes from ``allowance`` at the first text to
        #: ``per_second * ramp`` at ``ramp`` seconds (then ``per_second`` a second), so it
        #: never exceeds ``per_second * max(t, ramp)``; without, it is ``allowance +
        #: per_second * t``.
        self.ramp = ramp
        #: When the turn's first text came (the per-second share counts from there).
        self.started: float | None = None
        self.shown = 0
        self.spent = 0

    def grow(self, text: str) -> None:
        if self.started is None and text:
            self.started = self.clock()
        self.shown += len(text.encode())

    def room(self) -> float:
        """Bytes the budget can spend now."""
        return self.ratio * self.shown + self.timed() - self.spent

    def timed(self) -> float:
        """The share of the budget time has paid for so far."""
        t = 0.0 if self.started is None else max(self.clock() - self.started, 0.0)
        if self.ramp <= 0:
            return self.allowance + self.per_second * t
        if t >= self.ramp:
            return self.per_second * t
        return self.allowance + (self.per_second * self.ramp - self.allowance) * t / self.ramp

    def affords(self, cost: int) -> bool:
        return cost <= self.room()

    def wait_for(self, cost: int) -> float:
        """Seconds until the budget affords ``cost`` with no more text (0 when it does)."""
        short = cost - self.room()
        if short <= 0:
            return 0.0
        rate = self.per_second
        t = 0.0 if self.started is None else self.clock() - self.started
        if 0 < self.ramp and t < self.ramp:  # slower on the ramp: wait for the slower rate
            rate = max(self.per_second - self.allowance / self.ramp, 1.0)
        return short / rate

    def spend(self, cost: int) -> None:
        self.spent += cost
