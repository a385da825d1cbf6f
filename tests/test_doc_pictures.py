"""The pictures in docs/img have a command of their own (docs/img/make.py), and the test
run draws none of them: every picture there is named by the command, which selects the
existing tests that draw it, and those tests write into the checkout only when asked."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from browser.pictures import DOC_PICTURES_ENV, doc_picture

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "img"


def _make() -> object:
    spec = importlib.util.spec_from_file_location("docs_img_make", IMAGES / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_picture_in_docs_img_has_its_maker_and_a_reader() -> None:
    make = _make()
    pictures = {path.name for path in IMAGES.glob("*.png")}
    assert pictures == set(make.PICTURES)
    docs = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    text = "\n".join(path.read_text() for path in docs)
    for name in pictures:
        assert f"img/{name})" in text, f"{name} is shown by no page"


def test_the_command_selects_the_tests_that_draw_the_pictures() -> None:
    make = _make()
    command = make.pytest_command(["--collect-only", "-p", "no:cacheprovider"])
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = {line.strip() for line in done.stdout.splitlines()}
    assert set(make.PICTURES.values()) <= collected, done.stdout[-2000:]


def test_pictures_are_drawn_only_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv(DOC_PICTURES_ENV, raising=False)
    assert doc_picture("lab-permission.png") is None
    monkeypatch.setenv(DOC_PICTURES_ENV, str(tmp_path))
    assert doc_picture("lab-permission.png") == tmp_path / "lab-permission.png"
