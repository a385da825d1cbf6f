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

Model ids and request arguments are in :mod:`~iac_kernel.models.anthropic_request`, the
stream events in :mod:`~iac_kernel.models.anthropic_stream`, error classification and
backoff in :mod:`~iac_kernel.models.anthropic_errors`, the SDK clients in
:mod:`~iac_kernel.models.anthropic_clients`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic

from iac_kernel.models.anthropic_clients import FACTORIES, shared_client
from iac_kernel.models.anthropic_errors import (
    IncompleteStream,
    RetryCallback,
    RetryPolicy,
    classify,
)
from iac_kernel.models.anthropic_request import (
    CONTEXT_1M_BETA,
    DEFAULT_CONTEXT_WINDOW,
    LONG_CONTEXT_SUFFIX,
    LONG_CONTEXT_WINDOW,
    build_params,
    context_window_for,
    resolve_model,
)
from iac_kernel.models.anthropic_stream import MessageBuilder
from iac_kernel.models.base import ModelError, ModelEvent, ModelRequest
from iac_kernel.models.credentials import PROVIDERS, provider_from_env
from iac_kernel.models.providers import ANTHROPIC_CAPABILITIES, api_key, base_url, capabilities
from iac_kernel.models.providers import PROVIDERS as ALL_PROVIDERS
from iac_kernel.models.retry import first_byte_within, read_body, retrying
from iac_kernel.redact import redact

__all__ = [
    "CONTEXT_1M_BETA",
    "DEFAULT_CONTEXT_WINDOW",
    "LONG_CONTEXT_SUFFIX",
    "LONG_CONTEXT_WINDOW",
    "AnthropicModel",
    "RetryCallback",
    "RetryPolicy",
    "context_window_for",
    "create_anthropic_model",
    "resolve_model",
]


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
        capabilities: frozenset[str] = ANTHROPIC_CAPABILITIES,
    ) -> None:
        self.model_id = model_id
        self._api_model, window, self._betas = resolve_model(model_id)
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
        self.prompt_caching = prompt_caching and "cache_control" in capabilities
        #: Messages API features this endpoint takes (a compatible backend's profile).
        self.capabilities = capabilities

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, client={type(self.client).__name__})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant message; see the module docstring for the retry rules."""
        params = build_params(
            request,
            api_model=self._api_model,
            betas=self._betas,
            prompt_caching=self.prompt_caching,
            thinking="thinking" in self.capabilities,
        )
        async for event in retrying(
            lambda: self._attempt(params, request.first_byte_timeout),
            lambda exc: classify(exc, self._api_model),
            self.retry,
            lambda: self.on_retry,
            self._scrub,
        ):
            yield event

    async def _attempt(
        self, params: dict[str, Any], first_byte: float
    ) -> AsyncIterator[ModelEvent]:
        async with first_byte_within(first_byte) as clock:
            stream = await self.client.messages.create(**params, stream=True)
            async with stream:
                builder = MessageBuilder()
                async for raw in read_body(
                    stream, anthropic.APIConnectionError, anthropic.APITimeoutError, clock
                ):
                    for event in builder.feed(raw):
                        yield event
                if not builder.finished:
                    raise IncompleteStream("the response stream ended before message_stop")
                yield builder.done()

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


# --- factory -------------------------------------------------------------------------------


def create_anthropic_model(
    model_id: str,
    *,
    provider: str | None = None,
    retry: RetryPolicy | None = None,
    on_retry: RetryCallback | None = None,
    context_window: int | None = None,
    prompt_caching: bool = True,
    profile: str | None = None,
    **client_kwargs: Any,
) -> AnthropicModel:
    """Build an :class:`AnthropicModel` on the chosen provider's SDK client.

    ``provider`` is ``anthropic``, ``bedrock`` or ``vertex`` (default: :func:`provider_from_env`).
    ``client_kwargs`` go to ``AsyncAnthropic`` / ``AsyncAnthropicBedrock`` /
    ``AsyncAnthropicVertex`` (e.g. ``base_url``, ``api_key``, ``aws_region``, ``region``,
    ``project_id``); ``max_retries`` is always 0. Constructing needs no network; credentials
    for Bedrock and Vertex are resolved on the first request. Configuration problems raise
    ValueError.

    ``profile`` names a Messages-compatible backend of
    :data:`~iac_kernel.models.providers.PROVIDERS` (``deepseek_anthropic``): the direct
    client on its URL and key, sending only the features it takes.
    """
    if profile is not None:
        spec = ALL_PROVIDERS[profile]
        key = api_key(spec)
        if key is None:
            raise ModelError(f"no credentials for {spec.title}: set {spec.key_env}")
        client_kwargs.setdefault("base_url", base_url(spec))
        client_kwargs.setdefault("api_key", key)
        provider, caps = "anthropic", capabilities(spec)
    else:
        caps = capabilities(ALL_PROVIDERS["anthropic"])
        if (provider or provider_from_env()) == "anthropic" and os.environ.get(
            "IAC_KERNEL_BASE_URL"
        ):
            # Only when IAC_KERNEL_PROVIDER=anthropic names it (base_url() checks).
            override = base_url(ALL_PROVIDERS["anthropic"])
            if override:
                client_kwargs.setdefault("base_url", override)
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
        capabilities=caps,
    )
