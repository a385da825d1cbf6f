"""A plan's ``show -json`` runs once per call (bench/plan_scale.py): the document the
sensitive-value scan just made for a plan file's bytes is what the plan tool reads, and
only for those exact bytes; the guard's output masker scans beside the program's start
and still releases nothing before that scan's values are known."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from iac_kernel.guard.approval.output_filter import Relay
from iac_kernel.guard.approval.reviews import ExecInfo
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
def runs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The plan file of every ``show -json`` that really runs."""
    started: list[Path] = []
    real = cli.prepared_show

    def counting(executable, plan_file, *args, **kwargs):
        started.append(plan_file)
        return real(executable, plan_file, *args, **kwargs)

    monkeypatch.setattr(cli, "prepared_show", counting)
    return started


@needs_terraform
async def test_the_scan_s_document_is_read_once_and_only_for_its_bytes(tmp_path, runs):
    assert TERRAFORM is not None
    plan = _planned(tmp_path / "ws", 2)
    scanned = show_json_sync(TERRAFORM, plan, plan.parent, keep=True)
    assert len(runs) == 1
    assert await show_json(TERRAFORM, plan, plan.parent) is scanned
    assert len(runs) == 1  # taken: no second show of the same bytes
    again = await show_json(TERRAFORM, plan, plan.parent)
    assert len(runs) == 2 and again == scanned and again is not scanned  # taken once
    assert show_json_sync(TERRAFORM, plan, plan.parent) is not again  # kept by scans only
    assert len(runs) == 3

    show_json_sync(TERRAFORM, plan, plan.parent, keep=True)
    _planned(plan.parent, 3)  # the file rewritten: other bytes
    fresh = await show_json(TERRAFORM, plan, plan.parent)
    assert len(runs) == 5
    assert len(fresh["resource_changes"]) == 3  # the new plan, not the scan's old document

    show_json_sync(TERRAFORM, plan, plan.parent, keep=True)
    await show_json(TERRAFORM, plan, plan.parent, {"TF_LOG_PATH": str(tmp_path / "log")})
    assert len(runs) == 7  # shown another way: shown again


@needs_terraform
async def test_a_plan_file_is_shown_once_as_soon_as_terraform_wrote_it(tmp_path, runs):
    """Around ``plan -out``, the new file is shown (once) while terraform still renders
    its plan; the tool then takes that document. An older file of the same name is never
    what is shown, and a failed plan shows nothing."""
    assert TERRAFORM is not None
    plan = _planned(tmp_path / "ws", 2)  # an older plan of the same name
    runs.clear()
    (plan.parent / "main.tf").write_text(CONFIG % 3)
    with cli.show_when_written(TERRAFORM, plan, plan.parent):
        tf(plan.parent, "plan", "-input=false", "-out=p.tfplan")
        for _ in range(200):  # the watcher's show (begun as terraform printed the plan)
            if runs:
                break
            await asyncio.sleep(0.05)
    assert runs == [plan]
    doc = await show_json(TERRAFORM, plan, plan.parent)
    assert len(runs) == 1 and len(doc["resource_changes"]) == 3  # taken, and the new one

    (plan.parent / "main.tf").write_text("resource {")  # terraform refuses it
    with cli.show_when_written(TERRAFORM, plan, plan.parent):
        assert tf(plan.parent, "plan", "-input=false", "-out=p.tfplan", check=False).returncode
        await asyncio.sleep(0.3)
    assert len(runs) == 1


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


def test_a_program_is_not_kept_waiting_while_a_scan_runs(tmp_path, monkeypatch):
    """A terraform printing a plan while the scan that shows its new plan file runs
    ends meanwhile (its output is read and held, not left in a full pipe), and nothing
    it printed goes out before the scan's values are known."""
    gate = threading.Event()

    def slow_scan(workdir: Path) -> frozenset[str]:
        gate.wait(60)
        return frozenset({"Scan-Found-Value-5521"})

    monkeypatch.setattr(tf_guard, "sensitive_values", slow_scan)
    read, write = os.pipe()
    relay = Relay({1: write}, _masker(tmp_path, ["terraform", "plan"]))
    os.close(write)
    line = "a Scan-Found-Value-5521 b " + "x" * 100 + "\n"
    program = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.stdout.write({line!r} * 20000)"],
        stdout=relay.child[1],
    )
    relay.start()
    assert program.wait(15) == 0  # 2.5 MB printed while the scan still runs
    os.set_blocking(read, False)
    with pytest.raises(BlockingIOError):
        os.read(read, 1)  # nothing out yet
    gate.set()
    out = b""
    os.set_blocking(read, True)
    while chunk := os.read(read, 1 << 20):
        out += chunk
    os.close(read)
    relay.join(30)
    assert out.count(b"(sensitive)") == 20000 and b"Scan-Found-Value-5521" not in out


def test_a_failed_first_scan_releases_nothing(tmp_path, monkeypatch):
    def broken(workdir: Path) -> frozenset[str]:
        raise RuntimeError("scan broke")

    monkeypatch.setattr(tf_guard, "sensitive_values", broken)
    masker = _masker(tmp_path, ["terraform", "plan"])()
    with pytest.raises(RuntimeError, match="scan broke"):
        released = masker.feed("anything\n")  # held while the scan runs, or raised
        assert released == ""
        masker.flush()
