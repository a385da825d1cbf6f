"""Which model providers exist, how each is reached, and which one the environment picks.

No SDK is imported here: every new session, ``initialize`` and the settings check ask
these questions. Two kinds of provider:

* ``openai`` kind, on the official ``openai`` SDK (Chat Completions): ``openai``
  (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) and the presets ``dashscope``, ``deepseek``
  and ``ollama``, each with its documented URL, overridable by ``IAC_KERNEL_BASE_URL``.
* ``anthropic`` kind, on the official ``anthropic`` SDK (Messages API): ``anthropic``,
  ``bedrock``, ``vertex``, and Messages-compatible endpoints as profiles
  (``deepseek_anthropic``, ``ollama_anthropic``, or any ``ANTHROPIC_BASE_URL``), each with
  the capabilities the backend documents (thinking, cache_control, tool_choice).

With no ``IAC_KERNEL_PROVIDER`` the first credentials found decide: Anthropic's, then
OpenAI, DashScope, DeepSeek; else the offline scripted model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

ANTHROPIC_CAPABILITIES = frozenset({"thinking", "cache_control", "tool_choice"})


@dataclass(frozen=True)
class Provider:
    """One way to reach models."""

    name: str
    #: ``openai`` (Chat Completions) or ``anthropic`` (Messages API).
    kind: str
    title: str
    #: Environment variable holding the key (``None``: no key needed).
    key_env: str | None
    #: Documented default endpoint (``None``: the SDK's own default).
    base_url: str | None = None
    #: Environment variable the SDK itself reads for the endpoint.
    url_env: str | None = None
    #: Model ids offered in pickers, the first is the default.
    models: tuple[str, ...] = ()
    #: Messages API features the backend takes (anthropic kind only).
    capabilities: frozenset[str] = field(default_factory=frozenset)
    #: Whether the backend wants ``reasoning_content`` sent back within a tool loop.
    echo_reasoning: bool = False
    #: Whether the token limit goes as ``max_completion_tokens`` (OpenAI's own API).
    completion_tokens_param: bool = False


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "anthropic",
            "anthropic",
            "Anthropic",
            "ANTHROPIC_API_KEY",
            url_env="ANTHROPIC_BASE_URL",
            capabilities=ANTHROPIC_CAPABILITIES,
        ),
        Provider(
            "bedrock", "anthropic", "Amazon Bedrock", None, capabilities=ANTHROPIC_CAPABILITIES
        ),
        Provider(
            "vertex", "anthropic", "Google Vertex AI", None, capabilities=ANTHROPIC_CAPABILITIES
        ),
        Provider(
            "openai",
            "openai",
            "OpenAI",
            "OPENAI_API_KEY",
            url_env="OPENAI_BASE_URL",
            models=("gpt-4.1", "gpt-4.1-mini", "o4-mini"),
            completion_tokens_param=True,
        ),
        Provider(
            "dashscope",
            "openai",
            "DashScope (Qwen)",
            "DASHSCOPE_API_KEY",
            base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
            models=("qwen-plus", "qwen-max", "qwen3-coder-plus"),
        ),
        Provider(
            "deepseek",
            "openai",
            "DeepSeek",
            "DEEPSEEK_API_KEY",
            base_url="https://api.deepseek.com",
            models=("deepseek-flash", "deepseek-v4-pro"),
            echo_reasoning=True,
        ),
        Provider(
            "ollama",
            "openai",
            "Ollama",
            None,
            base_url="http://localhost:11434/v1",
            models=("llama3.2",),
        ),
        Provider(
            "deepseek_anthropic",
            "anthropic",
            "DeepSeek (Anthropic API)",
            "DEEPSEEK_API_KEY",
            base_url="https://api.deepseek.com/anthropic",
            models=("deepseek-flash", "deepseek-v4-pro"),
            capabilities=frozenset({"thinking", "tool_choice"}),
        ),
        Provider(
            "ollama_anthropic",
            "anthropic",
            "Ollama (Anthropic API)",
            None,
            base_url="http://localhost:11434",
            models=("qwen3-coder",),
            capabilities=frozenset({"thinking"}),
        ),
    )
}
#: Providers whose key, when set, picks them with no IAC_KERNEL_PROVIDER (in this order,
#: after Anthropic's own credentials).
DETECT_ORDER = ("openai", "dashscope", "deepseek")
#: The Anthropic SDK clients: direct, Bedrock, Vertex (profiles use the direct client).
ANTHROPIC_FAMILY = ("anthropic", "bedrock", "vertex")


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def named_provider(env: Mapping[str, str] | None = None) -> str | None:
    """``IAC_KERNEL_PROVIDER`` lower-cased, or None; an unknown name raises ValueError."""
    env = os.environ if env is None else env
    named = (env.get("IAC_KERNEL_PROVIDER") or "").strip().lower()
    if not named:
        return None
    if named not in PROVIDERS:
        raise ValueError(
            f"unknown IAC_KERNEL_PROVIDER {named!r}; expected one of {', '.join(PROVIDERS)}"
        )
    return named


def has_key(provider: Provider, env: Mapping[str, str] | None = None) -> bool:
    """Whether the provider's credentials are in the environment (always for keyless ones)."""
    env = os.environ if env is None else env
    if provider.name == "anthropic":
        return bool(
            env.get("ANTHROPIC_API_KEY")
            or env.get("ANTHROPIC_AUTH_TOKEN")
            or env.get("ANTHROPIC_PROFILE")
        )
    if provider.name in ("bedrock", "vertex"):
        return True  # the cloud SDK's credential chain decides on the first request
    return provider.key_env is None or bool(env.get(provider.key_env))


