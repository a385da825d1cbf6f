"""What the connected client declared in ``initialize`` that changes what the agent sends
(schema 1.25), read from the raw ``clientCapabilities``: the Python SDK's models (schema
1.19) drop the newer ones (``session.notices``, ``session.compaction``, ``elicitation``).

* ``session.configOptions.boolean``: ``type: "boolean"`` config options are offered;
* ``session.notices``: errors and warnings go out as ``notice`` updates, not message text;
* ``session.compaction``: a compaction is a ``compaction_update``, not message text;
* ``elicitation.form``: a destroy or production apply asks for a typed confirmation, the
  agent's own questions and an MCP server's forms are forms;
* ``elicitation.url``: an MCP server's URL elicitation reaches the user (else declined).

A capability is declared by an object (``{}``); anything else (absent, ``null``, ``true``)
is not a declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClientFeatures:
    """The client's capabilities as sent (``raw``), and the ones the agent acts on."""

    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def boolean_options(self) -> bool:
        return _declared(self.raw, "session", "configOptions", "boolean")

    @property
    def notices(self) -> bool:
        return _declared(self.raw, "session", "notices")

    @property
    def compaction(self) -> bool:
        return _declared(self.raw, "session", "compaction")

    @property
    def elicitation_form(self) -> bool:
        return _declared(self.raw, "elicitation", "form")

    @property
    def elicitation_url(self) -> bool:
        return _declared(self.raw, "elicitation", "url")


def from_initialize(params: Any) -> ClientFeatures:
    """The features of an ``initialize`` request's params (any shape: never raises)."""
    raw = params.get("clientCapabilities") if isinstance(params, dict) else None
    return ClientFeatures(raw if isinstance(raw, dict) else {})


def _declared(raw: dict[str, Any], *path: str) -> bool:
    value: Any = raw
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return isinstance(value, dict)
