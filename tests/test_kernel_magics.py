"""Every magic, and the error cases, through a real kernel process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from iac_kernel.sessions.store import SessionStore
from kernel_harness import CellResult, KernelHarness, scripted_kernel

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel-magics")


@pytest.fixture(scope="module")
def work(root: Path) -> Path:
    path = root / "work"
    (path / "envs" / "prod").mkdir(parents=True)
    return Path(os.path.realpath(path))


@pytest.fixture(scope="module")
def kernel(root: Path, work: Path) -> Iterator[KernelHarness]:
    notebook = str(work / "infra-review.ipynb")
    harness = scripted_kernel(root, work, SCRIPT, {"JPY_SESSION_NAME": notebook})
    try:
        yield harness
    finally:
        harness.stop()


@pytest.fixture
def store(root: Path) -> SessionStore:
    return SessionStore(root / "sessions")


def ok(kernel: KernelHarness, code: str) -> CellResult:
    result = kernel.execute(code)
    assert result.status == "ok", result.reply["content"]
    return result


def shown(result: CellResult) -> str:
    """The text/plain of the cell's displays (a streamed text display has it only at its end)."""
    return "\n".join(
        m["content"]["data"]["text/plain"]
        for m in result.of_type("display_data")
        if "text/plain" in m["content"]["data"]
    )


def failed(kernel: KernelHarness, code: str, ename: str) -> str:
    """Run a cell that must fail readably; returns the error message."""
    result = kernel.execute(code)
    assert result.status == "error"
    content = result.reply["content"]
    assert content["ename"] == ename, content
    [error] = result.of_type("error")
    assert len(error["content"]["traceback"]) == 1
    assert "Traceback (most recent call last)" not in str(error["content"])
    return content["evalue"]


def current_id(kernel: KernelHarness) -> str:
    for line in shown(ok(kernel, "%session")).splitlines():
        if line.startswith("id "):
            return line.split()[-1]
    raise AssertionError("no id in %session")


def test_help_lists_every_magic(kernel: KernelHarness) -> None:
    text = shown(ok(kernel, "%help"))
    for name in ("help", "session", "sessions", "load", "fork", "new", "model", "mode", "cwd"):
        assert f"%{name}" in text
    assert "%config" in text and "%permissions" in text
    assert "%fork" in shown(ok(kernel, "%help fork"))
    assert "no magic %bogus" in failed(kernel, "%help bogus", "UsageError")


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[KernelHarness, SessionStore, Path]]:
    """A kernel of its own whose session no other test has touched (the module's kernel
    is shared, and tests run in any order)."""
    work = Path(os.path.realpath(tmp_path / "work"))
    work.mkdir()
    notebook = str(work / "infra-review.ipynb")
    harness = scripted_kernel(tmp_path, work, SCRIPT, {"JPY_SESSION_NAME": notebook})
    try:
        yield harness, SessionStore(tmp_path / "sessions"), work
    finally:
        harness.stop()


def test_session_is_created_on_first_use_with_the_notebook_title(
    fresh: tuple[KernelHarness, SessionStore, Path],
) -> None:
    kernel, store, work = fresh
    text = shown(ok(kernel, "%session"))
    session_id = current_id(kernel)
    assert "cwd          .\n" in text and str(work) not in text
    assert "store        $IAC_KERNEL_SESSIONS_DIR" in text
    assert "model        scripted" in text and "mode         default" in text
    meta = store.read_meta(session_id)
    assert meta.origin == "kernel" and meta.title == "infra-review"
    assert meta.notebook == str(work / "infra-review.ipynb")
    assert store.lock_holder(session_id)["holder"].startswith("iac-kernel Jupyter kernel")
    ok(kernel, "quick question")
    assert "tokens used  0 " not in shown(ok(kernel, "%session"))
    assert "no arguments" in failed(kernel, "%session extra", "UsageError")


def test_sessions_lists_this_folder(kernel: KernelHarness) -> None:
    session_id = current_id(kernel)
    text = shown(ok(kernel, "%sessions"))
    assert f"* {session_id}" in text and "open in this kernel" in text
    assert session_id in shown(ok(kernel, "%sessions all"))
    assert "usage" in failed(kernel, "%sessions everything", "UsageError")


