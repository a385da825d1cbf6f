"""The sandbox keeps the guard's own code visible when the checkout lies under /tmp.

Every sandbox mounts a private /tmp; a checkout (or venv) under /tmp would vanish inside
it, and the guard's helpers (exec_helper.py, run by path) with it. CI may clone anywhere.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import iac_kernel
from iac_kernel.guard.sandbox.bwrap import bwrap_path, unusable_reason

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

PROBE = """
import sys
import tempfile
from pathlib import Path
from iac_kernel.guard.sandbox.bwrap import Layout
ws, tmp, guard, launchers = (Path(p) for p in sys.argv[1:5])
layout = Layout(cwd=ws, tmp_dir=tmp, guard_dir=guard, launcher_dir=launchers)
import iac_kernel.guard.sandbox.exec_helper as helper
tool = Path.cwd() / "notebooks" / "tools" / "probe.py"  # beside the package, as runbooks
args = layout.bwrap_args(sys.argv[5]) + ["sh", "-c", 'test -r "$0" && test -r "$1"']
args += [helper.__file__, str(tool)]
raise SystemExit(__import__("subprocess").run(args).returncode)
"""


@pytest.fixture
def under_tmp() -> Path:
    """A folder under /tmp itself, whatever TMPDIR says."""
    path = Path(tempfile.mkdtemp(prefix="iac-checkout-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_checkout_under_tmp_stays_visible_in_the_sandbox(under_tmp):
    tmp_path = under_tmp
    checkout = tmp_path / "checkout"
    shutil.copytree(
        Path(iac_kernel.__file__).parent,
        checkout / "iac_kernel",
        ignore=shutil.ignore_patterns("__pycache__", "labextension"),
    )
    (checkout / "notebooks" / "tools").mkdir(parents=True)
    (checkout / "notebooks" / "tools" / "probe.py").write_text("print('runbook tool')\n")
    dirs = [tmp_path / name for name in ("ws", "privtmp", "guard", "launchers")]
    for path in dirs:
        path.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, dirs), bwrap_path()],
        cwd=checkout,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
