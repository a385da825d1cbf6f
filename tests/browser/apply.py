"""A workspace whose ``terraform`` is a fake on PATH: ``show`` prints a synthetic plan that
destroys (so the gate asks for a typed confirmation), ``apply`` prints three lines a second
apart. The scripted model (tests/scripts/browser_reload.json) applies it through bash."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from browser.lab import server_env
from browser.plans import synthetic_show

FAKE_TERRAFORM = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in
    show) exec cat "{root}/show.json" ;;
    apply)
      echo "terraform_data.r[3]: Destroying..."; sleep 1
      echo "terraform_data.r[3]: Destruction complete after 0s"; sleep 1
      echo "Apply complete! Resources: 9 added, 1 changed, 2 destroyed."; exit 0 ;;
  esac
done
echo "fake terraform: $*" >&2
exit 1
"""


def apply_workspace(root: Path) -> None:
    """``root`` with ``tfplan``, ``show.json`` and ``bin/terraform``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "show.json").write_text(json.dumps(synthetic_show(12)))
    with zipfile.ZipFile(root / "tfplan", "w") as plan:  # what the guard takes for a plan
        plan.writestr("tfplan", "a saved plan (the fake terraform prints show.json)")
    terraform = root / "bin" / "terraform"
    terraform.parent.mkdir()
    terraform.write_text(FAKE_TERRAFORM.format(root=root))
    terraform.chmod(0o755)


def apply_env(tmp_path: Path, root: Path, script: Path) -> dict[str, str]:
    """The server's environment: the scripted model and the fake terraform first on PATH."""
    return {
        **server_env(tmp_path, script),
        "PATH": f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "TF_CLI_CONFIG_FILE": "/dev/null",
    }
