"""What a changing terraform/tofu command reads besides its argv, fixed when it is asked.

A question names a folder, a workspace and a state; terraform finds them at run time
through inputs the call can change while the question waits: a symlinked ``-chdir``
folder, ``.terraform/environment``, ``TF_DATA_DIR``, the CLI config and the var files.
:func:`bind` reads them at question time (paths as the sandbox sees them); the command
then runs with them given explicitly (:meth:`Binding.argv`, :meth:`Binding.env`), and
:meth:`Binding.changed`, run right before the exec, refuses a run whose folder, data
folder, backend settings, var files or state lineage changed meanwhile. The state is
marked by its lineage and serial (:func:`state_mark`) before the question and after
the run (:func:`lineage_check`), for the audit record. :meth:`Binding.approval_inputs`
names the same inputs for a team's approval record (``team/approvals.py``), so an
approval given for one plan in one folder, workspace and state is spent on nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.guard.tfcover.held import identity
from iac_kernel.guard.tfcover.writes import HostPath, resolve, selected_workspace, workspace_state
from iac_kernel.terraform.commands import flag_values

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
#: The largest state file read for its lineage and serial.
MAX_STATE_BYTES = 256 * 1024 * 1024


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
    #: Host paths watched (backend settings, the CLI config, ...) and ``-var-file`` names.
    watched: list[str] = field(default_factory=list)
    var_files: list[str] = field(default_factory=list)
    #: Host path -> digest of what must not change (watched files and var files).
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
    #: The CLI config read at question time: the file as the sandbox names it, and its
    #: digest then (``None``: no such file; ``"other"``: not a regular file, /dev/null).
    cli_config_file: dict[str, str | None] = field(default_factory=dict)

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

    def state_now(self, state_flag: str | None = None) -> dict:
        """The state's mark now (``-state-out``: ``state_flag``), read on the host."""
        env = {**self.env(self.base_env), "TF_DATA_DIR": str(self.host_data_dir)}
        return state_mark(self.host_workdir, env, state_flag or self.state_flag)

    def shown(self) -> str:
        return f"Runs in: {self.workdir} (workspace {self.workspace})."

    def approval_inputs(self) -> dict[str, Any]:
        """The inputs an approval record is bound to besides the plan's hash (each of
        ``team.approvals.BINDING_KEYS``), as fixed at question time: the same in every
        process that reviews the same plan in the same place, so a later apply finds the
        record, and different when any of them differs."""
        # Here, not at the top: the team store's modules bring SQLAlchemy and Alembic,
        # which every start of the agent would otherwise import.
        from iac_kernel.team.approvals import BINDING_KEYS

        var_files = {
            path: digest for path, digest in sorted(self.files.items()) if path not in self.watched
        }
        inputs = {
            "folder": str(self.host_workdir),
            "workspace": self.workspace,
            "data_dir": str(self.host_data_dir),
            "cli_config": dict(self.cli_config_file) or None,
            "var_files": var_files,
            "lineage": self.state.get("lineage"),
        }
        return {key: inputs[key] for key in BINDING_KEYS}

    def scan(self) -> tuple[dict[str, str | None], dict[str, tuple[int, int] | None]]:
        """(host path -> digest, name -> identity) of what must not change, now."""
        host = self.host_path
        files = {p: _digest(p) for p in self.watched}
        for name in self.var_files:
            path = host(name if os.path.isabs(name) else os.path.join(self.workdir, name))
            files[path] = _digest(path)
        for pattern in AUTO_VAR_FILES:
            for found in sorted(self.host_workdir.glob(pattern)):
                files[str(found)] = _digest(str(found))
        idents = {
            "folder": identity(str(self.host_workdir), follow_symlinks=True),
            "data folder": identity(str(self.host_data_dir), follow_symlinks=True),
        }
        return files, idents

    def changed(self) -> str | None:
        """Why the run is refused (what changed since the question), or None."""
        files, idents = self.scan()
        for name, ident in self.idents.items():
            if idents.get(name) != ident:
                return self._refusal(f"the {name} is not the folder the question named")
        for path, digest in self.files.items():
            if files.get(path) != digest:
                return self._refusal(f"{path} changed")
        extra = set(files) - set(self.files)
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
    workdir = resolve(named, host_path)
    data = env.get("TF_DATA_DIR") or ".terraform"
    data_dir = resolve(os.path.join(workdir, data), host_path)
    workspace_cmd = subcommand == "workspace"
    host_data = host_path(data_dir)
    selected = selected_workspace(host_data, env)
    cli_config, config_src, config_file = _cli_config(
        cwd, env, host_path, private_dir, sandbox_private_dir
    )
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
        cli_config_file=config_file,
    )
    binding.watched = [os.path.join(host_data, "terraform.tfstate")]  # backend settings
    if workspace_cmd:
        binding.watched.append(os.path.join(host_data, "environment"))
    if config_src:
        binding.watched.append(config_src)
    binding.var_files = flag_values(words, "var-file")
    binding.files, binding.idents = binding.scan()
    binding.state = binding.state_now()
    return binding


