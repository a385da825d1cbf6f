"""Replace known secret values, in all their forms, with a mask: one compiled pattern.

Values of :data:`SHORT` characters or fewer are masked only where they stand alone: as a
whole JSON string value (``"ab"``) or a whole token (not touching a letter, digit, ``_``,
``-``, ``.``, ``/``, ``+`` or ``@``). Anywhere else a two-character value would mask half
the text by chance.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

from iac_kernel.masking.encodings import MIN_SPLIT, caseless_forms, forms

#: Values this long or shorter are masked only as whole tokens / JSON strings.
SHORT = 3
#: Forms longer than this are replaced one by one (few); shorter ones go through one
#: trie pattern. Split forms (:attr:`ValueMasker.split`) and per-character escapes
#: (found in any case) of any length go through theirs.
TRIE_MAX = 96
_TOKEN_CHAR = r"[A-Za-z0-9_.\-/+@]"
#: What a split form may be split by: whitespace (wrapped base64, one character per
#: line, ``od -An -tx1``), and a dump's ASCII column and next offset (``xxd``,
#: ``hexdump -C``, ``od -c`` / ``od -tx1``).
_NOISE = re.compile(
    r"(?:(?<! )  (?:\|[^\n]{0,16}\||(?! )(?:(?!  )[^\n]){1,16})\n[0-9a-fA-F]{7,8}(?::|(?= ))"
    r"|\n[0-9a-fA-F]{7,8}(?::|(?= ))|\s)+"
)
#: Where a dump's offset column starts a line: text without one has only whitespace for
#: :data:`_NOISE` to take out.
_DUMP_OFFSET = re.compile(r"\n[0-9a-fA-F]{7,8}(?::|(?= ))")
#: Four or more hex bytes each marked (``xxd -i``'s ``0x41, 0x6d``, ``0x41 0x6d``) or
#: separated by ``:`` or ``,`` (openssl's ``41:6d``), lines wrapped or not: its hex
#: digits are searched for the hex forms, and the whole run is masked.
_HEX_RUN = re.compile(
    r"0[xX][0-9a-fA-F]{2}(?:[,:\s]*0[xX][0-9a-fA-F]{2}){3,}"
    r"|[0-9a-fA-F]{2}(?:[ \t]*[,:]\s*[0-9a-fA-F]{2}){3,}"
)
#: What every :data:`_HEX_RUN` holds, found faster (text without it has no run).
_HEX_RUN_HINT = re.compile(
    r"[,:0](?:(?<=[,:])\s*[0-9a-fA-F]{2}[ \t]*[,:]|(?<=0)[xX][0-9a-fA-F]{2})"
)  # one character class first: the engine skips to it
_NOT_HEX = re.compile(r"0[xX]|[^0-9a-fA-F]")
_HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")


def trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, longest first, built as a trie: the engine
    checks one branch per character instead of every word at every position.

    Built without recursion: a value's escaped forms run to hundreds of characters, a
    trie level each (a recursive build failed on secrets of 83 to 288 characters).
    Words whose groups would nest deeper than :data:`MAX_NESTING` (each a prefix of the
    next, or branching at every character) give a plain alternation instead, longest
    first: the regex compiler recurses into nested groups."""
    unique = set(words)
    trie: dict = {}
    for word in unique:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True
    pattern, nesting = _trie_to_pattern(trie)
    if nesting > MAX_NESTING:
        return "|".join(re.escape(w) for w in sorted(unique, key=len, reverse=True) if w)
    return pattern


#: How deep the groups of one :func:`trie_pattern` may nest.
MAX_NESTING = 64


