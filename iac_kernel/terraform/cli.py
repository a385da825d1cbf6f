"""Finding and running ``terraform`` / ``tofu`` (the same code path for both), and
``show -json PLANFILE`` of a workspace plan, never running workspace code.

``show`` of a plan starts the provider plugins the plan's configuration needs, from
``./.terraform/providers`` (or ``TF_DATA_DIR``), which a sandboxed bash call can write.
So the agent's own ``show`` (apply review, plan pick-up, plan tool, sensitive-value scan)
must not run on the host as is. :func:`prepared_show` copies the plan's bytes into a
private directory and gives the command that shows the copy:

* with bubblewrap: inside the sandbox (:func:`iac_kernel.guard.confine.confine`): the
  whole filesystem read-only, the working directory included, a private /tmp, guard
  launchers with no approval channel over every guarded program;
* without (reduced mode): on the host with ``TF_DATA_DIR``, ``TF_PLUGIN_CACHE_DIR`` and
  ``HOME`` pointing at empty private directories and a ``TF_CLI_CONFIG_FILE`` with no
  plugin sources, run from the private directory: ``show`` then fails for a plan that
  needs a provider plugin instead of starting one. Plans of built-in resources
  (``terraform_data``) need none and show either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.guard.confine import confine
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, state_dir
from iac_kernel.guard.sandbox.processes import signal_group

PROGRAMS = ("terraform", "tofu")
#: Seconds terraform gets to release its state lock after SIGINT before it is killed.
INTERRUPT_GRACE = 10.0
UNSANDBOXED_SHOW = (
    " (bubblewrap is unusable here, so plans are shown with no provider plugins: the "
    "workspace's plugins never run outside a sandbox; only plans of built-in resources "
    "can be shown)"
)
#: Seconds a ``show -json`` of a plan file may take.
SHOW_TIMEOUT = 120.0

PLAN_NAME = "plan.tfplan"
#: Variables that make terraform run or reach plugins, or change its arguments.
DROPPED = ("TF_REATTACH_PROVIDERS", "TF_CLI_ARGS")
NO_PLUGINS_CONFIG = """\
disable_checkpoint = true
plugin_cache_dir   = "{empty}"
provider_installation {{
  filesystem_mirror {{
    path    = "{empty}"
    include = ["example.invalid/none/none"]
  }}
}}
"""


#: The ``show -json`` a scan keeps, being made or made, by how and what it shows (program,
#: folder, environment, the sha256 of the plan's bytes). A running ``plan -out`` has its
#: new plan file shown as soon as terraform has written it (:func:`show_when_written`, and
#: the guard's output masker scans it); the tool that ran it then reads the same bytes
#: from here, waiting while the document is made, instead of showing them again. One
#: slot; a show that does not keep takes it.
_SHOWN: tuple[tuple[str, str, int, str], Future[dict[str, Any]]] | None = None
_SHOWN_LOCK = threading.Lock()
#: How often :func:`show_when_written` looks for the plan file.
WATCH_SECONDS = 0.05


class TerraformError(Exception):
    """terraform could not be run, or its output could not be read."""


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()


def find_program(program: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The executable for ``program`` (``terraform`` or ``tofu``); without one, the first
    of them on PATH. Raises :class:`TerraformError` when none is installed."""
    path = (env or os.environ).get("PATH")
    names = [program] if program else list(PROGRAMS)
    for name in names:
        if name not in PROGRAMS:
            raise TerraformError(f"unknown program {name!r}: use terraform or tofu")
        found = shutil.which(name, path=path)
        if found:
            return found
    raise TerraformError(f"{' or '.join(names)} is not installed (not found on PATH)")


def program_name(executable: str) -> str:
    """``terraform`` or ``tofu`` for an executable path."""
    name = os.path.basename(executable)
    return "tofu" if name.startswith("tofu") else "terraform"


