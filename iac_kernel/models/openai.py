"""The OpenAI-compatible provider: Chat Completions, streamed, with tools, on the ``openai`` SDK.

Serves OpenAI and every endpoint that speaks Chat Completions (DashScope, DeepSeek, Ollama,
vLLM, a LiteLLM proxy, gateways). History is kept in the Messages API's shape whatever
model wrote it and converted on every call, so a session can switch providers mid-way;
thinking goes back as ``reasoning_content`` only within the current turn's tool loop of
a provider that wants it (DeepSeek). Streamed ``reasoning_content`` / ``reasoning``
becomes thinking with an empty signature (never sent to Claude); tool calls are assembled
by ``index``, and one whose arguments are not a JSON object, or that has no name, is
answered with an error instead of run. Messages name the provider, the variable to set
and the URL tried; a 404 lists the models the endpoint offers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import openai

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
    content_text,
    json_object,
)
from iac_kernel.models.providers import (
    BASE_URL_ENV,
    PROVIDER_ENV,
    PROVIDERS,
    Provider,
    api_key,
    base_url,
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

DEFAULT_CONTEXT_WINDOW = 128_000
V1_HINT = "Many OpenAI-compatible endpoints need a /v1 suffix"
_OPENAI_HOST = urlsplit(PROVIDERS["openai"].base_url or "").hostname

# --- the request ---------------------------------------------------------------------------


def build_params(request: ModelRequest, *, model: str, provider: Provider) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for ``request``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages += convert_messages(request.messages, echo_reasoning=provider.echo_reasoning)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    limit = "max_completion_tokens" if provider.completion_tokens_param else "max_tokens"
    params[limit] = request.max_tokens
    if request.tools:
        params["tools"] = [convert_tool(tool) for tool in request.tools]
    return params


def convert_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic tool definition as an OpenAI function tool (whose ``parameters`` must
    be an object schema)."""
    schema = dict(tool.get("input_schema") or {})
    if schema.get("type") != "object":
        schema = (
            {"type": "object", "properties": {}} if not schema else {**schema, "type": "object"}
        )
    schema.setdefault("properties", {})
    function: dict[str, Any] = {"name": tool["name"], "parameters": schema}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def convert_messages(
    messages: list[dict[str, Any]], *, echo_reasoning: bool = False
) -> list[dict[str, Any]]:
    """Messages API messages as Chat Completions messages: user text -> one ``user``
    message, each ``tool_result`` -> a ``tool`` message before it; assistant text and
    ``tool_use`` -> ``content`` and ``tool_calls``; ``thinking`` -> ``reasoning_content``
    only with ``echo_reasoning``, after the current prompt; ``redacted_thinking`` dropped."""
    last_prompt = _last_user_text(messages)
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") == "user":
            out += _user(blocks)
        else:
            out.append(_assistant(blocks, echo_reasoning and position > last_prompt))
    return out


