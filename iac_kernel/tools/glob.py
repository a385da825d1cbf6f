"""glob: find files by name pattern, respecting .gitignore (via ripgrep).

ripgrep lists files matching a ``--glob`` fastest (files that do not match are dropped
before any ignore rule is read), but whatever a ``--glob`` matches skips the ignore
rules: a ``.gitignore`` saying ``secret.tf`` is overridden for that file, and a folder
whose name the glob matches is entered even when ignored. Other ignored folders are
never entered, either way. So that fast listing is exact unless some ignore rule ripgrep
reads for this search matches a listed file, or a folder on a listed path whose name
the glob matches.

:func:`may_drop` answers that conservatively: ``False`` only when it has read every
ignore source and no rule in them can match such a file or folder; anything it cannot
read or parse with certainty answers ``True`` (the listing is then made the slow, exact
way). The sources are those ripgrep reads with ``--no-require-git``: ``.gitignore``,
``.ignore`` and ``.rgignore`` in the searched tree and in every folder above it, the
repository's ``.git/info/exclude``, and git's global excludes file. (A repository nested
inside the searched tree has its own ``info/exclude``, which is not read here.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from iac_kernel.tools.base import ToolContext, ToolError, ToolResult, prefix_for, resolve_path
from iac_kernel.tools.rg import SearchTool, run_rg

MAX_RESULTS = 1000
#: Stop reading rg's file list after this many bytes (a glob over a huge tree).
MAX_LIST_BYTES = 8_000_000


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for a gitignore-style glob, matched against a '/'-separated relative path.

    ``*`` and ``?`` stay within one path segment, ``**`` spans segments, ``[...]`` and
    ``{a,b}`` work as in ripgrep. A pattern without '/' matches the file name at any
    depth; one with '/' is matched from the search root. A trailing '/' means
    everything below that directory.
    """
    pat = pattern.strip()
    while pat.startswith("./"):
        pat = pat[2:]
    if pat.endswith("/"):
        pat += "**"
    anchored = "/" in pat
    body = _translate(pat.lstrip("/"))
    return re.compile(("" if anchored else "(?:.*/)?") + body + r"\Z", re.DOTALL)


