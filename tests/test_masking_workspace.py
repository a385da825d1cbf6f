"""Sensitive values planted where the old scan never looked, or created during a call,
never reach an ACP client or the session store in any form (issue 23 point 2; real
terraform and a real ``iac-kernel acp`` server).

Planted: a value with ``&<>`` (terraform writes it Go-escaped), a 3-character value, a
value only in a ``terraform.tfstate.<unix>.backup``, state behind a ``backend "local"``
path, a value only in a tfvars file in another folder, a ``*.tf.json`` default, a state
past 20,000 workspace entries, a value passed as ``-var "tok=$(cat tok.txt)"``, and a
``sensitive("Gen-${uuid()}")`` output created by the bash call that prints it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from iac_kernel.masking.encodings import forms
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401

pytestmark = needs_terraform

AMP = "Amp&Secret<x>-4471"
TINY = "q7Z"
BACKUP = "BackupOnly-Value-8812"
FAR = "FarTfvars-Value-3301"
TFJSON = "TfJsonDefault-5520"
PAST = "PastTwentyK-Value-9090"
TOK = "TokFromFile-6174"

MAIN = """
terraform {
  backend "local" {
    path = "states/prod.state"
  }
}
variable "amp" {
  type      = string
  sensitive = true
}
variable "tiny" {
  type      = string
  sensitive = true
}
variable "far" {
  type      = string
  sensitive = true
  default   = "unset"
}
variable "tok" {
  type      = string
  sensitive = true
  default   = "unset"
}
resource "terraform_data" "amp" {
  input = var.amp
}
resource "terraform_data" "tok" {
  input = var.tok
}
output "amp" {
  value     = var.amp
  sensitive = true
}
output "tiny" {
  value     = var.tiny
  sensitive = true
}
output "gen" {
  value     = sensitive("Gen-${uuid()}")
  sensitive = true
}
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    os.environ["TF_CLI_CONFIG_FILE"] = "/dev/null"
    root = tmp_path_factory.mktemp("mask") / "ws"
    root.mkdir()
    (root / "main.tf").write_text(MAIN)
    (root / "terraform.tfvars").write_text(f'amp = "{AMP}"\ntiny = "{TINY}"\n')
    (root / "envs" / "prod").mkdir(parents=True)
    (root / "envs" / "prod" / "secret.tfvars").write_text(f'far = "{FAR}"\n')
    (root / "extra.tf.json").write_text(
        json.dumps({"variable": {"json_secret": {"sensitive": True, "default": TFJSON}}})
    )
    (root / "tok.txt").write_text(TOK)
    tf(root, "init", "-input=false", "-no-color")
    tf(root, "apply", "-auto-approve", "-input=false")
    state = json.loads((root / "states" / "prod.state").read_text())
    assert "\\u0026" in (root / "states" / "prod.state").read_text()  # Go's escapes
    state["outputs"]["amp"]["value"] = BACKUP  # what `state rm` leaves behind
    (root / "terraform.tfstate.1700000000.backup").write_text(json.dumps(state))
    bulk = root / "bulk"
    bulk.mkdir()
    for i in range(20_500):
        (bulk / f"f{i:05d}.txt").touch()
    state["outputs"]["amp"]["value"] = PAST
    (bulk / "zz-past.tfstate").write_text(json.dumps(state, indent=1))
    return root


COMMANDS = [
    "cat states/prod.state",
    "terraform output -json",
    "terraform show -json",
    "terraform state pull",
    "terraform output -raw tiny; echo; terraform output -raw amp | base64",
    "cat terraform.tfstate.1700000000.backup",
    "cat envs/prod/secret.tfvars; base64 -w0 envs/prod/secret.tfvars; echo",
    "rev envs/prod/secret.tfvars",
    "python3 -c \"import sys;print(open('envs/prod/secret.tfvars').read().encode().hex())\"",
    "python3 -c \"import urllib.parse as u;print(u.quote(open('extra.tf.json').read()))\"",
    "cat extra.tf.json",
    "grep -rh value bulk/",
    # created during the call, printed live by a program that is not terraform
    'terraform apply -auto-approve -input=false -no-color -var "tok=$(cat tok.txt)" '
    "-var-file=envs/prod/secret.tfvars >/dev/null && sleep 1 && "
    "python3 -c \"import json;print(json.load(open('states/prod.state'))"
    "['outputs']['gen']['value'])\" && sleep 1",
]
READS = [("read_file", {"path": "states/prod.state"}), ("grep", {"pattern": "value"})]


def script(path: Path) -> Path:
    calls = [("bash", {"command": c}) for c in COMMANDS] + READS
    turns = [
        {"text": f"Step {i}.", "tool_use": [{"name": n, "input": a}]}
        for i, (n, a) in enumerate(calls)
    ]
    turns.append({"text": "Done."})
    path.write_text(json.dumps({"name": "m", "exchanges": [{"match": "read", "turns": turns}]}))
    return path


