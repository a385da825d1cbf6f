"""The Anthropic Messages API provider: direct API, Amazon Bedrock or Google Vertex AI.

Streams ``messages.create(stream=True)`` through the official ``anthropic`` SDK and turns
the raw events into :data:`~iac_kernel.models.base.ModelEvent`. Retries are ours, not the
SDK's (its clients are built with ``max_retries=0``): 408/429/529/5xx, connection errors and
dropped streams are retried with exponential backoff (honouring ``retry-after``), but only
while nothing has been yielded to the caller; once output has streamed a failure raises
:class:`~iac_kernel.models.base.ModelError`, because the caller has already shown it.

``ModelError.retryable`` is True only for a transient failure that ran out of attempts
before anything was yielded: calling again later is expected to help and shows nothing twice.
A failure after output started is never marked retryable.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anthropic

from iac_kernel.agent.events import Usage
from iac_kernel.models.anthropic_clients import FACTORIES, shared_client
from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
)
from iac_kernel.models.credentials import (
    PROVIDERS,
    provider_from_env,
)
from iac_kernel.redact import redact

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 200_000
LONG_CONTEXT_WINDOW = 1_000_000
#: Beta that opens the 1M window on models where it is opt-in.
CONTEXT_1M_BETA = "context-1m-2025-08-07"
#: Claude Code's convention for "this model with the 1M context window".
LONG_CONTEXT_SUFFIX = "[1m]"

# Context windows as documented on platform.claude.com model pages (checked when written):
# these models have a 1M window natively; everything else defaults to 200k.
_NATIVE_1M = frozenset(
    {
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-sonnet-5",
    }
)
# Documented to reach 1M only with the CONTEXT_1M_BETA header (ask with the "[1m]" suffix).
_BETA_1M = frozenset({"claude-sonnet-4", "claude-sonnet-4-5"})
# Documented as adaptive-thinking models without manual extended thinking: a budget cannot
# be sent to them, so thinking_budget > 0 turns on {"type": "adaptive"} instead.
_ADAPTIVE_THINKING = frozenset({"claude-opus-4-7", "claude-opus-5", "claude-sonnet-5"})

RetryCallback = Callable[[int, float, str], Awaitable[None] | None]

# Error types that may come in an `event: error` frame of a 200 stream, with the HTTP status
# they would have had as a response.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


def _transport_errors() -> tuple[type[BaseException], ...]:
    """httpx-level errors raised while reading a stream (the SDK does not wrap those)."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()


# --- configuration -----------------------------------------------------------------------


def _canonical_model(model_id: str) -> str:
    """``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` / ``claude-sonnet-4-5@20250929``
    -> ``claude-sonnet-4-5``."""
    name = model_id.strip().lower()
    name = re.sub(r"^(?:[a-z]{2,6}\.)?anthropic\.", "", name)
    name = re.sub(r"-v\d+(?::\d+)?$", "", name)
    name = re.sub(r"[@-]\d{8}$", "", name)
    return name


def resolve_model(model_id: str) -> tuple[str, int, list[str]]:
    """Split a user model id into (id sent to the API, context window, betas to send).

    A ``[1m]`` suffix asks for the 1M window; it is accepted only where that is documented.
    """
    requested = model_id.strip()
    if not requested:
        raise ValueError("model id is empty")
    long_context = requested.lower().endswith(LONG_CONTEXT_SUFFIX)
    api_id = requested[: -len(LONG_CONTEXT_SUFFIX)] if long_context else requested
    family = _canonical_model(api_id)
    if family in _NATIVE_1M:
        return api_id, LONG_CONTEXT_WINDOW, []
    if long_context:
        if family in _BETA_1M:
            return api_id, LONG_CONTEXT_WINDOW, [CONTEXT_1M_BETA]
        supported = ", ".join(sorted(_BETA_1M | _NATIVE_1M))
        raise ValueError(
            f"model {api_id!r} is not documented to support a 1M context window "
            f"(supported: {supported})"
        )
    return api_id, DEFAULT_CONTEXT_WINDOW, []


