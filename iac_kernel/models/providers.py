"""The model providers: one record each, owning its names, variables, detection and prices.

A :class:`Provider` says how it is reached (``openai`` kind: Chat Completions on the
``openai`` SDK; ``anthropic`` kind: the Messages API on the ``anthropic`` SDK), which
variables hold its key and URL, its documented endpoint, when the environment picks it
without ``IAC_KERNEL_PROVIDER``, and its list prices. Nothing else types a provider's
name or variables: settings, ACP ``authMethods``, error messages, costs, the variables
offline runs clear, the CLI help and docs/providers.md derive from :data:`PROVIDERS`.
No SDK is imported here: every ``initialize`` and new session asks these questions.

List prices are USD per million tokens as published by Anthropic and OpenAI (transcribed
2026-12-03), given only for the provider's own key at its documented endpoint: contracts,
batch and regional prices and long-context surcharges are not applied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iac_kernel.events import Usage

#: The agent's own provider variables (their accepted values: :data:`SETTINGS`).
PROVIDER_ENV = "IAC_KERNEL_PROVIDER"
BASE_URL_ENV = "IAC_KERNEL_BASE_URL"
CAPABILITIES_ENV = "IAC_KERNEL_ANTHROPIC_CAPABILITIES"
ANTHROPIC_CAPABILITIES = frozenset({"thinking", "cache_control", "tool_choice"})


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    #: Cache reads (Anthropic: 0.1 x input; OpenAI: its "cached input" price).
    cache_read: float
    #: Cache writes (Anthropic's 5-minute cache, the one the agent uses: 1.25 x input).
    cache_write: float


def _claude(input_price: float, output_price: float) -> Price:
    return Price(
        input_price, output_price, round(input_price * 0.1, 6), round(input_price * 1.25, 6)
    )


def _gpt(input_price: float, output_price: float, cached: float) -> Price:
    return Price(input_price, output_price, cached, input_price)  # no charge for writes


#: Every Claude model id accepted (any spelling of it), at its list price.
CLAUDE_PRICES = {
    "claude-opus-4-7": _claude(5, 25),
    "claude-opus-4-6": _claude(5, 25),
    "claude-opus-4-5": _claude(5, 25),
    "claude-opus-4-1": _claude(15, 75),
    "claude-opus-4-0": _claude(15, 75),
    "claude-opus-4": _claude(15, 75),
    "claude-sonnet-4-6": _claude(3, 15),
    "claude-sonnet-4-5": _claude(3, 15),
    "claude-sonnet-4-0": _claude(3, 15),
    "claude-sonnet-4": _claude(3, 15),
    "claude-3-7-sonnet": _claude(3, 15),
    "claude-haiku-4-5": _claude(1, 5),
    "claude-3-5-haiku": _claude(0.8, 4),
}
OPENAI_PRICES = {
    "gpt-5": _gpt(1.25, 10, 0.125),
    "gpt-5-mini": _gpt(0.25, 2, 0.025),
    "gpt-5-nano": _gpt(0.05, 0.4, 0.005),
    "gpt-4.1": _gpt(2, 8, 0.5),
    "gpt-4.1-mini": _gpt(0.4, 1.6, 0.1),
    "gpt-4.1-nano": _gpt(0.1, 0.4, 0.025),
    "gpt-4o": _gpt(2.5, 10, 1.25),
    "gpt-4o-mini": _gpt(0.15, 0.6, 0.075),
    "o3": _gpt(2, 8, 0.5),
    "o4-mini": _gpt(1.1, 4.4, 0.275),
}
#: The Claude models offered in pickers, the first is the default.
CLAUDE_PICKS = ("claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5")


@dataclass(frozen=True)
class Provider:
    """One way to reach models."""

    name: str
    #: ``openai`` (Chat Completions) or ``anthropic`` (Messages API).
    kind: str
    title: str
    #: Variables holding credentials: the first is the key sent, any one counts as set
    #: (none: no key needed, or the cloud SDK's credential chain decides).
    keys: tuple[str, ...] = ()
    #: Variable the SDK itself reads for the endpoint.
    url_env: str | None = None
    #: Documented endpoint (``None``: the cloud region's).
    base_url: str | None = None
    #: Place in detection without ``IAC_KERNEL_PROVIDER`` (0: only when named).
    detect: int = 0
    #: Variable whose true value picks it (instead of a key being set).
    switch_env: str | None = None
    #: The ``anthropic`` SDK's client class (the Anthropic family; profiles use the direct).
    sdk_client: str | None = None
    #: Model ids offered in pickers, the first is the default.
    models: tuple[str, ...] = ()
    #: Messages API features the backend takes (anthropic kind only; all by default).
    capabilities: frozenset[str] = ANTHROPIC_CAPABILITIES
    #: Whether the backend wants ``reasoning_content`` sent back within a tool loop.
    echo_reasoning: bool = False
    #: Whether the token limit goes as ``max_completion_tokens`` (OpenAI's own API).
    completion_tokens_param: bool = False
    #: List prices by model, for its own key at :attr:`base_url` only.
    prices: Mapping[str, Price] = field(default_factory=dict, compare=False)

    @property
    def key_env(self) -> str | None:
        """The variable whose key is sent (``None``: no key of its own)."""
        return self.keys[0] if self.keys else None


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "anthropic",
            "anthropic",
            "Anthropic",
            ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"),
            "ANTHROPIC_BASE_URL",
            "https://api.anthropic.com",
            detect=3,
            sdk_client="AsyncAnthropic",
            models=CLAUDE_PICKS,
            prices=CLAUDE_PRICES,
        ),
        Provider(
            "bedrock",
            "anthropic",
            "Amazon Bedrock",
            detect=1,
            switch_env="CLAUDE_CODE_USE_BEDROCK",
            sdk_client="AsyncAnthropicBedrock",
            models=CLAUDE_PICKS,
        ),
        Provider(
            "vertex",
            "anthropic",
            "Google Vertex AI",
            detect=2,
            switch_env="CLAUDE_CODE_USE_VERTEX",
            sdk_client="AsyncAnthropicVertex",
            models=CLAUDE_PICKS,
        ),
        Provider(
            "openai",
            "openai",
            "OpenAI",
            ("OPENAI_API_KEY",),
            "OPENAI_BASE_URL",
            "https://api.openai.com/v1",
            detect=4,
            models=("gpt-4.1", "gpt-4.1-mini", "o4-mini"),
            completion_tokens_param=True,
            prices=OPENAI_PRICES,
        ),
        Provider(
            "dashscope",
            "openai",
            "DashScope (Qwen)",
            ("DASHSCOPE_API_KEY",),
            base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
            detect=5,
            models=("qwen-plus", "qwen-max", "qwen3-coder-plus"),
        ),
        Provider(
            "deepseek",
            "openai",
            "DeepSeek",
            ("DEEPSEEK_API_KEY",),
            base_url="https://api.deepseek.com",
            detect=6,
            models=("deepseek-flash", "deepseek-v4-pro"),
            echo_reasoning=True,
        ),
        Provider(
            "ollama",
            "openai",
            "Ollama",
            base_url="http://localhost:11434/v1",
            models=("llama3.2",),
        ),
        Provider(
            "deepseek_anthropic",
            "anthropic",
            "DeepSeek (Anthropic API)",
            ("DEEPSEEK_API_KEY",),
            base_url="https://api.deepseek.com/anthropic",
            models=("deepseek-flash", "deepseek-v4-pro"),
            capabilities=frozenset({"thinking", "tool_choice"}),
        ),
        Provider(
            "ollama_anthropic",
            "anthropic",
            "Ollama (Anthropic API)",
            base_url="http://localhost:11434",
            models=("qwen3-coder",),
            capabilities=frozenset({"thinking"}),
        ),
    )
}
#: Providers the environment picks without IAC_KERNEL_PROVIDER, in the order tried.
DETECT_ORDER = tuple(
    sorted((n for n, p in PROVIDERS.items() if p.detect), key=lambda n: PROVIDERS[n].detect)
)
#: The Anthropic SDK clients: direct, Bedrock, Vertex (profiles use the direct client).
ANTHROPIC_FAMILY = tuple(n for n, p in PROVIDERS.items() if p.sdk_client)
#: Variables that make a process pick a real model over the scripted one: tests,
#: notebook runs and demos that must stay offline remove them.
CREDENTIAL_ENV = (
    PROVIDER_ENV,
    BASE_URL_ENV,
    *dict.fromkeys(v for p in PROVIDERS.values() for v in (*p.keys, p.url_env, p.switch_env) if v),
)
#: The agent's own provider variables for :data:`iac_kernel.config.OTHER_ENV`: name ->
#: accepted words, or ``None`` (free text: a URL, a comma list of capabilities).
SETTINGS: dict[str, tuple[str, ...] | None] = {
    PROVIDER_ENV: tuple(PROVIDERS),
    BASE_URL_ENV: None,
    CAPABILITIES_ENV: None,
}


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def named_provider(env: Mapping[str, str] | None = None) -> str | None:
    """``IAC_KERNEL_PROVIDER`` lower-cased, or None; an unknown name raises ValueError."""
    env = os.environ if env is None else env
    named = (env.get(PROVIDER_ENV) or "").strip().lower()
    if named and named not in PROVIDERS:
        raise ValueError(
            f"unknown {PROVIDER_ENV} {named!r}; expected one of {', '.join(PROVIDERS)}"
        )
    return named or None


def has_key(provider: Provider, env: Mapping[str, str] | None = None) -> bool:
    """Whether the provider's credentials are in the environment (always for those
    without a key variable: local servers, and clouds whose SDK chain decides later)."""
    env = os.environ if env is None else env
    return not provider.keys or any(env.get(name) for name in provider.keys)


def _picked(provider: Provider, env: Mapping[str, str]) -> bool:
    if provider.switch_env:
        return truthy(env.get(provider.switch_env))
    return bool(provider.keys) and has_key(provider, env)


def active_provider(env: Mapping[str, str] | None = None) -> str | None:
    """The provider sessions use by default, or None for the scripted model:
    ``IAC_KERNEL_PROVIDER`` (an unknown name raises ValueError), else the first of
    :data:`DETECT_ORDER` whose switch or credentials are set."""
    env = os.environ if env is None else env
    named = named_provider(env)
    if named:
        return named
    return next((n for n in DETECT_ORDER if _picked(PROVIDERS[n], env)), None)


def known_active_provider() -> str | None:
    """:func:`active_provider`, or None when ``IAC_KERNEL_PROVIDER`` names no provider."""
    try:
        return active_provider()
    except ValueError:
        return None


def provider_from_env(env: Mapping[str, str] | None = None) -> str:
    """The Anthropic SDK client the environment chooses (one of :data:`ANTHROPIC_FAMILY`):
    the one ``IAC_KERNEL_PROVIDER`` names (a Messages-compatible profile uses the direct
    client), else the one whose switch is set, else ``anthropic``. An unknown name raises
    ValueError."""
    env = os.environ if env is None else env
    named = named_provider(env)
    if named in ANTHROPIC_FAMILY:
        return named
    switched = (n for n in ANTHROPIC_FAMILY if PROVIDERS[n].switch_env)
    return next((n for n in switched if _picked(PROVIDERS[n], env)), "anthropic")


def claude_available(env: Mapping[str, str] | None = None) -> bool:
    """Whether Claude itself can be reached: Bedrock or Vertex is picked (the cloud SDK
    chain decides), or a key of Anthropic's is set with the direct API or a
    Messages-compatible profile in use. An unknown ``IAC_KERNEL_PROVIDER`` answers True,
    so that building the model reports the bad name instead of a silent fallback."""
    env = os.environ if env is None else env
    try:
        active = active_provider(env)
    except ValueError:
        return True
    if active is None or PROVIDERS[active].kind != "anthropic":
        return False
    cloud = active in ANTHROPIC_FAMILY and active != "anthropic"
    return cloud or has_key(PROVIDERS["anthropic"], env)


def base_url(provider: Provider, env: Mapping[str, str] | None = None) -> str | None:
    """The endpoint: ``IAC_KERNEL_BASE_URL`` for the provider ``IAC_KERNEL_PROVIDER``
    names (never another: a key goes only where it was sent), else the variable the SDK
    reads (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), else the documented URL."""
    env = os.environ if env is None else env
    override = (env.get(BASE_URL_ENV) or "").strip()
    if override and (env.get(PROVIDER_ENV) or "").strip().lower() == provider.name:
        return override
    if provider.url_env and env.get(provider.url_env):
        return env[provider.url_env].strip()
    return provider.base_url


def api_key(provider: Provider, env: Mapping[str, str] | None = None) -> str | None:
    """The key to send; keyless local servers get a placeholder the SDK insists on."""
    env = os.environ if env is None else env
    if provider.key_env:
        return env.get(provider.key_env) or None
    return provider.name


def capabilities(provider: Provider, env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The Messages API features sent to an anthropic-kind provider;
    ``IAC_KERNEL_ANTHROPIC_CAPABILITIES`` (a comma list, may be empty) narrows any profile
    (a gateway behind ``ANTHROPIC_BASE_URL`` that rejects ``cache_control``)."""
    env = os.environ if env is None else env
    named = env.get(CAPABILITIES_ENV)
    if named is None:
        return provider.capabilities
    wanted = {part.strip().lower() for part in named.split(",") if part.strip()}
    return frozenset(wanted & ANTHROPIC_CAPABILITIES)