def test_new_load_and_fork_switch_sessions(kernel: KernelHarness, store: SessionStore) -> None:
    first = current_id(kernel)
    ok(kernel, "quick question")
    ok(kernel, "%new Second thoughts")
    second = current_id(kernel)
    assert second != first
    assert store.lock_holder(first) is None, "the old session's lock is released"
    assert store.read_meta(second).title == "Second thoughts"

    loaded = shown(ok(kernel, f"%load {first[:8]}"))
    assert f"Loaded session {first}" in loaded
    assert current_id(kernel) == first
    assert store.lock_holder(second) is None

    ok(kernel, "%fork")
    fork = current_id(kernel)
    meta = store.read_meta(fork)
    assert fork != first and meta.forked_from == first
    assert meta.message_count == store.read_meta(first).message_count > 0
    assert store.lock_holder(first) is None

    assert "usage" in failed(kernel, "%load", "UsageError")
    assert "no session matches" in failed(kernel, "%load deadbeef", "SessionError")
    assert "takes no arguments" in failed(kernel, "%fork now", "UsageError")


def test_model_magic(kernel: KernelHarness, tmp_path: Path) -> None:
    assert "scripted" in shown(ok(kernel, "%model"))
    script = tmp_path / "mine.json"
    script.write_text('{"exchanges": [{"match": "ping", "turns": [{"text": "pong"}]}]}')
    ok(kernel, f"%model scripted:{script}")
    assert ok(kernel, "ping").answer() == "pong"
    ok(kernel, "%model scripted")
    message = failed(kernel, "%model scripted:/no/such/script.json", "ModelError")
    assert "cannot read script" in message


def test_mode_magic(kernel: KernelHarness, store: SessionStore) -> None:
    assert "read_only" in shown(ok(kernel, "%mode"))
    ok(kernel, "%mode read_only")
    assert store.read_meta(current_id(kernel)).mode == "read_only"
    assert "unknown mode" in failed(kernel, "%mode yolo", "UsageError")
    ok(kernel, "%mode default")


def test_cwd_magic(kernel: KernelHarness, store: SessionStore, work: Path) -> None:
    # Paths are shown relative to the notebook's folder (the kernel's start folder).
    assert shown(ok(kernel, "%cwd")) == "."
    assert "set to envs/prod" in shown(ok(kernel, "%cwd envs/prod"))
    assert store.read_meta(current_id(kernel)).cwd == str(work / "envs" / "prod")
    assert str(work) not in shown(ok(kernel, "%session"))
    assert "not a directory" in failed(kernel, "%cwd /no/such/dir", "UsageError")
    ok(kernel, f"%cwd {work}")


def test_a_relative_cwd_is_taken_from_the_notebooks_folder(
    kernel: KernelHarness, store: SessionStore, work: Path
) -> None:
    """The same %cwd line means the same folder each time it runs (a runbook run again
    from the top), wherever the last one went; "." is the notebook's folder."""
    try:
        for _again in range(2):
            assert "set to envs/prod" in shown(ok(kernel, "%cwd envs/prod"))
            assert store.read_meta(current_id(kernel)).cwd == str(work / "envs" / "prod")
        assert "set to envs" in shown(ok(kernel, "%cwd envs"))
        assert "set to ." in shown(ok(kernel, "%cwd ."))
        assert store.read_meta(current_id(kernel)).cwd == str(work)
    finally:
        ok(kernel, f"%cwd {work}")


def test_config_magic(kernel: KernelHarness) -> None:
    assert "max_tokens" in shown(ok(kernel, "%config"))
    assert "max_tokens set to 2048" in shown(ok(kernel, "%config max_tokens 2048"))
    assert "max_tokens" in shown(ok(kernel, "%config"))
    assert "unknown setting" in failed(kernel, "%config no_such_key 1", "ConfigError")
    assert "max_tokens = 'lots' is not valid (expects a whole number" in failed(
        kernel, "%config max_tokens lots", "ConfigError"
    )
    assert "cannot change" in failed(kernel, "%config sessions_dir /tmp", "ConfigError")
    ok(kernel, "%config max_tokens 8192")


