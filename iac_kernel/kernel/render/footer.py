"""The footer under a turn's output: model, tokens (with the cached share), elapsed time
and, for a direct API key of a model with a list price, the cost.

One display at the end of the turn. The extension renders :data:`FOOTER_MIME` with copy
and collapse controls; other frontends show its HTML, Markdown or plain form. The cost is
the list price (:mod:`iac_kernel.models.providers`); where no honest figure exists
(Bedrock, Vertex, compatible endpoints, the scripted model) the footer shows none.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from iac_kernel.events import Usage

FOOTER_MIME = "application/vnd.iac-kernel.footer+json"


def cached_share(usage: Usage) -> float:
    """Cache reads as a share of everything the model read (0.0 when it read nothing)."""
    read = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return usage.cache_read_tokens / read if read else 0.0


def tokens(count: int) -> str:
    """``950``, ``12.3k``, ``1.2M``: short enough for one line."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def cost_of(model_id: str) -> Callable[[Usage], float | None]:
    """The cost of a turn of ``model_id`` from its usage: list price for a direct API key,
    else None (the environment is read when the turn ends)."""
    # As paths.shown_model: no model code at import.
    from iac_kernel.models.providers import turn_cost
    from iac_kernel.models.registry import describe

    provider, model = describe(model_id)
    return lambda usage: turn_cost(provider, model, usage)


def dollars(cost: float) -> str:
    """``$0.0123``, ``$1.23``: a cent's fraction shows for small turns."""
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def line(model: str, usage: Usage, elapsed: float, cost: float | None = None) -> str:
    """The footer as one line of text."""
    read = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    text = f"{model} · {tokens(read)} in"
    if usage.cache_read_tokens:
        text += f" ({cached_share(usage):.0%} cached)"
    text += f" · {tokens(usage.output_tokens)} out · {elapsed:.1f} s"
    return text if cost is None else f"{text} · ≈{dollars(cost)} (list price)"


def payload(
    model: str, usage: Usage, elapsed: float, stop_reason: str, cost: float | None = None
) -> dict[str, Any]:
    """The extension's footer payload; ``input`` counts every token read but cache reads;
    ``cost`` (USD at list price) only where :mod:`iac_kernel.models.providers` gives one."""
    data: dict[str, Any] = {
        "v": 1,
        "model": model,
        "input": usage.input_tokens + usage.cache_write_tokens,
        "cacheRead": usage.cache_read_tokens,
        "output": usage.output_tokens,
        "elapsed": round(elapsed, 1),
        "stopReason": stop_reason,
    }
    if cost is not None:
        data["cost"] = round(cost, 6)
    return data


def bundle(
    model: str, usage: Usage, elapsed: float, stop_reason: str, cost: float | None = None
) -> dict[str, Any]:
    """The footer's MIME bundle: the extension's payload, HTML and plain text."""
    text = line(model, usage, elapsed, cost)
    return {
        FOOTER_MIME: payload(model, usage, elapsed, stop_reason, cost),
        "text/html": (
            '<div class="iac-turn-footer" style="font:0.85em monospace;opacity:.75">'
            f"{html.escape(text)}</div>"
        ),
        "text/markdown": "`" + text.replace("`", "'") + "`",
        "text/plain": text,
    }