def context_window_for(model_id: str) -> int:
    """Context window in tokens for a model id (200k unless 1M is documented)."""
    return resolve_model(model_id)[1]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before retrying a failed call."""

    #: Total attempts, the first one included.
    max_attempts: int = 5
    #: Delay before the first retry; doubles with each further one.
    base_delay: float = 1.0
    #: Cap on any delay, the server's ``retry-after`` included.
    max_delay: float = 60.0
    #: Backoff delays are scaled by a random factor in [1 - jitter, 1].
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        backoff = self.base_delay * 2 ** min(attempt - 1, 30)
        backoff *= 1 - self.jitter * random.random()
        return max(0.0, min(backoff, self.max_delay))


# --- the model -----------------------------------------------------------------------------


class _IncompleteStream(Exception):
    """The response body ended before message_stop."""


@dataclass
class _Failure:
    retryable: bool
    status: int | None
    reason: str
    detail: str
    retry_after: float | None = None


class AnthropicModel:
    """A :class:`~iac_kernel.models.base.Model` on the Anthropic Messages API.

    ``client`` may be any of the SDK's async clients (``AsyncAnthropic``,
    ``AsyncAnthropicBedrock``, ``AsyncAnthropicVertex``); without one an ``AsyncAnthropic``
    is built from ``api_key``/``base_url`` or, as the SDK does, from ``ANTHROPIC_API_KEY`` /
    ``ANTHROPIC_AUTH_TOKEN`` / ``ANTHROPIC_BASE_URL``. ``on_retry(attempt, delay, reason)``
    (sync or async) is called before each retry; it may also be set as an attribute.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        on_retry: RetryCallback | None = None,
        context_window: int | None = None,
        prompt_caching: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.model_id = model_id
        self._api_model, window, self._betas = resolve_model(model_id)
        self._adaptive_thinking = _canonical_model(self._api_model) in _ADAPTIVE_THINKING
        self.context_window = context_window or window
        if client is None:
            kwargs: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": 0}
            if timeout is not None:
                kwargs["timeout"] = timeout
            client = shared_client("anthropic", anthropic.AsyncAnthropic, kwargs)
        elif getattr(client, "max_retries", 0) != 0:
            client = client.with_options(max_retries=0)
        self.client = client
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self.prompt_caching = prompt_caching

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, client={type(self.client).__name__})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant message; see the module docstring for the retry rules."""
        params = self._params(request)
        attempt = 0
        while True:
            attempt += 1
            emitted = False
            try:
                async with aclosing(self._attempt(params)) as events:
                    async for event in events:
                        emitted = True
                        yield event
                return
            except ModelError:
                raise
            except Exception as exc:
                failure = self._classify(exc)
            if emitted:
                raise ModelError(
                    self._scrub(
                        f"the model's response broke off after output had started "
                        f"({failure.reason}): {failure.detail}"
                    ),
                    retryable=False,
                    status=failure.status,
                )
            if not failure.retryable:
                raise ModelError(
                    self._scrub(f"{failure.reason}: {failure.detail}"),
                    retryable=False,
                    status=failure.status,
                )
            if attempt >= self.retry.max_attempts:
                raise ModelError(
                    self._scrub(
                        f"{failure.reason}; gave up after {attempt} attempts: {failure.detail}"
                    ),
                    retryable=True,
                    status=failure.status,
                )
            delay = self.retry.delay(attempt, failure.retry_after)
            await self._notify_retry(attempt, delay, failure.reason)
            await asyncio.sleep(delay)

    # --- request ---------------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        if request.max_tokens <= 0:
            raise ModelError(f"max_tokens must be positive, got {request.max_tokens}")
        if request.thinking_budget < 0:
            raise ModelError(f"thinking_budget must not be negative, got {request.thinking_budget}")
        adaptive = self._adaptive_thinking
        if (
            request.thinking_budget
            and not adaptive
            and request.thinking_budget >= request.max_tokens
        ):
            raise ModelError(
                f"thinking_budget ({request.thinking_budget}) must be less than "
                f"max_tokens ({request.max_tokens})"
            )
        if not request.messages:
            raise ModelError("a model request needs at least one message")
        params: dict[str, Any] = {
            "model": self._api_model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if request.thinking_budget > 0:
            params["thinking"] = (
                {"type": "adaptive"}
                if adaptive
                else {"type": "enabled", "budget_tokens": request.thinking_budget}
            )
        if self.prompt_caching:
            _add_cache_breakpoints(params)
        if self._betas:
            params["extra_headers"] = {"anthropic-beta": ",".join(self._betas)}
        return params

    async def _attempt(self, params: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        stream = await self.client.messages.create(**params, stream=True)
        async with stream:
            builder = _MessageBuilder()
            async for raw in stream:
                for event in builder.feed(raw):
                    yield event
            if not builder.finished:
                raise _IncompleteStream("the response stream ended before message_stop")
            yield builder.done()

    # --- errors ----------------------------------------------------------------------------

    def _classify(self, exc: Exception) -> _Failure:
        if isinstance(exc, anthropic.APIStatusError):
            return _classify_status(exc, self._api_model)
        if isinstance(exc, anthropic.APITimeoutError):
            return _Failure(True, None, "the request to the model timed out", _text(exc))
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__
            detail = f"{_text(exc)} ({type(cause).__name__}: {cause})" if cause else _text(exc)
            return _Failure(True, None, "could not connect to the model API", detail)
        if isinstance(exc, _TRANSPORT_ERRORS):
            return _Failure(True, None, "the response stream was dropped", _text(exc))
        if isinstance(exc, _IncompleteStream):
            return _Failure(True, None, "the response stream was cut short", str(exc))
        if "Could not resolve authentication method" in str(exc):
            return _Failure(
                False,
                None,
                "no credentials for the model API",
                "set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (or pass api_key)",
            )
        if isinstance(exc, anthropic.AnthropicError):
            return _Failure(False, None, "the Anthropic SDK failed", _text(exc))
        return _Failure(
            False, None, f"the model call failed unexpectedly ({type(exc).__name__})", _text(exc)
        )

    def _scrub(self, text: str) -> str:
        """Remove secrets: secret-looking env values and the client's own credentials."""
        text = redact(text)
        for attr in (
            "api_key",
            "auth_token",
            "aws_secret_key",
            "aws_session_token",
            "access_token",
        ):
            value = getattr(self.client, attr, None)
            if isinstance(value, str) and len(value) >= 4 and value in text:
                text = text.replace(value, f"[REDACTED:{attr}]")
        return text

    async def _notify_retry(self, attempt: int, delay: float, reason: str) -> None:
        callback = self.on_retry
        if callback is None:
            return
        try:
            result = callback(attempt, delay, self._scrub(reason))
            if inspect.isawaitable(result):
                await result
        except Exception:
            # A broken notice must not turn a retryable hiccup into a failed turn.
            log.exception("on_retry callback failed")


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _classify_status(exc: anthropic.APIStatusError, api_model: str) -> _Failure:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    error_type = error.get("type") or getattr(exc, "type", None)
    message = getattr(exc, "api_message", None) or error.get("message") or _text(exc)
    status = exc.status_code
    if status == 200:
        # An `event: error` frame inside a stream: judge it by its error type.
        status = _STREAM_ERROR_STATUS.get(str(error_type), 500)
    headers = exc.response.headers if exc.response is not None else {}
    should_retry = (headers.get("x-should-retry") or "").lower()
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    else:
        retryable = status in (408, 429) or status >= 500
    label = f"{status} {error_type}" if error_type else str(status)
    if status == 400:
        reason = f"the model API rejected the request ({label})"
    elif status == 401:
        reason = f"the model API did not accept the credentials ({label})"
        message = f"{message} (check ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN or cloud credentials)"
    elif status == 403:
        reason = f"the credentials may not use this model or API ({label})"
    elif status == 404:
        reason = f"the model API does not know this model or endpoint ({label})"
        message = f"{message} (model {api_model!r})"
    elif status == 413:
        reason = f"the request is too large for the model API ({label})"
    elif status == 429:
        reason = f"rate limited by the model API ({label})"
    elif status == 529:
        reason = f"the model API is overloaded ({label})"
    elif status >= 500:
        reason = f"the model API had a server error ({label})"
    else:
        reason = f"the model API returned an error ({label})"
    return _Failure(retryable, status, reason, str(message), _retry_after(headers))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            parsed = email.utils.parsedate_tz(value) if scale == 1.0 else None
            if parsed is None:
                continue
            seconds = email.utils.mktime_tz(parsed) - time.time()
        if seconds >= 0:
            return seconds
        return 0.0
    return None


