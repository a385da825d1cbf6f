"""glob: find files by name pattern, respecting .gitignore (via ripgrep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult
from iac_kernel.tools.paths import resolve_path, short, tool_paths
from iac_kernel.tools.rg import prefix_for, run_rg
from iac_kernel.tools.validate import check

MAX_RESULTS = 1000
#: Stop reading rg's file list after this many bytes (a glob over a huge tree).
MAX_LIST_BYTES = 4_000_000


class GlobTool(Tool):
    name = "glob"
    description = (
        "Find files whose path matches a glob pattern, e.g. `**/*.tf`, `modules/*/main.tf`, "
        "`*.tfvars`. Patterns are matched from `path` (default: the working directory); "
        "a pattern without '/' matches the file name at any depth. Files ignored by "
        ".gitignore and the .git/.terraform directories are skipped. Sorted paths, "
        f"at most {MAX_RESULTS}."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern.", "minLength": 1},
            "path": {
                "type": "string",
                "description": "Directory to search (default: the working directory).",
                "minLength": 1,
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    kind = "search"
    category = Category.READ

    def title(self, args: dict[str, Any]) -> str:
        where = f" in {short(args['path'])}" if args.get("path") else ""
        return f"glob: {short(args.get('pattern', ''))}{where}"

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return tool_paths(ctx, args, default=".")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = check(self, args)
        shown = args.get("path", ".")
        base = resolve_path(ctx, shown)
        if not base.exists():
            raise ToolError(f"directory not found: {shown}")
        if not base.is_dir():
            raise ToolError(f"{shown} is not a directory")
        pattern = args["pattern"]
        out = await run_rg(["--files", f"--glob={pattern}"], base, MAX_LIST_BYTES)
        if out.returncode not in (0, 1) and not out.truncated and not out.stdout:
            raise ToolError(f"glob failed: {out.stderr or f'rg exit code {out.returncode}'}")
        files = [line for line in out.stdout.splitlines() if line]
        if out.truncated and files:
            files.pop()  # the last line may be cut mid-path
        if not files:
            return ToolResult(f"No files match {pattern!r} in {shown}.", raw_output={"count": 0})
        prefix = prefix_for(base, Path(ctx.cwd))
        files = sorted(prefix + f for f in files)
        total = len(files)
        text = "\n".join(files[:MAX_RESULTS])
        if total > MAX_RESULTS or out.truncated:
            count = f"{total}+" if out.truncated else str(total)
            text += (
                f"\n\n[showing the first {MAX_RESULTS} of {count} files; "
                "use a narrower pattern or path]"
            )
        return ToolResult(text, raw_output={"count": total, "truncated": total > MAX_RESULTS})
