"""Answers given before the ACP SDK has finished importing: ``initialize``, ``session/new``.

An editor spawns ``iac-kernel acp`` and sends ``initialize`` then ``session/new`` at
once; importing the SDK takes most of a second. :func:`parse_initialize` accepts an
``initialize`` whose params are plainly valid, answered with what the agent answers
(:data:`INITIALIZE_RESULT`) using only ``json``; :func:`parse_new_session` accepts a
``session/new`` with plainly valid params and no MCP servers, whose session the agent
core creates (:mod:`iac_kernel.acp.stdio` does both). Anything these are not sure about
(other methods, unusual params) is declined and the SDK answers it once loaded.

Once the SDK is loaded the server replays the ``initialize`` through the real agent (so
its state is set by its own code) and validates both answers with the SDK's models,
logging an error if either would differ (:func:`iac_kernel.acp.server.serve`);
``tests/test_speed_startup.py`` and ``tests/test_acp_early_session.py`` check the same
for many params.
"""

from __future__ import annotations

import json
from typing import Any

from iac_kernel import __version__

#: ``acp.PROTOCOL_VERSION`` of the pinned SDK (a test compares them).
PROTOCOL_VERSION = 1

#: What ``IacAgent.initialize`` answers, as the SDK serializes it, but ``authMethods``
#: (:func:`initialize_result` fills them in from the environment).
INITIALIZE_RESULT: dict[str, Any] = {
    "protocolVersion": PROTOCOL_VERSION,
    "agentCapabilities": {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": True},
        "sessionCapabilities": {
            "list": {},
            "delete": {},
            "additionalDirectories": {},
            "fork": {},
            "resume": {},
            "close": {},
        },
    },
    "authMethods": [],
    "agentInfo": {"name": "iac-kernel", "title": "iac-kernel", "version": __version__},
}

_MESSAGE_KEYS = {"jsonrpc", "id", "method", "params"}
_FS_KEYS = {"readTextFile": bool, "writeTextFile": bool, "_meta": dict}
_CAPABILITY_KEYS = {"fs": dict, "terminal": bool, "_meta": dict}
_INFO_KEYS = {"name": str, "version": str, "title": str, "_meta": dict}


def initialize_result() -> dict[str, Any]:
    """The ``initialize`` answer: :data:`INITIALIZE_RESULT` with the env-var auth methods
    of the providers lacking credentials (none when a provider is usable)."""
    from iac_kernel.models.providers import auth_methods

    return {**INITIALIZE_RESULT, "authMethods": auth_methods()}


def parse_initialize(line: bytes) -> dict[str, Any] | None:
    """The message on ``line`` if it is an ``initialize`` request that certainly
    validates against the SDK's ``InitializeRequest``; ``None`` otherwise."""
    message = _request(line, "initialize")
    return message if message and plainly_valid(message.get("params")) else None


def parse_new_session(line: bytes) -> dict[str, Any] | None:
    """The message on ``line`` if it is a ``session/new`` request that certainly
    validates (an absolute ``cwd``, no MCP servers); ``None`` otherwise."""
    message = _request(line, "session/new")
    return message if message and plainly_valid_new(message.get("params")) else None


def plainly_valid_new(params: Any) -> bool:
    """True for ``session/new`` params with a plain absolute ``cwd`` and no MCP servers
    (missing or ``[]``): what editors send when the user configured none."""
    if not isinstance(params, dict) or set(params) - {"cwd", "mcpServers", "_meta"}:
        return False
    cwd = params.get("cwd")
    if type(cwd) is not str or not cwd.startswith("/") or "\0" in cwd:
        return False
    if params.get("mcpServers", []) != [] or type(params.get("mcpServers", [])) is not list:
        return False
    meta = params.get("_meta")
    return meta is None or isinstance(meta, dict)


def _request(line: bytes, method: str) -> dict[str, Any] | None:
    """The JSON-RPC request for ``method`` on ``line`` (a string or integer id, no
    unknown keys); ``None`` for anything else."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != method or set(message) - _MESSAGE_KEYS:
        return None
    request_id = message.get("id")
    if not (isinstance(request_id, str) or type(request_id) is int):
        return None
    return message


def plainly_valid(params: Any) -> bool:
    """True for params the SDK accepts without coercion or salvage (a subset)."""
    if not isinstance(params, dict) or set(params) - {
        "protocolVersion",
        "clientCapabilities",
        "clientInfo",
        "_meta",
    }:
        return False
    version = params.get("protocolVersion")
    if type(version) is not int or not 0 <= version <= 65535:
        return False
    capabilities = params.get("clientCapabilities")
    if capabilities is not None and not _shaped(capabilities, _CAPABILITY_KEYS):
        return False
    if isinstance(capabilities, dict) and capabilities.get("fs") is not None:
        if not _shaped(capabilities["fs"], _FS_KEYS):
            return False
    info = params.get("clientInfo")
    if info is not None and not (
        _shaped(info, _INFO_KEYS)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    ):
        return False
    meta = params.get("_meta")
    return meta is None or isinstance(meta, dict)


def _shaped(value: Any, keys: dict[str, type]) -> bool:
    """A dict with only ``keys``, each absent, null or of its type (bool is not int)."""
    if not isinstance(value, dict) or set(value) - set(keys):
        return False
    for key, kind in keys.items():
        item = value.get(key)
        if item is not None and type(item) is not kind:
            return False
    return True


def answer_bytes(request_id: Any, result: dict[str, Any] | None = None) -> bytes:
    """The JSON-RPC answer line, encoded as the transport encodes answers."""
    message = {"jsonrpc": "2.0", "id": request_id, "result": result or initialize_result()}
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"
