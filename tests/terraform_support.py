"""Real-terraform workspaces for the plan-first tests (terraform_data: fully offline).

``tests/terraform/`` holds the configuration: stage 1 is applied once per test module
(:func:`applied_workspace`, or the module-scoped ``applied`` fixture), and each test
works on its own copy (:func:`copy_workspace`, :func:`stage2_copy`).
``terraform.tfvars`` plants :data:`SECRET` as a sensitive variable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

TEMPLATE = Path(__file__).with_name("terraform")
SECRET = "PlantedSecret-7f3a9c"
TERRAFORM = shutil.which("terraform")

needs_terraform = pytest.mark.skipif(TERRAFORM is None, reason="terraform is not installed")


@pytest.fixture(autouse=True)
def no_checkov_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """checkov takes ~20 s a run: only tests/test_terraform_policy.py turns it on."""
    monkeypatch.setenv("IAC_KERNEL_CHECKOV", "off")


def tf_env() -> dict[str, str]:
    env = {**os.environ, "TF_CLI_CONFIG_FILE": "/dev/null", "TF_IN_AUTOMATION": "1"}
    env["CHECKPOINT_DISABLE"] = "1"
    return env


def tf(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [TERRAFORM or "terraform", *args, "-no-color"]
        if args and args[0] not in ("init",)
        else [TERRAFORM or "terraform", *args],
        cwd=workdir,
        env=tf_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"terraform {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def applied_workspace(root: Path) -> Path:
    """A copy of the template, initialised, with stage 1 applied."""
    workdir = root / "ws"
    shutil.copytree(TEMPLATE, workdir)
    tf(workdir, "init", "-input=false", "-no-color")
    tf(workdir, "apply", "-auto-approve", "-input=false")
    return workdir


def applied_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """For a module-scoped fixture: stage 1 applied once per test module (tests copy it)."""
    os.environ["TF_CLI_CONFIG_FILE"] = "/dev/null"
    return applied_workspace(tmp_path_factory.mktemp("tf"))


def copy_workspace(applied: Path, dest: Path) -> Path:
    shutil.copytree(applied, dest, symlinks=True)
    return dest


def to_stage(workdir: Path, stage: int) -> None:
    """Point the configuration at ``stage`` (through an auto-loaded tfvars file)."""
    (workdir / "stage.auto.tfvars").write_text(f"stage = {stage}\n")


@pytest.fixture(scope="module", name="applied")
def applied_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``applied``: stage 1 applied once per test module (import this; tests copy it)."""
    return applied_once(tmp_path_factory)


#: The resources of each stage once applied.
STAGE1 = {
    "terraform_data.app",
    "terraform_data.cache",
    "terraform_data.db",
    "terraform_data.old[0]",
}
STAGE2 = {
    "terraform_data.app",
    "terraform_data.cache",
    "terraform_data.db",
    "terraform_data.new[0]",
}


def stage2_copy(
    applied: Path, dest: Path, *, plan: str | None = None, destroy_plan: str | None = None
) -> Path:
    """A copy of ``applied`` pointed at stage 2; ``plan`` / ``destroy_plan`` name plan
    files to write in it (a stage 2 plan, a destroy plan of the same state)."""
    workdir = copy_workspace(applied, dest)
    to_stage(workdir, 2)
    if plan:
        tf(workdir, "plan", "-input=false", f"-out={plan}")
    if destroy_plan:
        tf(workdir, "plan", "-input=false", "-destroy", f"-out={destroy_plan}")
    return workdir


def state(workdir: Path) -> dict[str, Any]:
    return json.loads((workdir / "terraform.tfstate").read_text())


def addresses(workdir: Path) -> set[str]:
    """Resource instance addresses in the state."""
    out = set()
    for resource in state(workdir)["resources"]:
        for instance in resource["instances"]:
            key = instance.get("index_key")
            suffix = f"[{key}]" if isinstance(key, int) else ""
            out.add(f"{resource['type']}.{resource['name']}{suffix}")
    return out


def evil_plan_workspace(ws: Path, plugin_script: str) -> None:
    """What a sandboxed bash call can write in its cwd: a "provider" that is the shell
    script ``plugin_script`` (installed with ``init -plugin-dir``), ``good.tfplan`` (a real
    plan of a builtin resource) and ``evil.tfplan`` (that plan with the config and lock
    file that require the "provider" swapped in)."""
    main = 'resource "terraform_data" "a" {\n  input = "x"\n}\n'
    requires = (
        'terraform {\n  required_providers {\n    x = { source = "example.com/evil/x",'
        ' version = "1.0.0" }\n  }\n}\n'
    )
    ws.mkdir(parents=True)
    (ws / "main.tf").write_text(main)
    tf(ws, "plan", "-input=false", "-out=good.tfplan")
    plugin_dir = ws / "mirror" / "example.com" / "evil" / "x" / "1.0.0" / "linux_amd64"
    plugin_dir.mkdir(parents=True)
    plugin = plugin_dir / "terraform-provider-x_v1.0.0"
    plugin.write_text(plugin_script)
    plugin.chmod(0o755)
    (ws / "main.tf").write_text(main + requires)
    tf(ws, "init", "-input=false", "-plugin-dir=./mirror")
    with (
        zipfile.ZipFile(ws / "good.tfplan") as src,
        zipfile.ZipFile(ws / "evil.tfplan", "w") as dst,
    ):
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("main.tf"):
                data = (ws / "main.tf").read_bytes()
            elif item.filename == ".terraform.lock.hcl":
                data = (ws / ".terraform.lock.hcl").read_bytes()
            dst.writestr(item, data)