def active_provider(env: Mapping[str, str] | None = None) -> str | None:
    """The provider sessions use by default, or None for the scripted model.

    ``IAC_KERNEL_PROVIDER`` wins (an unknown name raises ValueError); else
    ``CLAUDE_CODE_USE_BEDROCK`` / ``CLAUDE_CODE_USE_VERTEX``; else the first credentials
    found: Anthropic's, then OpenAI, DashScope, DeepSeek.
    """
    env = os.environ if env is None else env
    named = named_provider(env)
    if named:
        return named
    if truthy(env.get("CLAUDE_CODE_USE_BEDROCK")):
        return "bedrock"
    if truthy(env.get("CLAUDE_CODE_USE_VERTEX")):
        return "vertex"
    if has_key(PROVIDERS["anthropic"], env):
        return "anthropic"
    for name in DETECT_ORDER:
        if env.get(PROVIDERS[name].key_env or ""):
            return name
    return None


def known_active_provider() -> str | None:
    """:func:`active_provider`, or None when ``IAC_KERNEL_PROVIDER`` names no provider."""
    try:
        return active_provider()
    except ValueError:
        return None


def base_url(provider: Provider, env: Mapping[str, str] | None = None) -> str | None:
    """The endpoint: ``IAC_KERNEL_BASE_URL`` for the provider ``IAC_KERNEL_PROVIDER``
    names (never another: a key goes only where it was sent), else the variable the SDK
    reads (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), else the preset's URL."""
    env = os.environ if env is None else env
    override = (env.get("IAC_KERNEL_BASE_URL") or "").strip()
    try:
        named = named_provider(env)
    except ValueError:
        named = None
    if override and named == provider.name:
        return override
    if provider.url_env and env.get(provider.url_env):
        return env[provider.url_env].strip()
    return provider.base_url


def api_key(provider: Provider, env: Mapping[str, str] | None = None) -> str | None:
    """The key to send; keyless local servers get a placeholder the SDK insists on."""
    env = os.environ if env is None else env
    if provider.key_env and env.get(provider.key_env):
        return env[provider.key_env]
    return None if provider.key_env else provider.name


def capabilities(provider: Provider, env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The Messages API features sent to an anthropic-kind provider.

    ``IAC_KERNEL_ANTHROPIC_CAPABILITIES`` (comma list, may be empty) narrows any profile,
    e.g. a gateway behind ``ANTHROPIC_BASE_URL`` that rejects ``cache_control``.
    """
    env = os.environ if env is None else env
    named = env.get("IAC_KERNEL_ANTHROPIC_CAPABILITIES")
    if named is None:
        return provider.capabilities
    wanted = {part.strip().lower() for part in named.split(",") if part.strip()}
    return frozenset(wanted & ANTHROPIC_CAPABILITIES)


def auth_methods(env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """ACP ``authMethods``: one env-var method per provider lacking credentials; empty
    when a provider is usable (configured, or credentials found).

    Written in the schema's plain (agent) form with the variable in ``_meta``: the
    ``type: "env_var"`` form of schema v1.19 is gone from newer ACP schemas, whose
    clients drop it."""
    env = os.environ if env is None else env
    try:
        active = active_provider(env)
    except ValueError:
        return []  # a bad IAC_KERNEL_PROVIDER is reported when a model is built
    if active is not None and has_key(PROVIDERS[active], env):
        return []
    methods: list[dict[str, object]] = []
    for name in ("anthropic", *DETECT_ORDER):
        provider = PROVIDERS[name]
        if has_key(provider, env):
            continue
        methods.append(
            {
                "id": f"env:{provider.key_env}",
                "name": f"{provider.title} API key",
                "description": f"Set {provider.key_env} in the agent's environment.",
                "_meta": {"iac_kernel": {"envVar": provider.key_env}},
            }
        )
    return methods
