"""OpenTelemetry export (iac_kernel/telemetry.py): what an OTLP receiver on loopback gets.

The receiver is a small HTTP server that decodes each ``ExportTraceServiceRequest`` with
opentelemetry-proto's classes. The agent runs as it does for users: ``iac-kernel acp``
with the scripted model, and a short process writing approval records to a SQLite team
store. By default no prompt, model output, tool argument or tool result reaches the
receiver in any form (the raw request bodies are searched); with the GenAI conventions'
content variable it does, redacted.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from iac_kernel.telemetry import CONTENT_ENV
from test_acp_support import CHECKOUT, SCRIPTS, acp_server, server_env, wait_until

SCRIPT = SCRIPTS / "telemetry.json"
PROMPT_MARK = "PROMPT-0a8e"
FILE_MARK = "TOOL-OUTPUT-51e0"
#: What the script's model says and the argument it writes (tests/scripts/telemetry.json).
MODEL_MARK, ARGUMENT_MARK, ANSWER_MARK = "MODEL-SAID-4b1e", "ARGUMENT-9c2d", "ANSWER-7f3a"
SECRET_ENV, SECRET = "IAC_TEST_API_TOKEN", "tok-3f9a2b7c1d"
PROMPT = f"telemetry check {PROMPT_MARK} with {SECRET}"
CONTENT_MARKS = (PROMPT_MARK, FILE_MARK, MODEL_MARK, ARGUMENT_MARK, ANSWER_MARK, SECRET)
TURN = "invoke_agent iac-kernel"


class OtlpReceiver:
    """OTLP/HTTP traces on 127.0.0.1: every request's raw body and its decoded spans."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.spans: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(self.path, body)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def take(self, path: str, body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.paths.append(path)
            self.bodies.append(body)
            for resource_spans in request.resource_spans:
                self.resources.append(_attributes(resource_spans.resource.attributes))
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(_span(span, scope_spans.scope.name))

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [s for s in self.spans if s["name"] == name]

    def one(self, name: str) -> dict[str, Any]:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        with self._lock:
            return [s["name"] for s in self.spans]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _span(span: trace_pb2.Span, scope: str) -> dict[str, Any]:
    return {
        "name": span.name,
        "scope": scope,
        "kind": trace_pb2.Span.SpanKind.Name(span.kind),
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "attributes": _attributes(span.attributes),
        "status": trace_pb2.Status.StatusCode.Name(span.status.code),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
    }


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which) if which else None


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    yield server
    server.close()


async def run_turn(tmp_path: Path, workspace: Path, receiver: OtlpReceiver, **env: str) -> str:
    """One scripted turn in ``iac-kernel acp`` exporting to ``receiver``: it reads a file,
    writes one (the user allows it when asked) and answers; returns the session id."""
    (workspace / "notes.txt").write_text(f"{FILE_MARK}\n")
    extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, SECRET_ENV: SECRET, **env}
    async with acp_server(tmp_path, env=server_env(SCRIPT, **extra)) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block(PROMPT)])
        assert answer.stop_reason == "end_turn"
        assert [p["tool_call"].title for p in client.permissions] == ["write_file: out.txt"]
        # Sent when the turn ended, while the agent still runs: no exit needed.
        await wait_until(lambda: receiver.named(TURN), "the turn's span")
    assert (workspace / "out.txt").read_text() == f"{ARGUMENT_MARK}\n"
    return sid


