"""Failed calls to the Anthropic Messages API: what went wrong and whether to retry.

:func:`classify` turns an SDK, transport or stream error into a :class:`Failure` with a
readable reason: 408/429/529/5xx (or the server's ``x-should-retry``), connection errors,
dropped and cut-short streams are retryable, everything else is not. :class:`RetryPolicy`
says how long to wait (exponential backoff with jitter, honouring ``retry-after``).
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anthropic

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


class IncompleteStream(Exception):
    """The response body ended before message_stop."""


@dataclass
class Failure:
    """A failed attempt, classified."""

    retryable: bool
    status: int | None
    reason: str
    detail: str
    retry_after: float | None = None


def classify(exc: Exception, api_model: str) -> Failure:
    """What went wrong, whether retrying may help, and how to say it."""
    if isinstance(exc, anthropic.APIStatusError):
        return _classify_status(exc, api_model)
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(True, None, "the request to the model timed out", _text(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        detail = f"{_text(exc)} ({type(cause).__name__}: {cause})" if cause else _text(exc)
        return Failure(True, None, "could not connect to the model API", detail)
    if isinstance(exc, _TRANSPORT_ERRORS):
        return Failure(True, None, "the response stream was dropped", _text(exc))
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
        return Failure(False, None, "the Anthropic SDK failed", _text(exc))
    return Failure(
        False, None, f"the model call failed unexpectedly ({type(exc).__name__})", _text(exc)
    )


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _classify_status(exc: anthropic.APIStatusError, api_model: str) -> Failure:
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
    return Failure(retryable, status, reason, str(message), _retry_after(headers))


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
