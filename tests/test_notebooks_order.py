"""Under a shuffled test order (pytest-randomly, as CI runs), each notebook's cells still
run in their order, one notebook after another (notebooks/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = ["notebooks/01-quickstart.ipynb", "notebooks/03-change-runbook.ipynb"]


@pytest.mark.parametrize("seed", [1, 3])
def test_cells_stay_in_order_under_any_seed(seed: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "randomly",
         f"--randomly-seed={seed}", "-p", "no:cacheprovider", *NOTEBOOKS],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    ids = [line for line in done.stdout.splitlines() if "::Cell " in line]
    assert ids, done.stdout + done.stderr
    notebooks = list(dict.fromkeys(i.split("::")[0] for i in ids))
    assert sorted(notebooks) == NOTEBOOKS
    for notebook in notebooks:
        mine = [int(i.rsplit(" ", 1)[1]) for i in ids if i.startswith(f"{notebook}::")]
        assert mine == list(range(len(mine))), (seed, notebook, mine)
    # Contiguous: one notebook's cells, then the other's.
    assert [i.split("::")[0] for i in ids] == sorted(
        (i.split("::")[0] for i in ids), key=notebooks.index
    )
