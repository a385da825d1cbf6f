"""grep: search file contents with a regular expression (via ripgrep)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

from iac_kernel.events import Location
from iac_kernel.tools.base import ToolContext, ToolError, ToolResult, prefix_for, resolve_path
from iac_kernel.tools.glob import compile_glob, matching_files
from iac_kernel.tools.rg import SearchTool, run_rg, search_root
from iac_kernel.tools.tf_masking import rg_masking

OUTPUT_MODES = ("content", "files_with_matches", "count")
MAX_CONTEXT = 20
#: Matched lines longer than this are cut (minified JSON, state files).
MAX_LINE_CHARS = 500
#: A glob with '/' is expanded to a file list; more files than this is refused.
MAX_GLOB_FILES = 5000
#: Matches an editor is pointed at (``path:line`` of the content output), at most.
MAX_LOCATIONS = 20
_MATCH_LINE = re.compile(r"^(?P<path>[^\n]+?):(?P<line>\d+):")


class GrepTool(SearchTool):
    name = "grep"
    description = (
        "Search file contents for a regular expression (Rust regex syntax, like ripgrep). "
        "output_mode: 'content' (default) prints `path:line:text` for matches and "
        "`path-line-text` for context lines; 'files_with_matches' prints matching file "
        "paths; 'count' prints `path:count`. Filter files with `glob` (e.g. `*.tf`, "
        "`modules/**/*.tf`, `!*.md`). "
        "Respects .gitignore; skips .git and .terraform."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression.", "minLength": 1},
            "path": {
                "type": "string",
                "description": "File or directory to search (default: the working directory).",
                "minLength": 1,
            },
            "glob": {"type": "string", "description": "Only search files matching this glob."},
            "case_insensitive": {"type": "boolean", "description": "Ignore case."},
            "context": {
                "type": "integer",
                "description": "Lines of context around each match (content mode).",
                "minimum": 0,
                "maximum": MAX_CONTEXT,
            },
            "output_mode": {
                "type": "string",
                "enum": list(OUTPUT_MODES),
                "default": "content",
                "description": "content, files_with_matches or count.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def result_locations(self, output: str, cwd: Path) -> list[Location]:
        """``path:line`` matches of the content output, absolute, in order, no repeats."""
        found: list[Location] = []
        for text in output.splitlines():
            match = _MATCH_LINE.match(text)
            if match is None:
                continue
            path = os.path.normpath(os.path.join(str(cwd), match.group("path")))
            location = Location(path, int(match.group("line")))
            if location not in found:
                found.append(location)
                if len(found) >= MAX_LOCATIONS:
                    break
        return found

    shows_contents = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        shown = args.get("path", ".")
        target = resolve_path(ctx, shown)
        if not target.exists():
            raise ToolError(f"path not found: {shown}")
        limit = max(int(ctx.settings.output_limit), 1_000)
        mode = args["output_mode"]
        flags: list[str] = []
        if args.get("case_insensitive"):
            flags.append("--ignore-case")
        if mode == "content":
            flags += ["--json", f"--context={args.get('context', 0)}"]
        elif mode == "files_with_matches":
            flags += ["--files-with-matches", "--null"]
        else:
            flags += ["--count", "--with-filename", "--null"]
        root, targets = search_root(target)
        if args.get("glob") and not targets:
            glob_flags, targets = await _glob_filter(root, args["glob"])
            if glob_flags is None and not targets:
                return ToolResult(
                    f"No files match the glob {args['glob']!r}.", raw_output={"matches": 0}
                )
            flags += glob_flags or []
        argv = [*flags, f"--regexp={args['pattern']}", "--", *targets]
        # JSON is verbose: read well past the output limit before stopping rg. rg runs
        # on every core and its output is sorted here; only when the output is cut short
        # is it run again sorted (one thread), so what is kept is the same every time.
        with rg_masking(root, Path(ctx.cwd)) as masking:  # terraform's files: masked
            argv = [*masking, *argv]
            out = await run_rg(argv, root, limit * 20)
            if out.truncated:
                out = await run_rg(["--sort=path", *argv], root, limit * 20)
        if out.returncode == 2 and not out.stdout:
            raise ToolError(f"grep failed: {out.stderr or 'rg exit code 2'}")
        prefix = prefix_for(root, Path(ctx.cwd))
        if mode == "content":
            lines, matches = _content_lines(out.stdout, prefix)
        else:
            lines = _null_lines(out.stdout, prefix, mode, out.truncated)
            matches = len(lines)
        if not lines:
            return ToolResult("No matches found.", raw_output={"matches": 0})
        text, cut = _cap(lines, limit)
        if cut or out.truncated:
            text += (
                f"\n\n[output truncated after {len(lines) - cut} lines; narrow the pattern, "
                "path or glob, or use output_mode='files_with_matches']"
            )
        return ToolResult(text, raw_output={"matches": matches, "truncated": bool(cut)})


async def _glob_filter(root: Path, glob: str) -> tuple[list[str] | None, list[str]]:
    """rg flags, or explicit files, that restrict a search to ``glob`` and keep .gitignore.

    An rg ``--glob`` would re-include ignored files it matches; a file *type* does not,
    but types only match file names, so a glob with '/' is expanded to a file list.
    """
    negate = glob.startswith("!")
    pattern = glob[1:] if negate else glob
    if "/" not in pattern.rstrip("/"):
        kind = "--type-not=iacglob" if negate else "--type=iacglob"
        return [f"--type-add=iacglob:{pattern}", kind], []
    files, _ = await matching_files(root, "**" if negate else pattern)
    if negate:
        regex = compile_glob(pattern)
        files = [f for f in files if not regex.match(f)]
    if len(files) > MAX_GLOB_FILES:
        raise ToolError(
            f"the glob {glob!r} matches {len(files)} files (more than {MAX_GLOB_FILES}); "
            "narrow it or the path"
        )
    return None, files


def _text(obj: dict[str, Any] | None) -> str:
    """rg JSON gives ``{"text": ...}`` or, for non-UTF-8 data, ``{"bytes": base64}``."""
    if not obj:
        return ""
    if "text" in obj:
        return obj["text"]
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", errors="surrogateescape")


def path_key(path: str) -> list[str]:
    """Sort key for paths in rg's ``--sort=path`` order (component by component)."""
    return path.split("/")


