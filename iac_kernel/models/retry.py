"""What both SDK providers share (imports no SDK): retries, the first-byte deadline,
the shape of a failure and scrubbing keys from messages.

:class:`RetryingModel` streams one model answer: transient failures (as the provider's
``classify`` judges them) are retried with :class:`RetryPolicy`'s backoff, but only while
nothing has been yielded to the caller; once output has streamed a failure raises
:class:`~iac_kernel.models.base.ModelError`, because the caller has already shown it.
``ModelError.retryable`` is True only for a transient failure that ran out of attempts
before anything was yielded. The SDKs' own retries are off (``max_retries=0``).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import importlib.util
import inspect
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from iac_kernel.models.base import ModelError, ModelEvent, ModelRequest
from iac_kernel.redact import redact

log = logging.getLogger(__name__)

RetryCallback = Callable[[int, float, str], Awaitable[None] | None]


#: httpx-level errors raised while reading a stream (the SDKs do not wrap those).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = tuple(
    importlib.import_module(name).TransportError
    for name in ("httpx2", "httpx")
    if importlib.util.find_spec(name)
)


class StreamDropped(Exception):
    """The connection failed while the response body was being read.

    The SDKs disagree on what such a failure raises (anthropic 1.x lets httpx's
    ``ReadError`` through, 2.x wraps it in ``APIConnectionError`` like a failed connect),
    so :class:`RetryingModel` names it for what it is.
    """


class NoFirstByte(Exception):
    """The endpoint sent nothing within the first-byte timeout (no answer, or headers
    and then no event)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing arrived within {seconds:g} s")
        self.seconds = seconds


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


class CutStream(Exception):
    """The response stream ended before the message did."""


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


class RetryingModel:
    """The part of a :class:`~iac_kernel.models.base.Model` both SDK providers share.

    A provider sets ``client`` (any SDK client), ``retry`` and ``on_retry`` (sync or
    async ``(attempt, delay, reason)``, called before each retry; callers may swap it
    between calls), names its SDK's errors and implements :meth:`params` (the SDK call's
    arguments; bad requests raise ModelError), :meth:`open` (send them; the streamed
    response), :meth:`builder` (a fresh one whose ``feed(item)`` and ``finish()`` give
    the events; ``finish`` raises :class:`CutStream` for an answer that ended early) and
    :meth:`classify` (the SDK's own failures, else None).
    """

    #: Client attributes that may hold a credential: removed from every message.
    SECRETS: tuple[str, ...] = ("api_key",)
    #: The SDK's connection error and timeout error (a read that fails is a dropped stream).
    SDK_ERRORS: tuple[type[BaseException], type[BaseException]]
    client: Any
    retry: RetryPolicy
    on_retry: RetryCallback | None

    def _use(self, client: Any, retry: RetryPolicy | None, on_retry: RetryCallback | None):
        """Take ``client`` (without the SDK's own retries), the policy and the callback."""
        if getattr(client, "max_retries", 0) != 0:
            client = client.with_options(max_retries=0)
        self.client, self.retry, self.on_retry = client, retry or RetryPolicy(), on_retry

    def params(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    async def open(self, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def builder(self) -> Any:
        raise NotImplementedError

    def classify(self, exc: Exception) -> Failure | None:
        raise NotImplementedError

    async def explain(self, failure: Failure) -> None:
        """Add to a failure's detail before it is raised (e.g. the models offered)."""

    def scrub(self, text: str) -> str:
        """Remove secrets: secret-looking env values and the client's own credentials."""
        text = redact(text)
        for attr in self.SECRETS:
            value = getattr(self.client, attr, None)
            if isinstance(value, str) and len(value) >= 4 and value in text:
                text = text.replace(value, f"[REDACTED:{attr}]")
        return text

    def _failure(self, exc: Exception) -> Failure:
        """What went wrong in an attempt, and whether retrying may help."""
        if isinstance(exc, NoFirstByte):
            # Not retried: the setting is the bound the user chose for the whole wait.
            detail = f"{exc} (model_first_byte_timeout; raise it for a slow endpoint)"
            return Failure(False, None, "the model endpoint did not answer", detail)
        if isinstance(exc, StreamDropped):
            return Failure(True, None, "the response stream was dropped", str(exc))
        if isinstance(exc, TRANSPORT_ERRORS):
            return Failure(True, None, "the response stream was dropped", error_text(exc))
        if isinstance(exc, CutStream):
            return Failure(True, None, "the response stream was cut short", str(exc))
        unexpected = f"the model call failed unexpectedly ({type(exc).__name__})"
        return self.classify(exc) or Failure(False, None, unexpected, error_text(exc))

    async def _attempt(self, params: dict[str, Any], first_byte: float) -> AsyncIterator[Any]:
        """One call's events. A deadline for the first item (0: none) is disarmed when it
        arrives, so a slow but steady stream is never cut; it cancels the current task, so
        nothing is yielded under it. A connection failure while reading raises
        :class:`StreamDropped` (the SDKs disagree on what it raises); a read timeout
        stays a timeout."""
        builder = self.builder()
        connection_error, timeout_error = self.SDK_ERRORS
        clock = asyncio.timeout(first_byte if first_byte > 0 else None)
        try:
            async with clock:
                response = await self.open(params)
                async with response:
                    items = aiter(response)
                    while True:
                        try:
                            item = await anext(items)
                        except StopAsyncIteration:
                            break
                        except timeout_error:
                            raise
                        except (connection_error, *TRANSPORT_ERRORS) as exc:
                            cause = f" ({type(exc.__cause__).__name__})" if exc.__cause__ else ""
                            raise StreamDropped(error_text(exc) + cause) from exc
                        clock.reschedule(None)
                        for event in builder.feed(item):
                            yield event
        except TimeoutError:
            if clock.expired():
                raise NoFirstByte(first_byte) from None
            raise
        for event in builder.finish():
            yield event

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant message; see the module docstring for the retry rules."""
        if request.max_tokens <= 0:
            raise ModelError(f"max_tokens must be positive, got {request.max_tokens}")
        if not request.messages:
            raise ModelError("a model request needs at least one message")
        params = self.params(request)
        tries = 0
        while True:
            tries += 1
            emitted = False
            try:
                async with aclosing(self._attempt(params, request.first_byte_timeout)) as events:
                    async for event in events:
                        emitted = True
                        yield event
                return
            except ModelError:
                raise
            except Exception as exc:
                failure = self._failure(exc)
            if not failure.retryable:
                await self.explain(failure)
            if emitted:
                raise ModelError(
                    self.scrub(
                        f"the model's response broke off after output had started "
                        f"({failure.reason}): {failure.detail}"
                    ),
                    status=failure.status,
                )
            if not failure.retryable:
                raise ModelError(
                    self.scrub(f"{failure.reason}: {failure.detail}"), status=failure.status
                )
            if tries >= self.retry.max_attempts:
                raise ModelError(
                    self.scrub(
                        f"{failure.reason}; gave up after {tries} attempts: {failure.detail}"
                    ),
                    retryable=True,
                    status=failure.status,
                )
            delay = self.retry.delay(tries, failure.retry_after)
            await _notify(self.on_retry, tries, delay, self.scrub(failure.reason))
            await asyncio.sleep(delay)


async def _notify(callback: RetryCallback | None, attempt: int, delay: float, reason: str):
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
