"""Shared by the tests of files terraform writes during a call (issue 32 item 1): a
workspace with a sensitive variable (real terraform, terraform_data: offline) and a bash
call in the real sandbox, every question answered yes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.agent.permissions import ALLOW_ONCE
from iac_kernel.tools import tf_guard
from terraform_support import tf

VALUE = "Wx7-Hidden&Token<42>"
PLAIN = "Plain-Seen-5678"
HTTP_SECRET = "HttpPass-9f8e7d-abc"
MAIN = f"""
variable "tok" {{
  type      = string
  sensitive = true
}}
variable "on" {{
  type    = bool
  default = true
}}
variable "plain" {{
  type    = string
  default = "{PLAIN}"
}}
resource "terraform_data" "p" {{
  input = var.plain
}}
resource "terraform_data" "r" {{
  count = var.on ? 1 : 0
  input = var.tok
}}
output "plain" {{ value = var.plain }}
"""
ENV = "export TF_CLI_CONFIG_FILE=/dev/null TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1; "
APPLY = "terraform apply -auto-approve -input=false -no-color"


def leaked(text: str) -> list[str]:
    """Which spellings of the secrets ``text`` holds (raw, reversed, Go-escaped)."""
    go = VALUE.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    forms = [VALUE, go, "Wx7-Hidden", HTTP_SECRET]
    return [f for f in forms if f in text or f[::-1] in text]


def new_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised workspace whose ``tok`` is :data:`VALUE` (sensitive)."""
    root = tmp_path_factory.mktemp("tfwrites") / "ws"
    root.mkdir()
    (root / "main.tf").write_text(MAIN)
    (root / "secret.auto.tfvars").write_text(f'tok = "{VALUE}"\n')
    tf(root, "init", "-input=false")
    return root


def copy_work(base: Path, tmp_path: Path) -> Path:
    """A test's own copy of ``base``."""
    tf_guard.register()  # as building the tools does
    dest = tmp_path / "ws"
    shutil.copytree(base, dest, symlinks=True)
    return dest


async def run(work: Path, command: str) -> str:
    """The tool result of a bash call running ``command`` in ``work``."""
    fakes = work.parent / "fakes"
    if not fakes.exists():
        fakes.mkdir()
        bin_dir, _ = make_fakes(fakes)
        (bin_dir / "terraform").unlink()  # the real ones
        (bin_dir / "git").unlink()
    bin_dir, log = fakes / "fakebin", fakes / "fakelog" / "calls"
    harness = Harness(work, bin_dir, log, mode="bypass")
    result = await harness.run(
        ENV + command, Asker(exec_answer=ALLOW_ONCE, danger_answer=ALLOW_ONCE)
    )
    assert result is not None
    return result.content
