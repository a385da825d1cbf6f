"""The Anthropic Messages API provider: direct API, Amazon Bedrock, Google Vertex AI and
Messages-compatible profiles, on the official ``anthropic`` SDK.

A user's model id (provider spellings, ``[1m]``) becomes the id sent, its context window
and betas; a request becomes ``messages.create(stream=True)`` arguments (thinking,
prompt-cache breakpoints, other providers' turns made valid); stream events become model
events. 408/429/529/5xx (or the server's ``x-should-retry``) are retried.

Building an SDK client costs 20-35 ms (TLS context, certificate store) and about 0.9 MB,
so every model (and so every session) of a process shares the client of its
configuration: provider, constructor arguments and the environment the SDK reads
(credentials, endpoints, proxies, CA bundles). A client's pooled connections belong to
the event loop that opened them, so loops never share one. :func:`prepare_client` builds
the default client ahead of time (in a background thread at start-up).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any

import anthropic

from iac_kernel.events import Usage
from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
    json_object,
)
from iac_kernel.models.providers import (
    ANTHROPIC_CAPABILITIES,
    ANTHROPIC_FAMILY,
    BASE_URL_ENV,
    PROVIDER_ENV,
    PROVIDERS,
    api_key,
    base_url,
    canonical_model,
    capabilities,
    provider_from_env,
)
from iac_kernel.models.retry import (
    CutStream,
    Failure,
    RetryCallback,
    RetryingModel,
    RetryPolicy,
    error_text,
    retry_after_seconds,
)
from iac_kernel.redact import redact

# --- model ids and request arguments -------------------------------------------------------

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


def resolve_model(model_id: str) -> tuple[str, int, list[str]]:
    """Split a user model id into (id sent to the API, context window, betas to send).

    A ``[1m]`` suffix asks for the 1M window; it is accepted only where that is documented.
    """
    requested = model_id.strip()
    if not requested:
        raise ValueError("model id is empty")
    long_context = requested.lower().endswith(LONG_CONTEXT_SUFFIX)
    api_id = requested[: -len(LONG_CONTEXT_SUFFIX)] if long_context else requested
    family = canonical_model(api_id)
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


def build_params(
    request: ModelRequest,
    *,
    api_model: str,
    betas: list[str],
    prompt_caching: bool,
    thinking: bool = True,
) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request``; bad requests raise ModelError.

    ``thinking=False`` (a backend without it) never asks for extended thinking. The
    history is sent through :func:`for_messages_api` (other providers' turns made valid).
    """
    if request.thinking_budget < 0:
        raise ModelError(f"thinking_budget must not be negative, got {request.thinking_budget}")
    adaptive = canonical_model(api_model) in _ADAPTIVE_THINKING
    if request.thinking_budget and not adaptive and request.thinking_budget >= request.max_tokens:
        raise ModelError(
            f"thinking_budget ({request.thinking_budget}) must be less than "
            f"max_tokens ({request.max_tokens})"
        )
    params: dict[str, Any] = {
        "model": api_model,
        "max_tokens": request.max_tokens,
        "messages": for_messages_api(request.messages),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = request.tools
    if request.thinking_budget > 0 and thinking:
        params["thinking"] = (
            {"type": "adaptive"}
            if adaptive
            else {"type": "enabled", "budget_tokens": request.thinking_budget}
        )
    if prompt_caching:
        _add_cache_breakpoints(params)
    if betas:
        params["extra_headers"] = {"anthropic-beta": ",".join(betas)}
    return params


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


_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")


def for_messages_api(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as the Messages API takes it, whichever provider wrote it.

    Thinking with no signature (another provider's reasoning) cannot be verified by
    Claude and is dropped; tool-call ids other providers made are rewritten to the
    ``[a-zA-Z0-9_-]`` the API accepts (the same way in the call and its result). Copies
    only what changes.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(message)
            continue
        blocks = [_block(b) for b in content if not _unsigned_thinking(b)]
        if not blocks:
            blocks = [{"type": "text", "text": "(no text)"}]
        out.append({**message, "content": blocks} if blocks != content else message)
    return out


def _unsigned_thinking(block: Any) -> bool:
    return (
        isinstance(block, dict) and block.get("type") == "thinking" and not block.get("signature")
    )


def _block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_use" and _TOOL_ID.search(str(block.get("id", ""))):
        return {**block, "id": _TOOL_ID.sub("_", str(block["id"])) or "call"}
    if block.get("type") == "tool_result" and _TOOL_ID.search(str(block.get("tool_use_id", ""))):
        return {**block, "tool_use_id": _TOOL_ID.sub("_", str(block["tool_use_id"])) or "call"}
    return block


# --- the stream ----------------------------------------------------------------------------


class MessageBuilder:
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
        parsed = json_object(raw)
        if parsed is None:
            # Decided at the end: a cut-off input is expected when max_tokens hit.
            self.bad_json[index] = raw
            return []
        block["input"] = parsed
        if block["type"] == "tool_use":
            return [ToolUseEnd(id=block["id"], name=block["name"], input=parsed)]
        return []

    def finish(self) -> list[ModelEvent]:
        """The stored message, once the stream ended with ``message_stop``."""
        if not self.finished:
            raise CutStream("the response stream ended before message_stop")
        return [self.done()]

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


# --- failures ------------------------------------------------------------------------------

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


#: What a status says, in words.
_STATUS_REASONS = {
    400: "the model API rejected the request",
    401: "the model API did not accept the credentials",
    403: "the credentials may not use this model or API",
    404: "the model API does not know this model or endpoint",
    413: "the request is too large for the model API",
    429: "rate limited by the model API",
    529: "the model API is overloaded",
}


def classify(exc: Exception, api_model: str) -> Failure | None:
    """What went wrong, whether retrying may help, and how to say it (None: the SDK's
    errors do not explain it)."""
    keys = " / ".join(PROVIDERS["anthropic"].keys)
    if isinstance(exc, anthropic.APIStatusError):
        return _classify_status(exc, api_model, keys)
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(True, None, "the request to the model timed out", error_text(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        detail = f"{error_text(exc)} ({type(cause).__name__}: {cause})" if cause else None
        return Failure(True, None, "could not connect to the model API", detail or error_text(exc))
    if "Could not resolve authentication method" in str(exc):
        return Failure(False, None, "no credentials for the model API", f"set {keys}")
    if isinstance(exc, anthropic.AnthropicError):
        return Failure(False, None, "the Anthropic SDK failed", error_text(exc))
    return None


def _classify_status(exc: anthropic.APIStatusError, api_model: str, keys: str) -> Failure:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    error_type = error.get("type") or getattr(exc, "type", None)
    message = getattr(exc, "api_message", None) or error.get("message") or error_text(exc)
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
    default = (
        "the model API had a server error" if status >= 500 else "the model API returned an error"
    )
    reason = f"{_STATUS_REASONS.get(status, default)} ({label})"
    if status == 401:
        message = f"{message} (check {keys} or cloud credentials)"
    elif status == 404:
        message = f"{message} (model {api_model!r})"
    return Failure(retryable, status, reason, str(message), retry_after_seconds(headers))


# --- shared SDK clients --------------------------------------------------------------------

_SECRET_ARG = re.compile(r"key|token|secret|credential", re.IGNORECASE)


def build_client(provider: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Construct an SDK client; configuration problems become a readable ValueError."""
    try:
        return factory(**kwargs)
    except (ValueError, TypeError, anthropic.AnthropicError) as exc:
        message = redact(str(exc))
        for name, value in kwargs.items():
            if isinstance(value, str) and len(value) >= 4 and _SECRET_ARG.search(name):
                message = message.replace(value, f"[REDACTED:{name}]")
        raise ValueError(f"cannot set up the {provider} client: {message}") from None


#: Environment the SDK clients read when built (credentials, endpoints, proxies, CAs).
_CLIENT_ENV = ("ANTHROPIC_", "AWS_", "CLOUD_ML_", "GOOGLE_", "SSL_CERT_", "REQUESTS_CA_")
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")  # in either case
_shared_lock = threading.Lock()
#: Clients by event loop, then by configuration: a client's pooled connections belong
#: to the loop that opened them, so loops never share one.
_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
#: Clients built ahead of time outside any loop (:func:`prepare_client`), unused so far:
#: the first loop that asks for the configuration takes it.
_unbound: dict[tuple[Any, ...], Any] = {}


def shared_client(provider: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """The SDK client for this provider configuration, shared by every model (and so
    every session) of the running event loop; built on first use. Outside a running
    loop, or with unhashable options, a new client is built."""
    key = _client_key(provider, factory, kwargs)
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if key is None or loop is None:
        return build_client(provider, factory, kwargs)
    with _shared_lock:
        pool = _shared.setdefault(loop, {})
        client = pool.get(key) or _unbound.pop(key, None)
        if client is None:
            client = build_client(provider, factory, kwargs)
        pool[key] = client
        return client


def prepare_client() -> None:
    """Build the client :func:`create_anthropic_model` will use for the environment's
    provider now (e.g. in a background thread at start), so the first prompt does not pay."""
    chosen, factory = _sdk_client(None)
    kwargs: dict[str, Any] = {"max_retries": 0}
    key = _client_key(chosen, factory, kwargs)
    # Built under the lock: a session asking meanwhile waits for this client instead of
    # building a second one.
    with _shared_lock:
        if key is not None and key not in _unbound:
            _unbound[key] = build_client(chosen, factory, kwargs)


def _sdk_client(provider: str | None) -> tuple[str, Callable[..., Any]]:
    """The family member (default: the environment's) and its SDK client class."""
    chosen = (provider or provider_from_env()).strip().lower()
    if chosen not in ANTHROPIC_FAMILY:
        raise ValueError(
            f"unknown provider {chosen!r}; expected one of {', '.join(ANTHROPIC_FAMILY)}"
        )
    return chosen, getattr(anthropic, str(PROVIDERS[chosen].sdk_client))


def _client_key(provider: str, factory: Any, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    env = tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith(_CLIENT_ENV) or name.upper() in _PROXY_ENV
        )
    )
    key = (provider, factory, tuple(sorted(kwargs.items())), env)
    try:
        hash(key)
    except TypeError:
        return None
    return key


# --- the model -----------------------------------------------------------------------------


class AnthropicModel(RetryingModel):
    """A :class:`~iac_kernel.models.base.Model` on the Anthropic Messages API.

    ``client`` may be any of the SDK's async clients (``AsyncAnthropic``,
    ``AsyncAnthropicBedrock``, ``AsyncAnthropicVertex``); without one an ``AsyncAnthropic``
    is built from ``api_key``/``base_url`` or, as the SDK does, from the environment.
    """

    SECRETS = ("api_key", "auth_token", "aws_secret_key", "aws_session_token", "access_token")
    SDK_ERRORS = (anthropic.APIConnectionError, anthropic.APITimeoutError)

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
        capabilities: frozenset[str] = ANTHROPIC_CAPABILITIES,
    ) -> None:
        self.model_id = model_id
        self._api_model, window, self._betas = resolve_model(model_id)
        self.context_window = context_window or window
        if client is None:
            kwargs = {"api_key": api_key, "base_url": base_url, "max_retries": 0}
            client = shared_client("anthropic", anthropic.AsyncAnthropic, kwargs)
        self._use(client, retry, on_retry)
        self.prompt_caching = prompt_caching and "cache_control" in capabilities
        #: Messages API features this endpoint takes (a compatible backend's profile).
        self.capabilities = capabilities

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, client={type(self.client).__name__})"

    def params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(
            request,
            api_model=self._api_model,
            betas=self._betas,
            prompt_caching=self.prompt_caching,
            thinking="thinking" in self.capabilities,
        )

    def classify(self, exc: Exception) -> Failure | None:
        return classify(exc, self._api_model)

    async def open(self, params: dict[str, Any]) -> Any:
        return await self.client.messages.create(**params, stream=True)

    def builder(self) -> MessageBuilder:
        return MessageBuilder()


def create_anthropic_model(
    model_id: str,
    *,
    provider: str | None = None,
    profile: str | None = None,
    retry: RetryPolicy | None = None,
    **client_kwargs: Any,
) -> AnthropicModel:
    """Build an :class:`AnthropicModel` on the SDK client of ``provider`` (one of the
    Anthropic family; default: the environment's) or of ``profile`` (a Messages-compatible
    backend such as ``deepseek_anthropic``: the direct client on its URL and key, sent only
    the features it takes). ``client_kwargs`` go to the SDK client (``base_url``,
    ``aws_region``, ``project_id`` ...). No network is needed; configuration problems
    raise ValueError."""
    spec = PROVIDERS[profile or "anthropic"]
    if profile is not None:
        key = api_key(spec)
        if key is None:
            raise ModelError(f"no credentials for {spec.title}: set {spec.key_env}")
        client_kwargs.setdefault("base_url", base_url(spec))
        client_kwargs.setdefault("api_key", key)
        provider = "anthropic"
    elif provider in (None, "anthropic") and os.environ.get(BASE_URL_ENV):
        # Only when IAC_KERNEL_PROVIDER=anthropic names it (base_url() checks).
        if (os.environ.get(PROVIDER_ENV) or "").strip().lower() == "anthropic":
            client_kwargs.setdefault("base_url", base_url(spec))
    chosen, factory = _sdk_client(provider)
    client_kwargs["max_retries"] = 0
    return AnthropicModel(
        model_id,
        client=shared_client(chosen, factory, client_kwargs),
        retry=retry,
        capabilities=capabilities(spec),
    )
