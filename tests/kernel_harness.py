"""A jupyter_client harness for driving the kernel in tests and bench scripts.

It writes the kernelspec into a private directory, starts the kernel with a given
environment and working directory, and runs cells while collecting their IOPub messages,
with hooks to act while a cell still runs (send a widget click, interrupt, answer stdin).
"""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from jupyter_client.session import DELIM

from iac_kernel.kernel.app import KERNEL_NAME, write_spec
from iac_kernel.kernel.render.cards import CARD_MIME
from iac_kernel.models.providers import CREDENTIAL_ENV

#: Hang guard for one cell (not a timing assertion: cells normally take well under a second).
CELL_TIMEOUT = 90.0


@dataclass
class CellResult:
    """What one execute_request produced."""

    msg_id: str
    reply: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    stdin_prompts: list[str] = field(default_factory=list)
    #: The cell's status messages (busy, idle), kept apart from ``messages``.
    statuses: list[dict[str, Any]] = field(default_factory=list)
    #: ``time.monotonic()`` when each of ``messages`` was received.
    arrivals: list[float] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["msg_type"] in types]

    def displays(self) -> dict[str, list[dict[str, Any]]]:
        """display_id -> the bundles sent for it, in order (first display, then updates)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for msg in self.of_type("display_data", "update_display_data"):
            display_id = msg["content"].get("transient", {}).get("display_id")
            if display_id:
                found.setdefault(display_id, []).append(msg["content"]["data"])
        return found

    def final(self, display_id: str) -> dict[str, Any]:
        return self.displays()[display_id][-1]

    def created(self) -> list[str]:
        """Display ids in the order their displays were created (first display_data)."""
        return [
            m["content"]["transient"]["display_id"]
            for m in self.of_type("display_data")
            if m["content"].get("transient", {}).get("display_id")
        ]

    def text_ids(self) -> list[str]:
        """The turn's text displays, in order."""
        return [d for d in self.created() if d.startswith("iac-text-")]

    def answer(self) -> str:
        """The turn's text: the final text/plain (or, streamed as deltas, Markdown) of
        every text display, in order."""
        finals = [self.final(d) for d in self.text_ids()]
        texts = [f.get("text/plain", f.get("text/markdown")) for f in finals]
        assert all(t is not None for t in texts), "a text display never got its final form"
        return "\n\n".join(t.strip("\n") for t in texts if t and t.strip())

    def cards(self) -> list[list[dict[str, Any]]]:
        """Each tool card's payloads, in order of first appearance."""
        return [
            [bundle[CARD_MIME] for bundle in bundles if CARD_MIME in bundle]
            for display_id, bundles in self.displays().items()
            if display_id.startswith("iac-tool-")
        ]

    def markdown(self) -> str:
        """Every Markdown/plain text shown (final forms), joined: for "the cell says" checks."""
        texts = []
        for bundles in self.displays().values():
            texts.append(bundles[-1].get("text/markdown") or bundles[-1].get("text/plain", ""))
        for msg in self.of_type("display_data"):
            if not msg["content"].get("transient", {}).get("display_id"):
                data = msg["content"]["data"]
                texts.append(data.get("text/markdown") or data.get("text/plain", ""))
        texts += [m["content"]["text"] for m in self.of_type("stream")]
        texts += [m["content"]["evalue"] for m in self.of_type("error")]
        return "\n".join(texts)


#: Called with each IOPub message of the running cell and the harness.
OnMessage = Callable[[dict[str, Any], "KernelHarness"], None]
#: Called with each stdin prompt; returns the answer.
OnStdin = Callable[[str], str]


