"""Harness for the Jupyter AI persona tests (no tests here): a real chat document
(jupyterlab-chat's ``YChat``) with Jupyter AI's real ``PersonaManager``, whose
"IaC Agent" persona spawns ``iac-kernel acp`` and drives it with jupyter-ai-acp-client.

Messages go in as a user types them (added to the document, then handed to the
persona's ``on_message``, as the manager routes them); questions are answered as the
chat's buttons do (``resolve_permission``); Stop is ``cancel_response``. A server
restart keeps only the chat file's content (``YChat.get`` / ``set``) and the agent's
session store.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jupyter_ai_persona_manager import PersonaManager
from jupyterlab_chat.models import NewMessage
from jupyterlab_chat.ychat import YChat

from iac_kernel.persona.jupyter_ai import IacAgentPersona
from test_acp_support import WAIT, wait_until

SCRIPT = Path(__file__).parent / "scripts" / "jupyter_ai.json"
USER = "tester"


class ChatRoom:
    """One chat file under ``root`` with the IaC Agent persona in it."""

    def __init__(
        self, root: Path, content: str | None = None, path: str = "chats/infra.chat"
    ) -> None:
        self.root = root
        self.chat = YChat()
        self.chat.initial_path = path
        if content is not None:
            self.chat.set(content)
        self.manager = PersonaManager(
            chat=self.chat, root_dir=str(root), event_loop=asyncio.get_running_loop()
        )
        self.persona = next(
            p for p in self.manager.personas.values() if isinstance(p, IacAgentPersona)
        )
        self.turns: list[asyncio.Task[None]] = []

    @property
    def folder(self) -> Path:
        return Path(self.persona.get_chat_dir())

    def send(self, body: str) -> asyncio.Task[None]:
        """Post ``body`` as the user, to the persona; the task ends with its turn."""
        message_id = self.chat.add_message(NewMessage(body=body, sender=USER))
        task = asyncio.ensure_future(self.persona.on_message(self.chat.get_message(message_id)))
        self.turns.append(task)
        return task

    async def turn(self, body: str) -> None:
        await asyncio.wait_for(self.send(body), WAIT)

    def agent_messages(self) -> list[Any]:
        return [m for m in self.chat.get_messages() if m.sender == self.persona.id]

    def text(self) -> str:
        return "\n".join(m.body for m in self.agent_messages())

    async def wait_text(self, text: str) -> str:
        """Wait until ``text`` is in the persona's messages (Jupyter AI's SDK 0.11 client
        may write the last chunks just after the turn's answer)."""
        await wait_until(lambda: text in self.text(), f"{text!r} in the chat")
        return self.text()

    def tool_calls(self) -> list[dict[str, Any]]:
        calls = []
        for message in self.agent_messages():
            calls.extend((message.metadata or {}).get("tool_calls", []))
        return calls

    async def pending_question(self, seconds: float = WAIT) -> dict[str, Any]:
        """The tool call whose buttons are shown (waits for it)."""

        def pending() -> dict[str, Any] | None:
            return next(
                (c for c in self.tool_calls() if c.get("permission_status") == "pending"), None
            )

        return await wait_until(pending, "a question in the chat", seconds)

    async def click(self, call: dict[str, Any], option_id: str) -> None:
        client = await self.persona.get_client()
        assert client.resolve_permission(call["session_id"], call["tool_call_id"], option_id)

    def session_id(self) -> str:
        return self.chat.get_metadata()["acp_session_ids"][self.persona.id]

    def saved(self) -> str:
        """The chat file's content, as the server saves it."""
        return self.chat.get()

    async def close(self) -> None:
        """What a server stop does: shut the persona down (its agent process ends)."""
        for task in self.turns:
            if not task.done():
                task.cancel()
        await asyncio.gather(*self.turns, return_exceptions=True)
        await self.persona.shutdown()


def message_bodies(content: str) -> list[str]:
    """The message bodies in saved chat content."""
    return [m.get("body", "") for m in json.loads(content).get("messages", [])]
