"""read_file: a text file's lines, numbered like ``cat -n``."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from iac_kernel.events import Diff, Location
from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult, resolve_path
from iac_kernel.tools.list_files import ListFilesTool
from iac_kernel.tools.tf_masking import readable

#: Lines returned when no ``limit`` is given (and the most one call returns).
DEFAULT_LINE_LIMIT = 2000
#: Longer lines are cut (minified JSON, base64 blobs in state files).
MAX_LINE_CHARS = 2000
#: Bytes sniffed for NUL to call a file binary.
SNIFF_BYTES = 8192


def looks_binary(data: bytes) -> bool:
    """True when ``data`` holds a NUL byte (the test git and grep use)."""
    return b"\x00" in data


class ReadFileTool(Tool):
    name = "read_file"
    description = (
        "Read a text file. Lines come back numbered like `cat -n` (number, tab, text). "
        f"At most {DEFAULT_LINE_LIMIT} lines per call; use offset (1-based first line) and "
        "limit to page through long files. Relative paths are taken from the working "
        f"directory. Binary files are refused; use {ListFilesTool.name} for directories."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read.", "minLength": 1},
            "offset": {
                "type": "integer",
                "description": "1-based line to start at (default 1).",
                "minimum": 1,
            },
            "limit": {
                "type": "integer",
                "description": f"Number of lines to read (default and max {DEFAULT_LINE_LIMIT}).",
                "minimum": 1,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    kind = "read"
    category = Category.READ
    subject = path_arg = "path"
    shows_contents = True

    def locations(
        self, args: dict[str, Any], ctx: ToolContext, diff: Diff | None
    ) -> list[Location]:
        """The file, at the first line read."""
        offset = args.get("offset") if isinstance(args, dict) else None
        line = offset if type(offset) is int and offset > 0 else 1
        return [Location(str(path), line) for path in self.paths(args, ctx)]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        path = resolve_path(ctx, args["path"])
        offset = args.get("offset", 1)
        limit = min(args.get("limit", DEFAULT_LINE_LIMIT), DEFAULT_LINE_LIMIT)
        byte_cap = max(int(ctx.settings.read_limit_bytes), 1)
        try:
            shown = readable(path, ctx.cwd)  # terraform's sensitive files: masked
            result = _read(shown, args["path"], offset, limit, byte_cap)
            if shown != path:
                result.raw_output["path"] = str(path)
                result.raw_output["masked"] = True
            return result
        except FileNotFoundError:
            raise ToolError(f"file not found: {args['path']}") from None
        except IsADirectoryError:
            raise ToolError(f"{args['path']} is a directory; use {ListFilesTool.name}") from None
        except PermissionError:
            raise ToolError(f"permission denied: {args['path']}") from None
        except OSError as exc:
            raise ToolError(f"cannot read {args['path']}: {exc.strerror or exc}") from None


def _read(path: Path, shown: str, offset: int, limit: int, byte_cap: int) -> ToolResult:
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError
    if not stat.S_ISREG(mode):
        # FIFOs and devices would block or never end.
        raise ToolError(f"{shown} is not a regular file")
    out: list[str] = []
    used = 0
    stop_reason = ""
    total = 0
    with path.open("rb") as fh:
        if looks_binary(fh.read(SNIFF_BYTES)):
            raise ToolError(f"{shown} is a binary file; {ReadFileTool.name} only reads text")
        fh.seek(0)
        for number, raw in enumerate(fh, start=1):
            total = number
            if number < offset or stop_reason:
                continue
            if looks_binary(raw):
                raise ToolError(f"{shown} is a binary file; {ReadFileTool.name} only reads text")
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + f"… [line cut at {MAX_LINE_CHARS} characters]"
            line = f"{number:6d}\t{text}"
            size = len(line.encode()) + 1
            if out and used + size > byte_cap:
                stop_reason = f"the {byte_cap}-byte read limit"
                continue
            out.append(line)
            used += size
            if len(out) >= limit:
                stop_reason = f"the {limit}-line limit"
    if total == 0:
        return ToolResult("(empty file)", raw_output={"path": str(path), "lines": 0})
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {shown} ({total} lines)")
    last = offset + len(out) - 1
    text = "\n".join(out)
    if last < total:
        text += (
            f"\n\n[stopped at {stop_reason}: showing lines {offset}-{last} of {total}. "
            f"Read more with offset={last + 1}.]"
        )
    return ToolResult(
        text,
        raw_output={"path": str(path), "first_line": offset, "last_line": last, "lines": total},
    )
