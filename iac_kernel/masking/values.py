"""Replace known secret values, in all their forms, with a mask: one compiled pattern.

Values of :data:`SHORT` characters or fewer are masked only where they stand alone: as a
whole JSON string value (``"ab"``) or a whole token (not touching a letter, digit, ``_``,
``-``, ``.``, ``/``, ``+`` or ``@``). Anywhere else a two-character value would mask half
the text by chance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from iac_kernel.masking.encodings import forms

#: Values this long or shorter are masked only as whole tokens / JSON strings.
SHORT = 3
#: Forms longer than this are replaced one by one (few, and a trie that deep would
#: exceed Python's recursion limit); shorter ones go through one trie pattern.
TRIE_MAX = 96
_TOKEN_CHAR = r"[A-Za-z0-9_.\-/+@]"


def trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, longest first, built as a trie: the engine
    checks one branch per character instead of every word at every position."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True
    return _node_pattern(trie)


def _node_pattern(node: dict) -> str:
    ends = "" in node
    branches = [re.escape(char) + _node_pattern(child) for char, child in node.items() if char]
    if not branches:
        return ""
    branches.sort(key=len, reverse=True)
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if ends else body


class ValueMasker:
    """Masks a fixed set of values (and their forms) in text."""

    def __init__(self, values: Iterable[str], mask: str):
        self.mask = mask
        long_forms: set[str] = set()
        short: set[str] = set()
        for value in values:
            if not value or not value.strip():
                continue
            if len(value) <= SHORT:
                short.add(value)
            else:
                long_forms |= forms(value)
        #: The longest form: how much of a stream's tail may be the start of a value.
        self.longest = max((len(f) for f in long_forms), default=0)
        if short:
            self.longest = max(self.longest, SHORT + 2)
        #: Long forms, longest first: replaced before the pattern runs.
        self.literals = sorted((f for f in long_forms if len(f) > TRIE_MAX), key=len, reverse=True)
        parts = []
        trie_forms = {f for f in long_forms if len(f) <= TRIE_MAX}
        if trie_forms:
            parts.append(trie_pattern(trie_forms))
        if short:
            alternatives = trie_pattern(short)
            parts.append(f'(?<=")(?:{alternatives})(?=")')
            parts.append(f"(?<!{_TOKEN_CHAR})(?:{alternatives})(?!{_TOKEN_CHAR})")
        self.pattern = re.compile("|".join(parts)) if parts else None

    def __bool__(self) -> bool:
        return self.pattern is not None or bool(self.literals)

    def sub(self, text: str) -> str:
        if not text:
            return text
        for literal in self.literals:
            if literal in text:
                text = text.replace(literal, self.mask)
        return text if self.pattern is None else self.pattern.sub(self.mask, text)
