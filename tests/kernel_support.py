"""Shared fakes for the kernel unit tests: a Publisher sink and a clock with manual timers."""

from __future__ import annotations

from typing import Any


class Recorder:
    """A Publisher sink: every (msg_type, content) sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, msg_type: str, content: dict[str, Any]) -> None:
        self.sent.append((msg_type, content))

    def types(self) -> list[str]:
        return [t for t, _ in self.sent]


class FakeClock:
    """``now`` moves only on :meth:`advance`, which fires the timers that came due."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[list[Any]] = []  # [due, callback, cancelled]

    def __call__(self) -> float:
        return self.now

    def schedule(self, delay: float, callback: Any) -> Any:
        timer = [self.now + delay, callback, False]
        self.timers.append(timer)

        class Handle:
            def cancel(self_inner) -> None:
                timer[2] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for timer in list(self.timers):
            if not timer[2] and timer[0] <= self.now:
                timer[2] = True
                timer[1]()
