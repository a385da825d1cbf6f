"""Shared fakes for the kernel unit tests: a Publisher sink, a clock with manual timers, and
a second client of a real kernel (a reloaded page)."""

from __future__ import annotations

import queue
import time
from typing import Any

from jupyter_client.session import Session

from kernel_harness import KernelHarness


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


class SecondClient:
    """Another frontend connecting to the same kernel (a reloaded page)."""

    def __init__(self, harness: KernelHarness):
        assert harness.km is not None
        # Its own session id (hence its own ZMQ identity), as a reloaded page has.
        session = Session(key=harness.km.session.key)
        self.kc = harness.km.client(session=session)
        self.kc.start_channels()

    def stop(self) -> None:
        self.kc.stop_channels()

    def shell(self, msg_type: str, content: dict[str, Any]) -> str:
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply
        raise TimeoutError(f"no reply within {timeout} s")

    def comm_data(self, comm_id: str, kind: str, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            content = msg["content"]
            if msg["msg_type"] == "comm_msg" and content.get("comm_id") == comm_id:
                if content["data"].get("type") == kind:
                    return content["data"]
        raise TimeoutError(f"no {kind} on the comm")

    def iopub_of(self, msg_id: str, timeout: float = 10) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            found.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return found
        raise TimeoutError("the request never went idle")