def _add_cache_breakpoints(params: dict[str, Any]) -> None:
    """Mark the system prompt, the tool list and the conversation so far as cacheable.

    Copies what it changes; the caller's request is left as it was. Skipped for the
    messages when the caller already placed cache_control there (the API allows four).
    """
    ephemeral = {"type": "ephemeral"}
    if isinstance(params.get("system"), str):
        params["system"] = [{"type": "text", "text": params["system"], "cache_control": ephemeral}]
    tools = params.get("tools")
    if tools and isinstance(tools[-1], dict) and "cache_control" not in tools[-1]:
        params["tools"] = [*tools[:-1], {**tools[-1], "cache_control": ephemeral}]
    messages = params["messages"]
    if any(
        isinstance(block, dict) and "cache_control" in block
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    ):
        return
    last = messages[-1]
    if not isinstance(last, dict):
        return
    content = last.get("content")
    if isinstance(content, str) and content:
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": ephemeral}]
    elif (
        isinstance(content, list)
        and content
        and isinstance(content[-1], dict)
        and content[-1].get("type") not in ("thinking", "redacted_thinking")
        and not (content[-1].get("type") == "text" and not content[-1].get("text"))
    ):
        blocks = [*content[:-1], {**content[-1], "cache_control": ephemeral}]
    else:
        return
    params["messages"] = [*messages[:-1], {**last, "content": blocks}]


