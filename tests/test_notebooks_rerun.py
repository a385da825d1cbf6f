"""Issue 42: a runbook run again from the top in the kernel that ran it gives the same
result. A real kernel runs every code cell of a runbook twice; each cell's output of the
second run is the first run's (times, token counts, plan hashes and call ids aside), the
scratch copy does not nest, and the change runbook's diff is the real one both times.

The runbook runs in a copy of ``notebooks/`` outside /tmp (a bash call's sandbox has a
private /tmp, so the original sample beside the scratch copy would be invisible there).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from kernel_harness import KernelHarness

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: What notebooks/conftest.py gives every runbook's kernel under nbval.
RUNBOOK_ENV = {"IAC_KERNEL_CHECKOV": "off", "TF_CLI_CONFIG_FILE": "/dev/null"}
#: What differs between any two runs, in a fresh kernel too.
VARYING = [
    (r"\b\d[\d,.]*k? in · \d[\d,.]*k? out · \d+(\.\d+)? s\b", "TOKENS"),
    (r"\(\w+, \d+(\.\d+)? s\)", "(ELAPSED)"),
    (r"sha256 [0-9a-f]{12}", "sha256 HASH"),
    (r"\b\d[\d,]* bytes\b", "SIZE"),
    (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+Z)?( UTC)?", "TIME"),
    (r"toolu_scripted_\d+_\d+", "CALL_ID"),
    (r"plan-review\.\d+", "plan-review.N"),
]


def _copy(runbook: str, into: Path) -> Path:
    """``notebooks/`` without scratch copies or other runbooks, under ``into``."""
    folder = into / "notebooks"
    shutil.copytree(NOTEBOOKS, folder, ignore=shutil.ignore_patterns(".scratch", "*.ipynb"))
    shutil.copy(NOTEBOOKS / runbook, folder / runbook)
    return folder


def _shown(text: str) -> str:
    for pattern, replacement in VARYING:
        text = re.sub(pattern, replacement, text)
    return text


def _run_twice(runbook: str, root: Path, outside_tmp: Path) -> tuple[list[str], list[str]]:
    folder = _copy(runbook, outside_tmp)
    nb = nbformat.read(folder / runbook, as_version=4)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    env: dict[str, str | None] = {"JPY_SESSION_NAME": None, "IAC_KERNEL_PERMISSION_UI": None}
    runs: list[list[str]] = []
    with KernelHarness(root / "jupyter", folder, {**env, **RUNBOOK_ENV}) as kernel:
        for _run in range(2):
            outputs = []
            for source in cells:
                result = kernel.execute(source)
                assert result.status == "ok", (source, result.reply["content"])
                outputs.append(_shown(result.markdown()))
            runs.append(outputs)
    return runs[0], runs[1]


def test_the_change_runbook_run_twice_in_one_kernel(tmp_path: Path, outside_tmp: Path) -> None:
    first, second = _run_twice("03-change-runbook.ipynb", tmp_path, outside_tmp)
    for number, (one, two) in enumerate(zip(first, second, strict=True)):
        assert one == two, f"code cell {number} differs on the second run"
    scratch = outside_tmp / "notebooks" / ".scratch"
    assert sorted(p.name for p in scratch.iterdir()) == ["change-runbook"]
    assert not (scratch / "change-runbook" / ".scratch").exists()  # no nested copy
    diff = first[-1]
    assert '+    cidr_blocks = ["10.8.0.0/16"]' in diff
    assert '+  tags = merge(var.tags, { Name = "${var.name}-admin" })' in diff
    assert "Could not access" not in diff


@pytest.mark.parametrize("runbook", ["07-plan-review-apply.ipynb"])
def test_a_terraform_runbook_run_twice_in_one_kernel(
    tmp_path: Path, outside_tmp: Path, runbook: str
) -> None:
    """The plan-review runbook: the same plan card, state read (its count of values shown
    as (sensitive) included) and refused apply the second time."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed")
    first, second = _run_twice(runbook, tmp_path, outside_tmp)
    for number, (one, two) in enumerate(zip(first, second, strict=True)):
        assert one == two, f"code cell {number} differs on the second run"
    assert any("Plan: 2 to add, 1 to change, 2 to destroy" in out for out in first)
    assert any("sensitive value(s) shown as (sensitive)" in out for out in first)
