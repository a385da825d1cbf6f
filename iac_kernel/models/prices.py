"""List prices of the major Anthropic and OpenAI models, for the per-turn cost estimate.

USD per million tokens, **list prices as published** by Anthropic (platform.claude.com's
pricing page) and OpenAI (its API pricing page), transcribed on 2026-12-03. They may be
out of date, and they are not what every account pays (contracts, batch discounts,
regional endpoints, long-context surcharges above 200K prompt tokens are not applied).

A cost is given only for a **direct API key** of the provider that published the price:
Anthropic's API with ``ANTHROPIC_API_KEY``, OpenAI's with ``OPENAI_API_KEY``, each at its
own endpoint. Bedrock, Vertex, compatible endpoints (any base URL of one's own),
gateways and the scripted model price differently or not at all, so they get none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from iac_kernel.events import Usage


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    #: Cache reads (Anthropic: 0.1 x input; OpenAI: its "cached input" price).
    cache_read: float
    #: Cache writes (Anthropic's 5-minute cache, the one the agent uses: 1.25 x input).
    cache_write: float


#: Anthropic's multipliers of the input price for the prompt cache.
ANTHROPIC_CACHE_READ = 0.1
ANTHROPIC_CACHE_WRITE_5M = 1.25


def _anthropic(input_price: float, output_price: float) -> Price:
    return Price(
        input_price,
        output_price,
        round(input_price * ANTHROPIC_CACHE_READ, 6),
        round(input_price * ANTHROPIC_CACHE_WRITE_5M, 6),
    )


def _openai(input_price: float, output_price: float, cached: float) -> Price:
    return Price(input_price, output_price, cached, input_price)  # no charge for writes


PRICES: dict[str, dict[str, Price]] = {
    "anthropic": {
        "claude-opus-4-7": _anthropic(5, 25),
        "claude-opus-4-6": _anthropic(5, 25),
        "claude-opus-4-5": _anthropic(5, 25),
        "claude-opus-4-1": _anthropic(15, 75),
        "claude-opus-4-0": _anthropic(15, 75),
        "claude-opus-4": _anthropic(15, 75),
        "claude-sonnet-4-6": _anthropic(3, 15),
        "claude-sonnet-4-5": _anthropic(3, 15),
        "claude-sonnet-4-0": _anthropic(3, 15),
        "claude-sonnet-4": _anthropic(3, 15),
        "claude-3-7-sonnet": _anthropic(3, 15),
        "claude-haiku-4-5": _anthropic(1, 5),
        "claude-3-5-haiku": _anthropic(0.8, 4),
    },
    "openai": {
        "gpt-5": _openai(1.25, 10, 0.125),
        "gpt-5-mini": _openai(0.25, 2, 0.025),
        "gpt-5-nano": _openai(0.05, 0.4, 0.005),
        "gpt-4.1": _openai(2, 8, 0.5),
        "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
        "gpt-4.1-nano": _openai(0.1, 0.4, 0.025),
        "gpt-4o": _openai(2.5, 10, 1.25),
        "gpt-4o-mini": _openai(0.15, 0.6, 0.075),
        "o3": _openai(2, 8, 0.5),
        "o4-mini": _openai(1.1, 4.4, 0.275),
    },
}
#: The endpoints the prices are for (a base URL set to these is still direct).
OFFICIAL_URLS = {
    "anthropic": ("https://api.anthropic.com",),
    "openai": ("https://api.openai.com/v1", "https://api.openai.com"),
}
#: A dated snapshot (``-20250929``, ``-2025-04-14``) costs what its model does.
_DATED = re.compile(r"^(?P<base>.+?)(?:-\d{8}|-\d{4}-\d{2}-\d{2})$")


def price(provider: str, model: str) -> Price | None:
    """The list price of ``model`` at ``provider``, or ``None`` when the table has none."""
    table = PRICES.get(provider, {})
    name = model.strip().lower()
    if name in table:
        return table[name]
    match = _DATED.match(name)
    return table.get(match.group("base")) if match else None


def direct_key(provider: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``provider`` is reached with its own API key at its own endpoint."""
    env = os.environ if env is None else env
    if provider not in OFFICIAL_URLS:
        return False  # Bedrock, Vertex, compatible endpoints, the scripted model
    key = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    url_env = "ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL"
    if not env.get(key):
        return False  # e.g. ANTHROPIC_AUTH_TOKEN: a gateway's token
    named = (env.get("IAC_KERNEL_PROVIDER") or "").strip().lower()
    urls = [env.get(url_env) or ""]
    if named == provider:
        urls.append(env.get("IAC_KERNEL_BASE_URL") or "")
    official = OFFICIAL_URLS[provider]
    return all(not u.strip() or u.strip().rstrip("/") in official for u in urls)


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