def automation_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment terraform runs with: no prompts, no colour, no update checks."""
    env = {**os.environ, **(extra or {})}
    config = env.get("TF_CLI_CONFIG_FILE")
    if config and not os.path.exists(config):  # else every command warns about it
        env["TF_CLI_CONFIG_FILE"] = os.devnull
    env.setdefault("TF_IN_AUTOMATION", "1")
    env["TF_INPUT"] = "0"
    env.setdefault("CHECKPOINT_DISABLE", "1")
    return env


async def run(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    seconds: float = 600.0,
    pass_fds: tuple[int, ...] = (),
    exact_env: bool = False,
) -> Completed:
    """Run ``argv`` in its own process group; on cancel or timeout terraform gets SIGINT
    (so it releases a state lock), then SIGKILL. ``env`` is used as is with ``exact_env``,
    else on top of :func:`automation_env`."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env or {}) if exact_env else automation_env(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise TerraformError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        async with asyncio.timeout(seconds):
            out, err = await proc.communicate()
    except (asyncio.CancelledError, TimeoutError) as exc:
        await _interrupt(proc, os.path.basename(argv[0]) == "bwrap")
        if isinstance(exc, TimeoutError):
            raise TerraformError(f"{_label(argv)} timed out after {seconds:g}s") from None
        raise
    return Completed(
        list(argv),
        proc.returncode if proc.returncode is not None else -1,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def _label(argv: list[str]) -> str:
    """The program and subcommand of ``argv``, also behind ``bwrap ... -- python -IS
    exec_helper.py FD SCRIPT`` (:mod:`iac_kernel.guard.confine`)."""
    tail = argv[argv.index("--") + 1 :] if argv and "--" in argv else argv
    if len(tail) > 5 and tail[2].endswith("exec_helper.py"):
        tail = tail[5:]
    return " ".join(tail[:2])


async def _interrupt(proc: asyncio.subprocess.Process, sandboxed: bool) -> None:
    """SIGINT (to terraform, not to a sandbox's bwrap: it would kill terraform), then
    SIGKILL to the whole group."""
    for sig, wait in ((signal.SIGINT, INTERRUPT_GRACE), (signal.SIGKILL, 5.0)):
        if proc.returncode is not None:
            return
        signal_group(proc.pid, sig, sandboxed and sig != signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await proc.wait()


async def show_json(
    executable: str, plan_file: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """:func:`show_json_sync` from a coroutine (in a thread)."""
    return await asyncio.to_thread(show_json_sync, executable, plan_file, cwd, env)


def show_json_sync(
    executable: str,
    plan_file: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    """``terraform show -json PLANFILE`` as a dict, run so that no workspace code runs
    outside the sandbox (:func:`prepared_show`). The document a scan kept (``keep``) for
    the same bytes shown the same way is taken instead (:data:`_SHOWN`)."""
    global _SHOWN
    full_env = automation_env(env)
    try:
        with plan_file.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise TerraformError(f"cannot read {plan_file}: {exc.strerror or exc}") from None
    key = (executable, os.path.realpath(cwd), hash(frozenset(full_env.items())), digest)
    mine: Future[dict[str, Any]] = Future()
    with _SHOWN_LOCK:
        kept = _SHOWN[1] if _SHOWN is not None and _SHOWN[0] == key else None
        if kept is not None and not keep:
            _SHOWN = None
        elif kept is None and keep:
            _SHOWN = (key, mine)
    if kept is not None:
        return kept.result()
    try:
        doc, shown = _show(executable, plan_file, cwd, full_env)
    except BaseException as exc:
        mine.set_exception(exc)  # for those waiting on it
        _forget(mine)
        raise
    mine.set_result(doc)
    if shown != digest:  # the file changed meanwhile: those bytes are not the key's
        _forget(mine)
    return doc


def _forget(shown: Future[dict[str, Any]]) -> None:
    global _SHOWN
    with _SHOWN_LOCK:
        if _SHOWN is not None and _SHOWN[1] is shown:
            _SHOWN = None


def _show(
    executable: str, plan_file: Path, cwd: Path, env: dict[str, str]
) -> tuple[dict[str, Any], str]:
    """The document, and the sha256 of the bytes shown."""
    name = program_name(executable)
    try:
        with prepared_show(executable, plan_file, cwd, env) as show:
            done = subprocess.run(
                show.argv,
                cwd=str(show.cwd),
                env=show.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=SHOW_TIMEOUT,
                check=False,
                pass_fds=show.pass_fds,
            )
    except subprocess.TimeoutExpired:
        raise TerraformError(f"{name} show timed out") from None
    except OSError as exc:
        raise TerraformError(f"cannot run {executable}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        why = "" if show.sandboxed else UNSANDBOXED_SHOW
        output = (done.stdout + "\n" + done.stderr).strip()
        raise TerraformError(f"{name} show failed: {first_error(output)}{why}")
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise TerraformError(f"{name} show printed no JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TerraformError(f"{name} show printed unexpected JSON")
    return data, show.sha256


@contextlib.contextmanager
def show_when_written(executable: str, plan_file: Path, cwd: Path) -> Iterator[None]:
    """Around a ``plan -out=plan_file``: its plan file shown (and kept) as soon as
    terraform has written it whole, while terraform still renders and prints the plan
    (seconds at 10,000 resources), instead of after it returned."""
    before = _identity(plan_file)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(WATCH_SECONDS):
            if _identity(plan_file) not in (None, before) and is_plan_file(plan_file):
                with contextlib.suppress(TerraformError):
                    show_json_sync(executable, plan_file, cwd, keep=True)
                return

    threading.Thread(target=watch, name="show-when-written", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def is_plan_file(path: Path) -> bool:
    """True for a Terraform / OpenTofu saved plan, written whole (a zip with a
    ``tfplan`` member: its central directory comes last)."""
    try:
        with path.open("rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            return "tfplan" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def errors_of(output: str) -> list[str]:
    """The ``Error: ...`` diagnostics of terraform's text output, one string each."""
    errors: list[str] = []
    current: list[str] | None = None
    for raw in output.splitlines():
        line = raw.strip().lstrip("│╷╵").strip()
        if line.startswith("Error: "):
            if current:
                errors.append(" ".join(current))
            current = [line[len("Error: ") :]]
        elif current is not None:
            if not line:
                if len(current) > 1:
                    errors.append(" ".join(current))
                    current = None
                continue
            if len(current) < 6 and not line.startswith("on "):
                current.append(line)
    if current:
        errors.append(" ".join(current))
    return errors


def first_error(output: str) -> str:
    errors = errors_of(output)
    if errors:
        return errors[0]
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


@dataclass
class PreparedShow:
    """Run ``argv`` in ``cwd`` with ``env``, passing ``pass_fds``."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    #: False in reduced mode (no sandbox; plugin discovery disabled instead).
    sandboxed: bool
    #: The sha256 of the bytes shown (the private copy's).
    sha256: str = ""


def _clean(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(DROPPED)}


@contextlib.contextmanager
def prepared_show(
    executable: str, plan_file: Path, workdir: Path, env: Mapping[str, str]
) -> Iterator[PreparedShow]:
    """The command showing a private copy of ``plan_file`` as JSON (module docstring)."""
    private = Path(tempfile.mkdtemp(prefix="show-", dir=state_dir()))
    try:
        os.chmod(private, 0o755)  # the sandbox reads it through a read-only bind
        copy = private / PLAN_NAME
        shutil.copyfile(plan_file, copy)
        os.chmod(copy, 0o444)
        with copy.open("rb") as fh:
            sha = hashlib.file_digest(fh, "sha256").hexdigest()
        args = ["show", "-json", "-no-color"]
        inside = f"{GUARD_MOUNT}/{PLAN_NAME}"
        confined = confine(executable, [*args, inside], workdir, _clean(env), share=private)
        if confined is not None:
            try:
                yield PreparedShow(
                    confined.argv, workdir, confined.env, confined.pass_fds, True, sha
                )
            finally:
                confined.close()
            return
        yield PreparedShow(
            [executable, *args, str(copy)], private, _no_plugins_env(env, private), (), False, sha
        )
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _no_plugins_env(env: Mapping[str, str], private: Path) -> dict[str, str]:
    """The reduced-mode environment: nowhere to find a provider plugin."""
    empty = private / "empty"
    for name in ("empty", "data", "home"):
        (private / name).mkdir(mode=0o700)
    config = private / "cli.tfrc"
    config.write_text(NO_PLUGINS_CONFIG.format(empty=empty))
    clean = _clean(env)
    clean.update(
        TF_DATA_DIR=str(private / "data"),
        TF_PLUGIN_CACHE_DIR=str(empty),
        TF_CLI_CONFIG_FILE=str(config),
        HOME=str(private / "home"),
    )
    return clean
