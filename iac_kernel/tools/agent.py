"""agent: hand a self-contained task to a sub-agent and return its final answer."""

from __future__ import annotations

from typing import Any

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult, short


class AgentTool(Tool):
    name = "agent"
    description = (
        "Start a sub-agent with its own fresh context to carry out a self-contained task "
        "(e.g. survey every module for deprecated arguments) and return its final report. "
        "The prompt must contain everything the sub-agent needs; it cannot see this "
        "conversation."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "The complete task for the sub-agent.",
                "minLength": 1,
            },
            "description": {
                "type": "string",
                "description": "A short (3-8 word) summary of the task, for the user.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    kind = "execute"
    category = Category.EXECUTE
    runs_subagent = True

    def title(self, args: dict[str, Any]) -> str:
        return f"{self.name}: {short(args.get('description') or args.get('prompt', ''), 60)}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        if ctx.run_subagent is None:
            raise ToolError("sub-agents are not available in this session")
        try:
            answer = await ctx.run_subagent(args["prompt"])
        except ToolError:
            raise
        except Exception as exc:  # the sub-agent's failure is this call's result, not a crash
            raise ToolError(f"the sub-agent failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(answer, str):
            answer = "" if answer is None else str(answer)
        text = answer.strip() or "(the sub-agent finished without a final answer)"
        return ToolResult(text, raw_output={"chars": len(answer)})