def _by_file(stdout: str) -> list[list[dict[str, Any]]]:
    """rg's JSON events grouped per file (rg writes each file's events together, also
    when searching in parallel), the groups sorted by path."""
    groups: list[tuple[list[str], int, list[dict[str, Any]]]] = []
    for raw in stdout.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue  # a line cut short when the output cap stopped rg
        kind = event.get("type")
        if kind == "begin":
            path = _text(event.get("data", {}).get("path"))
            groups.append((path_key(path), len(groups), []))
        elif kind in ("match", "context") and groups:
            groups[-1][2].append(event)
    groups.sort(key=lambda group: (group[0], group[1]))
    return [events for _, _, events in groups]


def _content_lines(stdout: str, prefix: str) -> tuple[list[str], int]:
    """Grep-style lines from rg's JSON stream, files in path order, with ``--`` between
    separate groups."""
    lines: list[str] = []
    matches = 0
    for events in _by_file(stdout):
        if lines:
            lines.append("--")
        last: int | None = None
        for event in events:
            kind, data = event.get("type"), event.get("data", {})
            path = prefix + _text(data.get("path"))
            number = data.get("line_number") or 0
            sep = ":" if kind == "match" else "-"
            matches += kind == "match"
            if last is not None and number > last + 1:
                lines.append("--")
            for i, text in enumerate(_text(data.get("lines")).rstrip("\n").split("\n")):
                text = text.rstrip("\r")
                if len(text) > MAX_LINE_CHARS:
                    text = text[:MAX_LINE_CHARS] + "… [line cut]"
                lines.append(f"{path}{sep}{number + i}{sep}{text}")
                last = number + i
    return lines, matches


def _null_lines(stdout: str, prefix: str, mode: str, truncated: bool) -> list[str]:
    """Lines for files_with_matches (``path\\0``) and count (``path\\0N\\n``) output."""
    if mode == "files_with_matches":
        items = stdout.split("\0")
        # The final item is empty, or a partial path when the output was cut.
        return [prefix + p for p in sorted((p for p in items[:-1] if p), key=path_key)]
    counts = []
    for line in stdout.splitlines() if not truncated else stdout.splitlines()[:-1]:
        path, _, count = line.rpartition("\0")
        if path:
            counts.append((path, count))
    counts.sort(key=lambda item: path_key(item[0]))
    return [f"{prefix}{path}:{count}" for path, count in counts]


def _cap(lines: list[str], limit: int) -> tuple[str, int]:
    """Join ``lines`` up to ``limit`` characters; return the text and how many were left out."""
    size = 0
    for i, line in enumerate(lines):
        size += len(line) + 1
        if size > limit and i > 0:
            return "\n".join(lines[:i]), len(lines) - i
    return "\n".join(lines), 0
