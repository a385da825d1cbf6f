"""MCP server specs, from the three places they come from.

* ACP ``mcpServers`` (``session/new``, load, resume, fork): stdio ``{name, command,
  args, env: [{name, value}]}``, ``{type: "http" | "sse", name, url, headers: [{name,
  value}]}``, as SDK models or plain dicts;
* a ``.mcp.json`` in the session's folder, Claude Code's format: ``{"mcpServers": {NAME:
  {"command", "args", "env"} | {"type": "http" | "sse", "url", "headers"}}}``, with
  ``${VAR}`` / ``${VAR:-default}`` taken from the environment;
* a ``%mcp add`` / ``/mcp add`` line: ``NAME COMMAND [ARG...]`` or ``NAME URL [--sse]``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

PROJECT_FILE = ".mcp.json"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
TRANSPORTS = ("stdio", "http", "sse")

Transport = Literal["stdio", "http", "sse"]


class McpConfigError(ValueError):
    """A server spec is malformed; the message names the server and the field."""


@dataclass
class ServerSpec:
    """How to reach one MCP server."""

    name: str
    transport: Transport
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: Working directory of a stdio server (the session's folder).
    cwd: str | None = None
    #: Where the spec came from: ``acp``, ``.mcp.json`` or ``%mcp``.
    origin: str = "acp"

    def describe(self) -> str:
        """One line for lists (no header or env values: they may hold secrets)."""
        if self.transport == "stdio":
            return " ".join(shlex.quote(part) for part in [self.command, *self.args])
        return f"{self.url} ({self.transport})"


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise McpConfigError(
            f"invalid MCP server name {name!r}: use letters, digits, '_', '-' or '.' "
            "(up to 48 characters)"
        )
    return name


def _pairs(value: Any, what: str, server: str) -> dict[str, str]:
    """``[{name, value}]`` (ACP) or ``{name: value}`` (.mcp.json) as a dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        try:
            items = [(_get(item, "name"), _get(item, "value")) for item in value]
        except (KeyError, AttributeError, TypeError):
            message = f"MCP server {server!r}: {what} must be name/value pairs"
            raise McpConfigError(message) from None
    else:
        raise McpConfigError(f"MCP server {server!r}: {what} must be name/value pairs")
    out = {}
    for key, val in items:
        if not isinstance(key, str) or not isinstance(val, str):
            raise McpConfigError(f"MCP server {server!r}: {what} names and values are strings")
        out[key] = val
    return out


def _get(item: Any, key: str) -> Any:
    return item[key] if isinstance(item, dict) else getattr(item, key)


def _as_dict(server: Any) -> dict[str, Any]:
    if isinstance(server, dict):
        return server
    dump = getattr(server, "model_dump", None)
    if dump is None:
        raise McpConfigError(f"unreadable MCP server entry {server!r}")
    return dump(by_alias=True, exclude_none=True)


def spec_from_entry(name: Any, entry: dict[str, Any], cwd: str | None, origin: str) -> ServerSpec:
    """One server from a dict in either format (``type`` absent means stdio)."""
    name = check_name(name)
    if not isinstance(entry, dict):
        raise McpConfigError(f"MCP server {name!r}: expected an object")
    transport = entry.get("type") or ("stdio" if "command" in entry else None)
    if transport == "streamable-http":
        transport = "http"
    if transport not in TRANSPORTS:
        raise McpConfigError(
            f"MCP server {name!r}: unsupported type {transport!r} (stdio, http or sse)"
        )
    if transport == "stdio":
        command, args = entry.get("command"), entry.get("args") or []
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f"MCP server {name!r}: 'command' is required")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"MCP server {name!r}: 'args' must be a list of strings")
        env = _pairs(entry.get("env"), "env", name)
        return ServerSpec(name, "stdio", command, list(args), env, cwd=cwd, origin=origin)
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise McpConfigError(f"MCP server {name!r}: 'url' must be an http(s) URL")
    headers = _pairs(entry.get("headers"), "headers", name)
    return ServerSpec(name, transport, url=url, headers=headers, cwd=cwd, origin=origin)


def from_acp(servers: Any, cwd: str | None) -> list[ServerSpec]:
    """Specs from ACP ``mcpServers`` (``None`` = none). Raises McpConfigError."""
    specs = [
        spec_from_entry(acp_server_name(_as_dict(s).get("name")), _as_dict(s), cwd, "acp")
        for s in servers or []
    ]
    _check_unique(specs)
    return specs


def acp_server_name(name: Any) -> Any:
    """An ACP server's name (a display name: Jupyter AI sends "Jupyter MCP Server") as a
    name for tool names: each run of other characters becomes ``_``."""
    if not isinstance(name, str):
        return name
    return _NAME_RUN.sub("_", name).strip("_.-")[:48]


_NAME_RUN = re.compile(r"[^A-Za-z0-9_.-]+")


def from_project_bytes(raw: bytes, folder: str | Path) -> list[ServerSpec]:
    """Specs from the bytes of the ``.mcp.json`` in ``folder`` (as read once, so the
    specs are those of exactly the content the user trusted)."""
    path = Path(folder) / PROJECT_FILE
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise McpConfigError(f"{path}: not readable JSON ({exc})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
    return [
        spec_from_entry(name, expand_env(entry, path), str(folder), PROJECT_FILE)
        for name, entry in servers.items()
    ]


def expand_env(value: Any, where: Path, env: dict[str, str] | None = None) -> Any:
    """``${VAR}`` and ``${VAR:-default}`` in the strings of a ``.mcp.json`` entry, as
    Claude Code expands them (a token stays in the environment, not in the file)."""
    env = dict(os.environ) if env is None else env
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(3)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise McpConfigError(f"{where}: ${{{name}}} is not set")

        return _ENV_REF.sub(one, value)
    if isinstance(value, list):
        return [expand_env(item, where, env) for item in value]
    if isinstance(value, dict):
        return {key: expand_env(item, where, env) for key, item in value.items()}
    return value


def from_add_line(text: str, cwd: str | None) -> ServerSpec:
    """``NAME COMMAND [ARG...]`` or ``NAME URL [--sse]`` (a ``%mcp add`` line)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise McpConfigError(f"cannot parse {text!r}: {exc}") from None
    if len(words) < 2:
        raise McpConfigError("usage: add NAME COMMAND [ARG...]  or  add NAME URL [--sse]")
    name, target, rest = words[0], words[1], words[2:]
    if target.startswith(("http://", "https://")):
        if rest not in ([], ["--sse"], ["--http"]):
            raise McpConfigError("a URL server takes only --sse or --http after the URL")
        kind = "sse" if rest == ["--sse"] else "http"
        return spec_from_entry(name, {"type": kind, "url": target}, cwd, "%mcp")
    return spec_from_entry(name, {"command": target, "args": rest}, cwd, "%mcp")


def _check_unique(specs: list[ServerSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise McpConfigError(f"two MCP servers are named {spec.name!r}")
        seen.add(spec.name)
