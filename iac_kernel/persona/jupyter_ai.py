"""The "IaC Agent" persona of Jupyter AI 3's chat (``jupyter_ai.personas`` entry point).

Jupyter AI's ACP client (``jupyter-ai-acp-client``) spawns ``iac-kernel acp`` of this
environment and speaks ACP to it; the chat is then one more front on the same agent
core and session store as the kernel and the editors. Four things differ from its
defaults, each through its public API:

* sessions continue with ``session/resume`` where it would ``session/load``: its load
  ignores the replayed history only while the load call runs, and SDK 0.11 handles the
  replayed notifications after that, so the history was added to the chat again (the
  chat document keeps its own history; the agent needs no replay);
* a tool result whose output is structured (a Terraform plan) shows the agent's text
  (the plan summary) instead of JSON, and a question with a review (terraform apply's
  plan summary) posts that review in the chat beside its buttons;
* no notebook-tool guidance is prepended to the first prompt (the agent has no such
  tools);
* when no model credentials are set, the chat says so and how to set them (once, when
  the chat's session starts), instead of leaving the scripted model's replies unexplained.

Importing this module without Jupyter AI raises ``ImportError``; with Jupyter AI but
without its ACP client, Jupyter AI's own ``PersonaRequirementsUnmet`` (the persona
manager then skips the persona with a one-line warning).
"""

from __future__ import annotations

import re
from typing import Any

from iac_kernel.persona import (
    AVATAR,
    DESCRIPTION,
    INSTALL_HINT,
    NAME,
    agent_command,
    credentials_notice,
)

try:
    from jupyter_ai_persona_manager import PersonaDefaults, PersonaRequirementsUnmet
except ImportError as exc:
    raise ImportError(f"the {NAME} persona runs inside Jupyter AI 3: {INSTALL_HINT}") from exc

try:
    from acp.schema import (
        ContentToolCallContent,
        LoadSessionResponse,
        TextContentBlock,
        ToolCallProgress,
    )
    from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
    from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
except ImportError as exc:
    raise PersonaRequirementsUnmet(
        f"the {NAME} persona needs jupyter-ai-acp-client ({exc}): {INSTALL_HINT}"
    ) from exc


class ResumingConnection:
    """The ACP client connection, with ``load_session`` done as ``session/resume``."""

    def __init__(self, conn: Any) -> None:
        self.inner = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        resumed = await self.inner.resume_session(
            session_id=session_id, cwd=cwd, mcp_servers=mcp_servers or [], **kwargs
        )
        return LoadSessionResponse.model_validate(
            resumed.model_dump(by_alias=True, exclude_none=True)
        )


class IacAcpClient(JaiAcpClient):
    """Jupyter AI's ACP client for the IaC agent (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The persona (chat) of each session this client opened.
        self.personas: dict[str, Any] = {}

    async def get_connection(self) -> Any:
        return ResumingConnection(await super().get_connection())

    async def create_session(self, persona: Any) -> Any:
        response = await super().create_session(persona)
        self.personas[response.session_id] = persona
        notice = credentials_notice()
        if notice is not None:  # the chat keeps it: a restart does not repeat it
            persona.send_message(notice)
        return response

    async def load_session(self, persona: Any, session_id: str) -> Any:
        response = await super().load_session(persona, session_id)
        self.personas[session_id] = persona
        return response

    async def end_session(self, session_id: str) -> None:
        self.personas.pop(session_id, None)
        await super().end_session(session_id)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        await super().session_update(session_id, readable_result(update), **kwargs)

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        review = content_text(tool_call.content)
        persona = self.personas.get(session_id)
        if review and persona is not None:
            persona.send_message(code_block(review))
        return await super().request_permission(
            options=options, session_id=session_id, tool_call=tool_call, **kwargs
        )


def content_text(content: list[Any] | None) -> str:
    """The text blocks of a tool call's content, joined."""
    texts = [
        item.content.text
        for item in content or []
        if isinstance(item, ContentToolCallContent) and isinstance(item.content, TextContentBlock)
    ]
    return "\n".join(text for text in texts if text)


def code_block(text: str) -> str:
    """``text`` as a Markdown code block whose fence no backtick run inside can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def readable_result(update: Any) -> Any:
    """A tool result whose ``raw_output`` is structured (a Terraform plan) or absent (the
    agent sends a plain result's text once, as content) and that has a text content gets
    that text as its ``raw_output``: the chat shows ``raw_output``."""
    if not isinstance(update, ToolCallProgress) or isinstance(update.raw_output, str):
        return update
    text = content_text(update.content)
    return update.model_copy(update={"raw_output": text}) if text else update


class IacAgentPersona(BaseAcpPersona):
    """The iac-kernel agent in Jupyter AI's chat."""

    acp_client_class = IacAcpClient
    NOTEBOOK_EDITING_GUIDANCE = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=agent_command(), **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name=NAME, description=DESCRIPTION, avatar_path=str(AVATAR), system_prompt="unused"
        )
