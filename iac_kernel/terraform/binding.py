"""What a changing terraform/tofu command reads besides its argv, fixed when it is asked.

A question names a folder, a workspace and a state; terraform finds them at run time
through inputs the call can change while the question waits: a symlinked ``-chdir``
folder, ``.terraform/environment``, ``TF_DATA_DIR``, the CLI config and the var files.
:func:`bind` reads them at question time; the command then runs with them given
explicitly (:meth:`Binding.argv`, :meth:`Binding.env`: ``-chdir=<resolved folder>``,
``TF_WORKSPACE=<selected>``, ``TF_DATA_DIR=<absolute>``, ``TF_CLI_CONFIG_FILE=<private
copy>``), and :meth:`Binding.changed`, run right before the exec, refuses a run whose
folder, data folder, backend settings, var files or state lineage changed meanwhile.

Paths are handled as the sandbox sees them (``host_path`` maps one to the host): a
symlink's target is read in the sandbox's view (:func:`resolve_inside`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from iac_kernel.guard.held import identity
from iac_kernel.terraform.apply_args import flag_values
from iac_kernel.terraform.audit import state_mark

#: Subcommands whose question is bound (the rest read, or are asked for no target).
BOUND = {
    "apply",
    "destroy",
    "refresh",
    "import",
    "taint",
    "untaint",
    "force-unlock",
    "state",
    "workspace",
}
AUTO_VAR_FILES = ("terraform.tfvars", "terraform.tfvars.json", "*.auto.tfvars")
AUTO_VAR_FILES += ("*.auto.tfvars.json",)
MAX_HOPS = 40
HostPath = Callable[[str], str]


def resolve_inside(path: str, host_path: HostPath = os.path.normpath) -> str:
    """``path`` (absolute, as the sandbox sees it) with every symlink resolved the way
    the sandbox would: targets are read through ``host_path``; a missing rest is kept."""
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
        try:
            info = os.lstat(host_path(candidate))
        except FileNotFoundError:
            return os.path.join(candidate, *parts)
        if not stat.S_ISLNK(info.st_mode):
            done = candidate
            continue
        hops += 1
        if hops > MAX_HOPS:
            raise OSError(errno.ELOOP, "too many symbolic links", path)
        target = os.readlink(host_path(candidate))
        done = "/" if target.startswith("/") else done
        parts = [p for p in target.split("/") if p] + parts
    return done


def _digest(host: str) -> str | None:
    """The sha256 of a regular file (None: no such file; "dir"/"other" for the rest)."""
    try:
        info = os.stat(host)
        if not stat.S_ISREG(info.st_mode):
            return "other"
        with open(host, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


@dataclass
class Binding:
    """One command's folder, workspace, data folder, CLI config and var files."""

    program: str
    subcommand: str
    #: The folder terraform runs in, resolved, as the sandbox sees it; its host path.
    workdir: str
    host_workdir: Path
    data_dir: str
    host_data_dir: Path
    workspace: str
    #: Set ``TF_WORKSPACE`` to :attr:`workspace` (not for ``workspace select|new|delete``).
    pin_workspace: bool
    #: What ``TF_CLI_CONFIG_FILE`` is set to (a private copy), or None: left as it was.
    cli_config: str | None
    #: Host path -> digest of what must not change (var files, backend settings, ...).
    files: dict[str, str | None] = field(default_factory=dict)
    idents: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    #: The command's environment, and its ``-state`` (a host path), if any.
    base_env: dict[str, str] = field(default_factory=dict)
    state_flag: str | None = None
    #: The state it will act on, read at question time (``state_mark``).
    state: dict = field(default_factory=dict)
    host_path: HostPath = os.path.normpath
    #: The folder as the command names it (absolute, symlinks not resolved).
    named: str = ""
    _recheck: Callable[[], dict[str, str | None]] | None = None

    @property
    def through_link(self) -> bool:
        """True when a symlink made the folder other than the one the command names."""
        return self.workdir != self.named

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` with its leading ``-chdir`` replaced by the resolved folder."""
        rest = list(argv[1:])
        while rest and rest[0].startswith("-chdir="):
            rest.pop(0)
        return [argv[0], f"-chdir={self.workdir}", *rest]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with the workspace, the data folder and the CLI config given."""
        out = dict(env)
        out["TF_DATA_DIR"] = self.data_dir
        if self.pin_workspace:
            out["TF_WORKSPACE"] = self.workspace
        if self.cli_config is not None:
            out["TF_CLI_CONFIG_FILE"] = self.cli_config
        return out

    def host_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """:meth:`env` with host paths: where the guard reads the state."""
        out = self.env(env)
        out["TF_DATA_DIR"] = str(self.host_data_dir)
        return out

    def state_now(self, state_flag: str | None = None) -> dict:
        """The state's mark now (``-state-out``: ``state_flag``)."""
        flag = state_flag or self.state_flag
        return state_mark(self.host_workdir, self.host_env(self.base_env), flag)

    def shown(self) -> str:
        return f"Runs in: {self.workdir} (workspace {self.workspace})."

    def changed(self) -> str | None:
        """Why the run is refused (what changed since the question), or None."""
        now = _scan(self)
        for name, ident in self.idents.items():
            if now["idents"].get(name) != ident:
                return self._refusal(f"the {name} is not the folder the question named")
        for path, digest in self.files.items():
            if now["files"].get(path) != digest:
                return self._refusal(f"{path} changed")
        extra = set(now["files"]) - set(self.files)
        if extra:
            return self._refusal(f"{sorted(extra)[0]} appeared")
        lineage = self.state.get("lineage")
        found = self.state_now().get("lineage")
        if lineage and found != lineage:
            return self._refusal(f"the state's lineage is now {found}, not {lineage}")
        return None

    def _refusal(self, why: str) -> str:
        return (
            f"Refused: {why} while the question waited; {self.program} {self.subcommand} "
            "would not act on what was asked. Nothing was run. Ask again."
        )


def bind(
    program: str,
    chdir: str | None,
    subcommand: str,
    cwd: str,
    env: Mapping[str, str],
    words: list[str],
    *,
    host_path: HostPath = os.path.normpath,
    private_dir: Path | None = None,
    sandbox_private_dir: str | None = None,
    state_flag: str | None = None,
) -> Binding:
    """Read what the command will act on now (``cwd`` and paths as the sandbox sees them;
    ``words``: its arguments, the environment's included, for ``-var-file``)."""
    start = os.path.join(cwd, chdir) if chdir else cwd
    named = os.path.abspath(start)
    workdir = resolve_inside(named, host_path)
    data = env.get("TF_DATA_DIR") or ".terraform"
    data_dir = resolve_inside(os.path.join(workdir, data), host_path)
    workspace_cmd = subcommand == "workspace"
    host_data = host_path(data_dir)
    selected = env.get("TF_WORKSPACE") or _read_environment(host_data) or "default"
    cli_config, config_src = _cli_config(cwd, env, host_path, private_dir, sandbox_private_dir)
    binding = Binding(
        program,
        subcommand,
        workdir,
        Path(host_path(workdir)),
        data_dir,
        Path(host_data),
        selected,
        not workspace_cmd,
        cli_config,
        base_env=dict(env),
        state_flag=state_flag,
        host_path=host_path,
        named=named,
    )
    watched = [os.path.join(host_data, "terraform.tfstate")]  # the backend's settings
    if workspace_cmd:
        watched.append(os.path.join(host_data, "environment"))
    if config_src:
        watched.append(config_src)
    named = flag_values(words, "var-file")

    def scan() -> dict[str, dict]:
        files = {p: _digest(p) for p in watched}
        for name in named:
            inside = name if os.path.isabs(name) else os.path.join(workdir, name)
            files[host_path(inside)] = _digest(host_path(inside))
        for pattern in AUTO_VAR_FILES:
            for path in sorted(Path(host_path(workdir)).glob(pattern)):
                files[str(path)] = _digest(str(path))
        idents = {
            "folder": identity(host_path(workdir), follow_symlinks=True),
            "data folder": identity(host_data, follow_symlinks=True),
        }
        return {"files": files, "idents": idents}

    binding._recheck = scan
    first = scan()
    binding.files, binding.idents = first["files"], first["idents"]
    binding.state = binding.state_now()
    return binding


def _scan(binding: Binding) -> dict[str, dict]:
    assert binding._recheck is not None
    return binding._recheck()


def _read_environment(host_data: str) -> str:
    try:
        with open(os.path.join(host_data, "environment"), encoding="utf-8") as fh:
            return fh.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _cli_config(
    cwd: str,
    env: Mapping[str, str],
    host_path: HostPath,
    private_dir: Path | None,
    sandbox_private_dir: str | None,
) -> tuple[str | None, str | None]:
    """(what ``TF_CLI_CONFIG_FILE`` is set to, the host file it was read from). A
    regular file is copied privately; without a private folder, or for the default
    ``~/.terraformrc``, the source is watched instead."""
    given = env.get("TF_CLI_CONFIG_FILE")
    if given:
        inside = given if os.path.isabs(given) else os.path.join(cwd, given)
    elif env.get("HOME"):
        inside = os.path.join(env["HOME"], ".terraformrc")
    else:
        return None, None
    inside = resolve_inside(inside, host_path)
    source = host_path(inside)
    try:
        regular = stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        regular = False
    if not regular:  # /dev/null, or no such file: watched (it must not appear)
        return (inside if given else None), source
    if private_dir is None or sandbox_private_dir is None:
        return inside, source
    fd, copy = tempfile.mkstemp(prefix="cli-", suffix=".tfrc", dir=private_dir)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out)
    os.chmod(copy, 0o444)
    return os.path.join(sandbox_private_dir, os.path.relpath(copy, private_dir)), None


def lineage_check(before: Mapping, after: dict) -> dict:
    """``{"state_after": after}``, with ``lineage_mismatch`` when the local state found
    after the run is not the one the question named (another lineage, or none)."""
    out: dict = {"state_after": after}
    expected = before.get("lineage")
    if expected and after.get("path") is not None and after.get("lineage") != expected:
        out["lineage_mismatch"] = {"expected": expected, "found": after.get("lineage")}
    return out
