"""Retrying failed model calls: the policy (backoff with jitter, ``retry-after``) and the
classified failure both providers share. Imports no SDK."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

RetryCallback = Callable[[int, float, str], Awaitable[None] | None]


def _transport_errors() -> tuple[type[BaseException], ...]:
    """httpx-level errors raised while reading a stream (the SDKs do not wrap those)."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found)


TRANSPORT_ERRORS = _transport_errors()


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


@dataclass
class Failure:
    """A failed attempt, classified."""

    retryable: bool
    status: int | None
    reason: str
    detail: str
    retry_after: float | None = None


def error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
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
