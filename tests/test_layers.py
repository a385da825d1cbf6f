"""The house's walls are a contract the test command checks: pyproject's [tool.importlinter]."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_contracts_are_kept() -> None:
    run = lint_imports()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_a_broken_contract_fails(tmp_path: Path) -> None:
    """The check can fail: a lower layer importing a front breaks the layers contract."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "iac_kernel"\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "masking never imports the kernel"\ntype = "forbidden"\n'
        'source_modules = ["iac_kernel.kernel"]\nforbidden_modules = ["iac_kernel.masking"]\n'
    )
    run = lint_imports("--config", str(config))
    if run.returncode == 0:
        pytest.fail(
            "the kernel imports masking (through redact); a forbidden contract on it must break"
        )
    assert "BROKEN" in run.stdout
