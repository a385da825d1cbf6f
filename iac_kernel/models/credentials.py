"""Which Anthropic provider the environment selects, without importing the SDK.

Kept apart from :mod:`iac_kernel.models.anthropic` because importing the ``anthropic``
SDK takes about a second, and every new session asks whether credentials exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PROVIDERS = ("anthropic", "bedrock", "vertex")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def provider_from_env(env: Mapping[str, str] | None = None) -> str:
    """The provider chosen by the environment.

    ``IAC_KERNEL_PROVIDER`` wins; else ``CLAUDE_CODE_USE_BEDROCK=1`` or
    ``CLAUDE_CODE_USE_VERTEX=1``; else ``anthropic``. An unknown name raises ValueError.
    """
    env = os.environ if env is None else env
    named = (env.get("IAC_KERNEL_PROVIDER") or "").strip().lower()
    if named:
        if named not in PROVIDERS:
            raise ValueError(
                f"unknown IAC_KERNEL_PROVIDER {named!r}; expected one of {', '.join(PROVIDERS)}"
            )
        return named
    if _truthy(env.get("CLAUDE_CODE_USE_BEDROCK")):
        return "bedrock"
    if _truthy(env.get("CLAUDE_CODE_USE_VERTEX")):
        return "vertex"
    return "anthropic"


def has_anthropic_credentials(env: Mapping[str, str] | None = None) -> bool:
    """Whether a real Anthropic model can be tried: an API key or auth token is set, or
    Bedrock/Vertex is selected (their credentials come from the cloud SDK chain). An
    ``ANTHROPIC_PROFILE`` (an SDK credential profile) counts too.

    A set but unknown ``IAC_KERNEL_PROVIDER`` also answers True, so that
    :func:`create_anthropic_model` reports the bad name instead of a silent fallback.
    """
    env = os.environ if env is None else env
    named = (env.get("IAC_KERNEL_PROVIDER") or "").strip().lower()
    if named and named != "anthropic":
        return True
    if not named and (
        _truthy(env.get("CLAUDE_CODE_USE_BEDROCK")) or _truthy(env.get("CLAUDE_CODE_USE_VERTEX"))
    ):
        return True
    return bool(
        env.get("ANTHROPIC_API_KEY")
        or env.get("ANTHROPIC_AUTH_TOKEN")
        or env.get("ANTHROPIC_PROFILE")
    )


#: Environment variables that make a process pick Claude over the scripted model; tests,
#: notebook runs and demos that must stay offline remove them.
CREDENTIAL_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "IAC_KERNEL_PROVIDER",
)
