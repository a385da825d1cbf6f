"""The JupyterLab extension's own unit tests (diff, payload parsing, live activity),
compiled with its TypeScript and run under node's test runner.

They need labextension/node_modules, which `pip install -e .` (the build hook) creates.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LABEXTENSION = Path(__file__).resolve().parents[1] / "labextension"

pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None or not (LABEXTENSION / "node_modules" / "typescript").is_dir(),
    reason="needs npm and labextension/node_modules (run `pip install -e .` or `npm install`)",
)


def test_extension_unit_tests_pass() -> None:
    result = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=LABEXTENSION,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    # node --test prints "# pass N" / "# fail N": make sure tests really ran.
    passed = [line for line in report.splitlines() if line.startswith("# pass ")]
    assert passed, report
    assert int(passed[-1].split()[-1]) >= 20, report
    assert "# fail 0" in report, report
