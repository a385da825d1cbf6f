"""Which Anthropic SDK client the environment selects, without importing the SDK.

Kept apart from :mod:`iac_kernel.models.anthropic` because importing the ``anthropic``
SDK takes about a second, and every new session asks whether credentials exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from iac_kernel.models.providers import ANTHROPIC_FAMILY as PROVIDERS
from iac_kernel.models.providers import PROVIDERS as ALL_PROVIDERS
from iac_kernel.models.providers import has_key, named_provider, truthy

__all__ = ["CREDENTIAL_ENV", "PROVIDERS", "has_anthropic_credentials", "provider_from_env"]


def provider_from_env(env: Mapping[str, str] | None = None) -> str:
    """The Anthropic SDK client the environment chooses: ``anthropic``, ``bedrock`` or
    ``vertex``.

    ``IAC_KERNEL_PROVIDER`` naming one of those wins (a Messages-compatible profile such as
    ``deepseek_anthropic`` uses the direct client); else ``CLAUDE_CODE_USE_BEDROCK=1`` or
    ``CLAUDE_CODE_USE_VERTEX=1``; else ``anthropic``. An unknown name raises ValueError.
    """
    env = os.environ if env is None else env
    named = named_provider(env)
    if named in PROVIDERS:
        return named
    if truthy(env.get("CLAUDE_CODE_USE_BEDROCK")):
        return "bedrock"
    if truthy(env.get("CLAUDE_CODE_USE_VERTEX")):
        return "vertex"
    return "anthropic"


def has_anthropic_credentials(env: Mapping[str, str] | None = None) -> bool:
    """Whether a Messages API model can be tried: an API key or auth token is set, or
    Bedrock/Vertex or a Messages-compatible profile is selected (Bedrock and Vertex take
    their credentials from the cloud SDK chain). An ``ANTHROPIC_PROFILE`` (an SDK
    credential profile) counts too.

    A set but unknown ``IAC_KERNEL_PROVIDER`` also answers True, so that
    :func:`create_anthropic_model` reports the bad name instead of a silent fallback.
    """
    env = os.environ if env is None else env
    try:
        named = named_provider(env)
    except ValueError:
        return True
    if named and named != "anthropic":
        return ALL_PROVIDERS[named].kind == "anthropic" and has_key(ALL_PROVIDERS[named], env)
    if not named and (
        truthy(env.get("CLAUDE_CODE_USE_BEDROCK")) or truthy(env.get("CLAUDE_CODE_USE_VERTEX"))
    ):
        return True
    return has_key(ALL_PROVIDERS["anthropic"], env)


#: Environment variables that make a process pick a real model over the scripted one;
#: tests, notebook runs and demos that must stay offline remove them.
CREDENTIAL_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "IAC_KERNEL_PROVIDER",
    "IAC_KERNEL_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DASHSCOPE_API_KEY",
    "DEEPSEEK_API_KEY",
)
