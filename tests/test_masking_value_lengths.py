"""Values of every length are masked in every form, and no set of values breaks the
masker: a secret of 83 to 288 characters once made its pattern build recurse past
Python's limit (a 93-character GitHub token in the environment failed every masking),
and values nested in one another must not exceed the regex compiler's."""

from __future__ import annotations

import base64
import random
import re
import string

import pytest

from iac_kernel.masking.values import MAX_NESTING, trie_pattern
from iac_kernel.redact import MIN_SECRET_LENGTH, redactor
from iac_kernel.terraform.sensitive import mask_text

ALPHABET = string.ascii_letters + string.digits + "-_/+=&<>"


def _value(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(ALPHABET, k=length))


@pytest.mark.parametrize(
    "length", [4, 8, 40, 82, 83, 93, 96, 97, 108, 124, 144, 165, 192, 248, 288, 289, 600, 2000]
)
def test_a_value_of_any_length_is_masked_in_its_forms(length):
    value = _value(random.Random(length), length)
    for shown in (value, value.encode().hex(), base64.b64encode(value.encode()).decode()):
        assert shown not in mask_text(f"before {shown} after", [value])
    if length >= MIN_SECRET_LENGTH:  # a secret environment value too
        secret = value.replace("/", "s")  # not taken for a path
        hexed = secret.encode().hex().upper()
        masked = redactor({"GITHUB_TOKEN": secret})(f"token {secret} and {hexed}")
        assert secret not in masked and hexed not in masked
        assert masked.startswith("token [REDACTED:"), masked


def test_lengths_up_to_400_build():
    rng = random.Random(5)
    for length in range(4, 401, 5):
        value = _value(rng, length)
        assert value not in mask_text(value, [value]), length


@pytest.mark.parametrize(
    "words",
    [
        ["prefix" + "x" * n for n in range(120)],  # each a prefix of the next
        ["a" * n + "Z" for n in range(8, 130)],  # a branch at every character
        ["k" * n for n in range(4, 100)] + ["k" * n + "q" for n in range(4, 100)],
    ],
    ids=["nested", "branching", "both"],
)
def test_values_nested_in_one_another_are_all_masked(words):
    assert "(?:" not in trie_pattern(words)  # deeper than MAX_NESTING: an alternation
    pattern = re.compile(trie_pattern(words))  # compiles, whatever the nesting
    for word in words[:: max(1, len(words) // 20)]:
        assert pattern.fullmatch(word), word
    text = " | ".join(words[::37])
    masked = mask_text(text, words)
    assert not any(word in masked for word in words if len(word) > 3)


def test_a_shallow_trie_stays_a_trie():
    """The plain alternation is the exception: ordinary forms keep the trie's shape."""
    pattern = trie_pattern(["secret-one", "secret-two", "other"])
    assert pattern.count("|") == 2 and pattern.startswith("(?:")
    assert re.fullmatch(pattern, "secret-two") and not re.fullmatch(pattern, "secret-")
    assert MAX_NESTING >= 16


def _wrapped(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width)) + "\n"


def _dumps(value: str) -> dict[str, str]:
    """What wrapping and per-character tools print for ``value`` (base64 -w 76, xxd -p,
    od -An -tx1, xxd -i, colon-separated hex, every character escaped)."""
    data = value.encode()
    pairs = [f"{b:02x}" for b in data]
    od = "\n".join(" " + " ".join(pairs[i : i + 16]) for i in range(0, len(pairs), 16))
    return {
        "base64 -w 76": _wrapped(base64.b64encode(data).decode(), 76),
        "base64 -w 20": _wrapped(base64.b64encode(data).decode(), 20),
        "xxd -p": _wrapped(data.hex(), 60),
        "od -An -tx1": od + "\n",
        "xxd -i": ",\n".join(
            "  " + ", ".join(f"0x{p}" for p in pairs[i : i + 12]) for i in range(0, len(pairs), 12)
        ),
        "openssl-style colons": ":".join(pairs).upper(),
        "every \\u": "".join(f"\\u{ord(c):04X}" for c in value),
        "every %XX": "".join(f"%{b:02x}" for b in data),
        "every \\x": "".join(f"\\x{b:02X}" for b in data),
    }


@pytest.mark.parametrize("length", [40, 85, 93, 108, 300, 1200])
def test_a_long_value_is_masked_wrapped_and_escaped(length):
    """The split and per-character forms are not only for short values: a 93-character
    GitHub token or a 108-character API key wrapped by base64 or dumped by od was shown
    whole (those forms were searched for values under about 50 characters only)."""
    value = _value(random.Random(length * 7), length)
    for name, shown in _dumps(value).items():
        masked = mask_text(f"out:\n{shown}done\n", [value])
        squeezed = "".join(masked.split())
        whole = "".join(shown.split())
        assert whole[:60] not in squeezed and whole[-60:] not in squeezed, name
