"""A plan's ``show -json`` runs once per call (bench/plan_scale.py): the document the
sensitive-value scan just made for a plan file's bytes is what the plan tool reads, and
only for those exact bytes; the guard's output masker scans beside the program's start
and still releases nothing before that scan's values are known."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from iac_kernel.guard.reviews import ExecInfo
from iac_kernel.terraform import cli
from iac_kernel.terraform.cli import show_json, show_json_sync
from iac_kernel.tools import tf_guard
from terraform_support import TERRAFORM, needs_terraform, tf

CONFIG = 'resource "terraform_data" "r" {\n  count = %d\n  input = "v-${count.index}"\n}\n'


def _planned(ws: Path, count: int) -> Path:
    ws.mkdir(exist_ok=True)
    (ws / "main.tf").write_text(CONFIG % count)
    if not (ws / ".terraform").exists():
        tf(ws, "init", "-input=false", "-no-color")
    tf(ws, "plan", "-input=false", "-no-color", "-out=p.tfplan")
    return ws / "p.tfplan"


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv of every program :func:`cli.run` starts (show_json's async path)."""
    started: list[list[str]] = []
    real = cli.run

    async def counting(argv, *args, **kwargs):
        started.append(list(argv))
        return await real(argv, *args, **kwargs)

    monkeypatch.setattr(cli, "run", counting)
    return started


@needs_terraform
async def test_the_scan_s_document_is_read_once_and_only_for_its_bytes(tmp_path, runs):
    assert TERRAFORM is not None
    plan = _planned(tmp_path / "ws", 2)
    scanned = show_json_sync(TERRAFORM, plan, plan.parent)
    assert await show_json(TERRAFORM, plan, plan.parent) is scanned
    assert runs == []  # taken: no second show of the same bytes
    again = await show_json(TERRAFORM, plan, plan.parent)
    assert len(runs) == 1 and again == scanned and again is not scanned  # taken once

    show_json_sync(TERRAFORM, plan, plan.parent)
    _planned(plan.parent, 3)  # the file rewritten: other bytes
    fresh = await show_json(TERRAFORM, plan, plan.parent)
    assert len(runs) == 2
    assert len(fresh["resource_changes"]) == 3  # the new plan, not the scan's old document

    show_json_sync(TERRAFORM, plan, plan.parent)
    await show_json(TERRAFORM, plan, plan.parent, {"TF_LOG_PATH": str(tmp_path / "log")})
    assert len(runs) == 3  # shown another way: shown again


def _masker(tmp_path: Path, argv: list[str]):
    info = ExecInfo("terraform", argv, str(tmp_path), tmp_path, "/guard", {})
    make = tf_guard.output_masker(info)
    assert make is not None
    return make


@pytest.mark.parametrize("argv", [["terraform", "plan"], ["terraform", "output", "-json"]])
def test_the_first_scan_runs_beside_the_start_and_gates_every_release(tmp_path, monkeypatch, argv):
    gate = threading.Event()

    def slow_scan(workdir: Path) -> frozenset[str]:
        gate.wait(10)
        return frozenset({"Scan-Found-Value-5521"})

    monkeypatch.setattr(tf_guard, "sensitive_values", slow_scan)
    started = time.monotonic()
    masker = _masker(tmp_path, argv)()
    assert time.monotonic() - started < 5  # not waiting for the scan

    released: list[str] = []
    feeder = threading.Thread(
        target=lambda: released.extend(
            [masker.feed("a Scan-Found-Value-5521 b\nmore\n"), masker.flush()]
        )
    )
    feeder.start()
    feeder.join(0.3)
    assert feeder.is_alive() and released == []  # held until the scan is known
    gate.set()
    feeder.join(10)
    out = "".join(released)
    assert "Scan-Found-Value-5521" not in out and "(sensitive)" in out and "more" in out


def test_a_failed_first_scan_releases_nothing(tmp_path, monkeypatch):
    def broken(workdir: Path) -> frozenset[str]:
        raise RuntimeError("scan broke")

    monkeypatch.setattr(tf_guard, "sensitive_values", broken)
    masker = _masker(tmp_path, ["terraform", "plan"])()
    with pytest.raises(RuntimeError, match="scan broke"):
        masker.feed("anything\n")
