"""The per-turn cost (issue 24 point 6): list prices for a direct API key only.

The cost counts input, output, cache reads and cache writes at their own prices; Bedrock,
Vertex, compatible endpoints, gateways, the scripted model and unpriced models get none.
"""

from __future__ import annotations

import pytest

from iac_kernel.events import Usage
from iac_kernel.kernel.render import footer
from iac_kernel.kernel.render.footer import FOOTER_MIME
from iac_kernel.models import providers
from iac_kernel.models.providers import CREDENTIAL_ENV, PROVIDERS, Price

ANTHROPIC = {"ANTHROPIC_API_KEY": "sk-ant-test"}
OPENAI = {"OPENAI_API_KEY": "sk-test"}
#: Cleared so the machine's own settings cannot change what footer.cost_of sees.
PROVIDER_ENV = (*CREDENTIAL_ENV, "ANTHROPIC_MODEL")


def test_anthropic_cost_counts_cache_reads_and_writes_at_their_multipliers() -> None:
    usage = Usage(
        input_tokens=100_000,
        output_tokens=10_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=200_000,
    )
    got = providers.turn_cost("anthropic", "claude-sonnet-4-6", usage, ANTHROPIC)
    # $3 in, $15 out, reads 0.1 x $3, 5-minute writes 1.25 x $3 (per million tokens).
    want = 0.1 * 3 + 0.01 * 15 + 1.0 * 0.3 + 0.2 * 3.75
    assert got == pytest.approx(want)
    assert got == pytest.approx(1.5)
    # Cache reads are cheaper than the same tokens uncached.
    uncached = Usage(input_tokens=1_300_000, output_tokens=10_000)
    assert providers.turn_cost("anthropic", "claude-sonnet-4-6", uncached, ANTHROPIC) > got


def test_openai_cost_uses_the_cached_input_price() -> None:
    usage = Usage(input_tokens=500_000, output_tokens=100_000, cache_read_tokens=500_000)
    got = providers.turn_cost("openai", "gpt-4.1", usage, OPENAI)
    assert got == pytest.approx(0.5 * 2 + 0.1 * 8 + 0.5 * 0.5)


def test_dated_snapshots_cost_what_their_model_does() -> None:
    assert providers.price("anthropic", "claude-haiku-4-5-20251001") == providers.price(
        "anthropic", "claude-haiku-4-5"
    )
    assert providers.price("openai", "gpt-4.1-2025-04-14") == Price(2, 8, 0.5, 2)
    assert providers.price("openai", "gpt-4.1-2025") is None
    assert providers.price("anthropic", "claude-sonnet-9") is None


@pytest.mark.parametrize(
    ("provider", "model", "env"),
    [
        ("bedrock", "claude-sonnet-4-6", ANTHROPIC),
        ("vertex", "claude-sonnet-4-6", ANTHROPIC),
        ("deepseek", "deepseek-flash", {"DEEPSEEK_API_KEY": "k"}),
        ("deepseek_anthropic", "claude-sonnet-4-6", ANTHROPIC),
        ("ollama", "llama3.2", {}),
        ("scripted", "scripted", ANTHROPIC),
        # A compatible endpoint or a gateway behind the provider's own variables.
        ("anthropic", "claude-sonnet-4-6", {**ANTHROPIC, "ANTHROPIC_BASE_URL": "http://gw"}),
        ("openai", "gpt-4.1", {**OPENAI, "OPENAI_BASE_URL": "https://openrouter.ai/api/v1"}),
        (
            "openai",
            "gpt-4.1",
            {**OPENAI, "IAC_KERNEL_PROVIDER": "openai", "IAC_KERNEL_BASE_URL": "http://x/v1"},
        ),
        # A gateway's token, not an API key; no key at all.
        ("anthropic", "claude-sonnet-4-6", {"ANTHROPIC_AUTH_TOKEN": "t"}),
        ("openai", "gpt-4.1", {}),
        # A model the table has no price for.
        ("openai", "gpt-99", OPENAI),
    ],
)
def test_no_cost_without_a_direct_key_and_a_price(provider: str, model: str, env) -> None:
    assert providers.turn_cost(provider, model, Usage(1000, 1000), env) is None


def test_the_official_endpoint_spelled_out_is_still_direct() -> None:
    env = {**OPENAI, "OPENAI_BASE_URL": "https://api.openai.com/v1/"}
    assert providers.turn_cost("openai", "gpt-4.1", Usage(1_000_000), env) == pytest.approx(2)


def test_every_price_is_positive_and_reads_cost_less_than_input() -> None:
    for provider in PROVIDERS.values():
        for name, price in provider.prices.items():
            assert 0 < price.cache_read < price.input < price.output, name


def test_footer_shows_the_cost_only_when_given() -> None:
    usage = Usage(input_tokens=2000, output_tokens=300, cache_read_tokens=6000)
    priced = footer.bundle("anthropic:claude-sonnet-4-6", usage, 3.0, "end_turn", 0.01234)
    assert priced["text/plain"].endswith(" · 3.0 s · ≈$0.0123 (list price)")
    assert priced[FOOTER_MIME]["cost"] == 0.01234
    assert "$0.0123" in priced["text/html"]
    unpriced = footer.bundle("bedrock:claude-sonnet-4-6", usage, 3.0, "end_turn")
    assert "cost" not in unpriced[FOOTER_MIME]
    assert "$" not in unpriced["text/plain"] and "$" not in unpriced["text/html"]
    assert footer.dollars(12.345) == "$12.35"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_kernel_prices_a_session_model_from_the_environment(clean_env) -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert footer.cost_of("claude-haiku-4-5")(usage) == pytest.approx(6)
    assert footer.cost_of("scripted")(usage) is None
    clean_env.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    assert footer.cost_of("claude-haiku-4-5")(usage) is None  # Bedrock prices differ
    clean_env.delenv("CLAUDE_CODE_USE_BEDROCK")
    clean_env.setenv("OPENAI_API_KEY", "sk-test")
    assert footer.cost_of("openai:gpt-4.1-mini")(usage) == pytest.approx(2.0)
