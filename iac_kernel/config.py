"""Settings: defaults, environment overrides, and typed run-time changes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("default", "accept_edits", "read_only", "bypass")
HEADLESS_POLICIES = ("deny", "allow", "stdin")


def _default_sessions_dir() -> Path:
    env = os.environ.get("IAC_KERNEL_SESSIONS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".iac-code" / "sessions"


@dataclass
class Settings:
    """Every knob the agent core reads. One instance per session (copied from defaults)."""

    sessions_dir: Path = field(default_factory=_default_sessions_dir)
    #: Model id; ``None`` picks Anthropic when a key is set, else the scripted model.
    model: str | None = None
    #: Script file for the scripted model (``None``: the packaged default script).
    script: str | None = None
    mode: str = "default"
    max_turn_requests: int = 25
    max_tokens: int = 8192
    thinking_budget: int = 0
    #: Overrides the model's context window (tests use small windows to force compaction).
    context_window: int | None = None
    #: Compact when the context reaches this fraction of the window.
    compact_threshold: float = 0.8
    bash_timeout: float = 120.0
    #: Seconds between SIGINT and SIGTERM (and SIGTERM and SIGKILL) when a command is cancelled.
    bash_grace: float = 5.0
    output_limit: int = 30_000
    read_limit_bytes: int = 256_000
    web_fetch_allow_private: bool = False
    web_fetch_max_bytes: int = 2_000_000
    web_fetch_timeout: float = 20.0
    #: What a headless notebook run does with a permission request: deny, allow, or ask on stdin.
    headless_policy: str = "deny"

    @classmethod
    def from_env(cls) -> Settings:
        """Defaults, overridden by ``IAC_KERNEL_<FIELD>`` environment variables."""
        settings = cls()
        for f in dataclasses.fields(cls):
            value = os.environ.get(f"IAC_KERNEL_{f.name.upper()}")
            if value is not None and f.name != "sessions_dir":
                settings.set(f.name, value)
        return settings

    def copy(self) -> Settings:
        return dataclasses.replace(self)

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]

    def set(self, key: str, value: Any) -> None:
        """Set one field from a string or a typed value; bad keys or values raise ValueError."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        if key not in fields:
            raise ValueError(f"unknown setting {key!r}; known: {', '.join(fields)}")
        setattr(self, key, _coerce(key, fields[key].type, value))

    def public(self) -> dict[str, Any]:
        """The settings as plain JSON values."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self).items()}


def _coerce(key: str, type_name: Any, value: Any) -> Any:
    type_name = str(type_name)
    text = value.strip() if isinstance(value, str) else value
    try:
        if "None" in type_name and text in (None, "", "none", "None", "null"):
            result: Any = None
        elif type_name.startswith("bool"):
            if isinstance(text, bool):
                return text
            lowered = str(text).lower()
            if lowered not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ValueError
            result = lowered in ("1", "true", "yes", "on")
        elif type_name.startswith("int"):
            if isinstance(text, bool):
                raise ValueError
            result = int(text)
            if result < 0:
                raise ValueError
        elif type_name.startswith("float"):
            result = float(text)
            if result < 0:
                raise ValueError
        elif type_name == "Path":
            result = Path(str(text)).expanduser()
        else:
            result = str(text)
    except (TypeError, ValueError):
        raise ValueError(f"invalid value {value!r} for setting {key!r}") from None
    if key == "mode" and result not in MODES:
        raise ValueError(f"unknown mode {result!r}; modes: {', '.join(MODES)}")
    if key == "headless_policy" and result not in HEADLESS_POLICIES:
        raise ValueError(f"headless_policy must be one of {', '.join(HEADLESS_POLICIES)}")
    return result
