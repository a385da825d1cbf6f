"""A load masks a stored result again only with what its mark says it was not masked
with: a value learned later is masked (with that value only: shapes are not searched
again); a text edited by hand, a missing or rotated key, another masking code, a set
edited by hand mask it again in full; a result masked with everything known now is shown
as stored, and equals what masking it again gives."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from iac_kernel.agent.history import replay
from iac_kernel.events import ToolCallResult
from iac_kernel.masking import marks
from iac_kernel.redact import redact, secret_values
from iac_kernel.sessions.store import KEY_NAME as NAME
from iac_kernel.sessions.store import SessionStore, install_key, mark_table, read_key
from iac_kernel.terraform.sensitive import mask_text
from iac_kernel.terraform.workspace import sensitive_values
from test_acp_support import RawServer, server_env

SECRET = "Env-Secret-Value-4471"
LATE = "Late-Env-Secret-9902"
LATE_STATE = "late-state-password-5519"
#: Text that masking changes (a credential shape): shown as stored only when skipped.
SHAPED = "key AKIAIOSFODNN7EXAMPLE here"


def _state(value: str) -> dict:
    output = {"value": value, "type": "string", "sensitive": True}
    return {"version": 4, "serial": 1, "lineage": "l", "resources": [], "outputs": {"db": output}}


def _store() -> SessionStore:
    return SessionStore(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"]))


def _write(workspace: Path, texts: list[str], masked_with: frozenset[str] | None) -> str:
    """A session with one bash call per text, each result stored as given and marked as
    masked with ``masked_with`` and what this process knows now (values other tests gave
    terraform are masked in every session of the process)."""
    if masked_with is not None:
        masked_with = masked_with | frozenset(secret_values()) | sensitive_values(workspace)
    store = _store()
    meta = store.create(str(workspace), title="marks")
    writer = store.open_writer(meta.session_id, "test")
    for i, text in enumerate(texts):
        use = {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"command": "x"}}
        writer.append_message({"role": "user", "content": [{"type": "text", "text": f"q{i}"}]})
        writer.append_message({"role": "assistant", "content": [use]})
        block = {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
        writer.append_tool_result(block, name="bash", masked_with=masked_with)
    writer.close()
    return meta.session_id


def _shown(sid: str, tool_ctx, with_marks: bool = True) -> list[str]:
    store = _store()
    writer = store.open_writer(sid, "test")
    try:
        stored = store.load(writer)
        table = writer.marks if with_marks else None
        events = replay(stored.messages, {}, tool_ctx, table)
        return [e.output for e in events if isinstance(e, ToolCallResult)]
    finally:
        writer.close()


def _log(sid: str) -> Path:
    return _store().root / f"{sid}.jsonl"


def test_a_result_masked_with_all_known_now_is_shown_as_stored(workspace, tool_ctx):
    sid = _write(workspace, [SHAPED, "plain"], frozenset())
    assert _shown(sid, tool_ctx) == [SHAPED, "plain"]  # not masked again
    assert _shown(sid, tool_ctx, with_marks=False)[0] != SHAPED  # what masking again does
    kinds = [json.loads(line)["type"] for line in _log(sid).read_text().splitlines()]
    assert kinds.count("mask_set") == 1 and kinds.count("tool_result") == 2


def test_a_secret_learned_later_is_masked(workspace, tool_ctx, monkeypatch):
    sid = _write(workspace, [f"env {LATE} and {LATE_STATE}", SHAPED], frozenset({SECRET}))
    monkeypatch.setenv("LATER_API_TOKEN", LATE)  # known only at load
    shown = _shown(sid, tool_ctx)
    assert LATE not in shown[0] and "[REDACTED:LATER_API_TOKEN]" in shown[0]
    assert shown[1] == SHAPED  # masked again with the new value only, not its shapes
    monkeypatch.delenv("LATER_API_TOKEN")
    # a value known later:
    (workspace / "terraform.tfstate").write_text(json.dumps(_state(LATE_STATE)))
    shown = _shown(sid, tool_ctx)
    assert LATE_STATE not in shown[0] and "(sensitive)" in shown[0]


def test_a_value_no_longer_known_needs_no_second_masking(workspace, tool_ctx, monkeypatch):
    monkeypatch.setenv("SOME_API_TOKEN", SECRET)
    sid = _write(workspace, [SHAPED], frozenset({SECRET, "other-value-1234"}))
    assert _shown(sid, tool_ctx) == [SHAPED]  # every value known now was in its set
    monkeypatch.delenv("SOME_API_TOKEN")
    assert _shown(sid, tool_ctx) == [SHAPED]  # fewer known now: still covered


def test_a_text_edited_by_hand_is_masked_again(workspace, tool_ctx):
    sid = _write(workspace, [SHAPED.replace("here", "there")], frozenset())
    log = _log(sid)
    log.write_text(log.read_text().replace("there", "where"))  # the mark is kept
    assert _shown(sid, tool_ctx)[0] != SHAPED.replace("here", "where")


def test_a_log_without_marks_is_masked_again(workspace, tool_ctx):
    sid = _write(workspace, [SHAPED], None)
    assert "mask" not in json.loads(_log(sid).read_text().splitlines()[-1])
    assert _shown(sid, tool_ctx)[0] != SHAPED


@pytest.mark.parametrize("change", ["missing", "rotated", "not a key"])
def test_a_missing_or_rotated_key_masks_everything_again(workspace, tool_ctx, change):
    sid = _write(workspace, [SHAPED], frozenset())
    key = _store().root / NAME
    if change == "missing":
        key.unlink()
    elif change == "rotated":
        key.write_text(os.urandom(32).hex())
    else:
        key.write_text("zz")
    assert _shown(sid, tool_ctx)[0] != SHAPED


def test_a_set_edited_by_hand_or_another_masking_code_masks_again(workspace, tool_ctx):
    sid = _write(workspace, [SHAPED], frozenset())
    log = _log(sid)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for record in lines:  # a fingerprint added to the set: its id no longer says it
        if record["type"] == "mask_set":
            record["known"].append("0" * 16)
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert _shown(sid, tool_ctx)[0] != SHAPED
    sid = _write(workspace, [SHAPED], frozenset())
    log = _log(sid)
    log.write_text(log.read_text().replace(marks.version(), "0123456789abcdef"))
    assert _shown(sid, tool_ctx)[0] != SHAPED


def test_masked_results_replay_as_masking_them_again_would(workspace, tool_ctx, monkeypatch):
    """The live path's masking (environment secrets, workspace values, shapes), then a
    load with marks, equals a load that masks every result again."""
    monkeypatch.setenv("SOME_API_TOKEN", SECRET)
    (workspace / "terraform.tfstate").write_text(json.dumps(_state(LATE_STATE)))
    raw = [
        f"{SECRET} {LATE_STATE} ordinary words",
        "Server=db;PASSWORD=Sup3rS3cret!; postgres://app:hunter2pass@db/app",
        f"café {SECRET[::-1]} née ghp_0123456789abcdefghijABCDEFGHIJ012345",
        json.dumps({"password": LATE_STATE, "note": SECRET}),
    ]
    values = sensitive_values(workspace)
    masked = [mask_text(redact(text), values) for text in raw]
    known = frozenset(secret_values()) | values
    sid = _write(workspace, masked, known)
    skipped = _shown(sid, tool_ctx)
    assert skipped == masked  # shown as stored: nothing new is known
    assert skipped == _shown(sid, tool_ctx, with_marks=False)
    for text in skipped:
        assert SECRET not in text and LATE_STATE not in text


def test_the_key_is_private_and_never_read_through_a_link(tmp_path):
    root = tmp_path / "store"
    assert read_key(root) is None
    key = install_key(root)
    assert len(key) == 32 and read_key(root) == key and install_key(root) == key
    assert stat.S_IMODE((root / NAME).stat().st_mode) == 0o600
    other = tmp_path / "elsewhere.key"
    other.write_text(os.urandom(32).hex())
    (root / NAME).unlink()
    (root / NAME).symlink_to(other)
    assert read_key(root) is None
    with pytest.raises(OSError):
        install_key(root)


def test_the_log_holds_no_unkeyed_hash_of_a_secret(workspace):
    import hashlib

    sid = _write(workspace, ["x"], frozenset({SECRET}))
    text = _log(sid).read_text()
    for digest in (hashlib.sha256, hashlib.sha1, hashlib.md5):
        assert digest(SECRET.encode()).hexdigest()[:16] not in text
    assert SECRET not in text
    key = read_key(_store().root)
    assert key is not None and marks.fingerprint(key, SECRET) in text  # keyed only


async def test_a_live_result_is_stored_with_its_mark(tmp_path: Path, workspace: Path, monkeypatch):
    """A tool call over ACP stores its masked result with a mark that covers the secret
    environment values and the workspace's values known then."""
    (workspace / "notes.txt").write_text(f"token {SECRET} and AKIAIOSFODNN7EXAMPLE\n")
    read = {"name": "read_file", "input": {"path": "notes.txt"}}
    turns = [{"tool_use": [read]}, {"text": "Read."}]
    script = {"name": "marks", "fallback": "ok", "exchanges": [{"match": "^read", "turns": turns}]}
    (tmp_path / "s.json").write_text(json.dumps(script))
    env = server_env(tmp_path / "s.json", SOME_API_TOKEN=SECRET)
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "read it"}]}
        answer = await server.call("session/prompt", params)
        assert answer["result"]["stopReason"] == "end_turn"
    records = [json.loads(line) for line in _log(sid).read_text().splitlines()]
    (result,) = [r for r in records if r["type"] == "tool_result"]
    text = result["block"]["content"]
    assert SECRET not in text and "[REDACTED:SOME_API_TOKEN]" in text
    assert result["mask"]["v"] == marks.version()
    table = mark_table(_store().root, records)
    monkeypatch.setenv("SOME_API_TOKEN", SECRET)
    now = set(secret_values())  # the workspace has no values; this process may have
    call_id = result["block"]["tool_use_id"]
    assert table.checker(now).fresh(call_id, text) == frozenset()
    later = table.checker(now | {"learned-later-value"})
    assert later.fresh(call_id, text) == {"learned-later-value"}
    assert later.fresh(call_id, text + " edited") is None