def _last_user_text(messages: list[dict[str, Any]]) -> int:
    """Index of the last user message that carries text (the current turn's prompt)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        content = message.get("content")
        if message.get("role") == "user" and (
            isinstance(content, str)
            or any(b.get("type") == "text" for b in content or [] if isinstance(b, dict))
        ):
            return position
    return -1


def _user(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            text = content_text(block.get("content"))
            if block.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text" and block.get("text"):
            texts.append(block["text"])
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _assistant(blocks: list[dict[str, Any]], echo_reasoning: bool) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            texts.append(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    if echo_reasoning and reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


# --- the stream ----------------------------------------------------------------------------

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}


class ChunkBuilder:
    """Turns streamed chunks into ModelEvents and the final storable content blocks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        #: Stream index -> slot in ``calls`` (differs only for servers that reuse indexes).
        self._slots: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        #: Chunks seen; none at all means the endpoint sent an empty stream.
        self.chunks = 0

    def feed(self, chunk: Any) -> list[ModelEvent]:
        self.chunks += 1
        events: list[ModelEvent] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._usage(usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue  # only one choice is ever asked for
            delta = getattr(choice, "delta", None)
            if delta is not None:
                events += self._delta(delta)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        reasoning = _extra(delta, "reasoning_content") or _extra(delta, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
            events.append(ThinkingChunk(reasoning))
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            self.text.append(content)
            events.append(TextChunk(content))
        for fragment in getattr(delta, "tool_calls", None) or []:
            events += self._tool_fragment(fragment)
        return events

    def _tool_fragment(self, fragment: Any) -> list[ModelEvent]:
        index = getattr(fragment, "index", None)
        if not isinstance(index, int):
            index = len(self.calls)
        new_id = getattr(fragment, "id", None)
        slot = self._slots.get(index, index)
        known = self.calls.get(slot)
        if known is not None and new_id and known["id"] and new_id != known["id"]:
            # Some servers give every parallel call index 0: a new id is a new call, and
            # the fragments after it (no id) continue that one.
            slot = max(self.calls) + 1
            self._slots[index] = slot
        index = slot
        call = self.calls.setdefault(index, {"id": "", "name": "", "args": [], "begun": False})
        if getattr(fragment, "id", None):
            call["id"] = call["id"] or fragment.id
        function = getattr(fragment, "function", None)
        if function is not None:
            if getattr(function, "name", None):
                call["name"] = call["name"] or function.name
            if getattr(function, "arguments", None):
                call["args"].append(function.arguments)
        if not call["begun"] and call["name"]:
            call["id"] = call["id"] or f"call_{index}"
            call["begun"] = True
            return [ToolUseBegin(id=call["id"], name=call["name"])]
        return []

    def _usage(self, usage: Any) -> None:
        prompt = getattr(usage, "prompt_tokens", None) or 0
        completion = getattr(usage, "completion_tokens", None) or 0
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if not isinstance(cached, int):
            cached = _extra(usage, "prompt_cache_hit_tokens")
        cached = cached if isinstance(cached, int) else 0
        # Some servers repeat usage on several chunks: the last report wins.
        self.usage = Usage(
            input_tokens=max(0, prompt - cached),
            output_tokens=completion,
            cache_read_tokens=cached,
        )

    def finish(self) -> list[ModelEvent]:
        """The tool calls' ends and the stored message; an empty or cut stream raises."""
        if self.chunks == 0:
            raise EmptyStream()
        if self.finish_reason is None and not (self.text or self.calls):
            raise CutStream("the response stream ended before a finish_reason")
        return [*self.finish_tools(), self.done()]

    def finish_tools(self) -> list[ModelEvent]:
        """Parse every call's arguments: a ToolUseEnd each, malformed ones with an error."""
        events: list[ModelEvent] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            raw = "".join(call["args"])
            error = None
            if not call["name"]:
                error = f"the model sent a tool call without a name (arguments {raw[:200]!r})"
                call["name"] = "unnamed_tool"
            parsed = json_object(raw)
            if parsed is None:
                error = error or (
                    f"the arguments for {call['name']!r} are not a JSON object: {raw[:200]!r}"
                )
                parsed = {}
            call["id"] = call["id"] or f"call_{index}"
            call["input"] = parsed
            call["error"] = error
            if not call["begun"]:
                call["begun"] = True
                events.append(ToolUseBegin(id=call["id"], name=call["name"]))
            events.append(ToolUseEnd(call["id"], call["name"], parsed, error=error))
        return events

    def done(self) -> MessageDone:
        """The stored message: thinking, text, then the tool calls."""
        reason = STOP_REASONS.get(self.finish_reason or "", None)
        if reason is None:
            reason = "tool_use" if self.calls else "end_turn"
        if reason == "max_tokens" and self.calls:
            # A call cut off by the limit cannot be answered; the loop ends the turn.
            self.calls = {i: c for i, c in self.calls.items() if not c.get("error")}
        content: list[dict[str, Any]] = []
        if self.reasoning:
            content.append(
                {"type": "thinking", "thinking": "".join(self.reasoning), "signature": ""}
            )
        if self.text:
            content.append({"type": "text", "text": "".join(self.text)})
        for index in sorted(self.calls):
            call = self.calls[index]
            content.append(
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["input"]}
            )
        return MessageDone(content=content, stop_reason=reason, usage=self.usage)


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK's types do not declare (servers add them; pydantic keeps extras)."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value


# --- failures ------------------------------------------------------------------------------


class EmptyStream(Exception):
    """The endpoint answered 200 with no chunks at all."""


def classify(exc: Exception, provider: Provider, url: str, model: str) -> Failure | None:
    """What went wrong, whether retrying may help, and how to say it (None: the SDK's
    errors do not explain it)."""
    if isinstance(exc, openai.APIStatusError):
        return _status(exc, provider, url, model)
    if isinstance(exc, openai.APITimeoutError):
        return Failure(True, None, f"the request to {provider.title} timed out", f"URL {url}")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause else error_text(exc)
        return Failure(True, None, f"could not connect to {provider.title} at {url}", detail)
    if isinstance(exc, EmptyStream):
        return Failure(
            False,
            None,
            f"{provider.title} at {url} answered with an empty stream",
            f"{V1_HINT} (set {BASE_URL_ENV}, e.g. {url.rstrip('/')}/v1)",
        )
    if "api_key" in str(exc) and isinstance(exc, openai.OpenAIError):
        return Failure(False, None, f"no credentials for {provider.title}", _set_key(provider))
    if isinstance(exc, openai.OpenAIError):
        return Failure(False, None, "the OpenAI SDK failed", error_text(exc))
    return None


def _set_key(provider: Provider) -> str:
    if provider.key_env:
        return f"set {provider.key_env} (and {PROVIDER_ENV}={provider.name})"
    return f"{provider.title} needs no key; check {BASE_URL_ENV}"


def _status(exc: openai.APIStatusError, provider: Provider, url: str, model: str) -> Failure:
    status = exc.status_code
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    message = (error or {}).get("message") or getattr(exc, "message", None) or error_text(exc)
    headers = exc.response.headers if exc.response is not None else {}
    retryable = status in (408, 409, 429) or status >= 500
    who = f"{provider.title} ({url})"
    if status in (401, 403):
        reason = f"{who} did not accept the credentials ({status})"
        message = f"{message}; {_set_key(provider)}"
    elif status == 404:
        reason = f"{who} does not know model {model!r} or this path (404)"
        documented = (provider.base_url or "").rstrip("/")
        if not url.rstrip("/").endswith("/v1") and documented.endswith("/v1"):
            message = f"{message}; {V1_HINT}"
    elif status == 429:
        reason = f"rate limited by {provider.title} (429)"
    elif status >= 500:
        reason = f"{provider.title} had a server error ({status})"
    elif status == 400:
        reason = f"{provider.title} rejected the request (400)"
    else:
        reason = f"{provider.title} returned an error ({status})"
    return Failure(retryable, status, reason, str(message), retry_after_seconds(headers))


# --- the model -----------------------------------------------------------------------------


class OpenAIModel(RetryingModel):
    """A :class:`~iac_kernel.models.base.Model` on a Chat Completions endpoint."""

    SDK_ERRORS = (openai.APIConnectionError, openai.APITimeoutError)

    def __init__(
        self,
        provider: Provider,
        model: str,
        *,
        client: Any = None,
        retry: RetryPolicy | None = None,
        on_retry: RetryCallback | None = None,
    ) -> None:
        self.provider = provider
        self.api_model = model
        self.model_id = f"{provider.name}:{model}"
        self.context_window = DEFAULT_CONTEXT_WINDOW
        if client is None:
            key = api_key(provider)
            if key is None and provider.name != "openai":
                # Never let the SDK fall back to OPENAI_API_KEY: that key is OpenAI's only.
                raise ModelError(f"no credentials for {provider.title}: {_set_key(provider)}")
            client = _build_client(provider, key, base_url(provider))
        self._use(client, retry, on_retry)
        self.url = str(getattr(client, "base_url", "") or provider.base_url or "").rstrip("/")

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_id!r}, url={self.url!r})"

    def params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(request, model=self.api_model, provider=self.provider)

    def classify(self, exc: Exception) -> Failure | None:
        return classify(exc, self.provider, self.url, self.api_model)

    async def open(self, params: dict[str, Any]) -> Any:
        return await self.client.chat.completions.create(**params)

    def builder(self) -> ChunkBuilder:
        return ChunkBuilder()

    async def explain(self, failure: Failure) -> None:
        """A 404 names the models the endpoint offers, when it lists them."""
        if failure.status != 404:
            return
        try:
            page = await asyncio.wait_for(self.client.models.list(), 5.0)
            ids = sorted(str(m.id) for m in page.data)
        except Exception:
            return
        if ids:
            shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
            failure.detail += f"; models offered by {self.url}: {shown}"


def _build_client(provider: Provider, key: str | None, url: str | None) -> Any:
    try:
        client = openai.AsyncOpenAI(api_key=key, base_url=url, max_retries=0)
    except openai.OpenAIError as exc:
        message = redact(str(exc))
        if "api_key" in message and provider.key_env:
            message = _set_key(provider)
        raise ModelError(f"cannot set up the {provider.title} client: {message}") from None
    if urlsplit(str(client.base_url)).hostname != _OPENAI_HOST:
        # The SDK reads OPENAI_ORG_ID / OPENAI_PROJECT_ID and would send them as headers
        # to any endpoint: they name the user's OpenAI account, for OpenAI alone.
        client.organization = None
        client.project = None
    return client


def create_openai_model(provider: str, model: str, **kwargs: Any) -> OpenAIModel:
    """Build an :class:`OpenAIModel` for a provider name of
    :data:`~iac_kernel.models.providers.PROVIDERS` (its key and URL from the environment)."""
    spec = PROVIDERS.get(provider)
    if spec is None or spec.kind != "openai":
        raise ModelError(f"{provider!r} is not an OpenAI-compatible provider")
    return OpenAIModel(spec, model, **kwargs)