def auth_methods(env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """ACP ``authMethods``: one env-var method per detected provider lacking its key, none
    when a provider is usable. The schema's plain form with the variable in ``_meta``:
    the ``type: "env_var"`` form of v1.19 is gone from newer schemas, whose clients drop it."""
    env = os.environ if env is None else env
    try:
        active = active_provider(env)
    except ValueError:
        return []  # a bad IAC_KERNEL_PROVIDER is reported when a model is built
    if active is not None and has_key(PROVIDERS[active], env):
        return []
    keyed = (PROVIDERS[n] for n in DETECT_ORDER if PROVIDERS[n].keys)
    return [
        {
            "id": f"env:{p.key_env}",
            "name": f"{p.title} API key",
            "description": f"Set {p.key_env} in the agent's environment.",
            "_meta": {"iac_kernel": {"envVar": p.key_env}},
        }
        for p in keyed
        if not has_key(p, env)
    ]


# --- model ids and prices ------------------------------------------------------------------

_SPELLINGS = re.compile(
    r"^(?:(?:[a-z]{2,6}\.)?anthropic\.)?(?P<id>.+?)"  # Bedrock's [region.]anthropic.
    r"(?:[@-]\d{8}|-\d{4}-\d{2}-\d{2})?(?:-v\d+(?::\d+)?)?(?:\[1m\])?$"  # dates, -v1:0, [1m]
)


def canonical_model(model_id: str) -> str:
    """A model id without its provider's spelling: ``us.anthropic.claude-sonnet-4-5-20250929
    -v1:0``, ``claude-sonnet-4-5@20250929``, ``claude-sonnet-4-5[1m]`` -> ``claude-sonnet-4-5``;
    ``gpt-4.1-2025-04-14`` -> ``gpt-4.1``."""
    name = model_id.strip().lower()
    match = _SPELLINGS.match(name)
    return match.group("id") if match else name


def price(provider: str, model: str) -> Price | None:
    """The list price of ``model`` at ``provider``, or ``None`` when it publishes none."""
    spec = PROVIDERS.get(provider)
    return spec.prices.get(canonical_model(model)) if spec else None


def direct_key(provider: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``provider`` is reached with its own key at its own documented endpoint
    (not Bedrock, Vertex, a compatible endpoint, a gateway's token or the scripted model)."""
    env = os.environ if env is None else env
    spec = PROVIDERS.get(provider)
    if spec is None or not spec.prices or not spec.key_env or not env.get(spec.key_env):
        return False
    official = (spec.base_url or "").rstrip("/")
    url = (base_url(spec, env) or "").strip().rstrip("/")
    return url in (official, official.removesuffix("/v1"))


def cost(usage: Usage, found: Price) -> float:
    """USD for ``usage`` at ``found``: input, output, cache reads and writes apart."""
    return (
        usage.input_tokens * found.input
        + usage.output_tokens * found.output
        + usage.cache_read_tokens * found.cache_read
        + usage.cache_write_tokens * found.cache_write
    ) / 1_000_000


def turn_cost(
    provider: str, model: str, usage: Usage, env: Mapping[str, str] | None = None
) -> float | None:
    """The list-price cost of a turn, or ``None`` where no honest figure exists (no
    direct key, or no price for the model)."""
    found = price(provider, model)
    if found is None or not direct_key(provider, env):
        return None
    return cost(usage, found)


@dataclass
class RunningCost:
    """The list-price cost of a session's turns since it was opened (ACP ``usage_update``
    ``cost``). ``total`` is ``None`` until a turn was priced, and for good once a turn
    that used tokens had no honest figure: a partial sum would understate the cost."""

    settled: float = 0.0
    priced: bool = False
    unknown: bool = False

    def add(self, turn_cost: float | None, usage: Usage) -> None:
        """Count one finished turn (``turn_cost``: :func:`turn_cost` of its usage)."""
        if turn_cost is not None:
            self.settled += turn_cost
            self.priced = True
        elif usage.input_tokens or usage.output_tokens:
            self.unknown = True

    def total(self, running: float | None = None, used_tokens: bool = False) -> float | None:
        """The cost so far in USD, with a running turn's cost so far (``running``; the turn
        ``used_tokens``); ``None`` where no honest figure exists."""
        if self.unknown or (running is None and used_tokens):
            return None
        if running is not None:
            return self.settled + running
        return self.settled if self.priced else None


def provider_table() -> str:
    """The providers as a Markdown table (docs/providers.md holds this very text)."""
    rows = [
        "| `IAC_KERNEL_PROVIDER` | API | key | picked without it | endpoint | default model"
        " | Messages features |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in PROVIDERS.values():
        api = "Messages" if p.kind == "anthropic" else "Chat Completions"
        keys = " / ".join(f"`{k}`" for k in p.keys)
        keys = keys or ("the cloud SDK's credential chain" if p.sdk_client else "none")
        picked = f"`{p.switch_env}=1`" if p.switch_env else "by its key" if p.detect else "no"
        url = f"`{p.base_url}`" if p.base_url else "the region's"
        url = f"`{p.url_env}` or {url}" if p.url_env else url
        features = ", ".join(sorted(p.capabilities)) if p.kind == "anthropic" else "-"
        rows.append(
            f"| `{p.name}` | {api} | {keys} | {f'{p.detect}. {picked}' if p.detect else picked}"
            f" | {url} | `{p.models[0]}` | {features} |"
        )
    return "\n".join(rows) + "\n"
