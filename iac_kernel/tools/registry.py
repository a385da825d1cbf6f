"""The agent's tool set."""

from __future__ import annotations

from iac_kernel.tools import tf_guard
from iac_kernel.tools.agent import AgentTool
from iac_kernel.tools.ask_user import AskUserTool
from iac_kernel.tools.base import Tool
from iac_kernel.tools.bash import BashTool
from iac_kernel.tools.edit_file import EditFileTool
from iac_kernel.tools.glob import GlobTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.list_files import ListFilesTool
from iac_kernel.tools.pull_request import PullRequestTool
from iac_kernel.tools.read_file import ReadFileTool
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_plans import TerraformPlanDetailTool, TerraformPlanTool
from iac_kernel.tools.update_plan import UpdatePlanTool
from iac_kernel.tools.web_fetch import WebFetchTool
from iac_kernel.tools.write_file import WriteFileTool

TOOL_CLASSES: tuple[type[Tool], ...] = (
    ReadFileTool,
    ListFilesTool,
    GlobTool,
    GrepTool,
    WriteFileTool,
    EditFileTool,
    BashTool,
    AgentTool,
    WebFetchTool,
    TerraformPlanTool,
    TerraformPlanDetailTool,
    TerraformApplyTool,
    UpdatePlanTool,
    AskUserTool,
    PullRequestTool,
)


def build_tools() -> list[Tool]:
    """A fresh instance of every tool (one set per session)."""
    tf_guard.register()  # the guard's exec-time review of terraform/tofu apply
    return [cls() for cls in TOOL_CLASSES]
