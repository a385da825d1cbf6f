"""The footer under a turn's output: model, tokens (with the cached share) and elapsed time.

One display at the end of the turn (a few hundred bytes on IOPub). The extension renders
:data:`FOOTER_MIME` with copy and collapse controls; other frontends show the bundle's
``text/html`` (notebook, nbconvert), ``text/markdown`` (frontends that prefer it) or
``text/plain`` (console, papermill logs).

No cost is shown: the kernel keeps no price table (list prices change and differ by
provider, region and contract), so any figure could be wrong.
"""

from __future__ import annotations

import html
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


def line(model: str, usage: Usage, elapsed: float) -> str:
    """The footer as one line of text."""
    read = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    text = f"{model} · {tokens(read)} in"
    if usage.cache_read_tokens:
        text += f" ({cached_share(usage):.0%} cached)"
    return f"{text} · {tokens(usage.output_tokens)} out · {elapsed:.1f} s"


def payload(model: str, usage: Usage, elapsed: float, stop_reason: str) -> dict[str, Any]:
    """The extension's footer payload; ``input`` counts every token read but cache reads."""
    return {
        "v": 1,
        "model": model,
        "input": usage.input_tokens + usage.cache_write_tokens,
        "cacheRead": usage.cache_read_tokens,
        "output": usage.output_tokens,
        "elapsed": round(elapsed, 1),
        "stopReason": stop_reason,
    }


def bundle(model: str, usage: Usage, elapsed: float, stop_reason: str) -> dict[str, Any]:
    """The footer's MIME bundle: the extension's payload, HTML and plain text."""
    text = line(model, usage, elapsed)
    return {
        FOOTER_MIME: payload(model, usage, elapsed, stop_reason),
        "text/html": (
            '<div class="iac-turn-footer" style="font:0.85em monospace;opacity:.7">'
            f"{html.escape(text)}</div>"
        ),
        "text/markdown": "`" + text.replace("`", "'") + "`",
        "text/plain": text,
    }
