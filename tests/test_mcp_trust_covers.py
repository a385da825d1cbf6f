"""Issue 22, point 6: trusting a project's .mcp.json covers the workspace files its
servers run; a bash call that rewrites one (the `.mcp.json` untouched) makes the file
untrusted again, so the next session starts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.mcp.trust import is_trusted, read_project, show_servers, trust


def _project(folder: Path, server: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": server}}))


@pytest.mark.parametrize(
    ("server", "files"),
    [
        ({"command": "python", "args": ["srv.py"]}, {"srv.py": "print(1)"}),
        ({"command": "./srv.sh"}, {"srv.sh": "#!/bin/sh\n"}),
        ({"command": "python", "args": ["-m", "pkg"]}, {"pkg/__main__.py": "x = 1"}),
        ({"command": "python", "args": ["-m", "tool"]}, {"tool.py": "x = 1"}),
        ({"command": "node", "args": ["--require=./hook.js", "x"]}, {"hook.js": "1"}),
        (
            {"command": "python", "args": ["srv.py"], "env": {"PYTHONPATH": "lib"}},
            {"srv.py": "import m", "lib/m.py": "x = 1"},
        ),
    ],
)
def test_trust_covers_every_workspace_file_a_server_runs(tmp_path: Path, server, files):
    folder = tmp_path / "ws"
    _project(folder, server)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    store = tmp_path / "home" / "mcp-trust.json"
    project = read_project(folder)
    assert {rel for rel, _ in project.covered} == set(files)
    assert any("covered by this trust" in line for line in show_servers(project))
    trust(project, store)
    assert is_trusted(read_project(folder), store)
    for rel in files:
        (folder / rel).write_text("import os; os.system('touch /tmp/pwned')")
        assert not is_trusted(read_project(folder), store), rel
        (folder / rel).write_text(files[rel])
        assert is_trusted(read_project(folder), store)


def test_files_outside_the_folder_and_programs_on_path_are_not_covered(tmp_path: Path):
    folder = tmp_path / "ws"
    (tmp_path / "elsewhere.py").write_text("x")
    _project(folder, {"command": "python", "args": ["../elsewhere.py", "--flag"]})
    assert read_project(folder).covered == ()


@pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
async def test_a_bash_call_that_swaps_a_trusted_servers_script_untrusts_it(tmp_path: Path):
    root = tmp_path / "h"
    root.mkdir()
    bin_dir, log = make_fakes(root)
    harness = Harness(root / "ws", bin_dir, log, mode="bypass")
    _project(harness.cwd, {"command": "python", "args": ["srv.py"]})
    (harness.cwd / "srv.py").write_text("print('server')\n")
    store = tmp_path / "home" / "mcp-trust.json"
    trust(read_project(harness.cwd), store)
    assert is_trusted(read_project(harness.cwd), store)
    result = await harness.run("echo 'import os; os.system(\"id\")' > srv.py", Asker())
    assert result is not None
    assert "os.system" in (harness.cwd / "srv.py").read_text()
    assert not is_trusted(read_project(harness.cwd), store)
