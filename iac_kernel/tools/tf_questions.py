"""Questions and call inputs as front ends see them: every known secret masked.

A question is masked when it goes out, with the values known *then*: a value a running
bash call created (a state it wrote) is already masked in that call's exec-time question.
Values passed to variables the configuration declares sensitive (``-var tok=...``,
``TF_VAR_tok``) are masked too: an expanded ``-var "tok=$(cat f)"`` shows no value.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iac_kernel.redact import redact_value
from iac_kernel.terraform.sensitive import mask_value
from iac_kernel.terraform.workspace import (
    known_values,
    limit_note,
    sensitive_names,
    sensitive_values,
)

#: Shell text the shell has not expanded yet (``$(cat tok.txt)``, ``$TOKEN``): no value
#: (the exec-time question shows the expanded argv, masked).
UNEXPANDED = re.compile(r"\$[({A-Za-z_]|`")


def variable_values(value: Any, names: frozenset[str]) -> set[str]:
    """Values given to the ``names`` variables anywhere in ``value`` (argv lists,
    ``TF_VAR_name`` keys, ``-var name=...`` and ``TF_VAR_name=...`` in text)."""
    if not names:
        return set()
    found: set[str] = set()
    for text in _strings(value, names, found):
        for name in names:
            flag = rf"-var[= ]\s*(['\"])?{re.escape(name)}=(.+?)(?(1)\1)(?=[\s;|&)]|$)"
            env = rf"TF_VAR_{re.escape(name)}=(['\"])?(.+?)(?(1)\1)(?=[\s;|&)]|$)"
            for match in (*re.finditer(flag, text), *re.finditer(env, text)):
                if match.group(1) == "'" or not UNEXPANDED.search(match.group(2)):
                    found.add(match.group(2))
    return {v for v in found if v}


def _strings(value: Any, names: frozenset[str], found: set[str]) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.startswith("TF_VAR_") and key[7:] in names:
                found.add(str(item))
            yield from _strings(item, names, found)
    elif isinstance(value, list | tuple):
        words = [w for w in value if isinstance(w, str)]
        for i, word in enumerate(words):
            given = words[i + 1] if word == "-var" and i + 1 < len(words) else word[5:]
            if (word == "-var" or word.startswith("-var=")) and "=" in given:
                name, _, val = given.partition("=")
                if name in names:
                    found.add(val)
        for item in value:
            yield from _strings(item, names, found)


def mask_shown(value: Any, cwd: Path, fresh: bool = True) -> Any:
    """``value`` (text, or strings at any depth) with every known secret masked: secret
    environment values and credential shapes, the workspace's sensitive values (as of now
    with ``fresh``, else as of the last scan), and values given to sensitive variables."""
    values = set(sensitive_values(cwd) if fresh else known_values(cwd))
    values |= variable_values(value, sensitive_names(cwd))
    return mask_value(redact_value(value), values)


def mask_question(request: Any, cwd: Path, fresh: bool = True) -> Any:
    """A copy of a permission request with every shown field masked (:func:`mask_shown`),
    saying when the sensitive-value scan stopped early. A question asked while the call
    runs (exec time) wants ``fresh``: the call may have created values."""
    fields = {"title": request.title, "input": request.input, "reason": request.reason}
    fields["review"] = request.review
    fields["labels"] = dict(request.labels)  # "Allow always: `...`" quotes the command
    masked = mask_shown(fields, cwd, fresh)
    note = limit_note(cwd)
    if note:
        masked["reason"] = f"{masked['reason']}\n{note}"
    diff = request.diff
    if diff is not None:
        shown = mask_shown([diff.path, diff.old_text, diff.new_text], cwd, fresh)
        diff = dataclasses.replace(diff, path=shown[0], old_text=shown[1], new_text=shown[2])
    return dataclasses.replace(request, **masked, diff=diff)
