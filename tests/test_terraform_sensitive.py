"""A sensitive value planted in a workspace never reaches ACP clients, cell outputs or the
session store, whichever way it is read (real terraform, real kernel, real ACP server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iac_kernel.terraform.sensitive import MASK, StreamMasker, mask_text, values_in_text
from terraform_support import (
    SECRET,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
    tf,
)

pytestmark = needs_terraform

#: Every read path of the issue: read_file, grep, cat, output -json, show -json (state and
#: plan), state pull, output -raw, and the plan tool.
READS = [
    ("read_file", {"path": "terraform.tfstate"}),
    ("read_file", {"path": "terraform.tfvars"}),
    ("grep", {"pattern": "password"}),
    ("bash", {"command": "cat terraform.tfstate"}),
    ("bash", {"command": "terraform output -json"}),
    ("bash", {"command": "terraform output -raw db_password"}),
    ("bash", {"command": "terraform show -json"}),
    ("bash", {"command": "terraform show -json p.tfplan"}),
    ("bash", {"command": "terraform state pull"}),
    ("terraform_plan", {"out": "again.tfplan"}),
]


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan")


def script(path: Path) -> Path:
    turns = [
        {"text": f"Step {i}.", "tool_use": [{"name": n, "input": a}]}
        for i, (n, a) in enumerate(READS)
    ]
    turns.append({"text": "All read."})
    path.write_text(json.dumps({"name": "reads", "exchanges": [{"match": "read", "turns": turns}]}))
    return path


def store_text(root: Path) -> str:
    parts = []
    for path in root.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_the_planted_value_is_in_the_workspace(ws: Path):
    """The test can fail: terraform itself prints the value on every path."""
    assert SECRET in (ws / "terraform.tfstate").read_text()
    assert SECRET in tf(ws, "output", "-raw", "db_password").stdout
    assert SECRET in tf(ws, "show", "-json", "p.tfplan").stdout


def test_kernel_cells_and_store_never_show_it(ws: Path, tmp_path: Path):
    from kernel_harness import scripted_kernel

    env = {"IAC_KERNEL_HEADLESS_POLICY": "allow", "TF_CLI_CONFIG_FILE": "/dev/null"}
    kernel = scripted_kernel(tmp_path, ws, script(tmp_path / "reads.json"), env)
    try:
        cell = kernel.execute("read the state every way")
    finally:
        kernel.stop()
    wire = json.dumps([m["content"] for m in cell.messages])
    assert SECRET not in wire
    cards = cell.cards()
    assert len(cards) == len(READS)
    finals = [c[-1] for c in cards]
    assert all(c["status"] == "done" for c in finals), [c["output"] for c in finals]
    assert MASK in wire and "Terraform state/plan data" in wire
    assert "application/vnd.iac-kernel.plan+json" in wire  # the plan tool's card
    stored = store_text(tmp_path / "sessions")
    assert "terraform state pull" in stored and SECRET not in stored


async def test_acp_messages_and_store_never_show_it(ws: Path, tmp_path: Path):
    from acp import text_block

    from test_acp_support import acp_server, server_env

    env = server_env(script(tmp_path / "reads.json"), TF_CLI_CONFIG_FILE="/dev/null")
    async with acp_server(tmp_path, env=env) as (conn, _p, _client, wire):
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("read it all")])
    assert answer.stop_reason == "end_turn"
    text = json.dumps(wire.incoming)
    assert SECRET not in text
    assert text.count(MASK) >= len(READS) - 2
    metas = [u.get("_meta") for _i, u in wire.updates_of(sid) if u.get("_meta")]
    assert any("plan" in (m.get("iac_kernel") or {}) for m in metas)
    assert SECRET not in store_text(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"]))


def test_values_are_found_in_printed_documents():
    state = {
        "version": 4,
        "resources": [],
        "outputs": {"pw": {"value": "LongHidden-1", "sensitive": True}},
    }
    outputs = {"pw": {"sensitive": True, "type": "string", "value": "LongHidden-2"}}
    text = "noise\n" + json.dumps(state) + "\n"
    assert values_in_text(text) == {"LongHidden-1"}
    assert values_in_text(json.dumps(outputs)) == {"LongHidden-2"}
    assert mask_text('x "LongHidden-2" y', {"LongHidden-2"}) == 'x "(sensitive)" y'


def test_a_document_printed_after_masking_teaches_no_value():
    """A guarded `output -json` or state read reaches the tools masked: MASK stands where
    the secret was, and learning it as a secret would make every later result count it
    (a runbook run again in the same kernel said "3 sensitive values" for 0)."""
    outputs = {
        "pw": {"sensitive": True, "type": "string", "value": MASK},
        "pair": {"sensitive": True, "type": ["list", "string"], "value": ["LongHidden-3", MASK]},
    }
    state = {"version": 4, "resources": [], "outputs": {"pw": {"value": MASK, "sensitive": True}}}
    assert values_in_text(json.dumps(outputs)) == {"LongHidden-3"}
    assert values_in_text(json.dumps(state)) == set()


def test_the_stream_masker_catches_a_value_split_across_chunks():
    masker = StreamMasker({"Split-Secret-99"})
    shown = masker.feed("before Split-Se") + masker.feed("cret-99 after") + masker.flush()
    assert shown == "before (sensitive) after"
    held = StreamMasker(set(), hold_all=True)
    doc = json.dumps({"pw": {"sensitive": True, "type": "string", "value": "Remote-Only-77"}})
    assert held.feed(doc) == "" and "Remote-Only-77" not in held.flush()


def test_edit_diffs_never_show_it(ws: Path, tmp_path: Path):
    """Overwriting terraform.tfvars: the preview, the question and the result diff."""
    import asyncio

    from core_support import make_loop, write_script
    from iac_kernel.agent.permissions import ALLOW_ONCE
    from iac_kernel.events import ToolCallInput, ToolCallResult
    from iac_kernel.tools.write_file import WriteFileTool

    content = 'db_password = "Replaced-Value-42"\n'
    call = {"name": "write_file", "input": {"path": "terraform.tfvars", "content": content}}
    script = write_script(
        tmp_path / "w.json", [{"match": "rotate", "turns": [{"tool_use": [call]}, {"text": "ok"}]}]
    )
    loop, persist = make_loop(script, ws, [WriteFileTool()])
    events: list = []
    questions: list = []

    async def ask(request):
        questions.append(request)
        return ALLOW_ONCE

    asyncio.run(loop.run_turn([{"type": "text", "text": "rotate it"}], events.append, ask))
    diffs = [e.diff for e in events if isinstance(e, ToolCallInput | ToolCallResult) and e.diff]
    diffs += [q.diff for q in questions if q.diff]
    assert len(diffs) >= 2
    for diff in diffs:
        assert SECRET not in (diff.old_text or "") and MASK in (diff.old_text or "")
    assert SECRET not in json.dumps(persist.messages)
    assert (ws / "terraform.tfvars").read_text() == content  # the write itself happened


async def test_a_state_outside_the_workspace_is_masked(ws: Path):
    from iac_kernel.config import Settings
    from iac_kernel.tools.base import ToolContext
    from iac_kernel.tools.read_file import ReadFileTool
    from iac_kernel.tools.tf_masking import after_tool_call

    sub = ws / "sub"  # the session works in a sub-folder: the state is outside its cwd
    sub.mkdir()
    read = {"path": "../terraform.tfstate"}
    raw = await ReadFileTool().run(read, ToolContext(cwd=sub, settings=Settings()))
    # the tool itself reads the masked copy (issue 32), by content, outside its cwd too
    assert SECRET not in raw.content and MASK in raw.content
    shown = await after_tool_call(ReadFileTool(), read, sub, raw)
    assert SECRET not in shown.content and MASK in shown.content


def test_printed_state_cut_to_head_and_tail_is_masked(ws: Path, tmp_path: Path):
    """A state only printed (remote ``state pull``): the live output sees all of it, and the
    values found there are masked in the final result too, although it is cut."""
    import asyncio

    from core_support import make_loop, write_script
    from iac_kernel.config import Settings
    from iac_kernel.events import ToolCallOutput, ToolCallResult
    from iac_kernel.tools.bash import BashTool

    other = "OtherSecret-5150-not-on-disk"
    doc = json.loads((ws / "terraform.tfstate").read_text())
    doc["outputs"]["db_password"]["value"] = other
    doc["resources"] = doc["resources"] * 20  # long: the output is cut to head and tail
    (ws / "snapshot.json").write_text(json.dumps(doc, indent=2))
    command = "cat snapshot.json  # a tfstate printed by a remote backend"
    call = {"name": "bash", "input": {"command": command}}
    script = write_script(
        tmp_path / "s.json", [{"match": "pull", "turns": [{"tool_use": [call]}, {"text": "ok"}]}]
    )
    settings = Settings()
    settings.output_limit = 2000
    settings.headless_policy = "allow"
    loop, persist = make_loop(script, ws, [BashTool()], settings=settings)
    events: list = []

    async def ask(request):
        return "allow_once"

    asyncio.run(loop.run_turn([{"type": "text", "text": "pull"}], events.append, ask))
    (result,) = [e for e in events if isinstance(e, ToolCallResult)]
    assert "characters of output cut" in result.output
    assert other[:12] not in json.dumps([e.__dict__ for e in events], default=str)
    assert any(isinstance(e, ToolCallOutput) for e in events)
    assert other not in json.dumps(persist.messages)
