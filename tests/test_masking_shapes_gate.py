""":func:`mask_shapes` runs on ASCII text only the rules whose strings the text holds;
the result is always that of running every rule (:func:`mask_every_rule`), for every
credential shape in every spelling, embedded in other text, several at once, in text
that is not ASCII, and for ordinary text that must stay as it is."""

from __future__ import annotations

import random

import pytest

from iac_kernel.masking import shapes
from iac_kernel.masking.shapes import RULES, mask_every_rule, mask_shapes
from test_masking_forms import CONTROLS, SHAPES


def _spellings(text: str) -> list[str]:
    return [text, text.lower(), text.upper(), text.swapcase(), text.title()]


def _corpus() -> list[str]:
    rng = random.Random(5)
    words = ["plan", "apply", "resource", "aws_instance", "key", "token", "xoxo", "eyj", "EYJ"]
    out = []
    for text in [*(t for t, _ in SHAPES.values()), *CONTROLS]:
        for spelled in _spellings(text):
            filler = " ".join(rng.choices(words, k=20))
            out += [spelled, f"{filler}\n{spelled}\n{filler}", f"{spelled} é {filler}"]
    every = "\n".join(t for t, _ in SHAPES.values())
    out += [every, every.lower(), every.upper(), "x" * 39, "A1b" + "x" * 37, "A1b" + "x" * 36]
    return out


@pytest.mark.parametrize("text", _corpus())
def test_the_gated_rules_mask_what_every_rule_masks(text: str):
    assert mask_shapes(text) == mask_every_rule(text)


def test_every_shape_is_still_masked():
    for text, secret in SHAPES.values():
        assert secret not in mask_shapes(f"output:\n{text}\nend"), text


def test_each_rule_has_its_anchors():
    assert len(shapes.ANCHORS) == len(RULES)
    assert set(shapes.CASED) <= {kind for kind, _ in RULES}
    for anchors in shapes.ANCHORS:
        assert anchors is None or set(anchors) <= set(shapes.GATE)


def test_ordinary_ascii_text_runs_no_rule():
    text = "terraform plan: 3 to add, 0 to change\n" * 50
    assert not any(shapes.rules_wanted(text))
    assert mask_shapes(text) is text
