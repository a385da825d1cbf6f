"""Retrying failed model calls, shared by both providers (imports no SDK).

:func:`retrying` streams one model answer: transient failures (as the provider's
``classify`` judges them) are retried with :class:`RetryPolicy`'s backoff, but only while
nothing has been yielded to the caller; once output has streamed a failure raises
:class:`~iac_kernel.models.base.ModelError`, because the caller has already shown it.
``ModelError.retryable`` is True only for a transient failure that ran out of attempts
before anything was yielded.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import inspect
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

from iac_kernel.models.base import ModelError, ModelEvent

log = logging.getLogger(__name__)

T = TypeVar("T")

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


class StreamDropped(Exception):
    """The connection failed while the response body was being read.

    The SDKs disagree on what such a failure raises (anthropic 1.x lets httpx's
    ``ReadError`` through, 2.x wraps it in ``APIConnectionError`` like a failed connect), so
    the providers read the body through :func:`read_body`, which names it for what it is.
    """


class NoFirstByte(Exception):
    """The endpoint sent nothing within the first-byte timeout (no answer, or headers
    and then no event)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing arrived within {seconds:g} s")
        self.seconds = seconds


@contextlib.asynccontextmanager
async def first_byte_within(seconds: float) -> AsyncIterator[asyncio.Timeout]:
    """A deadline for a response's first item (0: none). :func:`read_body` disarms it
    when the first item arrives, so a slow but steady stream is never cut; until then,
    ``seconds`` without it raise :class:`NoFirstByte`.

    The deadline cancels the current task, so only awaits of the request and of the
    first item may run under it: nothing is yielded to a consumer before it is disarmed.
    """
    clock = asyncio.timeout(seconds if seconds > 0 else None)
    try:
        async with clock:
            yield clock
    except TimeoutError:
        if clock.expired():
            raise NoFirstByte(seconds) from None
        raise


async def read_body(
    body: AsyncIterator[T],
    connection_error: type[BaseException],
    timeout_error: type[BaseException],
    first_byte: asyncio.Timeout | None = None,
) -> AsyncIterator[T]:
    """The items of a streamed response; a connection failure while reading raises
    :class:`StreamDropped` (a read timeout stays a timeout). ``first_byte`` (from
    :func:`first_byte_within`) is disarmed once the first item is in."""
    items = aiter(body)
    while True:
        try:
            item = await anext(items)
        except StopAsyncIteration:
            return
        except timeout_error:
            raise
        except (connection_error, *TRANSPORT_ERRORS) as exc:
            cause = exc.__cause__
            detail = f"{error_text(exc)} ({type(cause).__name__})" if cause else error_text(exc)
            raise StreamDropped(detail) from exc
        if first_byte is not None:
            first_byte.reschedule(None)
            first_byte = None
        yield item


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


async def retrying(
    attempt: Callable[[], AsyncIterator[ModelEvent]],
    classify: Callable[[Exception], Failure],
    policy: RetryPolicy,
    on_retry: Callable[[], RetryCallback | None],
    scrub: Callable[[str], str],
    explain: Callable[[Failure], Awaitable[None]] | None = None,
) -> AsyncIterator[ModelEvent]:
    """Yield one answer's events from ``attempt()``, retried as the module docstring says.

    ``on_retry()`` gives the callback of the moment (callers may swap it between calls);
    ``scrub`` removes secrets from every message; ``explain`` may add to a failure's
    detail before it is raised (e.g. the models an endpoint offers).
    """
    tries = 0
    while True:
        tries += 1
        emitted = False
        try:
            async with aclosing(attempt()) as events:
                async for event in events:
                    emitted = True
                    yield event
            return
        except ModelError:
            raise
        except NoFirstByte as exc:
            # Not retried: the setting is the bound the user chose for the whole wait.
            failure = Failure(
                False,
                None,
                "the model endpoint did not answer",
                f"{exc} (model_first_byte_timeout; raise it for a slow endpoint)",
            )
        except Exception as exc:
            failure = classify(exc)
        if explain is not None and not failure.retryable:
            await explain(failure)
        if emitted:
            raise ModelError(
                scrub(
                    f"the model's response broke off after output had started "
                    f"({failure.reason}): {failure.detail}"
                ),
                retryable=False,
                status=failure.status,
            )
        if not failure.retryable:
            raise ModelError(
                scrub(f"{failure.reason}: {failure.detail}"), retryable=False, status=failure.status
            )
        if tries >= policy.max_attempts:
            raise ModelError(
                scrub(f"{failure.reason}; gave up after {tries} attempts: {failure.detail}"),
                retryable=True,
                status=failure.status,
            )
        delay = policy.delay(tries, failure.retry_after)
        await notify_retry(on_retry(), tries, delay, scrub(failure.reason))
        await asyncio.sleep(delay)


async def notify_retry(callback: RetryCallback | None, attempt: int, delay: float, reason: str):
    """Call the retry callback (sync or async); a failing one is logged, never raised."""
    if callback is None:
        return
    try:
        result = callback(attempt, delay, reason)
        if inspect.isawaitable(result):
            await result
    except Exception:
        # A broken notice must not turn a retryable hiccup into a failed turn.
        log.exception("on_retry callback failed")
