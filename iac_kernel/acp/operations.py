"""Operation ids: a retried request runs once.

A request may carry ``_meta.operationId`` (a string the client picks, unique per
operation). The agent process remembers the last :data:`KEEP` operations by method,
session and id: a request with an id it has seen is not run again; it gets the first
run's answer (waiting for it if that run is still going), whichever connection it comes
on. A client that lost the answer to ``session/prompt`` can therefore send it again
without running the turn, and its tools, a second time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

META_KEY = "operationId"
#: Operations remembered (oldest forgotten first).
KEEP = 512
MAX_ID = 200

Key = tuple[str, str, str]


def operation_key(method: str, params: Any) -> Key | None:
    """The operation a request names in ``_meta.operationId``, if any."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    op = meta.get(META_KEY) if isinstance(meta, dict) else None
    if not isinstance(op, str) or not op or len(op) > MAX_ID:
        return None
    sid = params.get("sessionId")
    return (method, sid if isinstance(sid, str) else "", op)


class Operations:
    """Operations by key: their outcome, or the run still going."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._runs: OrderedDict[Key, asyncio.Future[Any]] = OrderedDict()

    async def run(self, key: Key, work: Callable[[], Awaitable[Any]]) -> Any:
        """``work()``'s outcome; run only the first time ``key`` is seen."""
        known = self._runs.get(key)
        if known is not None:
            return await asyncio.shield(known)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._runs[key] = future
        while len(self._runs) > self.keep:
            self._runs.popitem(last=False)
        try:
            result = await work()
        except asyncio.CancelledError:
            # Not run to an answer (its connection went away): a retry runs it.
            self._runs.pop(key, None)
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure nobody retries is not logged twice
            raise
        future.set_result(result)
        return result


#: The agent process's operations (every connection's).
OPERATIONS = Operations()
