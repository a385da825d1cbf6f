"""A ``session/load`` replay masks what is known now, whatever the log held when it was
written: an environment secret and a workspace's sensitive value that became known after
the log was written, and credential shapes in every spelling, in ASCII output and not;
plain text stays readable. Checked on the raw lines a real client reads."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from iac_kernel.sessions.store import SessionStore, now_iso
from test_acp_support import RawServer, server_env

LATE_ENV = "Late-Env-Secret-Value-7731"
LATE_STATE = "late-state-password-5519"
NAME = "LATER_API_TOKEN"
SHAPES = {
    "AKIAIOSFODNN7EXAMPLE": "aws-access-key-id",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "aws-secret",
    "Sup3rS3cret!": "password",
    "hunter2pass": "url-password",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345": "github-token",
}
OUTPUTS = [
    f"note: {LATE_ENV} and {LATE_STATE} in plain text\nordinary words stay",
    f"encoded: {base64.b64encode(LATE_ENV.encode()).decode()}",
    "keys: AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Server=db;PASSWORD=Sup3rS3cret!; postgres://app:hunter2pass@db/app",
    "café token ghp_0123456789abcdefghijABCDEFGHIJ012345 née",  # not ASCII
]


def _write_log(workspace: Path) -> str:
    """A session written before either value was known (no masking then)."""
    store = SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"])
    meta = store.create(str(workspace), title="written before")
    records: list[dict[str, Any]] = []
    for i, output in enumerate(OUTPUTS):
        call = f"toolu_{i}"
        use = {"type": "tool_use", "id": call, "name": "bash", "input": {"command": "cat x"}}
        records += [
            {"type": "message", "ts": now_iso(),
             "message": {"role": "user", "content": [{"type": "text", "text": f"q{i}"}]}},
            {"type": "message", "ts": now_iso(),
             "message": {"role": "assistant", "content": [use]}},
            {"type": "tool_result", "ts": now_iso(), "name": "bash",
             "block": {"type": "tool_result", "tool_use_id": call, "content": output}},
        ]  # fmt: skip
    path = store.root / f"{meta.session_id}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    meta.message_count = len(records)
    store.write_meta(meta)
    return meta.session_id


async def test_a_load_masks_values_learned_after_the_log_was_written(
    tmp_path: Path, workspace: Path
):
    sid = _write_log(workspace)
    output = {"value": LATE_STATE, "type": "string", "sensitive": True}
    state = {"version": 4, "resources": [], "outputs": {"db": output}}
    (workspace / "terraform.tfstate").write_text(json.dumps(state))  # known only now
    env = server_env(**{NAME: LATE_ENV})  # so is this secret
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.initialize()
        loaded = await server.call(
            "session/load", {"cwd": str(workspace), "sessionId": sid, "mcpServers": []}
        )
        assert "result" in loaded
    secrets = [LATE_ENV, LATE_STATE, base64.b64encode(LATE_ENV.encode()).decode(), *SHAPES]
    calls = []
    for raw in server.lines:
        for secret in secrets:
            assert secret.encode() not in raw, (secret, raw[:300])
        update = (json.loads(raw).get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            calls.append(update)
    # One final tool_call per call, its output masked and otherwise whole.
    assert [c["sessionUpdate"] for c in calls] == ["tool_call"] * len(OUTPUTS)
    assert not any("rawOutput" in c for c in calls)  # the text is sent once, as content
    shown = "\n".join(c["content"][0]["content"]["text"] for c in calls)
    assert f"[REDACTED:{NAME}]" in shown and "(sensitive)" in shown
    for kind in set(SHAPES.values()):
        assert f"[REDACTED:{kind}]" in shown, kind
    assert "ordinary words stay" in shown and "café token" in shown and "née" in shown
