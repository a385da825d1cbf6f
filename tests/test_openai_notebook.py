"""A runbook notebook run headless (nbclient, as papermill runs it) in a kernel whose
environment points at an OpenAI-compatible endpoint: the fake one on loopback."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from fake_openai import Call, Chat, FakeOpenAIServer
from iac_kernel.kernel.app import KERNEL_NAME, write_spec
from iac_kernel.kernel.render.cards import CARD_MIME
from iac_kernel.kernel.session.status import SESSION_MIME
from kernel_harness import CREDENTIAL_ENV


def test_a_runbook_runs_headless_on_an_openai_compatible_endpoint(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("IAC_KERNEL_MODEL", raising=False)
    (workspace / "main.tf").write_text('resource "aws_s3_bucket" "logs" {}\n')
    write_spec(tmp_path / "kernels" / KERNEL_NAME)
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Runbook: what does this stack create?"),
        nbformat.v4.new_code_cell("Read main.tf and tell me what it creates."),
        nbformat.v4.new_code_cell("%session"),
    ]
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("IAC_KERNEL_PROVIDER", "deepseek")
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-notebook-42")
        monkeypatch.setenv("IAC_KERNEL_BASE_URL", server.url)
        server.enqueue(
            Chat(
                reasoning="Read the file first.",
                calls=[Call("call_nb", "read_file", ['{"path": ', '"main.tf"}'])],
                finish_reason="tool_calls",
            ),
            Chat(text="It creates one S3 bucket, `logs`."),
        )
        km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)
        client = NotebookClient(
            nb, km=km, timeout=90, resources={"metadata": {"path": os.fspath(workspace)}}
        )
        client.execute()
        requests = server.chat_requests()

    assert len(requests) == 2
    assert requests[0].headers["authorization"] == "Bearer sk-deepseek-notebook-42"
    assert requests[0].body["model"] == "deepseek-flash"
    assert requests[1].body["messages"][-1]["tool_call_id"] == "call_nb"
    answer_cell, session_cell = nb.cells[1], nb.cells[2]
    cards = [o for o in answer_cell.outputs if CARD_MIME in o.get("data", {})]
    assert cards and cards[0].data[CARD_MIME]["status"] == "done"
    texts = "\n".join(o.get("data", {}).get("text/plain", "") for o in answer_cell.outputs)
    assert "one S3 bucket" in texts
    infos = [
        o.metadata[SESSION_MIME]
        for o in answer_cell.outputs
        if SESSION_MIME in o.get("metadata", {})
    ]
    assert infos and infos[-1]["model"] == "deepseek:deepseek-flash"
    assert infos[-1]["provider"] == "deepseek"
    shown = "\n".join(o.get("data", {}).get("text/plain", "") for o in session_cell.outputs)
    assert "provider" in shown and "deepseek" in shown


def test_model_switches_provider_in_a_kernel_and_says_what_the_history_keeps(
    tmp_path: Path, workspace: Path
) -> None:
    from kernel_harness import scripted_kernel

    (workspace / "notes.txt").write_text("hello from the notes\n")
    script = Path(__file__).parent / "scripts" / "kernel_turns.json"
    with FakeOpenAIServer() as server:
        server.enqueue(Chat(text="The notes greet you."))
        kernel = scripted_kernel(
            tmp_path,
            workspace,
            script,
            {"OPENAI_API_KEY": "sk-openai-kernel-7", "OPENAI_BASE_URL": server.url},
        )
        try:
            assert kernel.execute("read the notes").status == "ok"
            switched = kernel.execute("%model openai:gpt-4.1")
            answer = kernel.execute("so what do they say?")
            info = kernel.execute("%session")
        finally:
            kernel.stop()
        sent = server.chat_requests()[0].body["messages"]

    def plain(result) -> str:
        return "\n".join(
            m["content"]["data"].get("text/plain", "")
            for kind in ("display_data", "update_display_data")
            for m in result.of_type(kind)
            if "data" in m["content"]
        )

    assert "Model set to openai:gpt-4.1." in plain(switched)
    assert "1 tool calls with their results" in plain(switched)
    assert "The notes greet you." in plain(answer)
    assert [m["role"] for m in sent][-3:] == ["tool", "assistant", "user"]
    assert "provider" in plain(info) and "openai" in plain(info)
