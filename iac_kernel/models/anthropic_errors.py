"""Failed calls to the Anthropic Messages API: what went wrong and whether to retry.

:func:`classify` turns an SDK, transport or stream error into a :class:`Failure` with a
readable reason: 408/429/529/5xx (or the server's ``x-should-retry``), connection errors,
dropped and cut-short streams are retryable, everything else is not. :class:`RetryPolicy`
says how long to wait (exponential backoff with jitter, honouring ``retry-after``).
"""

from __future__ import annotations

import anthropic

from iac_kernel.models.retry import (
    TRANSPORT_ERRORS,
    Failure,
    RetryCallback,
    RetryPolicy,
    StreamDropped,
    error_text,
    retry_after_seconds,
)

__all__ = ["Failure", "IncompleteStream", "RetryCallback", "RetryPolicy", "classify"]

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


class IncompleteStream(Exception):
    """The response body ended before message_stop."""


def classify(exc: Exception, api_model: str) -> Failure:
    """What went wrong, whether retrying may help, and how to say it."""
    if isinstance(exc, anthropic.APIStatusError):
        return _classify_status(exc, api_model)
    if isinstance(exc, StreamDropped):
        return Failure(True, None, "the response stream was dropped", str(exc))
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(True, None, "the request to the model timed out", error_text(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        detail = (
            f"{error_text(exc)} ({type(cause).__name__}: {cause})" if cause else error_text(exc)
        )
        return Failure(True, None, "could not connect to the model API", detail)
    if isinstance(exc, TRANSPORT_ERRORS):
        return Failure(True, None, "the response stream was dropped", error_text(exc))
    if isinstance(exc, IncompleteStream):
        return Failure(True, None, "the response stream was cut short", str(exc))
    if "Could not resolve authentication method" in str(exc):
        return Failure(
            False,
            None,
            "no credentials for the model API",
            "set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (or pass api_key)",
        )
    if isinstance(exc, anthropic.AnthropicError):
        return Failure(False, None, "the Anthropic SDK failed", error_text(exc))
    return Failure(
        False, None, f"the model call failed unexpectedly ({type(exc).__name__})", error_text(exc)
    )


def _classify_status(exc: anthropic.APIStatusError, api_model: str) -> Failure:
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
    return Failure(retryable, status, reason, str(message), retry_after_seconds(headers))
