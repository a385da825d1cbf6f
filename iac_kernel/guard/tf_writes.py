"""Where a guarded terraform/tofu may write its sensitive files: regular files only.

A plan, a state or its backup written to a pipe, a terminal or ``/dev/stdout`` reaches
the shell as it is written (and a plan's members are compressed: the output filter
cannot read them); one written to a file is covered in the shell before terraform starts
and masked before its exit status goes back (:mod:`.cover`). So ``-out``, ``-state``,
``-state-out`` and ``-backup`` must name a regular file or a new one, never a FIFO, a
socket, a device or a path under ``/dev``, ``/proc`` or ``/sys`` (symlinks followed as
the sandbox sees them), and terraform's own log goes to stderr, which is masked:
``TF_LOG_PATH`` is refused. The words of ``TF_CLI_ARGS`` and ``TF_CLI_ARGS_<command>``
count as the command line's (``TF_CLI_ARGS_plan=-out=/dev/stdout``). Checked when the
request arrives, and again when the files are held (:meth:`.cover.Cover.hold`), after
which the shell cannot swap one for a FIFO: it is a mount point in the shell's view.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence

#: Options naming a file terraform writes.
OUTPUT_OPTIONS = ("out", "state", "state-out", "backup")
#: Variables naming a file terraform writes its log to.
LOG_VARIABLES = ("TF_LOG_PATH",)
SPECIAL_ROOTS = ("/dev", "/proc", "/sys")
_MAX_LINKS = 40


def words_of(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` after the program name, with the words terraform adds after the command
    from ``TF_CLI_ARGS`` and ``TF_CLI_ARGS_<command>``."""
    words = list(argv[1:])
    command = next((w for w in words if not w.startswith("-")), "")
    if not command:
        return words
    extra = f"{env.get('TF_CLI_ARGS', '')} {env.get(f'TF_CLI_ARGS_{command}', '')}"
    try:
        added = shlex.split(extra)
    except ValueError:
        added = extra.split()
    at = words.index(command) + 1
    return [*words[:at], *added, *words[at:]]


def outputs(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[str | None, list[str]]:
    """(``-chdir`` folder or None, the paths ``argv`` asks terraform to write), with
    the words of ``TF_CLI_ARGS*`` in ``env``."""
    chdir: str | None = None
    found: list[str] = []
    words = words_of(argv, env or {})
    for i, word in enumerate(words):
        name, eq, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or word == "--":
            continue
        if not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
        if name == "chdir":
            chdir = value
        elif name in OUTPUT_OPTIONS and value and value != "-":
            found.append(value)
    return chdir, found


def refusal(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], host_path: Callable[[str], str]
) -> str | None:
    """Why terraform must not run ``argv`` (None: it may): ``cwd`` as the sandbox sees
    it, ``host_path`` maps a sandbox path to the host's."""
    for name in LOG_VARIABLES:
        if env.get(name):
            return (
                f"{name} is refused: terraform's log can hold sensitive values; "
                "without it the log goes to stderr, which is masked"
            )
    chdir, paths = outputs(argv, env)
    base = os.path.join(cwd, chdir) if chdir else cwd
    for path in paths:
        problem = _problem(os.path.join(base, path), host_path)
        if problem:
            return f"`{path}` is refused as an output of terraform: {problem}"
    return None


def _problem(path: str, host_path: Callable[[str], str]) -> str | None:
    """Why ``path`` (absolute, as the sandbox sees it) is no place for a sensitive file."""
    resolved = resolve(path, host_path)
    if resolved is None:
        return "too many symbolic links"
    if _special(resolved):
        return f"it is under {resolved}, not a file in a folder"
    try:
        st = os.stat(host_path(resolved), follow_symlinks=False)
    except FileNotFoundError:
        return None  # a new file
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a FIFO, socket or device)"
    return None


def resolve(path: str, host_path: Callable[[str], str]) -> str | None:
    """``path`` with every symlink resolved as the sandbox resolves it (targets read
    through ``host_path``); None after too many links."""
    parts = [p for p in os.path.normpath(path).split("/") if p]
    done = "/"
    links = 0
    while parts:
        part = parts.pop(0)
        candidate = os.path.normpath(os.path.join(done, part))
        if _special(candidate):  # the host's /proc says nothing of the sandbox's
            return candidate
        try:
            target = os.readlink(host_path(candidate))
        except OSError:
            done = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            return None
        base = "/" if target.startswith("/") else done
        parts = [p for p in os.path.normpath(os.path.join(base, target)).split("/") if p] + parts
        done = "/"
    return done


def _special(path: str) -> bool:
    return any(path == r or path.startswith(r + "/") for r in SPECIAL_ROOTS)
