"""The files a guarded terraform/tofu run may write sensitive values to, known before it
starts: :meth:`.cover.Cover.hold` covers them in the call's shell first (issue 32).

From the command line (``-chdir``, ``-out``, ``-state``, ``-state-out``, ``-backup``,
``TF_CLI_ARGS`` and ``TF_CLI_ARGS_<command>`` too) and the environment: the state of
the selected workspace (``TF_WORKSPACE`` or the data folder's ``environment``; a local
backend's ``path`` and ``workspace_dir`` from the backend cache), its backups (a
``state`` command's, named with the time, for the first seconds of its run),
``errored.tfstate``, a plan from ``-out`` and, for ``init``, the backend cache in the
data folder (``TF_DATA_DIR``). Paths are as the sandbox sees them, symlinks resolved.
Over-approximated: a file terraform does not write is put back as it was.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from iac_kernel.guard.tf_writes import resolve, words_of

#: Commands that write the state (``state mv|rm|push|...`` too).
STATE_WRITERS = frozenset({"apply", "destroy", "import", "refresh", "taint", "untaint", "state"})
#: ``state`` commands that back the state up under a name with the time in it.
STATE_BACKED_UP = frozenset({"mv", "rm", "push", "replace-provider"})
#: Seconds from a ``state`` command's start its timestamped backup is held for.
STAMP_SECONDS = 4
#: Options naming a file (``-name value`` and ``-name=value``).
PATH_OPTIONS = ("out", "state", "state-out", "backup", "chdir")
#: A backend cache naming no backend: terraform reads it as no cache (an empty file is
#: a syntax error to it) and rewrites it in place.
NO_BACKEND = b'{"version":3,"serial":0,"lineage":"00000000-0000-0000-0000-000000000000"}\n'


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
    argv: Sequence[str], cwd: str, env: Mapping[str, str], host_path: Callable[[str], str]
) -> list[Target]:
    """What terraform may write running ``argv`` in ``cwd`` (as the sandbox sees it)."""
    command, sub, options = _parse(argv, env)
    base = os.path.join(cwd, options.get("chdir", ""))
    found: list[Target] = []
    if options.get("out"):
        found.append(Target(os.path.join(base, options["out"])))
    data_dir = os.path.join(base, env.get("TF_DATA_DIR") or ".terraform")
    if command == "init":
        found.append(Target(os.path.join(data_dir, "terraform.tfstate"), NO_BACKEND, True))
    if command in STATE_WRITERS:
        found += _state_targets(base, data_dir, options, env, host_path)
    if command == "state" and sub in STATE_BACKED_UP:
        found += _stamped_backups(base, data_dir, options, env, host_path)
    out: list[Target] = []
    for target in found:
        named = os.path.normpath(os.path.join(base, target.path))
        path = resolve(named, host_path)
        if path is not None and all(t.path != path for t in out):
            link = named if named != path else ""
            out.append(Target(path, target.content, target.make_dirs, link))
    return out


def _state_targets(
    base: str,
    data_dir: str,
    options: dict[str, str],
    env: Mapping[str, str],
    host_path: Callable[[str], str],
) -> list[Target]:
    given = options.get("state")
    state = given or _workspace_state(data_dir, env, host_path)
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


def _stamped_backups(
    base: str,
    data_dir: str,
    options: dict[str, str],
    env: Mapping[str, str],
    host_path: Callable[[str], str],
) -> list[Target]:
    """``<state>.<unix time>.backup`` of a ``state`` command without a ``-backup`` path
    (``-backup=-`` too), for each second of :data:`STAMP_SECONDS` from now: terraform
    names it when it has loaded the backend, a moment after it starts."""
    if options.get("backup") not in (None, "", "-"):
        return []
    state = options.get("state") or _workspace_state(data_dir, env, host_path)
    if state is None:
        return []
    now = int(time.time())
    return [Target(f"{state}.{now + i}.backup", make_dirs=True) for i in range(STAMP_SECONDS)]


def _workspace_state(
    data_dir: str, env: Mapping[str, str], host_path: Callable[[str], str]
) -> str | None:
    """The state file of the selected workspace (None: the backend is not local)."""
    workspace = env.get("TF_WORKSPACE") or _read(host_path(os.path.join(data_dir, "environment")))
    workspace = (workspace or "default").strip() or "default"
    backend: dict = {}
    try:
        cache = json.loads(_read(host_path(os.path.join(data_dir, "terraform.tfstate"))) or "{}")
        backend = cache.get("backend") or {}
    except (ValueError, AttributeError):
        pass
    kind = backend.get("type") if isinstance(backend, dict) else None
    if kind not in (None, "local"):
        return None
    config = backend.get("config") or {} if isinstance(backend, dict) else {}
    if workspace == "default":
        return str(config.get("path") or "terraform.tfstate")
    folder = str(config.get("workspace_dir") or "terraform.tfstate.d")
    return os.path.join(folder, workspace, "terraform.tfstate")


def _parse(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str, str, dict[str, str]]:
    """(the command, the word after it, ``{option: value}`` of :data:`PATH_OPTIONS`),
    the words of ``TF_CLI_ARGS*`` included."""
    words = words_of(argv, env)
    command = next((w for w in words if not w.startswith("-")), "")
    at = words.index(command) + 1 if command else len(words)
    sub = words[at] if at < len(words) else ""
    options: dict[str, str] = {}
    for i, word in enumerate(words):
        if not word.startswith("-") or word == "--":
            continue
        name, eq, value = word.lstrip("-").partition("=")
        if name in PATH_OPTIONS:
            options[name] = value if eq else (words[i + 1] if i + 1 < len(words) else "")
    return command, sub, options


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None
