"""OpenTelemetry export of what the agent does: an option (the ``otel`` extra).

With the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
set and the SDK installed, each turn, model call, tool call, question to the user, approval
step and audit record becomes a span, sent in batches by the SDK's OTLP/HTTP (protobuf)
exporter; the exporter reads its other standard variables itself (headers, timeout, TLS).
Model calls and turns follow the GenAI semantic conventions (``chat MODEL`` and
``invoke_agent iac-kernel``, ``gen_ai.request.model``, ``gen_ai.provider.name``,
``gen_ai.usage.*``); tool calls are ``execute_tool NAME``; the rest is ``iac_kernel.*``.

What people typed and what tools and models said (prompts, outputs, tool arguments and
results, question texts, audit record bodies) is exported only with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the GenAI conventions'
variable), and then redacted like everything the agent shows.

Without an endpoint nothing of OpenTelemetry is imported: the first hook reads the
environment once and every later one is a check of a module global. Spans go to a tracer
provider of this module, never the process's global one: libraries that trace on their
own (model SDKs) keep exporting nothing, so what leaves is what this module decides.
Logs are not exported: OpenTelemetry's Python logs SDK is still a private module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

log = logging.getLogger(__name__)

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Values of :data:`CONTENT_ENV` that put content on spans (the GenAI conventions' own
#: ``SPAN_ONLY``/``SPAN_AND_EVENT`` included; this module emits no events).
CONTENT_ON = {"1", "true", "yes", "on", "span_only", "span_and_event"}
SERVICE_NAME = "iac-kernel"
AGENT_NAME = "iac-kernel"
SCOPE = "iac_kernel"
#: How long a turn's end waits, in a thread of its own, for the batch to go out.
FLUSH_MILLIS = 5000
#: Our provider names that the GenAI conventions spell otherwise.
PROVIDER_NAMES = {
    "bedrock": "aws.bedrock",
    "vertex": "gcp.vertex_ai",
    "deepseek_anthropic": "deepseek",
    "ollama_anthropic": "ollama",
}
#: Fields of an audit record that are facts, not content: exported always.
AUDIT_FACTS = ("step", "approval_id", "outcome", "tool", "call_id", "plan_sha256", "exit")

_T = TypeVar("_T")


class _Exporter:
    """The SDK objects this process exports with (made once, when an endpoint is set)."""

    def __init__(self, content: bool) -> None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({"service.version": _version()})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        # shutdown_on_exit: the SDK's atexit hook sends what is left when a short
        # process (`iac-kernel approvals approve`) ends.
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self.tracer = self.provider.get_tracer(SCOPE, _version())
        self.trace = trace
        self.content = content

    def start(
        self,
        name: str,
        attributes: Mapping[str, Any],
        parent: Span | None,
        *,
        client: bool = False,
        start_time: int | None = None,
    ) -> Any:
        context = self.trace.set_span_in_context(parent.span) if parent is not None else None
        kind = self.trace.SpanKind.CLIENT if client else self.trace.SpanKind.INTERNAL
        return self.tracer.start_span(
            name, context=context, kind=kind, attributes=_clean(attributes), start_time=start_time
        )

    def flush(self) -> None:
        """Send what is batched, without making the caller wait for the collector."""
        threading.Thread(
            target=self.provider.force_flush, args=(FLUSH_MILLIS,), name="otel-flush", daemon=True
        ).start()


_NOT_READ = object()
_state: Any = _NOT_READ
_state_lock = threading.Lock()
_current: ContextVar[Span | None] = ContextVar("iac_kernel_telemetry_span", default=None)


def _exporter() -> _Exporter | None:
    """The exporter, or None when telemetry is off (decided once per process)."""
    global _state
    if _state is _NOT_READ:
        with _state_lock:
            if _state is _NOT_READ:
                _state = _setup(os.environ)
    return _state


def _setup(env: Mapping[str, str]) -> _Exporter | None:
    if not any(env.get(name, "").strip() for name in ENDPOINT_ENVS):
        return None
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    protocol = next((env[n].strip() for n in PROTOCOL_ENVS if env.get(n, "").strip()), "")
    if protocol not in ("", "http/protobuf"):
        log.warning(
            "telemetry off: iac-kernel exports OTLP over http/protobuf only, "
            "not %s (OTEL_EXPORTER_OTLP_PROTOCOL)",
            protocol,
        )
        return None
    content = env.get(CONTENT_ENV, "").strip().lower() in CONTENT_ON
    try:
        return _Exporter(content)
    except ImportError as exc:
        log.warning(
            "telemetry off: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK "
            "is missing (pip install 'iac-kernel[otel]'): %s",
            exc,
        )
    except Exception as exc:  # a bad variable must not stop the agent
        log.warning("telemetry off: %s", exc)
    return None


def enabled() -> bool:
    """Whether spans are exported in this process."""
    return _exporter() is not None


class Span:
    """One open span and what the hooks add to it; a no-op when telemetry is off."""

    def __init__(self, exporter: _Exporter | None, span: Any, kind: str) -> None:
        self.exporter = exporter
        self.span = span
        self.kind = kind

    def set(self, key: str, value: Any) -> None:
        if self.span is not None and value is not None:
            self.span.set_attribute(key, _attribute(value))

    def content(self, key: str, value: Any) -> None:
        """A content attribute: set only when the user turned content on; redacted."""
        if self.span is not None and self.exporter is not None and self.exporter.content:
            self.span.set_attribute(key, _content_text(value))

    def fail(self, error_type: str, description: str = "") -> None:
        if self.span is None:
            return
        status = self.exporter.trace.Status(self.exporter.trace.StatusCode.ERROR)
        if description and self.exporter.content:
            status = self.exporter.trace.Status(
                self.exporter.trace.StatusCode.ERROR, _content_text(description)[:500]
            )
        self.span.set_status(status)
        self.set("error.type", error_type)

    def usage(self, usage: Any) -> None:
        """Token counts (an :class:`iac_kernel.events.Usage`) as the GenAI conventions
        name them; input counts every input token, cached ones included."""
        read = int(getattr(usage, "cache_read_tokens", 0) or 0)
        written = int(getattr(usage, "cache_write_tokens", 0) or 0)
        self.set("gen_ai.usage.input_tokens", int(usage.input_tokens) + read + written)
        self.set("gen_ai.usage.output_tokens", int(usage.output_tokens))
        if read:
            self.set("gen_ai.usage.cache_read.input_tokens", read)
        if written:
            self.set("gen_ai.usage.cache_creation.input_tokens", written)

    def ended(self, stop_reason: Any, usage: Any) -> None:
        """A turn's end: why it stopped and what its model calls used."""
        self.set("gen_ai.response.finish_reasons", [str(stop_reason)])
        self.set("iac_kernel.turn.stop_reason", str(stop_reason))
        self.usage(usage)

    def result(self, text: str, is_error: bool, denied: bool) -> None:
        """A tool call's end: its outcome, and its result as content."""
        outcome = "denied" if denied else "failed" if is_error else "completed"
        self.set("iac_kernel.tool.outcome", outcome)
        if is_error and not denied:
            self.fail("tool_error", text)
        self.content("gen_ai.tool.call.result", text)


