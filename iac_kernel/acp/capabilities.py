"""What the agent advertises in its ``initialize`` answer (``agentCapabilities``).

:data:`iac_kernel.acp.early.INITIALIZE_RESULT` holds the same, serialized without the
SDK (a test compares them). Not advertised: ``auth.logout`` (the auth methods only name
an environment variable; there is no login to end, so ``logout`` answers -32601).
"""

from __future__ import annotations

from acp.schema import (
    AgentCapabilities,
    McpCapabilities,
    PromptCapabilities,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

CAPABILITIES = AgentCapabilities(
    load_session=True,
    prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
    mcp_capabilities=McpCapabilities(http=True, sse=True),
    session_capabilities=SessionCapabilities(
        additional_directories=SessionAdditionalDirectoriesCapabilities(),
        list=SessionListCapabilities(),
        close=SessionCloseCapabilities(),
        delete=SessionDeleteCapabilities(),
        fork=SessionForkCapabilities(),
        resume=SessionResumeCapabilities(),
    ),
)