async def test_a_turn_is_traced_with_genai_attributes_and_no_content(
    tmp_path: Path, workspace: Path, receiver: OtlpReceiver
) -> None:
    sid = await run_turn(tmp_path, workspace, receiver)

    assert set(receiver.paths) == {"/v1/traces"}
    assert {r.get("service.name") for r in receiver.resources} == {"iac-kernel"}
    turn = receiver.one(TURN)
    attrs = turn["attributes"]
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "iac-kernel"
    assert attrs["gen_ai.conversation.id"] == sid
    assert attrs["gen_ai.request.model"] == "scripted"
    assert attrs["iac_kernel.turn.stop_reason"] == "end_turn"
    # Both model calls: 40 + (60 + 5 cached) in, 12 + 8 out.
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (105, 20)
    assert turn["parent"] == ""

    calls = sorted(receiver.named("chat scripted"), key=lambda s: s["start"])
    assert len(calls) == 2
    for call in calls:
        a = call["attributes"]
        assert call["kind"] == "SPAN_KIND_CLIENT"
        assert call["parent"] == turn["span_id"] and call["trace_id"] == turn["trace_id"]
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "scripted"
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "scripted"
    first, second = (c["attributes"] for c in calls)
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (40, 12)
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert (second["gen_ai.usage.input_tokens"], second["gen_ai.usage.output_tokens"]) == (65, 8)
    assert second["gen_ai.usage.cache_read.input_tokens"] == 5
    assert second["gen_ai.response.finish_reasons"] == ["end_turn"]

    read, write = receiver.one("execute_tool read_file"), receiver.one("execute_tool write_file")
    for span, tool in ((read, "read_file"), (write, "write_file")):
        a = span["attributes"]
        assert span["parent"] == turn["span_id"]
        assert a["gen_ai.operation.name"] == "execute_tool"
        assert a["gen_ai.tool.name"] == tool and a["gen_ai.tool.call.id"]
        assert a["iac_kernel.tool.outcome"] == "completed"
        assert span["status"] != "STATUS_CODE_ERROR"
    assert read["start"] < write["start"]
    # The write was asked about: the question is a child of its tool call.
    question = receiver.one("iac_kernel.question write_file")
    q = question["attributes"]
    assert question["parent"] == write["span_id"]
    assert q["gen_ai.tool.call.id"] == write["attributes"]["gen_ai.tool.call.id"]
    assert q["iac_kernel.question.answer"] == "allow_once"
    assert "allow_once" in q["iac_kernel.question.options"]
    assert q["iac_kernel.question.answered_by"]
    assert not receiver.named("iac_kernel.question read_file")  # a read inside: not asked

    # No content: not an attribute, and not anywhere in what was sent.
    for span in receiver.spans:
        assert not {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
            "iac_kernel.question.text",
        } & set(span["attributes"]), span
    sent = b"".join(receiver.bodies)
    assert b"execute_tool write_file" in sent
    for mark in CONTENT_MARKS:
        assert mark.encode() not in sent, mark


async def test_content_is_exported_redacted_when_turned_on(
    tmp_path: Path, workspace: Path, receiver: OtlpReceiver
) -> None:
    await run_turn(tmp_path, workspace, receiver, **{CONTENT_ENV: "true"})

    turn = receiver.one(TURN)["attributes"]
    prompt = json.loads(turn["gen_ai.input.messages"])
    assert prompt[0]["role"] == "user"
    text = prompt[0]["parts"][0]["content"]
    assert PROMPT_MARK in text and f"[REDACTED:{SECRET_ENV}]" in text
    first, second = (
        c["attributes"] for c in sorted(receiver.named("chat scripted"), key=lambda s: s["start"])
    )
    assert PROMPT_MARK in first["gen_ai.input.messages"]
    output = json.loads(first["gen_ai.output.messages"])
    assert output[0]["finish_reason"] == "tool_use"
    assert [p["type"] for p in output[0]["parts"]] == ["text", "tool_call", "tool_call"]
    assert MODEL_MARK in output[0]["parts"][0]["content"]
    assert ANSWER_MARK in second["gen_ai.output.messages"]
    assert FILE_MARK in second["gen_ai.input.messages"]  # the read's result went back
    assert "infrastructure" in first["gen_ai.system_instructions"]

    read = receiver.one("execute_tool read_file")["attributes"]
    write = receiver.one("execute_tool write_file")["attributes"]
    assert json.loads(read["gen_ai.tool.call.arguments"]) == {"path": "notes.txt"}
    assert FILE_MARK in read["gen_ai.tool.call.result"]
    assert ARGUMENT_MARK in json.loads(write["gen_ai.tool.call.arguments"])["content"]
    question = receiver.one("iac_kernel.question write_file")["attributes"]
    assert "out.txt" in question["iac_kernel.question.text"]
    # Redacted like everything the agent shows: the secret's value never leaves.
    assert SECRET.encode() not in b"".join(receiver.bodies)


# -- approvals and audit records: a short process, exporting when it exits ---------------

APPROVALS = """
import sys
from iac_kernel.team import audit
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, open_store

store = open_store("sqlite:///" + sys.argv[1])
book = Approvals(store)
binding = {"folder": "/srv/infra", "workspace": "prod", "data_dir": None, "cli_config": None,
           "var_files": [], "lineage": None}
record = book.request(Identity("alice"), "a" * 64, binding, "Plan: SUMMARY-6d0b.",
                      Requirement(approvers=1, rules=("prod needs a second person",)))
book.approve(record.id, Identity("bob"))
try:  # a record whose transaction rolls back was never written: nothing is exported
    with store.transaction() as conn:
        audit.append_in(conn, {"kind": "rolled-back"}, "alice")
        raise RuntimeError
except RuntimeError:
    pass
print(record.id)
"""


