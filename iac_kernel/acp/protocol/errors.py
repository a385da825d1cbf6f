"""JSON-RPC errors the ACP server answers with, and what their ``data`` may carry.

Error data names the field that is wrong and why, never a stack trace or a secret
(every message passes through :func:`~iac_kernel.redact.redact`). Whatever a handler
raises becomes one of them (:func:`from_exception`): bad params are -32602 naming the
fields; a session store that refuses (a link in place of its index) or fails is -32603
with the store's one-line reason; anything unexpected is -32603 with a one-line,
redacted reason (logged with its traceback), and the server goes on.

They are the SDK's ``RequestError``, imported when the first one is made: the
``initialize`` and ``session/new`` answers come before the SDK is imported.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from iac_kernel.redact import redact
from iac_kernel.sessions.files import StoreOpenError, StoreWriteError

if TYPE_CHECKING:
    from acp import RequestError
    from pydantic import ValidationError

log = logging.getLogger(__name__)

#: Field errors listed per response; a bad union can produce dozens.
MAX_FIELD_ERRORS = 10
MAX_MESSAGE = 300


def rpc_error(code: int, message: str, data: Any = None) -> RequestError:
    from acp import RequestError

    return RequestError(code, message, data)


def invalid_params(data: dict[str, Any]) -> RequestError:
    return rpc_error(-32602, "Invalid params", data)


def session_not_found() -> RequestError:
    return invalid_params({"session_id": "Session not found"})


def session_busy() -> RequestError:
    return invalid_params(
        {
            "session_id": "Session is busy: a prompt is already running on it; "
            "wait for its answer or send session/cancel"
        }
    )


def not_in_control(action: str, *, turn: bool = True) -> RequestError:
    """-32602 for a client that tries to steer a turn another client started, or (not
    ``turn``) a session whose control lease another client holds."""
    if turn:
        why = f"while its turn runs: {action} refused; wait for the turn to end"
    else:
        why = (
            f"(it holds the lease; this client observes): {action} refused; claim "
            "control with _iac/session/control while no turn runs"
        )
    why = f"Session is controlled by another client {why}"
    return invalid_params({"session_id": why})


def invalid_field(field: str, message: str) -> RequestError:
    """-32602 naming one bad field (``{"cwd": "must be an absolute path"}``)."""
    return invalid_fields({field: message})


def invalid_fields(problems: dict[str, str]) -> RequestError:
    """-32602 naming each bad field and what is wrong with it."""
    return invalid_params({field: _clip(message) for field, message in problems.items()})


def not_initialized(method: str) -> RequestError:
    details = "initialize must be the first request on a connection"
    return rpc_error(-32600, "Invalid request", {"method": method, "details": details})


def from_exception(exc: BaseException, method: str) -> RequestError:
    """The error answer for what a handler of ``method`` raised (see the module doc)."""
    from acp import RequestError
    from pydantic import ValidationError

    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, ValidationError):
        return from_validation(exc)
    if isinstance(exc, StoreOpenError | StoreWriteError):  # said in full by the store
        log.warning("%s failed: %s", method, exc.strerror or exc)
        return store_failure(exc)
    log.error("%s failed", method, exc_info=exc)
    return internal(exc)


def from_validation(exc: ValidationError) -> RequestError:
    """-32602 with ``{"field.path": "what is wrong"}``; never echoes the input."""
    data: dict[str, Any] = {}
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error.get("loc", ())) or "params"
        data.setdefault(field, _clip(str(error.get("msg", "invalid"))))
        if len(data) >= MAX_FIELD_ERRORS:
            break
    return invalid_params(data or {"params": "invalid"})


def store_failure(exc: OSError) -> RequestError:
    """-32603 for a session store that refused or failed (a link in its place, no room,
    too many open files): the store's own one-line reason, without the errno prefix."""
    return rpc_error(-32603, "Internal error", {"details": _clip(exc.strerror or str(exc))})


def internal(exc: BaseException) -> RequestError:
    """-32603 for an unexpected failure: the kind of error and a redacted first line."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    details = type(exc).__name__ + (f": {first_line}" if first_line else "")
    return rpc_error(-32603, "Internal error", {"details": _clip(details)})


def _clip(text: str) -> str:
    """Redacted (messages may quote input or paths) and cut to :data:`MAX_MESSAGE`."""
    text = redact(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"