# --- stream accumulation -------------------------------------------------------------------


class _MessageBuilder:
    """Turns raw stream events into ModelEvents and the final storable content blocks."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.bad_json: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.finished = False

    def feed(self, event: Any) -> list[ModelEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._usage(getattr(event.message, "usage", None), start=True)
        elif kind == "content_block_start":
            return self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            return self._stop(event.index)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._usage(getattr(event, "usage", None), start=False)
        elif kind == "message_stop":
            self.finished = True
        return []

    def _usage(self, usage: Any, *, start: bool) -> None:
        if usage is None:
            return
        # message_delta counts are cumulative totals: they replace, never add; fields it
        # leaves out (None) keep the message_start value.
        fields = {
            "input_tokens": "input_tokens",
            "output_tokens": "output_tokens",
            "cache_read_input_tokens": "cache_read_tokens",
            "cache_creation_input_tokens": "cache_write_tokens",
        }
        for api_name, ours in fields.items():
            value = getattr(usage, api_name, None)
            if isinstance(value, int):
                setattr(self.usage, ours, value)
            elif start:
                setattr(self.usage, ours, 0)

    def _start(self, index: int, block: Any) -> list[ModelEvent]:
        kind = block.type
        if kind == "text":
            self.blocks[index] = {"type": "text", "text": block.text or ""}
        elif kind == "thinking":
            self.blocks[index] = {
                "type": "thinking",
                "thinking": block.thinking or "",
                "signature": getattr(block, "signature", None) or "",
            }
        elif kind == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": block.data}
        elif kind == "tool_use":
            self.blocks[index] = {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": {},
            }
            self.json_parts[index] = []
            return [ToolUseBegin(id=block.id, name=block.name)]
        else:
            # Server tools and future block types: keep them as the API sent them.
            data = block.to_dict() if hasattr(block, "to_dict") else dict(block)
            self.blocks[index] = data
            if "input" in data:
                self.json_parts[index] = []
        return []

    def _delta(self, index: int, delta: Any) -> list[ModelEvent]:
        block = self.blocks.get(index)
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta" and block["type"] == "text":
            block["text"] += delta.text
            return [TextChunk(delta.text)] if delta.text else []
        if kind == "thinking_delta" and block["type"] == "thinking":
            block["thinking"] += delta.thinking
            return [ThinkingChunk(delta.thinking)] if delta.thinking else []
        if kind == "signature_delta" and block["type"] == "thinking":
            block["signature"] = delta.signature
        elif kind == "input_json_delta" and index in self.json_parts:
            self.json_parts[index].append(delta.partial_json)
        elif kind == "citations_delta" and block["type"] == "text":
            citation = delta.citation
            block.setdefault("citations", []).append(
                citation.to_dict() if hasattr(citation, "to_dict") else citation
            )
        return []

    def _stop(self, index: int) -> list[ModelEvent]:
        block = self.blocks.get(index)
        if block is None or index not in self.json_parts:
            return []
        raw = "".join(self.json_parts.pop(index))
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            # Decided at the end: a cut-off input is expected when max_tokens hit.
            self.bad_json[index] = raw
            return []
        block["input"] = parsed
        if block["type"] == "tool_use":
            return [ToolUseEnd(id=block["id"], name=block["name"], input=parsed)]
        return []

    def done(self) -> MessageDone:
        stop_reason = self.stop_reason or "end_turn"
        if self.bad_json and stop_reason != "max_tokens":
            index, raw = next(iter(self.bad_json.items()))
            name = self.blocks[index].get("name", "?")
            raise ModelError(
                f"the model sent tool input for {name!r} that is not a JSON object: {raw[:200]!r}"
            )
        content = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if index in self.bad_json or index in self.json_parts:
                continue  # an unfinished tool call cannot be stored or answered
            if block["type"] == "text" and not block["text"]:
                continue  # the API rejects empty text blocks in later requests
            content.append(block)
        return MessageDone(content=content, stop_reason=stop_reason, usage=self.usage)


# --- factory -------------------------------------------------------------------------------


def create_anthropic_model(
    model_id: str,
    *,
    provider: str | None = None,
    retry: RetryPolicy | None = None,
    on_retry: RetryCallback | None = None,
    context_window: int | None = None,
    prompt_caching: bool = True,
    **client_kwargs: Any,
) -> AnthropicModel:
    """Build an :class:`AnthropicModel` on the chosen provider's SDK client.

    ``provider`` is ``anthropic``, ``bedrock`` or ``vertex`` (default: :func:`provider_from_env`).
    ``client_kwargs`` go to ``AsyncAnthropic`` / ``AsyncAnthropicBedrock`` /
    ``AsyncAnthropicVertex`` (e.g. ``base_url``, ``api_key``, ``aws_region``, ``region``,
    ``project_id``); ``max_retries`` is always 0. Constructing needs no network; credentials
    for Bedrock and Vertex are resolved on the first request. Configuration problems raise
    ValueError.
    """
    chosen = (provider or provider_from_env()).strip().lower()
    if chosen not in PROVIDERS:
        raise ValueError(f"unknown provider {chosen!r}; expected one of {', '.join(PROVIDERS)}")
    client_kwargs["max_retries"] = 0
    factory: Callable[..., Any] = getattr(anthropic, FACTORIES[chosen])
    client = shared_client(chosen, factory, client_kwargs)
    return AnthropicModel(
        model_id,
        client=client,
        retry=retry,
        on_retry=on_retry,
        context_window=context_window,
        prompt_caching=prompt_caching,
    )