def _translate(pat: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**", i):
            j = i
            while j < len(pat) and pat[j] == "*":
                j += 1
            whole_segment = i == 0 or pat[i - 1] == "/"
            if whole_segment and pat[j : j + 1] == "/":
                out.append("(?:[^/]*/)*")
                j += 1
            elif whole_segment and j == len(pat):
                out.append(".*")
            else:
                out.append("[^/]*")
            i = j
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pat.find("]", i + 2)) != -1:
            inner = pat[i + 1 : end]
            if inner[0] in "!^":
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        elif c == "{" and (end := _closing_brace(pat, i)) != -1:
            options = _split_top_level(pat[i + 1 : end])
            out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
            i = end + 1
            continue
        elif c == "\\" and i + 1 < len(pat):
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _closing_brace(pat: str, start: int) -> int:
    depth = 0
    for i in range(start, len(pat)):
        if pat[i] == "{":
            depth += 1
        elif pat[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in text:
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += (c == "{") - (c == "}")
        current.append(c)
    parts.append("".join(current))
    return parts


async def matching_files(base: Path, pattern: str) -> tuple[list[str], bool]:
    """Files below ``base`` (relative, sorted) matching ``pattern`` and not ignored.

    rg lists the files so .gitignore and the skipped directories apply, on every core,
    in no particular order; the glob itself is matched and the result sorted here.
    Returns the files and whether the listing was cut short.
    """
    fast = await _fast_listing(base, pattern)
    if fast is not None:
        return fast, False
    # Only a listing cut short is made again in rg's sorted (one-thread) order, so the
    # files kept are the same every time.
    args = ["--files", *name_prefilter(pattern)]
    out = await run_rg(args, base, MAX_LIST_BYTES)
    if out.truncated:
        out = await run_rg([*args, "--sort=path"], base, MAX_LIST_BYTES)
    if out.returncode not in (0, 1) and not out.truncated and not out.stdout:
        raise ToolError(f"listing files failed: {out.stderr or f'rg exit code {out.returncode}'}")
    files = out.stdout.splitlines()
    if out.truncated and files:
        files.pop()  # the last line may be cut mid-path
    found = _matching(files, pattern, compile_glob(pattern))
    found.sort()
    return found, out.truncated


def _matching(listed: list[str], pattern: str, regex: re.Pattern[str]) -> list[str]:
    """The listed paths the glob matches (``regex`` is the glob's): all of them when the
    name filter rg applied is already exact."""
    if _type_is_exact(pattern):
        return [f for f in listed if f]
    return list(filter(regex.match, listed))


async def _fast_listing(base: Path, pattern: str) -> list[str] | None:
    """The files, listed through an rg ``--glob`` on the file name (non-matching files
    are dropped before any ignore rule is read), when no ignore rule could have dropped
    one of them or a folder on their paths (:func:`may_drop`);
    ``None`` otherwise (or when the listing is cut short): the caller lists the exact
    way."""
    name = _name_glob(pattern)
    if name is None:
        return None
    ignore_globs = [f"--glob={n}" for n in IGNORE_NAMES]
    out = await run_rg(["--files", f"--glob={name}", *ignore_globs], base, MAX_LIST_BYTES)
    if out.truncated or out.returncode not in (0, 1):
        return None
    regex = compile_glob(pattern)
    found = _matching(out.stdout.splitlines(), pattern, regex)
    ignore_files = _ignore_files(out.stdout)
    for path in ignore_files:  # listed for the check only, unless the glob matches them
        if not regex.match(path):
            with contextlib.suppress(ValueError):
                found.remove(path)
    if may_drop(base, found, ignore_files, compile_glob(name)):
        return None
    found.sort()
    return found


def _ignore_files(listing: str) -> list[str]:
    """The ignore files in rg's listing (one path a line), found with ``str.find``:
    a pass over each line in Python would cost more than the listing itself."""
    found = []
    for name in IGNORE_NAMES:
        start = 0
        while (at := listing.find(name + "\n", start)) >= 0:
            start = at + len(name)
            if at == 0 or listing[at - 1] in "/\n":
                found.append(listing[listing.rfind("\n", 0, at) + 1 : at + len(name)])
    return found


_SIMPLE_SEGMENT = re.compile(r"[^/*?\[\]{}\\!:,]*(?:\*[^/*?\[\]{}\\!:,]*)*\Z")


def _type_is_exact(pattern: str) -> bool:
    """True when the file type of :func:`name_prefilter` selects exactly the files the
    glob matches: a file-name pattern (any depth) of literal characters and ``*``."""
    pat = pattern.strip()
    while pat.startswith("**/"):
        pat = pat[3:]
    return bool(pat) and "/" not in pat and bool(_SIMPLE_SEGMENT.match(pat))


def name_prefilter(pattern: str) -> list[str]:
    """rg flags keeping only files whose name matches the glob's last segment (a file
    type, which unlike ``--glob`` never re-includes ignored files); none when that
    segment can match across folders or cannot be a type glob."""
    name = _name_glob(pattern)
    return [] if name is None else [f"--type-add=iacglob:{name}", "--type=iacglob"]


def _name_glob(pattern: str) -> str | None:
    """The glob's last segment, when every file the glob matches has a name it matches."""
    pat = pattern.strip()
    if not pat or pat.endswith("/"):
        return None
    last = pat.rsplit("/", 1)[-1]
    if not last or "**" in last or ":" in last or "\\" in last or last.startswith("!"):
        return None
    return last


# -- the ignore rules the fast listing must not miss ----------------------------------

IGNORE_NAMES = (".gitignore", ".ignore", ".rgignore")
#: Pattern characters whose gitignore meaning differs from our glob translation.
_UNSURE = re.compile(r"[\\{}]")
#: Glob characters: a name with none is matched by one name only.
_WILD = re.compile(r"[*?\[]")


def may_drop(
    root: Path, files: list[str], listed_ignore_files: Iterable[str], name_glob: re.Pattern[str]
) -> bool:
    """Whether an ignore rule could drop one of ``files`` (paths relative to ``root``),
    listed through an rg ``--glob`` that ``name_glob`` matches names like.

    ``listed_ignore_files`` are the ignore files inside ``root`` (relative paths), as
    the same listing found them (ignored folders were not entered, like ripgrep).
    """
    sources = [(root / name, _parent(name), "") for name in listed_ignore_files]
    try:
        sources += _outside_sources(root)
    except _Unsure:
        return True
    listing = _Listing(files)
    for path, below, above in sources:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            return True
        try:
            if _rules_match(text, listing, below, above, name_glob):
                return True
        except _Unsure:
            return True
    return False


class _Unsure(Exception):
    """A source or a rule this module cannot read with certainty."""


def _parent(name: str) -> str:
    """The folder of a listed ignore file, relative to the root ('' for the root)."""
    return name.rsplit("/", 1)[0] if "/" in name else ""


#: An ignore file, the folder below the root its rules are relative to (``""``: the
#: root), and the path from the folder above the root it sits in down to the root.
Source = tuple[Path, str, str]


def _outside_sources(root: Path) -> list[Source]:
    """Ignore files above ``root``, the repository's exclude file and the global one."""
    sources: list[Source] = []
    folder = root.resolve()
    for parent in folder.parents:
        down = folder.relative_to(parent).as_posix() + "/"
        sources += [(parent / name, "", down) for name in IGNORE_NAMES]
    for candidate in (folder, *folder.parents):
        git = candidate / ".git"
        if git.is_file():  # a worktree or submodule: its git dir is elsewhere
            raise _Unsure
        if git.is_dir():
            down = "" if candidate == folder else folder.relative_to(candidate).as_posix() + "/"
            sources.append((git / "info" / "exclude", "", down))
            break
    global_file = _global_excludes()
    if global_file is not None:
        sources.append((global_file, "", GLOBAL))
    return sources


#: Marks the global excludes file: relative to each repository (names only here).
GLOBAL = "\0global"


def _global_excludes() -> Path | None:
    """git's global excludes file: ``core.excludesFile`` if a config sets it in a form
    read plainly, else ``$XDG_CONFIG_HOME/git/ignore``."""
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    for config in (home / ".gitconfig", xdg / "git" / "config"):
        try:
            text = config.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            raise _Unsure from None
        if "excludesfile" not in text.lower():
            continue
        match = re.search(r"(?im)^\s*excludesfile\s*=\s*([^\s;#\"]+)\s*$", text)
        if match is None or "[include" in text.lower():
            raise _Unsure
        return Path(os.path.expanduser(match.group(1)))
    return xdg / "git" / "ignore"


class _Listing:
    """The listed files' names, folders and folder names, each worked out when a rule
    first needs it (most rule sets need none of them)."""

    def __init__(self, files: list[str]) -> None:
        self.files = files

    @functools.cached_property
    def names(self) -> set[str]:
        return {f.rsplit("/", 1)[-1] for f in self.files}

    @functools.cached_property
    def folders(self) -> list[str]:
        """Every folder on a listed path (``a``, ``a/b`` for ``a/b/c.tf``)."""
        parents = {f.rpartition("/")[0] for f in self.files} - {""}
        found = set(parents)
        for parent in parents:
            while "/" in parent:
                parent = parent.rpartition("/")[0]
                found.add(parent)
        return sorted(found)

    @functools.cached_property
    def folder_names(self) -> set[str]:
        return {f.rsplit("/", 1)[-1] for f in self.folders}

    def relative(self, paths: list[str], below: str, above: str) -> list[str]:
        """``paths`` as seen from an ignore file's folder (those under it only)."""
        if above == GLOBAL:  # relative to each repository: not decided here
            raise _Unsure
        if below:
            prefix = below + "/"
            return [p[len(prefix) :] for p in paths if p.startswith(prefix)]
        return [above + p for p in paths] if above else paths


def _rules_match(
    text: str, listing: _Listing, below: str, above: str, name_glob: re.Pattern[str]
) -> bool:
    """Whether a rule of one ignore file (in ``below``, or ``above`` the root) matches
    a listed file, or a listed folder whose name ``name_glob`` matches."""
    for raw in text.splitlines():
        line = raw.rstrip("\r").rstrip(" ")
        if not line or line.startswith("#") or line.startswith("!"):
            continue  # a negation only re-includes: it never drops anything
        folders_only = line.endswith("/")
        pattern = line.rstrip("/")
        if _UNSURE.search(pattern):
            raise _Unsure
        regex = compile_glob(pattern)
        last = pattern.rsplit("/", 1)[-1]
        # Only a folder the --glob matches can have been entered although ignored.
        folder_risk = bool(_WILD.search(last)) or bool(name_glob.match(last))
        if "/" not in pattern:  # a name, at any depth
            if not folders_only and any(map(regex.match, listing.names)):
                return True
            if folder_risk and any(
                regex.match(n) and name_glob.match(n) for n in listing.folder_names
            ):
                return True
            continue
        if not folders_only and any(
            map(regex.match, listing.relative(listing.files, below, above))
        ):
            return True
        if folder_risk:
            for folder in listing.relative(listing.folders, below, above):
                if regex.match(folder) and name_glob.match(folder.rsplit("/", 1)[-1]):
                    return True
    return False


class GlobTool(SearchTool):
    name = "glob"
    description = (
        "Find files whose path matches a glob pattern, e.g. `**/*.tf`, `modules/*/main.tf`, "
        "`*.{tf,tfvars}`. Patterns are matched from `path` (default: the working "
        "directory); a pattern without '/' matches the file name at any depth. Files "
        "ignored by .gitignore and the .git/.terraform directories are skipped. Sorted "
        f"paths, at most {MAX_RESULTS}."
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

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = self.check(args)
        shown = args.get("path", ".")
        base = resolve_path(ctx, shown)
        if not base.exists():
            raise ToolError(f"directory not found: {shown}")
        if not base.is_dir():
            raise ToolError(f"{shown} is not a directory")
        pattern = args["pattern"]
        files, cut_short = await matching_files(base, pattern)
        if not files:
            return ToolResult(f"No files match {pattern!r} in {shown}.", raw_output={"count": 0})
        prefix = prefix_for(base, Path(ctx.cwd))
        total = len(files)
        text = "\n".join(prefix + f for f in files[:MAX_RESULTS])
        if total > MAX_RESULTS or cut_short:
            count = f"{total}+" if cut_short else str(total)
            text += (
                f"\n\n[showing the first {min(total, MAX_RESULTS)} of {count} files; "
                "use a narrower pattern or path]"
            )
        return ToolResult(text, raw_output={"count": total, "truncated": total > MAX_RESULTS})