def leaks(text: str, values: list[str]) -> list[str]:
    """Each planted value (and form) ``text`` still shows."""
    found = []
    for value in values:
        for form in forms(value):
            if form in text:
                found.append(f"{value!r} as {form!r}")
    if re.search(rf"(?<![A-Za-z0-9_.\-/+@]){TINY}(?![A-Za-z0-9_.\-/+@])", text):
        found.append(TINY)
    return found


def store_text(root: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()
    )


async def test_planted_and_created_values_never_reach_the_client_or_the_store(
    ws: Path, tmp_path: Path
):
    from acp import text_block

    from test_acp_support import acp_server, server_env

    env = server_env(script(tmp_path / "m.json"), TF_CLI_CONFIG_FILE="/dev/null")
    async with acp_server(tmp_path, env=env) as (conn, _p, client, wire):
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("read everything")])
    assert answer.stop_reason == "end_turn"
    generated = json.loads((ws / "states" / "prod.state").read_text())["outputs"]["gen"]
    gen = generated["value"]
    assert gen.startswith("Gen-")
    planted = [AMP, BACKUP, FAR, TFJSON, PAST, TOK, gen]
    wire_text = "\n".join(json.dumps(m, ensure_ascii=False) for m in wire.incoming)
    wire_text += "\n".join(json.dumps(m) for m in wire.incoming)
    assert not leaks(wire_text, planted)
    assert not leaks(store_text(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"])), planted)
    # The calls really ran and printed: masks stand where the values were.
    results = [json.dumps(u) for _i, u in wire.updates_of(sid)]
    assert sum("(sensitive)" in r for r in results) >= len(COMMANDS)
    # The apply was asked at exec time, its expanded -var masked.
    asked = json.dumps(client.permissions, default=repr)
    assert "tok=" in asked and TOK not in asked
    # The live output of the creating call was masked too (not only the final result).
    live = [
        u
        for _i, u in wire.updates_of(sid)
        if u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "in_progress"
    ]
    assert any("(sensitive)" in json.dumps(u) for u in live)


def test_the_scan_finds_every_planted_value(ws: Path):
    from iac_kernel.terraform.workspace import WorkspaceIndex

    index = WorkspaceIndex(ws)
    values = index.values()
    for value in (AMP, TINY, BACKUP, FAR, TFJSON, PAST):
        assert value in values, value
    assert index.limit_note() == ""
    assert {"amp", "tiny", "far", "tok", "json_secret"} <= index.names


def test_a_scan_that_stops_says_so(ws: Path, monkeypatch: pytest.MonkeyPatch):
    from iac_kernel.terraform import workspace

    monkeypatch.setattr(workspace, "MAX_ENTRIES", 1000)
    index = workspace.WorkspaceIndex(ws)
    index.values()
    assert "stopped at 1000" in index.limit_note()


def test_the_scan_sees_a_new_state_in_an_unchanged_looking_folder(tmp_path: Path):
    """Listings are reused while a folder is unchanged; a file added later is still found,
    also when the folder's mtime is set back."""
    import time as clock

    from iac_kernel.terraform import workspace

    old = clock.time() - 100
    (tmp_path / "sub").mkdir()
    os.utime(tmp_path / "sub", (old, old))
    index = workspace.WorkspaceIndex(tmp_path)
    index.values()
    before = (tmp_path / "sub").stat()
    output = {"value": "Late-State-Value-1", "type": "string", "sensitive": True}
    state = {"version": 4, "resources": [], "outputs": {"x": output}}
    (tmp_path / "sub" / "late.tfstate").write_text(json.dumps(state))
    os.utime(tmp_path / "sub", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "Late-State-Value-1" in index.values()


def test_planted_values_never_reach_a_notebook_cell(ws: Path, tmp_path: Path):
    """The same reads from a notebook (headless: the apply is refused, nothing created)."""
    from kernel_harness import scripted_kernel

    env = {"IAC_KERNEL_HEADLESS_POLICY": "allow", "TF_CLI_CONFIG_FILE": "/dev/null"}
    kernel = scripted_kernel(tmp_path, ws, script(tmp_path / "m.json"), env)
    try:
        cell = kernel.execute("read everything")
    finally:
        kernel.stop()
    planted = [AMP, BACKUP, FAR, TFJSON, PAST, TOK]
    wire = json.dumps([m["content"] for m in cell.messages], ensure_ascii=False)
    assert "(sensitive)" in wire
    assert not leaks(wire, planted)
    assert not leaks(store_text(tmp_path / "sessions"), planted)