_OFF = Span(None, None, "off")


@contextlib.contextmanager
def _opened(
    name: str, kind: str, attributes: Mapping[str, Any], *, client: bool = False
) -> Iterator[Span]:
    """A span that is the current one (the parent of spans started inside) until it ends."""
    exporter = _exporter()
    if exporter is None:
        yield _OFF
        return
    handle = Span(exporter, exporter.start(name, attributes, _current.get(), client=client), kind)
    token = _current.set(handle)
    try:
        yield handle
    except BaseException as exc:
        _ended_by(handle, exc)
        raise
    finally:
        with contextlib.suppress(ValueError):  # reset in another context: nothing to undo
            _current.reset(token)
        handle.span.end()


def _ended_by(handle: Span, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit):
        return
    if type(exc).__name__ == "CancelledError":
        handle.set("iac_kernel.cancelled", True)
        return
    if handle.exporter is not None and handle.exporter.content:
        handle.span.record_exception(exc)  # its message and traceback may hold content
    handle.fail(type(exc).__name__, str(exc))


# -- the hooks ---------------------------------------------------------------------------


@contextlib.contextmanager
def turn(model: Any, prompt: Any, conversation_id: str | None) -> Iterator[Span]:
    """One user turn of the agent loop (a sub-agent's turn nests in its tool call).
    The outermost turn sends its spans when it ends."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.conversation.id": conversation_id,
        **_model_attributes(model),
    }
    outermost = _current.get() is None
    try:
        with _opened(f"invoke_agent {AGENT_NAME}", "turn", attributes) as span:
            span.content("gen_ai.input.messages", _messages([{"role": "user", "content": prompt}]))
            yield span
    finally:
        exporter = _exporter()
        if outermost and exporter is not None:
            exporter.flush()


def model_call(model: Any, request: Any, events: AsyncIterator[_T]) -> AsyncIterator[_T]:
    """``events`` (a model's stream for ``request``), traced as one ``chat`` call; the
    stream itself when telemetry is off."""
    exporter = _exporter()
    if exporter is None:
        return events
    return _traced_call(exporter, model, request, events)


async def _traced_call(
    exporter: _Exporter, model: Any, request: Any, events: AsyncIterator[_T]
) -> AsyncIterator[_T]:
    attributes = {
        "gen_ai.operation.name": "chat",
        **_model_attributes(model),
        "gen_ai.request.max_tokens": getattr(request, "max_tokens", None),
        "iac_kernel.model_call.purpose": getattr(request, "purpose", None),
    }
    name = f"chat {attributes.get('gen_ai.request.model') or 'model'}"
    # Not made current: nothing starts inside a model call, and a generator's context
    # is not the caller's.
    span = Span(exporter, exporter.start(name, attributes, _current.get(), client=True), "model")
    span.content("gen_ai.system_instructions", _parts(getattr(request, "system", "")))
    span.content("gen_ai.input.messages", _messages(getattr(request, "messages", [])))
    open_ = True
    try:
        async for event in events:
            if open_ and hasattr(event, "stop_reason") and hasattr(event, "usage"):
                stop = str(event.stop_reason)
                span.set("gen_ai.response.finish_reasons", [stop])
                span.usage(event.usage)
                output = {"role": "assistant", "content": getattr(event, "content", [])}
                span.content("gen_ai.output.messages", _messages([output], finish_reason=stop))
                open_ = False
                span.span.end()  # the caller may stop reading here
            yield event
    except BaseException as exc:
        if open_:
            status = getattr(exc, "status", None)
            if status is not None:
                span.set("http.response.status_code", status)
            _ended_by(span, exc)
        raise
    finally:
        if open_:
            span.span.end()


@contextlib.contextmanager
def tool_call(name: str, call_id: str, arguments: Any) -> Iterator[Span]:
    """One tool call, from its permission check to its result."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    with _opened(f"execute_tool {name}", "tool", attributes) as span:
        span.content("gen_ai.tool.call.arguments", arguments)
        yield span


async def question(request: Any, answer: Awaitable[str]) -> str:
    """A question put to the user (a permission, an exec-time approval, the agent's own
    question): awaits ``answer`` and records which option came back, and from whom."""
    current = _current.get()
    if _exporter() is None or (current is not None and current.kind == "question"):
        return await answer  # off, or the same question passed on by a sub-agent
    options = [str(option) for option in getattr(request, "options", [])]
    attributes = {
        "gen_ai.tool.name": getattr(request, "tool_name", None),
        "gen_ai.tool.call.id": getattr(request, "call_id", None),
        "iac_kernel.question.kind": getattr(request, "kind", None),
        "iac_kernel.question.danger": bool(getattr(request, "danger", False)),
        "iac_kernel.question.options": options,
    }
    name = f"iac_kernel.question {getattr(request, 'tool_name', '') or 'agent'}"
    with _opened(name, "question", attributes) as span:
        span.content(
            "iac_kernel.question.text",
            f"{getattr(request, 'title', '')}\n{getattr(request, 'reason', '')}",
        )
        got = await answer
        chosen = str(got) if got in [*options, "cancelled"] else "other"
        span.set("iac_kernel.question.answer", chosen)
        span.set("iac_kernel.question.answered_by", getattr(got, "by", "") or None)
        span.content("iac_kernel.question.note", getattr(got, "note", "") or None)
    return got


def approval(conn: Any, step: str, record_id: str, actor: str | None) -> None:
    """A step of an approval record (request, approve, reject, spend, ...), exported when
    ``conn``'s transaction commits: a step that rolled back never happened."""
    exporter = _exporter()
    if exporter is None:
        return
    attributes = {
        "iac_kernel.approval.id": record_id,
        "iac_kernel.approval.step": step,
        "iac_kernel.approval.actor": actor,
    }
    _after_commit(conn, _later(exporter, f"iac_kernel.approval {step}", attributes))


def audited(conn: Any, entry: _T, *, imported: bool = False) -> _T:
    """``entry`` (a :class:`iac_kernel.team.audit.AuditEntry` appended in ``conn``'s
    transaction; ``imported`` from an old ``audit.jsonl``), exported when that commits;
    returns it."""
    exporter = _exporter()
    if exporter is None:
        return entry
    record = getattr(entry, "record", {}) or {}
    attributes = {
        "iac_kernel.audit.seq": getattr(entry, "seq", None),
        "iac_kernel.audit.kind": getattr(entry, "kind", None),
        "iac_kernel.audit.actor": getattr(entry, "actor", None),
        "iac_kernel.audit.sha256": getattr(entry, "sha256", None),
        "iac_kernel.audit.imported": imported or None,
        **{f"iac_kernel.audit.{key}": _fact(record.get(key)) for key in AUDIT_FACTS},
    }
    emit = _later(exporter, f"iac_kernel.audit {getattr(entry, 'kind', 'record')}", attributes)
    _after_commit(conn, emit, content=record)
    return entry


def _later(exporter: _Exporter, name: str, attributes: Mapping[str, Any]) -> Callable[[Any], None]:
    """Emits a span started now (and under the current span) when called."""
    parent, started = _current.get(), time.time_ns()

    def emit(content: Any = None) -> None:
        try:
            handle = Span(
                exporter, exporter.start(name, attributes, parent, start_time=started), ""
            )
            handle.content("iac_kernel.audit.record", content)
            handle.span.end()
        except Exception:  # telemetry never fails what it observes
            log.exception("could not export %s", name)

    return emit


def _after_commit(conn: Any, emit: Callable[[Any], None], content: Any = None) -> None:
    """Call ``emit`` once ``conn`` (a SQLAlchemy connection) commits; at once without one."""
    try:
        from sqlalchemy import event
    except ImportError:
        emit(content)
        return
    try:
        event.listen(conn, "commit", lambda _conn: emit(content), once=True)
    except Exception:  # not a SQLAlchemy connection: nothing to wait for
        emit(content)


# -- attribute values ----------------------------------------------------------------------


def _model_attributes(model: Any) -> dict[str, Any]:
    """``gen_ai.request.model``, ``gen_ai.provider.name`` (and the deprecated
    ``gen_ai.system``) and the endpoint's address, from a model object."""
    model_id = str(getattr(model, "model_id", "") or "")
    requested = getattr(model, "api_model", None) or model_id
    provider = getattr(getattr(model, "provider", None), "name", None)
    client = getattr(model, "client", None)
    if provider is None and client is not None:
        sdk = type(client).__name__
        provider = "bedrock" if "Bedrock" in sdk else "vertex" if "Vertex" in sdk else None
        provider = provider or ("anthropic" if "Anthropic" in sdk else None)
    provider = PROVIDER_NAMES.get(provider or "", provider) or model_id.partition(":")[0]
    attributes: dict[str, Any] = {
        "gen_ai.request.model": requested,
        "gen_ai.provider.name": provider or None,
        "gen_ai.system": provider or None,
    }
    url = getattr(client, "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    if host:
        attributes["server.address"] = str(host)
        attributes["server.port"] = port if isinstance(port, int) else None
    return attributes


def _messages(messages: Any, finish_reason: str | None = None) -> list[dict[str, Any]]:
    """Anthropic-shaped messages in the GenAI conventions' message form."""
    shaped = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        one: dict[str, Any] = {
            "role": message.get("role", "user"),
            "parts": _parts(message.get("content")),
        }
        if finish_reason is not None:
            one["finish_reason"] = finish_reason
        shaped.append(one)
    return shaped


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        elif kind == "tool_use":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": block.get("input"),
                }
            )
        elif kind == "tool_result":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": block.get("tool_use_id"),
                    "response": block.get("content"),
                }
            )
        else:
            parts.append({"type": str(kind)})
    return parts


def _content_text(value: Any) -> str:
    """Content as one redacted string (JSON unless it is text already)."""
    from iac_kernel.redact import redact_value

    value = redact_value(value)
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=True)
    return _text(text)


def _text(value: str) -> str:
    """Text protobuf can carry (undecodable bytes kept as lone surrogates are replaced)."""
    return value.encode("utf-8", "replace").decode("utf-8")


def _attribute(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (list, tuple)):
        return [_text(str(v)) for v in value]
    return value


def _fact(value: Any) -> Any:
    return value if isinstance(value, (str, bool, int, float)) else None


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _attribute(v) for k, v in attributes.items() if v is not None}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iac-kernel")
    except PackageNotFoundError:
        return "unknown"
