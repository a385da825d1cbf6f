"""guard/held.py: files made ready to be covered before terraform runs, and put back.
A missing file is made (with its folders when terraform would make them) and removed
afterwards unless terraform wrote it; an existing one is shown as it was; nothing is
made or read through a symlink planted on the way, nor in a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

from iac_kernel.guard.tfcover.held import folders_between, prepare, put_back


def test_a_missing_file_is_made_and_removed_when_terraform_did_not_write_it(tmp_path: Path):
    root, copies = tmp_path / "root", tmp_path / "copies"
    root.mkdir()
    host = root / "a" / "b" / "s.json"
    held = prepare(str(host), str(host), str(root), b"{}", True, copies)
    assert not isinstance(held, str)
    assert host.read_bytes() == b"{}" and held.made is not None
    assert Path(held.placeholder).read_bytes() == b"{}"
    assert held.folders == [str(root / "a"), str(root / "a" / "b")]
    put_back([held])
    assert list(root.iterdir()) == []  # the file and its folders are gone


def test_a_file_terraform_wrote_stays(tmp_path: Path):
    root = tmp_path
    host = root / "terraform.tfstate"
    held = prepare(str(host), str(host), str(root), b"", False, tmp_path / "copies")
    assert not isinstance(held, str)
    with host.open("r+") as fh:  # in place, as terraform writes
        fh.write('{"serial": 1}')
    put_back([held])
    assert host.read_text() == '{"serial": 1}'


def test_an_existing_file_is_shown_as_it_was_and_kept(tmp_path: Path):
    host = tmp_path / "terraform.tfstate"
    host.write_text("old state\n")
    held = prepare(str(host), str(host), str(tmp_path), b"", False, tmp_path / "copies")
    assert not isinstance(held, str)
    assert held.made is None and Path(held.placeholder).read_text() == "old state\n"
    put_back([held])
    assert host.read_text() == "old state\n"


def test_what_cannot_be_held(tmp_path: Path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("not for the shell\n")
    os.symlink(outside, root / "sub")  # planted after terraform's path was resolved
    copies = tmp_path / "copies"
    for name, make in (("sub/new", True), ("sub/secret", False)):
        host = str(root / name)
        assert isinstance(prepare(host, host, str(root), b"", make, copies), str)
    assert sorted(os.listdir(outside)) == ["secret"]  # nothing made there
    assert not copies.exists() or all(
        p.read_text() != "not for the shell\n" for p in copies.iterdir()
    )
    os.mkfifo(root / "fifo")
    problem = prepare(str(root / "fifo"), str(root / "fifo"), str(root), b"", False, copies)
    assert problem == "not a regular file"
    missing = str(root / "missing" / "p")
    problem = prepare(missing, missing, str(root), b"", False, copies)
    assert problem == "its folder does not exist"
    assert not (root / "missing").exists()


def test_folders_between():
    assert folders_between("/r/a/b/f", ["/x", "/r"]) == ["/r/a", "/r/a/b"]
    assert folders_between("/r/f", ["/r"]) == []
    assert folders_between("/elsewhere/f", ["/r"]) == []
