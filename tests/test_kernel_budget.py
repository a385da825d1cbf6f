"""The byte budget of streamed text (kernel/render/display.py) and what the final update carries,
on a fake clock."""

from __future__ import annotations

import itertools
from typing import Any

from iac_kernel.events import TextDelta, TurnEnded, Usage
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render.display import LIVE_FIRST_SECOND, LIVE_PER_SECOND, ByteBudget
from iac_kernel.kernel.render.turn import TurnView
from kernel_support import FakeClock, Recorder


def test_the_live_time_share_never_runs_past_the_target() -> None:
    clock = FakeClock()
    budget = ByteBudget.live(clock, 580)
    budget.grow("a")
    shares = []
    for _ in range(400):  # 4 s in 10 ms steps
        shares.append((clock.now, budget.timed()))
        clock.advance(0.01)
    assert shares[0][1] == budget.allowance
    for t, share in shares:
        assert share <= max(LIVE_FIRST_SECOND, LIVE_PER_SECOND * t) + 1e-6, t
    # Evenly over the first second and on, with no flat stretch (no update could go out
    # there): it reaches the first second's bytes where LIVE_PER_SECOND a second does.
    assert abs(budget.ramp * LIVE_PER_SECOND - LIVE_FIRST_SECOND) < 1e-6
    steps = [b - a for (_t, a), (_u, b) in itertools.pairwise(shares[:102])]
    assert max(steps) - min(steps) < 1e-6 and min(steps) > 0
    assert all(b > a for (_t, a), (_u, b) in itertools.pairwise(shares))


def test_wait_for_says_when_time_pays() -> None:
    clock = FakeClock()
    budget = ByteBudget.live(clock, 580)
    budget.grow("a")
    for cost in (1000, 3000, 6000, 6100, 9000):
        wait = budget.wait_for(cost)
        clock.now += wait - 1e-4
        assert wait == 0 or not budget.affords(cost), cost
        clock.now += 2e-4
        assert budget.affords(cost), cost
        budget.spend(cost)


def _turn(deltas: bool) -> dict[str, Any]:
    sink, clock = Recorder(), FakeClock()
    view = TurnView(
        Publisher(sink), "s1", lambda _e: {"x/session": 1}, clock=clock, schedule=clock.schedule
    )
    view.deltas = deltas
    view.budget = ByteBudget.live(clock, 580) if deltas else ByteBudget(clock=clock)
    view.emit(TextDelta("Hello."))
    clock.advance(0.5)
    view.emit(TurnEnded("end_turn", Usage()))
    (final,) = [c for _t, c in sink.sent if c["data"].get("text/markdown") == "Hello."]
    return final["metadata"]


def test_the_session_info_rides_on_the_answer_only_without_deltas() -> None:
    assert _turn(deltas=False) == {"x/session": 1}
    # With deltas the extension has it from the status comm (test_kernel_streaming.py).
    assert _turn(deltas=True) == {}