class KernelHarness:
    """One iac-kernel process and a blocking client for it."""

    def __init__(self, spec_root: Path, cwd: Path, env: dict[str, str | None] | None = None):
        """``env`` is laid over this process's environment; a ``None`` value removes a name."""
        self.spec_root = Path(spec_root)
        self.cwd = Path(cwd)
        self.env = dict(env or {})
        write_spec(self.spec_root / "kernels" / KERNEL_NAME)
        self.km: KernelManager | None = None
        self.kc: Any = None

    def start(self) -> KernelHarness:
        ksm = KernelSpecManager(kernel_dirs=[str(self.spec_root / "kernels")])
        self.km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)
        env = {**os.environ, **self.env}
        env = {k: v for k, v in env.items() if v is not None}
        self.km.start_kernel(env=env, cwd=str(self.cwd))
        self.kc = self.km.client()
        measure_frames(self.kc.session)
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        return self

    def stop(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km is not None and self.km.has_kernel:
            self.km.shutdown_kernel(now=False)

    def __enter__(self) -> KernelHarness:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- requests ----------------------------------------------------------------------------

    def execute(
        self,
        code: str,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        metadata: dict[str, Any] | None = None,
        on_message: OnMessage | None = None,
        on_stdin: OnStdin | None = None,
        timeout: float = CELL_TIMEOUT,
    ) -> CellResult:
        """Run one cell to its idle status and return its reply and IOPub messages."""
        kc = self.kc
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": {},
            "allow_stdin": allow_stdin,
            "stop_on_error": False,
        }
        msg = kc.session.msg("execute_request", content, metadata=metadata or {})
        kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        result = CellResult(msg_id, {})
        deadline = time.monotonic() + timeout
        idle = False
        while not idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell did not finish: {code[:60]!r}")
            if allow_stdin and kc.stdin_channel.msg_ready():
                request = kc.stdin_channel.get_msg(timeout=1)
                prompt = request["content"]["prompt"]
                result.stdin_prompts.append(prompt)
                kc.input(on_stdin(prompt) if on_stdin else "")
            try:
                message = kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "status":
                result.statuses.append(message)
                idle = message["content"]["execution_state"] == "idle"
                continue
            result.messages.append(message)
            result.arrivals.append(time.monotonic())
            if on_message is not None:
                on_message(message, self)
        result.reply = self._reply(msg_id, deadline)
        return result

    def _reply(self, msg_id: str, deadline: float) -> dict[str, Any]:
        while time.monotonic() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=1)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply
        raise TimeoutError("no execute_reply")

    def request(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        """Send a shell request and return its reply."""
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        return self._reply(msg["header"]["msg_id"], time.monotonic() + 30)

    def open_comm(self, target: str, data: dict[str, Any]) -> str:
        """Open a comm to ``target`` as a frontend does (e.g. the extension's status comm
        with ``{"renders": [...]}``); returns its id."""
        comm_id = uuid.uuid4().hex
        content = {"comm_id": comm_id, "target_name": target, "data": data}
        self.kc.shell_channel.send(self.kc.session.msg("comm_open", content))
        return comm_id

    def send_comm_msg(self, comm_id: str, data: dict[str, Any]) -> None:
        """What a browser sends when a widget is used (e.g. a button click)."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str) -> None:
        self.send_comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}})

    def interrupt(self) -> None:
        assert self.km is not None
        self.km.interrupt_kernel()


#: Where :func:`measure_frames` puts the bytes a received message's frames took.
WIRE_SIZE = "iac_wire_size"


def measure_frames(session: Any) -> None:
    """Make ``session`` note on each message it receives the bytes its frames took (the
    delimiter, signature, headers, metadata, content and buffers, as the kernel packed
    and signed them) under :data:`WIRE_SIZE`."""
    deserialize = session.deserialize

    def measured(msg_list: list[Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        message = deserialize(msg_list, *args, **kwargs)
        frames = [f.bytes if hasattr(f, "bytes") else f for f in msg_list]
        message[WIRE_SIZE] = len(DELIM) + sum(len(f) for f in frames)
        return message

    session.deserialize = measured


def wire_bytes(session: Any, message: dict[str, Any]) -> int:
    """Bytes ``message`` took on IOPub: its frames as the kernel signed and sent them (as
    received, see :func:`measure_frames`; else packed again by ``session``), plus the
    topic frame (``kernel.<uuid>.<msg_type>``)."""
    topic = len("kernel.") + 36 + 1 + len(message["msg_type"])
    if WIRE_SIZE in message:
        return message[WIRE_SIZE] + topic
    frames = session.serialize(message)
    return sum(len(f) for f in frames) + topic


def button_comm_id(message: dict[str, Any], description: str) -> str | None:
    """The comm id if ``message`` opens a Button widget model labelled ``description``."""
    if message["msg_type"] != "comm_open":
        return None
    content = message["content"]
    state = content.get("data", {}).get("state", {})
    if state.get("_model_name") == "ButtonModel" and state.get("description") == description:
        return content["comm_id"]
    return None


def scripted_kernel(
    root: Path, cwd: Path, script: Path, env: dict[str, str | None] | None = None
) -> KernelHarness:
    """A started kernel on the scripted model, with its own store under ``root``."""
    full: dict[str, str | None] = {name: None for name in CREDENTIAL_ENV}
    full.update(
        {
            "IAC_KERNEL_SESSIONS_DIR": str(root / "sessions"),
            "IAC_KERNEL_SCRIPT": str(script),
            "IAC_KERNEL_MODEL": "scripted",
            "JPY_SESSION_NAME": None,
            "IAC_KERNEL_PERMISSION_UI": None,
        }
    )
    full.update(env or {})
    return KernelHarness(root / "jupyter", cwd, full).start()
