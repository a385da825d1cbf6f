"""guard/tfcover/writes.py: the files a guarded terraform/tofu run may write, known before
it starts (the selected workspace's state and backups, ``-state``/``-state-out``/
``-backup``/``-out``, ``errored.tfstate``, the backend cache for ``init``), from the
command line, ``TF_CLI_ARGS*``, ``TF_WORKSPACE``, ``TF_DATA_DIR`` and the data folder.
Controls: read-only commands write nothing, a remote backend has no local state."""

from __future__ import annotations

import json
import os
from pathlib import Path

from iac_kernel.guard.tfcover.writes import NO_BACKEND, STAMP_SECONDS, targets


def same(path: str) -> str:
    return path


def paths(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    found = targets(["terraform", *argv], str(cwd), env or {}, same)
    return {os.path.relpath(t.path, cwd) for t in found}


def test_apply_writes_the_default_state_its_backup_and_errored(tmp_path: Path):
    expected = {"terraform.tfstate", "terraform.tfstate.backup", "errored.tfstate"}
    assert paths(["apply", "-auto-approve"], tmp_path) == expected
    assert paths(["state", "list"], tmp_path) == expected


def test_a_state_commands_backup_named_with_the_time(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("time.time", lambda: 1000.5)
    stamped = {f"terraform.tfstate.{t}.backup" for t in range(1000, 1000 + STAMP_SECONDS)}
    found = paths(["state", "rm", "x.y"], tmp_path)
    assert stamped <= found and "terraform.tfstate" in found
    assert stamped <= paths(["state", "mv", "-backup=-", "a", "b"], tmp_path)
    assert not stamped & paths(["state", "rm", "-backup=b", "x"], tmp_path)
    assert not stamped & paths(["state", "list"], tmp_path)
    found = paths(["state", "push", "-state=s.json", "f"], tmp_path)
    assert "s.json.1000.backup" in found


def test_read_only_commands_write_nothing(tmp_path: Path):
    for argv in (["plan"], ["show"], ["output", "-json"], ["validate"], ["console"]):
        assert paths(argv, tmp_path) == set(), argv


def test_plan_out_and_tf_cli_args(tmp_path: Path):
    assert paths(["plan", "-out=p"], tmp_path) == {"p"}
    assert paths(["plan", "-out", "q"], tmp_path) == {"q"}
    assert paths(["plan"], tmp_path, {"TF_CLI_ARGS_plan": "-out=r"}) == {"r"}
    assert paths(["plan"], tmp_path, {"TF_CLI_ARGS": "-out='s t'"}) == {"s t"}


def test_state_out_state_and_backup_options(tmp_path: Path):
    found = paths(["apply", "-state=a.json", "-state-out=b/c.json"], tmp_path)
    assert found == {"b/c.json", "a.json.backup", "b/c.json.backup", "errored.tfstate"}
    found = paths(["apply", "-state-out=o.json", "-backup=bk"], tmp_path)
    assert found == {"o.json", "bk", "errored.tfstate"}
    assert paths(["apply", "-backup=-"], tmp_path) == {"terraform.tfstate", "errored.tfstate"}
    made = {t.path: t.make_dirs for t in targets(["t", "apply", "-state-out=n/o"], "/w", {}, same)}
    assert made["/w/n/o"] and not made["/w/errored.tfstate"]  # terraform makes its folder
    plans = targets(["t", "plan", "-out=n/p"], "/w", {}, same)
    assert [(t.path, t.make_dirs) for t in plans] == [("/w/n/p", False)]  # not a plan's


def test_the_selected_workspace(tmp_path: Path):
    ws = "terraform.tfstate.d/w/terraform.tfstate"
    (tmp_path / ".terraform").mkdir()
    (tmp_path / ".terraform" / "environment").write_text("w")
    assert paths(["apply"], tmp_path) == {ws, f"{ws}.backup", "errored.tfstate"}
    other = "terraform.tfstate.d/v/terraform.tfstate"
    assert other in paths(["apply"], tmp_path, {"TF_WORKSPACE": "v"})
    made = {t.path: t.make_dirs for t in targets(["t", "apply"], str(tmp_path), {}, same)}
    assert made[str(tmp_path / ws)]  # terraform makes a workspace's missing folder


def test_chdir_and_the_data_dir(tmp_path: Path):
    sub = tmp_path / "sub"
    (sub / "d").mkdir(parents=True)
    (sub / "d" / "environment").write_text("prod\n")
    found = paths(["-chdir=sub", "apply"], tmp_path, {"TF_DATA_DIR": "d"})
    assert "sub/terraform.tfstate.d/prod/terraform.tfstate" in found
    assert "sub/errored.tfstate" in found
    init = targets(["t", "-chdir=sub", "init"], str(tmp_path), {"TF_DATA_DIR": "/tmp/dd"}, same)
    assert [(t.path, t.content, t.make_dirs) for t in init] == [
        ("/tmp/dd/terraform.tfstate", NO_BACKEND, True)
    ]


def test_a_local_backends_paths_and_a_remote_backend(tmp_path: Path):
    cache = tmp_path / ".terraform" / "terraform.tfstate"
    cache.parent.mkdir()
    config = {"path": "prod.state", "workspace_dir": "wsd"}
    cache.write_text(json.dumps({"backend": {"type": "local", "config": config}}))
    assert "prod.state" in paths(["apply"], tmp_path)
    assert "wsd/w/terraform.tfstate" in paths(["apply"], tmp_path, {"TF_WORKSPACE": "w"})
    cache.write_text(json.dumps({"backend": {"type": "s3", "config": {}}}))
    assert paths(["apply"], tmp_path) == {"errored.tfstate"}  # no local state
    assert paths(["apply", "-state-out=x"], tmp_path) == {"errored.tfstate", "x", "x.backup"}


def test_symlinks_are_followed_as_terraform_would(tmp_path: Path):
    os.symlink(tmp_path / "elsewhere.json", tmp_path / "terraform.tfstate")
    assert "elsewhere.json" in paths(["apply"], tmp_path)
    assert "terraform.tfstate" not in paths(["apply"], tmp_path)