def _cli_config(
    cwd: str,
    env: Mapping[str, str],
    host_path: HostPath,
    private_dir: Path | None,
    sandbox_private_dir: str | None,
) -> tuple[str | None, str | None, dict[str, str | None]]:
    """(what ``TF_CLI_CONFIG_FILE`` is set to, the host file it was read from, that
    file's name and digest). A regular file is copied privately; without a private
    folder, or for the default ``~/.terraformrc``, the source is watched instead."""
    given = env.get("TF_CLI_CONFIG_FILE")
    if given:
        inside = given if os.path.isabs(given) else os.path.join(cwd, given)
    elif env.get("HOME"):
        inside = os.path.join(env["HOME"], ".terraformrc")
    else:
        return None, None, {}
    inside = resolve(inside, host_path)
    source = host_path(inside)
    try:
        regular = stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        regular = False
    if not regular:  # /dev/null, or no such file: watched (it must not appear)
        return (inside if given else None), source, {"path": inside, "sha256": _digest(source)}
    if private_dir is None or sandbox_private_dir is None:
        return inside, source, {"path": inside, "sha256": _digest(source)}
    fd, copy = tempfile.mkstemp(prefix="cli-", suffix=".tfrc", dir=private_dir)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out)
    os.chmod(copy, 0o444)
    fixed = {"path": inside, "sha256": _digest(copy)}  # what the command will read
    return os.path.join(sandbox_private_dir, os.path.relpath(copy, private_dir)), None, fixed


def lineage_check(before: Mapping, after: dict) -> dict:
    """``{"state_after": after}``, with ``lineage_mismatch`` when the local state found
    after the run is not the one the question named (another lineage, or none)."""
    out: dict = {"state_after": after}
    expected = before.get("lineage")
    if expected and after.get("path") is not None and after.get("lineage") != expected:
        out["lineage_mismatch"] = {"expected": expected, "found": after.get("lineage")}
    return out


def state_mark(workdir: Path, env: Mapping[str, str], state_flag: str | None = None) -> dict:
    """``{"path", "lineage", "serial", "workspace"}`` of the local state an apply in
    ``workdir`` reads and writes, now (no state yet: lineage and serial None; a remote
    backend's: path None and a note)."""
    data_dir = str(workdir / (env.get("TF_DATA_DIR") or ".terraform"))
    mark: dict[str, Any] = {"workspace": selected_workspace(data_dir, env)}
    found = state_flag or workspace_state(data_dir, env)
    if found is None:
        return {**mark, "path": None, "note": "remote backend: its state was not read"}
    path = workdir / found
    mark["path"] = _shown(path, workdir)
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            return {**mark, "note": "state too large to read"}
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {**mark, "lineage": None, "serial": None}
    except (OSError, ValueError) as exc:
        return {**mark, "note": f"unreadable: {type(exc).__name__}"}
    if not isinstance(doc, dict):
        return {**mark, "note": "not a state file"}
    return {**mark, "lineage": doc.get("lineage"), "serial": doc.get("serial")}


def state_line(mark: Mapping[str, Any]) -> str:
    """The state an apply will read and write, for its question."""
    where = f"workspace {mark.get('workspace') or 'default'}"
    if mark.get("path") is None:
        return f"State: a remote backend's ({where}), not read here."
    if mark.get("note"):
        return f"State: {mark['path']} ({where}; {mark['note']})."
    if mark.get("serial") is None:
        return f"State: {mark['path']} ({where}; no state yet)."
    lineage = str(mark.get("lineage") or "")[:8]
    return f"State: {mark['path']} ({where}; serial {mark['serial']}, lineage {lineage})."


def _shown(path: Path, workdir: Path) -> str:
    try:
        return str(path.relative_to(workdir))
    except ValueError:
        return str(path)
