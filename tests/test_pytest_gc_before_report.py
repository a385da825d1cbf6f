"""A failure report never crashes pytest (tests/gc_before_report.py): garbage left by an
earlier test is collected before a report is made, not inside pytest's ``ast`` parse of
the failing source, where CPython 3.11 raises ``AST constructor recursion depth
mismatch`` when a finalizer parses too (an asyncio task whose exception nobody
retrieved logs a traceback from ``Task.__del__``, and 3.11 formats it with ``ast``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Test 1 leaves a finalizer in a reference cycle and turns automatic collection off;
#: test 2 fails; a later hook notes whether the finalizer ran before test 2's report.
CASE = """
import gc, pathlib

class Left:
    def __init__(self):
        self.me = self
    def __del__(self):
        pathlib.Path("finalized").write_text("yes")

def test_leaves_garbage():
    Left()
    gc.disable()

def test_fails():
    assert False
"""
CONFTEST = """
import gc, pathlib, pytest

@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item, call):
    if item.name == "test_fails" and call.when == "call":
        pathlib.Path("seen").write_text(str(pathlib.Path("finalized").exists()))
        gc.enable()
    yield
"""


def run_case(tmp_path: Path, *plugin: str) -> str:
    (tmp_path / "test_case.py").write_text(CASE)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-o", "addopts=", *plugin, "test_case.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return (tmp_path / "seen").read_text()


def test_garbage_is_collected_before_the_report(tmp_path: Path) -> None:
    for name in ("without", "with"):
        (tmp_path / name).mkdir()
    assert run_case(tmp_path / "without") == "False"
    assert run_case(tmp_path / "with", "-p", "gc_before_report") == "True"


CRASH = """
import ast, asyncio, gc

async def boom():
    answer = {"closed": True}["result"]  # a traceback line 3.11 underlines with ast's help

source = "x = [f(a, b) for a in range(3) if g(a)]\\n" * 300
for _ in range(20):
    loop = asyncio.new_event_loop()
    task = loop.create_task(boom())
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    gc.disable()
    task.cycle = task  # garbage only the collector frees, as a failed test's frames
    del task
    gc.enable()
    ast.parse(source)  # as pytest does to show a failure
"""


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the ast counter of CPython 3.11")
def test_the_cause_a_finalizer_that_parses_inside_a_parse(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"  # a file: tracebacks show (and underline) its lines
    script.write_text(CRASH)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert "Task exception was never retrieved" in done.stderr and "KeyError" in done.stderr
    assert "AST constructor recursion depth mismatch" in done.stderr, done.stderr[-2000:]
