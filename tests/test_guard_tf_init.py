"""Issue 22, point 4: `terraform init` fed "yes" on stdin cannot migrate a local state
over a backend's state (real terraform, real bwrap). Unasked, init runs with
-input=false and says why it stopped; a plain init still runs unasked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from guard_support import Asker
from iac_kernel.agent.permissions import REJECT_ONCE
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from redteam_support import hidden, real_harness

TERRAFORM = shutil.which("terraform")
pytestmark = [
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
    pytest.mark.skipif(TERRAFORM is None, reason="terraform not installed"),
]
ENV = {"TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1"}
TF_ENV = "export TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1; "


def _tf(cwd: Path, *args: str) -> None:
    done = subprocess.run(
        [TERRAFORM, *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def _workspace(root: Path) -> Path:
    """A local state (output "local") and a backend block whose state says "backend"."""
    ws, other = root / "ws", root / "other"
    for folder, value in ((ws, "local"), (other, "backend")):
        folder.mkdir(parents=True)
        (folder / "main.tf").write_text(f'output "x" {{ value = "{value}" }}\n')
        _tf(folder, "init", "-input=false")
        _tf(folder, "apply", "-auto-approve", "-input=false")
    shutil.copy(other / "terraform.tfstate", ws / "backend.tfstate")
    with open(ws / "main.tf", "a") as fh:
        fh.write('terraform {\n  backend "local" { path = "backend.tfstate" }\n}\n')
    return ws


def _backend_value(ws: Path) -> str:
    return json.loads((ws / "backend.tfstate").read_text())["outputs"]["x"]["value"]


@pytest.mark.parametrize(
    "command", ["printf 'yes\\nyes\\n' | terraform init", "yes | terraform init -no-color"]
)
async def test_stdin_cannot_answer_a_state_migration(tmp_path: Path, command: str):
    ws = _workspace(tmp_path)
    harness = real_harness(tmp_path / "h")
    ask = Asker(exec_answer=REJECT_ONCE)
    result = await harness.run(TF_ENV + hidden(command), ask, cwd=ws, timeout=120)
    assert _backend_value(ws) == "backend", result and result.content[-600:]
    assert result is not None and "ran with -input=false" in result.content
    assert not ask.exec_questions()


async def test_migrating_is_asked(tmp_path: Path):
    ws = _workspace(tmp_path)
    harness = real_harness(tmp_path / "h")
    ask = Asker(exec_answer=REJECT_ONCE)
    command = "yes | terraform init -migrate-state"
    await harness.run(TF_ENV + hidden(command), ask, cwd=ws, timeout=120)
    assert len(ask.exec_questions()) == 1 and _backend_value(ws) == "backend"


async def test_a_plain_init_runs_unasked(tmp_path: Path):
    ws = tmp_path / "plain"
    ws.mkdir()
    (ws / "main.tf").write_text('output "x" { value = 1 }\n')
    harness = real_harness(tmp_path / "h")
    ask = Asker(exec_answer=REJECT_ONCE)
    result = await harness.run(TF_ENV + "terraform init -no-color", ask, cwd=ws, timeout=120)
    assert result is not None and "initialized" in result.content, result and result.content
    assert not ask.requests
