"""Installs side by side: two environments of the project, and two kernels of one, run
guarded terraform at the same time. Each process has its own launcher folder (written
with its own interpreter in the ``#!`` line), never rewritten by another, removed when
the process exits; an install that goes away breaks nobody else's guarded programs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iac_kernel.guard.sandbox import bwrap as sandbox

TERRAFORM = "/usr/local/bin/terraform"
REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not os.access(TERRAFORM, os.X_OK), reason=f"{TERRAFORM} is not installed"
)

#: One agent process: runs guarded ``terraform version`` through the bash tool each time
#: a go-file of the next phase appears, prints one JSON line per run, exits after the last.
DRIVER = r"""
import asyncio, json, os, sys, time
from pathlib import Path

import iac_kernel
from iac_kernel.config import Settings
from iac_kernel.guard.sandbox import bwrap as sandbox
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.bash import BashTool

cwd, gates = Path(sys.argv[1]), sys.argv[2:]
env = {"PATH": os.environ["PATH"], "TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1"}


async def once() -> dict:
    ctx = ToolContext(cwd=cwd, settings=Settings(), env=env)
    result = await BashTool().run({"command": "terraform version; echo rc=$?"}, ctx)
    return {"out": result.content, "sandbox": result.raw_output.get("sandbox")}


for gate in gates:
    while not os.path.exists(gate):
        time.sleep(0.02)
    line = asyncio.run(once())
    line.update(pid=os.getpid(), package=iac_kernel.__file__, dir=str(sandbox.process_dir()))
    print(json.dumps(line), flush=True)
"""


def make_install(root: Path) -> str:
    """A second environment of the project: its own virtualenv (own interpreter path)
    with its own copy of the package; dependencies come from this environment."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    shutil.copytree(
        REPO / "iac_kernel", root / "pkg" / "iac_kernel",
        ignore=shutil.ignore_patterns("__pycache__", "labextension"),
    )  # fmt: skip
    deps = [p for p in sys.path if p.endswith("site-packages")]
    Path(purelib, "iac-kernel-copy.pth").write_text("\n".join([str(root / "pkg"), *deps]) + "\n")
    return python


def start(python: str, cwd: Path, gates: list[Path], tmp: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TMPDIR"] = str(tmp)  # one state folder for all of them, as for one user
    return subprocess.Popen(
        [python, "-c", DRIVER, str(cwd), *map(str, gates)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
    )  # fmt: skip


def finish(process: subprocess.Popen) -> list[dict]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_two_installs_and_two_kernels_run_guarded_terraform_side_by_side(tmp_path: Path):
    second = make_install(tmp_path / "second")
    ws = tmp_path / "ws"
    ws.mkdir()
    # One state folder for all three (as for one user), with a short path: unix sockets.
    shared_tmp = Path(tempfile.mkdtemp(prefix="iac-installs-", dir="/tmp"))
    try:
        both_installs_run(tmp_path, second, ws, shared_tmp)
    finally:
        shutil.rmtree(shared_tmp, ignore_errors=True)


def both_installs_run(tmp_path: Path, second: str, ws: Path, shared_tmp: Path) -> None:
    gates = [tmp_path / f"phase{n}" for n in (1, 2, 3)]
    # Phase 1: two kernels of this install at once. Phase 2: the other install starts and
    # runs beside their second runs. Phase 3: the other install is gone (exited, its
    # environment deleted); the first install's kernels still run terraform.
    kernels = [start(sys.executable, ws, gates, shared_tmp) for _ in range(2)]
    other = start(second, ws, gates[1:2], shared_tmp)
    gates[0].touch()
    runs = [[json.loads(k.stdout.readline())] for k in kernels]
    gates[1].touch()
    [other_run] = finish(other)
    assert other_run["package"].startswith(str(tmp_path / "second" / "pkg"))
    shutil.rmtree(tmp_path / "second")
    assert not Path(other_run["dir"]).exists(), "the exited process's folder is removed"
    gates[2].touch()
    for k, run in zip(kernels, runs, strict=True):
        run += finish(k)

    for run in [other_run, *(r for k in runs for r in k)]:
        assert "Terraform v" in run["out"] and "rc=0" in run["out"], run
        if sandbox.unusable_reason() is None:
            assert run["sandbox"] == "bwrap", run
    dirs = {r["dir"] for k in runs for r in k}
    assert len(dirs) == 2 and other_run["dir"] not in dirs  # one folder per process
    for folder in dirs:
        assert not Path(folder).exists()
    assert not [p for p in (shared_tmp / f"iac-guard-{os.getuid()}").iterdir()
                if p.name.startswith("proc-")]  # fmt: skip


def test_a_killed_process_folder_is_removed_by_the_next(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(sandbox.tempfile, "tempdir", None)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    root = sandbox.state_dir()
    stale = root / f"proc-{dead.pid}-abc123"
    (stale / "bin-x").mkdir(parents=True)
    alive = root / f"proc-{os.getppid()}-def456"  # a live process's folder stays
    alive.mkdir()
    elsewhere = root / f"proc-{dead.pid}-ghi789"  # a pid of another PID namespace: kept
    elsewhere.mkdir()
    (elsewhere / "pidns").write_text("pid:[1]")
    monkeypatch.setattr(sandbox, "_PROCESS_DIR", None)
    mine = sandbox.process_dir()
    assert mine.parent == root and mine.name.startswith(f"proc-{os.getpid()}-")
    assert not stale.exists() and alive.exists() and elsewhere.exists()
    assert sandbox.process_dir() == mine  # made once per process
    shutil.rmtree(mine)
    assert sandbox.process_dir() != mine and sandbox.process_dir().is_dir()  # made again


#: A guarded program through the bash tool, then a changing one whose question must be
#: asked (answered "no" here): the launcher really ran in the sandbox.
SYMLINK_DRIVER = r"""
import asyncio, os, sys
from pathlib import Path
from iac_kernel.config import Settings
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.bash import BashTool

env = {"PATH": os.environ["PATH"], "TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1"}
asked = []


async def ask_exec(request):
    asked.append(request)
    return False, "no"


async def main():
    ctx = ToolContext(cwd=Path(sys.argv[1]), settings=Settings(), env=env, ask_exec=ask_exec)
    shown = await BashTool().run({"command": "terraform version; echo rc=$?"}, ctx)
    print(shown.content)
    changing = await BashTool().run({"command": "terraform destroy -auto-approve; echo rc=$?"}, ctx)
    print(changing.content)
    print("asked", len(asked))


asyncio.run(main())
"""


def test_a_venv_reached_through_a_symlink_runs_guarded_programs() -> None:
    """``/tmp/link -> /tmp/venv``: the sandbox binds the real folder only, so the
    launchers' ``#!`` line and the helpers must name the interpreter by its real folder
    (this gave exit 127 and no question at all)."""
    root = Path(tempfile.mkdtemp(prefix="iac-real-", dir="/tmp"))
    link = Path(f"{root}-link")
    try:
        make_install(root)
        link.symlink_to(root)
        python = str(link / "venv" / "bin" / "python")
        ws = root / "ws"
        ws.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = subprocess.run(
            [python, "-c", SYMLINK_DRIVER, str(ws)],
            env=env, capture_output=True, text=True, timeout=240, cwd=ws,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        out = done.stdout
        assert "Terraform v" in out and "rc=0" in out, out
        assert "required file not found" not in out and "rc=127" not in out, out
        assert "asked 1" in out, out  # the changing command's question was asked
    finally:
        link.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