def _trie_to_pattern(root: dict) -> tuple[str, int]:
    """The pattern of a trie and how deep its groups nest, children before their
    parents (an explicit stack, not recursion)."""
    built: dict[int, tuple[str, int]] = {}
    stack: list[tuple[dict, bool]] = [(root, False)]
    while stack:
        node, children_built = stack.pop()
        if not children_built:
            stack.append((node, True))
            stack.extend((child, False) for char, child in node.items() if char)
            continue
        parts = [(re.escape(char), built.pop(id(child))) for char, child in node.items() if char]
        if not parts:
            built[id(node)] = ("", 0)
            continue
        branches = sorted((char + sub for char, (sub, _) in parts), key=len, reverse=True)
        nesting = max(depth for _, (_, depth) in parts)
        if len(branches) > 1:
            body, nesting = "(?:" + "|".join(branches) + ")", nesting + 1
        else:
            body = branches[0]
        if "" in node:
            body, nesting = f"(?:{body})?", nesting + 1
        built[id(node)] = (body, nesting)
    return built[id(root)]


class ValueMasker:
    """Masks a fixed set of values (and their forms) in text."""

    def __init__(self, values: Iterable[str], mask: str):
        self.mask = mask
        long_forms: set[str] = set()
        caseless: set[str] = set()
        short: set[str] = set()
        for value in values:
            if not value or not value.strip():
                continue
            if len(value) <= SHORT:
                short.add(value)
            else:
                long_forms |= forms(value)
                caseless |= caseless_forms(value)
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
        self.longest = max([self.longest, *map(len, caseless)])
        # A run of marked hex bytes (``0x41, `` a byte, wrapped) is about 3x its digits.
        hexed = (len(f) for f in caseless if _HEX_DIGITS.fullmatch(f))
        self.longest = max([self.longest, *(4 * n for n in hexed)])
        lowered = {f.lower() for f in caseless}
        #: Hex, per-character escapes and values of MIN_SPLIT characters, in any case:
        #: searched in ASCII text lower-cased (as fast as a plain search), in other text
        #: with IGNORECASE (:meth:`_caseless`).
        self._caseless_words = trie_pattern(lowered) if lowered else None
        self._lowered = re.compile(self._caseless_words) if self._caseless_words else None
        self._ignorecase: re.Pattern[str] | None = None  # compiled when first needed
        #: Forms split by whitespace, lines and dump columns: searched in the text with
        #: those taken out (:meth:`_split_sub`), their own whitespace taken out too.
        split = {"".join(f.split()) for f in long_forms}  # wrapped: a long value's too
        split = {f for f in split if len(f) >= MIN_SPLIT}  # hex in both cases is a form
        self.split = re.compile(trie_pattern(split)) if split else None
        #: For :meth:`finds`: the forms :attr:`split` does not hold (fewer than MIN_SPLIT
        #: characters once their whitespace is out) and the short values.
        unsplit = {f for f in trie_forms if len("".join(f.split())) < MIN_SPLIT}
        short_parts = parts[1:] if trie_forms else parts
        gate = ([trie_pattern(unsplit)] if unsplit else []) + short_parts
        self._unsplit = re.compile("|".join(gate)) if gate else None

    def __bool__(self) -> bool:
        return self.pattern is not None or bool(self.literals)

    def finds(self, text: str) -> bool:
        """Whether any form is in ``text``: when not, :meth:`sub` leaves it as it is (a
        masker of several values answers for the maskers of each of them).

        Text without a dump's offset column loses only whitespace to :func:`squeeze`, so
        a form of :data:`MIN_SPLIT` characters or more (its own whitespace aside) in it
        is in the squeezed text too: one search there stands for :attr:`pattern`'s."""
        if any(literal in text for literal in self.literals):
            return True
        if self._caseless_in(text):
            return True
        if self.split is None or _DUMP_OFFSET.search(text) is not None:
            if self.pattern is not None and self.pattern.search(text):
                return True
            if self.split is not None and self.split.search(squeeze(text)) is not None:
                return True
            return self._hex_run_in(text)
        if self._unsplit is not None and self._unsplit.search(text):
            return True
        return self.split.search(_no_whitespace(text)) is not None or self._hex_run_in(text)

    def sub(self, text: str) -> str:
        if not text:
            return text
        for literal in self.literals:
            if literal in text:
                text = text.replace(literal, self.mask)
        if self.pattern is not None:
            text = self.pattern.sub(self.mask, text)
        if self._lowered is not None:
            text = self._caseless_sub(text)
            if _HEX_RUN_HINT.search(text):
                text = _HEX_RUN.sub(self._hex_run_mask, text)
        return text if self.split is None else self._split_sub(text)

    def _caseless_in(self, text: str) -> bool:
        if self._lowered is None:
            return False
        if text.isascii():
            return self._lowered.search(text.lower()) is not None
        return self._caseless().search(text) is not None

    def _caseless_sub(self, text: str) -> str:
        assert self._lowered is not None
        if not text.isascii():
            return self._caseless().sub(self.mask, text)
        pieces, last = [], 0
        for found in self._lowered.finditer(text.lower()):  # same places: ASCII
            pieces += [text[last : found.start()], self.mask]
            last = found.end()
        return "".join(pieces) + text[last:] if pieces else text

    def _caseless(self) -> re.Pattern[str]:
        """The caseless forms with IGNORECASE, for text that is not ASCII."""
        if self._ignorecase is None:
            self._ignorecase = re.compile(self._caseless_words or "", re.IGNORECASE)
        return self._ignorecase

    def _hex_run_in(self, text: str) -> bool:
        """Whether a run of marked or separated hex bytes in ``text`` holds a value."""
        if self._lowered is None or not _HEX_RUN_HINT.search(text):
            return False
        return any(self._caseless_in(_hex_digits(run)) for run in _HEX_RUN.finditer(text))

    def _hex_run_mask(self, run: re.Match[str]) -> str:
        if not self._caseless_in(_hex_digits(run)):
            return run.group()
        return self.mask + "\n" * run.group().count("\n")

    def _split_sub(self, text: str) -> str:
        """Mask the forms split by :data:`_NOISE` (the mask keeps the line breaks the
        form spanned, so line counts and a dump's layout stay)."""
        assert self.split is not None
        if not self.split.search(squeeze(text)):
            return text  # the usual case, at C speed
        squeezed: list[str] = []
        starts: list[int] = []  # where each kept piece starts in the squeezed text
        origins: list[int] = []  # ... and in ``text``
        pos = size = 0
        for noise in _NOISE.finditer(text):
            if noise.start() > pos:
                starts.append(size)
                origins.append(pos)
                squeezed.append(text[pos : noise.start()])
                size += noise.start() - pos
            pos = noise.end()
        if pos < len(text):
            starts.append(size)
            origins.append(pos)
            squeezed.append(text[pos:])
        if len(starts) < 2:
            return text  # nothing split
        spans = []
        for match in self.split.finditer("".join(squeezed)):
            first = bisect.bisect_right(starts, match.start()) - 1
            last = bisect.bisect_right(starts, match.end() - 1) - 1
            if first != last:  # split: the unsplit ones are masked already
                begin = origins[first] + match.start() - starts[first]
                end = origins[last] + match.end() - starts[last]
                spans.append((begin, end))
        for begin, end in reversed(spans):
            text = text[:begin] + self.mask + "\n" * text.count("\n", begin, end) + text[end:]
        return text


def _hex_digits(run: re.Match[str]) -> str:
    return _NOT_HEX.sub("", run.group())


def squeeze(text: str) -> str:
    """``text`` with :data:`_NOISE` taken out (what split forms are searched in); text
    without a dump's offset column has only whitespace to take out, at C speed."""
    if _DUMP_OFFSET.search(text) is None:
        return _no_whitespace(text)
    return _NOISE.sub("", text)


#: What ``str.split()`` and ``\s`` take for whitespace among ASCII characters.
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())


def _no_whitespace(text: str) -> str:
    if text.isascii():
        return text.encode("ascii").translate(None, _ASCII_SPACE).decode("ascii")
    return "".join(text.split())
