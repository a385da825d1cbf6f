"""The OpenAI-compatible provider: Chat Completions, streamed, with tools, on the ``openai`` SDK.

Serves OpenAI itself and every endpoint that speaks Chat Completions (DashScope, DeepSeek,
Ollama, vLLM, a LiteLLM proxy, gateways): see :mod:`iac_kernel.models.providers` for the
presets. The request is built by :mod:`~iac_kernel.models.openai_request` from the stored
history, chunks become model events in :mod:`~iac_kernel.models.openai_stream`.

Retries are ours, as for the Anthropic provider (the client has ``max_retries=0``):
408/409/429/5xx, connection errors and cut streams are retried with backoff while nothing
has been yielded; then one clear :class:`~iac_kernel.models.base.ModelError`. A 404 lists
the models the endpoint offers when it answers ``/models``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import openai

from iac_kernel.models.base import ModelError, ModelEvent, ModelRequest
from iac_kernel.models.openai_errors import CutStream, EmptyStream, classify
from iac_kernel.models.openai_request import build_params
from iac_kernel.models.openai_stream import ChunkBuilder
from iac_kernel.models.providers import PROVIDERS, Provider, api_key, base_url
from iac_kernel.models.retry import (
    Failure,
    RetryCallback,
    RetryPolicy,
    first_byte_within,
    read_body,
    retrying,
)
from iac_kernel.redact import redact

DEFAULT_CONTEXT_WINDOW = 128_000
OPENAI_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"


class OpenAIModel:
    """A :class:`~iac_kernel.models.base.Model` on a Chat Completions endpoint."""

    def __init__(
        self,
        provider: Provider,
        model: str,
        *,
        client: Any = None,
        retry: RetryPolicy | None = None,
        on_retry: RetryCallback | None = None,
        context_window: int | None = None,
        timeout: float | None = None,
    ) -> None:
        self.provider = provider
        self.api_model = model
        self.model_id = f"{provider.name}:{model}"
        self.context_window = context_window or DEFAULT_CONTEXT_WINDOW
        if client is None:
            key = api_key(provider)
            if key is None and provider.name != "openai":
                # Never let the SDK fall back to OPENAI_API_KEY: that key is OpenAI's only.
                raise ModelError(
                    f"no credentials for {provider.title}: set {provider.key_env} "
                    f"(and IAC_KERNEL_PROVIDER={provider.name})"
                )
            kwargs: dict[str, Any] = {
                "api_key": key,
                "base_url": base_url(provider),
                "max_retries": 0,
            }
            if timeout is not None:
                kwargs["timeout"] = timeout
            client = _build_client(provider, kwargs)
        elif getattr(client, "max_retries", 0) != 0:
            client = client.with_options(max_retries=0)
        self.client = client
        self.url = str(getattr(client, "base_url", "") or OPENAI_URL).rstrip("/")
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_id!r}, url={self.url!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant message; see the module docstring for the retry rules."""
        params = build_params(request, model=self.api_model, provider=self.provider)
        async for event in retrying(
            lambda: self._attempt(params, request.first_byte_timeout),
            lambda exc: classify(exc, self.provider, self.url, self.api_model),
            self.retry,
            lambda: self.on_retry,
            self._scrub,
            self._explain,
        ):
            yield event

    async def _attempt(
        self, params: dict[str, Any], first_byte: float
    ) -> AsyncIterator[ModelEvent]:
        builder = ChunkBuilder()
        async with first_byte_within(first_byte) as clock:
            stream = await self.client.chat.completions.create(**params)
            async with stream:
                async for chunk in read_body(
                    stream, openai.APIConnectionError, openai.APITimeoutError, clock
                ):
                    for event in builder.feed(chunk):
                        yield event
        if builder.chunks == 0:
            raise EmptyStream()
        if builder.finish_reason is None and not (builder.text or builder.calls):
            raise CutStream("the response stream ended before a finish_reason")
        for event in builder.finish_tools():
            yield event
        yield builder.done()

    async def _explain(self, failure: Failure) -> None:
        """A 404 names the models the endpoint offers, when it lists them."""
        if failure.status == 404:
            failure.detail += await self._model_list()

    async def _model_list(self) -> str:
        """``; models offered: ...`` when the endpoint lists its models, else ``""``."""
        try:
            page = await asyncio.wait_for(self.client.models.list(), 5.0)
            ids = sorted(str(m.id) for m in page.data)
        except Exception:
            return ""
        if not ids:
            return ""
        shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
        return f"; models offered by {self.url}: {shown}"

    def _scrub(self, text: str) -> str:
        text = redact(text)
        key = getattr(self.client, "api_key", None)
        if isinstance(key, str) and len(key) >= 4 and key in text:
            text = text.replace(key, "[REDACTED:api_key]")
        return text


def _build_client(provider: Provider, kwargs: dict[str, Any]) -> Any:
    try:
        client = openai.AsyncOpenAI(**kwargs)
    except openai.OpenAIError as exc:
        message = redact(str(exc))
        if "api_key" in message and provider.key_env:
            message = f"set {provider.key_env} (and IAC_KERNEL_PROVIDER={provider.name})"
        raise ModelError(f"cannot set up the {provider.title} client: {message}") from None
    if urlsplit(str(client.base_url)).hostname != OPENAI_HOST:
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