def test_permissions_magic(kernel: KernelHarness) -> None:
    text = shown(ok(kernel, "%permissions"))
    assert "headless policy     deny" in text and "permission UI       auto" in text
    ok(kernel, "%permissions ui policy")
    assert "permission UI       policy" in shown(ok(kernel, "%permissions"))
    ok(kernel, "%permissions ui auto")
    assert "Forgot" in shown(ok(kernel, "%permissions reset"))
    assert "usage" in failed(kernel, "%permissions ui sometimes", "UsageError")
    assert "usage" in failed(kernel, "%permissions maybe", "UsageError")


def test_audit_magic_lists_the_folders_apply_records(kernel: KernelHarness, work: Path) -> None:
    from iac_kernel.sessions.audit import AuditLog

    store = Path(kernel.env["IAC_KERNEL_SESSIONS_DIR"])
    assert "No audit records for" in shown(ok(kernel, "%audit"))
    record = {"cwd": str(work), "outcome": "rejected", "command": "terraform apply x.tfplan"}
    AuditLog(store).append({**record, "form": "bash", "answer": "reject_once"})
    AuditLog(store).append({**record, "cwd": "/elsewhere", "command": "terraform apply y"})
    text = shown(ok(kernel, "%audit"))
    assert "1 audit record(s)" in text and "rejected  terraform apply x.tfplan  [bash]" in text
    assert "terraform apply y" in shown(ok(kernel, "%audit all"))
    assert "usage: %audit" in failed(kernel, "%audit everything", "UsageError")


def test_unknown_magic_is_one_readable_error(kernel: KernelHarness) -> None:
    message = failed(kernel, "%sesion", "UnknownMagic")
    assert "Did you mean %session?" in message


def test_failing_magic_stops_the_cell(kernel: KernelHarness) -> None:
    result = kernel.execute("%nosuch\nquick question")
    assert result.status == "error"
    assert not [d for d in result.displays() if d.startswith("iac-text-")]


def test_magics_then_prompt_in_one_cell(kernel: KernelHarness) -> None:
    result = ok(kernel, "%mode default\nquick question")
    assert "Mode set to default" in shown(result)
    assert result.answer() == "Quick answer."


def test_model_error_is_readable_and_the_kernel_lives(kernel: KernelHarness) -> None:
    result = kernel.execute("broken model")
    assert result.status == "error"
    assert result.reply["content"]["ename"] == "ModelError"
    stderr = "".join(m["content"]["text"] for m in result.of_type("stream"))
    assert "broken on purpose" in stderr and "Traceback" not in stderr
    assert ok(kernel, "quick question").answer() == "Quick answer."


def test_rerun_of_a_cell_is_a_new_turn_and_says_so(kernel: KernelHarness) -> None:
    metadata = {"cellId": "cell-42"}
    first = kernel.execute("quick question", metadata=metadata)
    assert "Re-run" not in first.markdown()
    again = kernel.execute("quick question", metadata=metadata)
    assert "Re-run of this cell" in again.markdown()
    assert again.answer() == "Quick answer."


def test_silent_execution_shows_nothing_and_runs_no_turn(kernel: KernelHarness) -> None:
    def messages() -> list[str]:
        return [
            ln for ln in shown(ok(kernel, "%session")).splitlines() if ln.startswith("messages")
        ]

    before = messages()
    result = kernel.execute("quick question", silent=True)
    assert result.status == "ok"
    assert result.messages == []
    assert messages() == before


def test_a_script_path_is_the_notebooks_and_an_edited_script_is_read_again(
    kernel: KernelHarness, work: Path
) -> None:
    import json

    scripts = work / "own-scripts"
    scripts.mkdir(exist_ok=True)
    (work / "elsewhere").mkdir(exist_ok=True)
    script = scripts / "mine.json"

    def write(text: str) -> None:
        exchanges = [{"match": "which script", "turns": [{"text": text}]}]
        script.write_text(json.dumps({"name": "mine", "exchanges": exchanges}))

    write("the first script")
    ok(kernel, "%new")
    ok(kernel, "%cwd elsewhere")
    try:
        ok(kernel, "%model scripted:own-scripts/mine.json")  # from the notebook's folder
        assert ok(kernel, "which script?").answer() == "the first script"
        write("the edited script")
        ok(kernel, "%model scripted:own-scripts/mine.json")
        assert ok(kernel, "which script now?").answer() == "the edited script"
    finally:
        ok(kernel, f"%model scripted:{SCRIPT}")
        ok(kernel, f"%cwd {work}")
