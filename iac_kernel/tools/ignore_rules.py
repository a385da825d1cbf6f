"""Could an ignore rule drop one of these files? The check behind glob's fast listing.

ripgrep lists files matching a ``--glob`` fastest (files that do not match are dropped
before any ignore rule is read), but whatever a ``--glob`` matches skips the ignore
rules: a ``.gitignore`` saying ``secret.tf`` is overridden for that file, and a folder
whose name the glob matches is entered even when ignored. Other ignored folders are
never entered, either way. So the fast listing is exact unless some ignore rule ripgrep
reads for this search matches a listed file, or a folder on a listed path whose name
the glob matches.

:func:`may_drop` answers that conservatively: ``False`` only when it has read every
ignore source and no rule in them can match such a file or folder; anything it cannot
read or parse with certainty answers ``True`` (the caller then lists the slow, exact
way). The sources are those ripgrep reads with ``--no-require-git``: ``.gitignore``,
``.ignore`` and ``.rgignore`` in the searched tree and in every folder above it, the
repository's ``.git/info/exclude``, and git's global excludes file. (A repository nested
inside the searched tree has its own ``info/exclude``, which is not read here.)
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path

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
    from iac_kernel.tools.glob import compile_glob

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
