"""Failed Chat Completions calls: what went wrong, in words a user can act on.

:func:`classify` turns an ``openai`` SDK or transport error into the same
:class:`~iac_kernel.models.anthropic_errors.Failure` the Anthropic provider uses, so both
share :class:`~iac_kernel.models.anthropic_errors.RetryPolicy`: 408/409/429/5xx and
connection errors are retried, everything else is not. Messages name the provider, the
variable to set and the URL tried.
"""

from __future__ import annotations

import openai

from iac_kernel.models.providers import Provider
from iac_kernel.models.retry import (
    TRANSPORT_ERRORS,
    Failure,
    StreamDropped,
    error_text,
    retry_after_seconds,
)

V1_HINT = "Many OpenAI-compatible endpoints need a /v1 suffix"


class EmptyStream(Exception):
    """The endpoint answered 200 with no chunks at all."""


class CutStream(Exception):
    """The stream ended before a finish_reason, after some chunks."""


def classify(exc: Exception, provider: Provider, url: str, model: str) -> Failure:
    """What went wrong, whether retrying may help, and how to say it."""
    if isinstance(exc, openai.APIStatusError):
        return _status(exc, provider, url, model)
    if isinstance(exc, StreamDropped):
        return Failure(True, None, "the response stream was dropped", str(exc))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(True, None, f"the request to {provider.title} timed out", f"URL {url}")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause else error_text(exc)
        return Failure(True, None, f"could not connect to {provider.title} at {url}", detail)
    if isinstance(exc, TRANSPORT_ERRORS):
        return Failure(True, None, "the response stream was dropped", error_text(exc))
    if isinstance(exc, EmptyStream):
        return Failure(
            False,
            None,
            f"{provider.title} at {url} answered with an empty stream",
            f"{V1_HINT} (set IAC_KERNEL_BASE_URL, e.g. {url.rstrip('/')}/v1)",
        )
    if isinstance(exc, CutStream):
        return Failure(True, None, "the response stream was cut short", str(exc))
    if "api_key" in str(exc) and isinstance(exc, openai.OpenAIError):
        return Failure(False, None, f"no credentials for {provider.title}", _set_key(provider))
    if isinstance(exc, openai.OpenAIError):
        return Failure(False, None, "the OpenAI SDK failed", error_text(exc))
    return Failure(
        False, None, f"the model call failed unexpectedly ({type(exc).__name__})", error_text(exc)
    )


def _set_key(provider: Provider) -> str:
    if provider.key_env:
        return f"set {provider.key_env} (and IAC_KERNEL_PROVIDER={provider.name})"
    return f"{provider.title} needs no key; check IAC_KERNEL_BASE_URL"


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
        if not url.rstrip("/").endswith("/v1") and provider.name != "deepseek":
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
