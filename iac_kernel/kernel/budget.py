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
#: With deltas, bytes a second of streaming the updates may spend after the first second
#: (the target is 6,000: the rest is margin for the clocks, a late first message shortens
#: the seconds a client counts).
LIVE_PER_SECOND = 5900
#: With deltas, bytes the updates may spend by the end of the first second: the target is
#: 6,000 for any turn up to a second, however its seconds are counted.
LIVE_FIRST_SECOND = 6000
#: With deltas, the first update's content besides its text (a delta with offset 0 and
#: the display id: about 160 bytes in ``json.dumps``' default form). The budget pays it at
#: once, with the envelope and FINAL_BASE of the final update; the time share then ramps
#: to LIVE_FIRST_SECOND at about 1.02 s (see ByteBudget.ramp), so it never exceeds
#: ``max(LIVE_FIRST_SECOND, LIVE_PER_SECOND * t)``.
FIRST_DELTA = 170
#: With deltas, the content of a text display's final update besides its text (the
#: Markdown key, the display id: about 105 bytes; the text's JSON escapes come on top, and
#: each update keeps back the exact figure, see display.TextStream). Without the extension
#: the session info rides on the final update too: its bytes are charged when it is sent.
FINAL_BASE = 110


class ByteBudget:
    """How many bytes the streaming updates of one turn may still spend."""

    @classmethod
    def live(
        cls,
        clock: Callable[[], float] = time.monotonic,
        envelope: int = ENVELOPE,
        first: int = FIRST_DELTA + FINAL_BASE,
    ) -> ByteBudget:
        """The budget of a turn streamed as deltas: at most the target (3x the text, 6 KB
        a second, one second at least) less the final update's text, at any moment; each
        update is charged its real size. ``first``: the content of the first update and
        of the final one besides their text (the kernel measures them as it packs)."""
        # At once: the first update (envelope and a short delta) and the final's reserve.
        allowance = 2 * envelope + first
        return cls(
            allowance,
            LIVE_RATIO,
            per_second=LIVE_PER_SECOND,
            clock=clock,
            # Evenly up to where LIVE_PER_SECOND a second reaches the first second's bytes
            # (just after one second): no flat stretch where no update could go out.
            ramp=LIVE_FIRST_SECOND / LIVE_PER_SECOND,
            ceiling=LIVE_FIRST_SECOND,
        )

    def __init__(
        self,
        allowance: int = ALLOWANCE,
        ratio: float = RATIO,
        *,
        per_second: float = PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
        ramp: float = 0.0,
        ceiling: float | None = None,
    ):
        self.allowance = allowance
        self.ratio = ratio
        self.per_second = per_second
        self.clock = clock
        #: With a ramp, the time share goes evenly from ``allowance`` at the first text to
        #: ``ceiling`` (``per_second * ramp`` unless given) at ``ramp`` seconds, then is
        #: the larger of that and ``per_second * t``: it never exceeds ``max(ceiling,
        #: per_second * t)`` and never runs ahead of the time to come (no stall); without
        #: a ramp it is ``allowance + per_second * t``.
        self.ramp = ramp
        self.ceiling = ceiling if ceiling is not None else per_second * ramp
        #: When the turn's first text came (the per-second share counts from there).
        self.started: float | None = None
        self.shown = 0
        self.spent = 0

    def open(self, allowance: int) -> None:
        """Before the first text: what the time share pays at once (with deltas, the
        first display's first update and its final one's reserve, measured as sent)."""
        if self.started is None:
            self.allowance = allowance

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
            return max(self.ceiling, self.per_second * t)
        return self.allowance + (self.ceiling - self.allowance) * t / self.ramp

    def affords(self, cost: int) -> bool:
        return cost <= self.room()

    def wait_for(self, cost: int) -> float:
        """Seconds until the budget affords ``cost`` with no more text (0 when it does)."""
        short = cost - self.room()
        if short <= 0:
            return 0.0
        t = 0.0 if self.started is None else max(self.clock() - self.started, 0.0)
        return max(self.time_of(self.timed() + short) - t, 0.0)

    def time_of(self, share: float) -> float:
        """Seconds from the first text when the time share reaches ``share``."""
        if self.ramp <= 0:
            return (share - self.allowance) / self.per_second
        if share <= self.ceiling and self.ceiling > self.allowance:
            return self.ramp * max(share - self.allowance, 0.0) / (self.ceiling - self.allowance)
        return max(self.ramp, share / self.per_second)

    def spend(self, cost: int) -> None:
        self.spent += cost