def _scanned(monkeypatch) -> tuple[list[str], list[str]]:
    """Every text maskers are asked about from now on: searched for values or replaced,
    and searched for credential shapes."""
    from iac_kernel import redact
    from iac_kernel.masking.values import ValueMasker

    seen: list[str] = []
    shapes: list[str] = []
    for name in ("finds", "sub"):
        real = getattr(ValueMasker, name)

        def spy(self, text, _real=real):
            seen.append(text)
            return _real(self, text)

        monkeypatch.setattr(ValueMasker, name, spy)
    real_shapes = redact.mask_shapes
    monkeypatch.setattr(
        redact, "mask_shapes", lambda text: shapes.append(text) or real_shapes(text)
    )
    return seen, shapes


def test_a_value_learned_after_a_result_is_masked_and_a_later_result_is_not_scanned(
    workspace, tool_ctx, monkeypatch
):
    """Result A is written before LATE is known, B after (masked with it): a replay masks
    A again with LATE alone (not its shapes) and never scans B."""
    store = _store()
    sid = store.create(str(workspace), title="two generations").session_id
    writer = store.open_writer(sid, "test")
    # All known at the time, values given to sensitive variables by earlier tests included.
    before = frozenset(secret_values()) | sensitive_values(workspace)
    first = f"A: {LATE} and {SHAPED}"
    second = f"B: {SHAPED} written after"
    for call, text, known in (("a", first, before), ("b", second, before | {LATE})):
        use = {"type": "tool_use", "id": call, "name": "bash", "input": {"command": "x"}}
        writer.append_message({"role": "assistant", "content": [use]})
        block = {"type": "tool_result", "tool_use_id": call, "content": text}
        writer.append_tool_result(block, name="bash", masked_with=known)
        monkeypatch.setenv("LATER_API_TOKEN", LATE)  # learned between A and B
    writer.close()
    sets = [r for r in map(json.loads, _log(sid).read_text().splitlines()) if "known" in r]
    assert len(sets) == 2  # one set per generation of known values
    seen, shapes = _scanned(monkeypatch)
    shown = _shown(sid, tool_ctx)
    assert shown[0] == f"A: [REDACTED:LATER_API_TOKEN] and {SHAPED}"  # shapes not again
    assert shown[1] == second
    assert first in seen  # A was searched for the value learned since
    assert not any("A:" in text for text in shapes)  # but not for shapes
    assert not any("B:" in text for text in seen + shapes)  # B was not scanned at all


def test_a_mark_moved_to_an_older_result_does_not_hide_a_later_value(
    workspace, tool_ctx, monkeypatch
):
    """An older result given a newer result's mark (whose set holds LATE) is masked again
    in full: the mark's tag is of the other text."""
    monkeypatch.setenv("LATER_API_TOKEN", LATE)
    sid = _write(workspace, [f"old {LATE}", "new"], frozenset())
    records = [json.loads(line) for line in _log(sid).read_text().splitlines()]
    results = [r for r in records if r["type"] == "tool_result"]
    results[0]["mask"] = results[1]["mask"]
    results[0]["block"]["content"] = f"old {LATE} {SHAPED}"  # as if never masked
    _log(sid).write_text("".join(json.dumps(r) + "\n" for r in records))
    shown = _shown(sid, tool_ctx)
    assert LATE not in shown[0] and "AKIAIOSFODNN7EXAMPLE" not in shown[0]
    assert shown[1] == "new"
