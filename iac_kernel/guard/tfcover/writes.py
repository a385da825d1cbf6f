"""What a guarded terraform/tofu writes, read from its command line before it starts.

* :func:`refusal`: ``-out``, ``-state``, ``-state-out`` and ``-backup`` must name a regular
  file or a new one (one written to a pipe, a terminal or ``/dev/stdout`` reaches the
  shell as it is written; a file is covered in the shell, :mod:`.cover`), and
  ``TF_LOG_PATH`` is refused (the log goes to stderr, which is masked). Checked when the
  request arrives, and again once the files are held: a mount point the shell cannot
  swap for a FIFO.
* :func:`targets`: the files it may write, held by :meth:`.cover.Cover.hold`: the
  selected workspace's state (``TF_WORKSPACE`` or the data folder's ``environment``; a
  local backend's ``path`` and ``workspace_dir``), its backups (a ``state`` command's,
  named with the time, for its first seconds), ``errored.tfstate``, a plan from ``-out``
  and, for ``init``, the backend cache. Over-approximated: a file terraform does not
  write is put back as it was.
* :func:`without_input`: an ``init`` nobody asked runs with ``-input=false`` appended
  (it wins over ``TF_CLI_ARGS_init``), so a bash call cannot answer its prompt to migrate
  or overwrite state (``printf 'yes\\n' | terraform init``); ``init -migrate-state`` is
  asked per call.

The words of ``TF_CLI_ARGS`` and ``TF_CLI_ARGS_<command>`` count as the command line's.
Paths are as the sandbox sees them, symlinks resolved through ``host_path``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import stat
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

HostPath = Callable[[str], str]
#: Options naming a file terraform writes, and those naming a file or folder at all.
OUTPUT_OPTIONS = ("out", "state", "state-out", "backup")
PATH_OPTIONS = (*OUTPUT_OPTIONS, "chdir")
#: Variables naming a file terraform writes its log to.
LOG_VARIABLES = ("TF_LOG_PATH",)
SPECIAL_ROOTS = ("/dev", "/proc", "/sys")
MAX_LINKS = 40
#: Commands that write the state (``state mv|rm|push|...`` too).
STATE_WRITERS = frozenset({"apply", "destroy", "import", "refresh", "taint", "untaint", "state"})
#: ``state`` commands that back the state up under a name with the time in it.
STATE_BACKED_UP = frozenset({"mv", "rm", "push", "replace-provider"})
#: Seconds from a ``state`` command's start its timestamped backup is held for.
STAMP_SECONDS = 4
#: A backend cache naming no backend: terraform reads it as no cache (an empty file is
#: a syntax error to it) and rewrites it in place.
NO_BACKEND = b'{"version":3,"serial":0,"lineage":"00000000-0000-0000-0000-000000000000"}\n'
INIT_NOTE = (
    "guard: `{program} init` ran with -input=false: it never answers a prompt to migrate "
    "or overwrite state. To migrate, run `{program} init -migrate-state` (asked per call).\n"
)


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


def _path_options(words: list[str]) -> list[tuple[str, str]]:
    """``(name, value)`` of every :data:`PATH_OPTIONS` option among ``words``, in order."""
    found: list[tuple[str, str]] = []
    for i, word in enumerate(words):
        if not word.startswith("-") or word == "--":
            continue
        name, eq, value = word.lstrip("-").partition("=")
        if name in PATH_OPTIONS:
            found.append((name, value if eq else (words[i + 1] if i + 1 < len(words) else "")))
    return found


def outputs(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[str | None, list[str]]:
    """(``-chdir`` folder or None, the paths ``argv`` asks terraform to write), with
    the words of ``TF_CLI_ARGS*`` in ``env``."""
    options = _path_options(words_of(argv, env or {}))
    chdir = next((v for n, v in reversed(options) if n == "chdir"), None)
    return chdir, [v for n, v in options if n in OUTPUT_OPTIONS and v and v != "-"]


def refusal(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], host_path: HostPath
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


def _problem(path: str, host_path: HostPath) -> str | None:
    """Why ``path`` (absolute, as the sandbox sees it) is no place for a sensitive file."""
    try:
        resolved = resolve(path, host_path)
    except OSError:
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


def resolve(path: str, host_path: HostPath = os.path.normpath) -> str:
    """``path`` (absolute, as the sandbox sees it) with every symlink resolved the way
    the sandbox would: targets are read through ``host_path``, ``..`` after a link goes
    up from where the link led, a missing rest is kept; ``/dev``, ``/proc`` and ``/sys``
    are not looked into (the host's say nothing of the sandbox's). Raises ``OSError``
    (``ELOOP``) after :data:`MAX_LINKS` links."""
    parts = [p for p in path.split("/") if p]
    done, hops = "/", 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        candidate = os.path.join(done, part)
        if _special(candidate):
            return os.path.join(candidate, *parts)
        try:
            info = os.lstat(host_path(candidate))
        except FileNotFoundError:
            return os.path.join(candidate, *parts)
        if not stat.S_ISLNK(info.st_mode):
            done = candidate
            continue
        hops += 1
        if hops > MAX_LINKS:
            raise OSError(errno.ELOOP, "too many symbolic links", path)
        target = os.readlink(host_path(candidate))
        done = "/" if target.startswith("/") else done
        parts = [p for p in target.split("/") if p] + parts
    return done


def _special(path: str) -> bool:
    return any(path == r or path.startswith(r + "/") for r in SPECIAL_ROOTS)


@dataclass(frozen=True)
class Target:
    """A file terraform may write: ``path`` as the sandbox sees it."""

    path: str
    #: What a file made for it holds until terraform writes it.
    content: bytes = b""
    #: Terraform makes the missing folders on the way (states, also a workspace's
    #: that does not exist yet; not plans).
    make_dirs: bool = False
    #: The path as named, when a symlink on the way leads to ``path``.
    named: str = ""


def targets(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], host_path: HostPath
) -> list[Target]:
    """What terraform may write running ``argv`` in ``cwd`` (as the sandbox sees it)."""
    words = words_of(argv, env)
    command = next((w for w in words if not w.startswith("-")), "")
    at = words.index(command) + 1 if command else len(words)
    sub = words[at] if at < len(words) else ""
    options = dict(_path_options(words))  # the last value of each counts
    base = os.path.join(cwd, options.get("chdir", ""))
    found: list[Target] = []
    if options.get("out"):
        found.append(Target(os.path.join(base, options["out"])))
    data_dir = os.path.join(base, env.get("TF_DATA_DIR") or ".terraform")
    if command == "init":
        found.append(Target(os.path.join(data_dir, "terraform.tfstate"), NO_BACKEND, True))
    if command in STATE_WRITERS:
        state = options.get("state") or workspace_state(data_dir, env, host_path)
        found += _state_targets(base, state, options)
        stamped = command == "state" and sub in STATE_BACKED_UP
        if stamped and state and options.get("backup") in (None, "", "-"):
            # Named when terraform has loaded the backend, a moment after it starts.
            now = int(time.time())
            found += [
                Target(f"{state}.{now + i}.backup", make_dirs=True) for i in range(STAMP_SECONDS)
            ]
    out: list[Target] = []
    for target in found:
        named = os.path.normpath(os.path.join(base, target.path))
        try:
            path = resolve(named, host_path)
        except OSError:
            continue  # terraform cannot write through a loop either
        if all(t.path != path for t in out):
            link = named if named != path else ""
            out.append(Target(path, target.content, target.make_dirs, link))
    return out


def _state_targets(base: str, state: str | None, options: dict[str, str]) -> list[Target]:
    """The state written, its backups, and ``errored.tfstate``."""
    written = options.get("state-out") or state
    found = [Target(os.path.join(base, "errored.tfstate"))]
    if written is None:
        return found  # a remote backend: no local state
    found.append(Target(written, make_dirs=True))  # a new workspace's folder too
    backup = options.get("backup")
    if backup and backup != "-":
        found.append(Target(backup, make_dirs=True))
    elif backup is None:
        found += [Target(f"{p}.backup", make_dirs=True) for p in {state, written} if p]
    return found


def selected_workspace(
    data_dir: str, env: Mapping[str, str], host_path: HostPath = os.path.normpath
) -> str:
    """The workspace terraform selects: ``TF_WORKSPACE``, else the data folder's
    ``environment``, else ``default``."""
    chosen = env.get("TF_WORKSPACE") or _read(host_path(os.path.join(data_dir, "environment")))
    return (chosen or "default").strip() or "default"


def workspace_state(
    data_dir: str, env: Mapping[str, str], host_path: HostPath = os.path.normpath
) -> str | None:
    """The state file of the selected workspace, relative to terraform's folder (None:
    the backend is not local)."""
    workspace = selected_workspace(data_dir, env, host_path)
    backend: dict = {}
    with contextlib.suppress(ValueError, AttributeError):
        cache = json.loads(_read(host_path(os.path.join(data_dir, "terraform.tfstate"))) or "{}")
        backend = cache.get("backend") or {}
    kind = backend.get("type") if isinstance(backend, dict) else None
    if kind not in (None, "local"):
        return None
    config = backend.get("config") or {} if isinstance(backend, dict) else {}
    if workspace == "default":
        return str(config.get("path") or "terraform.tfstate")
    folder = str(config.get("workspace_dir") or "terraform.tfstate.d")
    return os.path.join(folder, workspace, "terraform.tfstate")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None


def is_init(program: str, argv: list[str]) -> bool:
    """A terraform/tofu/terragrunt ``init`` (``terragrunt run-all init`` too)."""
    if program not in ("terraform", "tofu", "terragrunt"):
        return False
    words = [a for a in argv[1:] if not a.startswith("-")]
    return "init" in words[:2]


async def without_input(
    program: str,
    argv: list[str],
    numbers: list,
    fds: list[int],
    run: Callable[[list[str]], Awaitable[int]],
) -> int:
    """``run`` ``argv`` plus ``-input=false``; on failure, say why on its stderr (the
    launcher's descriptor number 2 among ``numbers``/``fds``)."""
    stderr = dict(zip(numbers, fds, strict=False)).get(2)
    note_fd = os.dup(stderr) if stderr is not None else None
    try:
        code = await run([*argv, "-input=false"])
        if code != 0 and note_fd is not None:
            with contextlib.suppress(OSError):
                os.write(note_fd, INIT_NOTE.format(program=program).encode())
        return code
    finally:
        if note_fd is not None:
            os.close(note_fd)
