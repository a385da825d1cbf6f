"""The per-turn footer (issue 24 point 6): model, tokens in/out with the cached share and
elapsed time, in one display at the end of the turn; no cost without a price
(tests/test_prices.py: the cost for a direct API key)."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.events import Usage
from iac_kernel.kernel.render import footer
from iac_kernel.kernel.render.footer import FOOTER_MIME
from kernel_harness import KernelHarness, scripted_kernel

SCRIPT = Path(__file__).parent / "scripts" / "footer.json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHarness]:
    root = tmp_path_factory.mktemp("kernel-footer")
    work = root / "work"
    work.mkdir()
    harness = scripted_kernel(root, Path(os.path.realpath(work)), SCRIPT)
    try:
        yield harness
    finally:
        harness.stop()


def footers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["content"]["data"]
        for m in messages
        if m["msg_type"] == "display_data" and FOOTER_MIME in m["content"]["data"]
    ]


def test_turn_ends_with_one_footer_naming_model_tokens_and_time(kernel: KernelHarness) -> None:
    result = kernel.execute("Give a cached answer")
    assert result.status == "ok"
    [bundle] = footers(result.messages)
    displays = result.of_type("display_data")
    assert displays[-1]["content"]["data"] is bundle, "the footer is the turn's last display"
    data = bundle[FOOTER_MIME]
    assert data["model"].startswith("scripted")  # provider:model; a script is "scripted"
    assert (data["input"], data["cacheRead"], data["output"]) == (1000, 3000, 250)
    assert data["elapsed"] >= 0
    assert data["stopReason"] == "end_turn"
    assert "cost" not in data and "$" not in bundle["text/plain"]
    plain = bundle["text/plain"]
    assert plain.startswith(data["model"] + " · 4.0k in (75% cached) · 250 out · ")
    assert plain.endswith(" s")
    assert html.escape(plain) in bundle["text/html"]
    # One display at the end: a few hundred bytes, never updated.
    footer_ids = [
        m for m in result.of_type("update_display_data") if FOOTER_MIME in m["content"]["data"]
    ]
    assert not footer_ids
    assert len(json.dumps(bundle)) < 700


def test_footer_without_cache_reads_says_nothing_about_the_cache(kernel: KernelHarness) -> None:
    result = kernel.execute("Give a plain answer")
    [bundle] = footers(result.messages)
    assert " · 40 in · 7 out · " in bundle["text/plain"]
    assert "cached" not in bundle["text/plain"]


def test_a_magic_only_cell_has_no_footer(kernel: KernelHarness) -> None:
    result = kernel.execute("%mode")
    assert footers(result.messages) == []


# -- the fallback forms (no kernel) --------------------------------------------------------


def test_fallback_html_is_escaped_and_has_no_cost_without_a_price() -> None:
    usage = Usage(input_tokens=1_500_000, output_tokens=999, cache_read_tokens=500_000)
    bundle = footer.bundle("openai:<gpt>&co", usage, 12.345, "max_tokens")
    assert bundle["text/plain"] == "openai:<gpt>&co · 2.0M in (25% cached) · 999 out · 12.3 s"
    assert "openai:&lt;gpt&gt;&amp;co" in bundle["text/html"]
    assert "<gpt>" not in bundle["text/html"]
    assert bundle["text/html"].startswith('<div class="iac-turn-footer"')
    assert "monospace" in bundle["text/html"]
    assert bundle["text/markdown"] == f"`{bundle['text/plain']}`"
    assert bundle[FOOTER_MIME]["elapsed"] == 12.3
    assert bundle[FOOTER_MIME]["stopReason"] == "max_tokens"


def test_token_counts_are_short() -> None:
    assert [footer.tokens(n) for n in (0, 999, 1000, 12_345, 2_500_000)] == [
        "0",
        "999",
        "1.0k",
        "12.3k",
        "2.5M",
    ]
    assert footer.cached_share(Usage()) == 0.0


def test_nbval_sanitizers_make_two_footers_of_one_model_equal() -> None:
    """Committed notebooks compare footers only after notebooks/nbval-sanitize.cfg."""
    import re

    from nbval.plugin import get_sanitize_patterns

    cfg = Path(__file__).parent.parent / "notebooks" / "nbval-sanitize.cfg"
    patterns = get_sanitize_patterns(cfg.read_text())

    def clean(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    one = footer.bundle("scripted", Usage(1234, 56, 7000), 0.43, "end_turn")
    two = footer.bundle("scripted", Usage(99, 5, 0), 12.0, "end_turn")
    for key in one:
        assert clean(one[key]) == clean(two[key]), key
    priced = footer.bundle("openai:gpt-5", Usage(1234, 56, 7000), 0.43, "end_turn", 0.0123)
    again = footer.bundle("openai:gpt-5", Usage(99, 5, 0), 12.0, "end_turn", 1.5)
    for key in priced:
        assert clean(priced[key]) == clean(again[key]), key
    other = footer.bundle("openai:gpt-5", Usage(99, 5, 0), 12.0, "end_turn")
    assert clean(other["text/plain"]) != clean(two["text/plain"]), "the model is compared"
