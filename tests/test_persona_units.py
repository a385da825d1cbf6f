"""The persona's pieces that need no chat: what happens without Jupyter AI, its
readable tool results, session/resume in place of session/load, ACP MCP names."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec

import pytest

from iac_kernel.mcp.config import McpConfigError, acp_server_name, from_acp
from iac_kernel.persona import AVATAR, INSTALL_HINT, agent_command

HAS_JUPYTER_AI = find_spec("jupyter_ai_acp_client") is not None
needs_jupyter_ai = pytest.mark.skipif(
    not HAS_JUPYTER_AI,
    reason="needs Jupyter AI 3 + jupyter-ai-acp-client (the [jupyter-ai] extra; .ci/jupyter-ai)",
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_importing_iac_kernel_never_imports_the_persona():
    result = _run(
        "import sys, iac_kernel, iac_kernel.persona, iac_kernel.acp\n"
        "assert 'iac_kernel.persona.jupyter_ai' not in sys.modules\n"
        "assert 'jupyter_ai_persona_manager' not in sys.modules\n"
    )
    assert result.returncode == 0, result.stderr


def test_agent_command_is_this_environments_iac_kernel():
    assert agent_command() == [sys.executable, "-m", "iac_kernel", "acp"]
    assert AVATAR.is_file()


def test_without_jupyter_ai_the_persona_module_says_how_to_get_it():
    # Jupyter AI's persona manager hidden: as in an environment without Jupyter AI.
    result = _run(
        "import sys\n"
        "sys.modules['jupyter_ai_persona_manager'] = None\n"
        "import iac_kernel.persona.jupyter_ai\n"
    )
    assert result.returncode == 1
    assert "ImportError" in result.stderr and INSTALL_HINT in result.stderr


@needs_jupyter_ai
def test_without_the_acp_client_jupyter_ai_skips_the_persona_as_requirements_unmet():
    result = _run(
        "import sys\n"
        "sys.modules['jupyter_ai_acp_client'] = None\n"
        "from jupyter_ai_persona_manager import PersonaRequirementsUnmet\n"
        "try:\n"
        "    import iac_kernel.persona.jupyter_ai\n"
        "except PersonaRequirementsUnmet as exc:\n"
        "    print('unmet:', exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("unmet:") and INSTALL_HINT in result.stdout


@needs_jupyter_ai
def test_structured_results_show_the_agents_text():
    from acp.schema import ToolCallProgress

    from iac_kernel.acp.protocol.updates import text_content
    from iac_kernel.persona.jupyter_ai import readable_result

    summary = "Plan: 1 to add, 0 to change, 0 to destroy."
    plan = ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id="t1",
        status="completed",
        raw_output={"plan": {"add": 1}},
        content=[text_content(summary)],
    )
    assert readable_result(plan).raw_output == summary
    text = plan.model_copy(update={"raw_output": "already text"})
    assert readable_result(text) is text
    bare = plan.model_copy(update={"content": None})
    assert readable_result(bare) is bare
    # A plain result's text comes once, as content (no rawOutput): the chat gets it too.
    plain = plan.model_copy(update={"raw_output": None})
    assert readable_result(plain).raw_output == summary


@needs_jupyter_ai
async def test_load_is_sent_as_resume():
    from acp.schema import ResumeSessionResponse, SessionMode, SessionModeState

    from iac_kernel.persona.jupyter_ai import ResumingConnection

    calls = []

    class Conn:
        async def resume_session(self, **kwargs):
            calls.append(kwargs)
            modes = SessionModeState(
                current_mode_id="default",
                available_modes=[SessionMode(id="default", name="Default")],
            )
            return ResumeSessionResponse(modes=modes)

        async def load_session(self, **kwargs):
            raise AssertionError("session/load must not be sent")

        def other(self):
            return "passed through"

    conn = ResumingConnection(Conn())
    answer = await conn.load_session(cwd="/w", session_id="s1", mcp_servers=None)
    assert calls == [{"session_id": "s1", "cwd": "/w", "mcp_servers": []}]
    assert answer.modes.current_mode_id == "default"
    assert conn.other() == "passed through"


def test_acp_mcp_server_display_names_become_tool_safe_names():
    assert acp_server_name("Jupyter MCP Server") == "Jupyter_MCP_Server"
    assert acp_server_name("files") == "files"
    (spec,) = from_acp(
        [{"name": "My Server!", "url": "http://127.0.0.1:1/mcp", "type": "http"}], None
    )
    assert spec.name == "My_Server"
    with pytest.raises(McpConfigError, match="two MCP servers"):
        from_acp(
            [
                {"name": "a b", "url": "http://127.0.0.1:1/mcp", "type": "http"},
                {"name": "a  b", "url": "http://127.0.0.1:2/mcp", "type": "http"},
            ],
            None,
        )
    with pytest.raises(McpConfigError, match="invalid MCP server name"):
        from_acp([{"name": "!!!", "url": "http://127.0.0.1:1/mcp", "type": "http"}], None)


@needs_jupyter_ai
def test_a_review_cannot_close_its_code_block():
    from iac_kernel.persona.jupyter_ai import code_block

    assert code_block("Plan: 1 to add") == "```\nPlan: 1 to add\n```"
    block = code_block('name = "x```\n# injected"')
    fence = block.split("\n", 1)[0]
    assert fence == "````" and block.endswith("\n````")


def test_credentials_notice_names_every_key_and_stays_quiet_with_a_provider():
    from iac_kernel.models.providers import DETECT_ORDER, PROVIDERS
    from iac_kernel.persona import credentials_notice

    notice = credentials_notice({})
    assert notice is not None and "no model credentials" in notice
    for name in DETECT_ORDER:
        provider = PROVIDERS[name]
        assert f"`{provider.key_env or provider.switch_env}" in notice
    assert credentials_notice({"ANTHROPIC_API_KEY": "k"}) is None
    assert credentials_notice({"DEEPSEEK_API_KEY": "k"}) is None
    assert credentials_notice({"CLAUDE_CODE_USE_BEDROCK": "1"}) is None
    assert credentials_notice({"IAC_KERNEL_PROVIDER": "ollama"}) is None
    wrong = credentials_notice({"IAC_KERNEL_PROVIDER": "olama"})
    assert wrong is not None and "olama" in wrong and "no model credentials" not in wrong