def run_python(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter running this checkout."""
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": os.pathsep.join([str(CHECKOUT), str(CHECKOUT / "tests")]),
        "IAC_KERNEL_SESSIONS_DIR": os.environ["IAC_KERNEL_SESSIONS_DIR"],
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CHECKOUT,
    )


@pytest.mark.parametrize("content", [False, True])
def test_approval_steps_and_audit_records_are_exported_after_commit(
    tmp_path: Path, receiver: OtlpReceiver, content: bool
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    if content:
        env[CONTENT_ENV] = "true"
    run = run_python(APPROVALS, str(tmp_path / "team.sqlite"), env=env)
    assert run.returncode == 0, run.stderr
    record_id = run.stdout.strip()

    # Delivered by the exit alone (no turn ended in this process).
    request = receiver.one("iac_kernel.approval request")["attributes"]
    approve = receiver.one("iac_kernel.approval approve")["attributes"]
    assert request["iac_kernel.approval.id"] == approve["iac_kernel.approval.id"] == record_id
    assert request["iac_kernel.approval.actor"] == "alice"
    assert approve["iac_kernel.approval.actor"] == "bob"
    audits = sorted(
        (s["attributes"] for s in receiver.named("iac_kernel.audit approval")),
        key=lambda a: a["iac_kernel.audit.seq"],
    )
    assert [(a["iac_kernel.audit.seq"], a["iac_kernel.audit.step"]) for a in audits] == [
        (1, "request"),
        (2, "approve"),
    ]
    assert [a["iac_kernel.audit.actor"] for a in audits] == ["alice", "bob"]
    assert all(len(a["iac_kernel.audit.sha256"]) == 64 for a in audits)
    assert all(a["iac_kernel.audit.approval_id"] == record_id for a in audits)
    assert not receiver.named("iac_kernel.audit rolled-back")
    sent = b"".join(receiver.bodies)
    assert (b"SUMMARY-6d0b" in sent) is content
    if content:
        assert "SUMMARY-6d0b" in json.loads(audits[0]["iac_kernel.audit.record"])["summary"]


# -- off: nothing imported, nothing in the way ---------------------------------------------

TURN_WITHOUT_ENDPOINT = """
import asyncio, json, sys
from pathlib import Path
from core_support import TouchTool, make_loop, write_script
from iac_kernel import telemetry

blocked = sys.argv[2] == "blocked"
if blocked:  # the SDK is not installed
    for name in ("opentelemetry.sdk", "opentelemetry.exporter"):
        sys.modules[name] = None
cwd = Path(sys.argv[1])
script = write_script(cwd / "script.json", [{"turns": [
    {"tool_use": [{"name": "touch", "input": {"path": "made.txt"}}]}, {"text": "done"}]}])
loop, _ = make_loop(script, cwd, [TouchTool()])

async def allow(request):
    return "allow_once"

ended = asyncio.run(loop.run_turn([{"type": "text", "text": "go"}], lambda e: None, allow))
loaded = sorted(m for m, module in sys.modules.items() if module is not None and m.startswith(
    ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto")))
print(json.dumps({"stop": ended.stop_reason, "made": (cwd / "made.txt").exists(),
                  "enabled": telemetry.enabled(), "loaded": loaded}))
"""


@pytest.mark.parametrize(
    ("endpoint", "blocked"),
    [(False, False), (True, True)],
    ids=["no-endpoint", "endpoint-without-sdk"],
)
def test_without_endpoint_or_sdk_nothing_is_imported_and_the_turn_runs(
    tmp_path: Path, receiver: OtlpReceiver, endpoint: bool, blocked: bool
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint} if endpoint else {}
    run = run_python(TURN_WITHOUT_ENDPOINT, str(tmp_path), "blocked" if blocked else "", env=env)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result == {"stop": "end_turn", "made": True, "enabled": False, "loaded": []}
    warnings = [line for line in run.stderr.splitlines() if "telemetry off" in line]
    if blocked:  # one readable line says why, and how to get it
        assert len(warnings) == 1 and "iac-kernel[otel]" in warnings[0], run.stderr
    else:
        assert warnings == []
    assert receiver.bodies == []


def test_the_check_sees_an_sdk_import(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """The same run with the endpoint and the SDK does load it (the check above can fail)."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    run = run_python(TURN_WITHOUT_ENDPOINT, str(tmp_path), "", env=env)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["enabled"] is True and "opentelemetry.sdk.trace" in result["loaded"]
    assert receiver.named(TURN), receiver.names()  # sent at turn end, or at exit
