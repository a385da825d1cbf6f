"""Redact secrets from text: the values of secret-looking environment variables (in every
form they print in: :mod:`iac_kernel.masking.encodings`) and credentials recognisable by
their shape (:mod:`iac_kernel.masking.shapes`)."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from iac_kernel.masking.own_names import own_setting
from iac_kernel.masking.shapes import mask_shapes
from iac_kernel.masking.trust_store import public_path
from iac_kernel.masking.values import ValueMasker

_DiffLike = TypeVar("_DiffLike", bound=Any)

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|AUTH|SESSION_ID|CERT|WEBHOOK)",
    re.IGNORECASE,
)
#: Shorter values are too likely to occur by chance ("1", "true") to be worth replacing.
MIN_SECRET_LENGTH = 6


def secret_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Map secret value -> variable name for every secret-looking variable."""
    env = os.environ if env is None else env
    found = {}
    for name, value in env.items():
        if public_path(name, value):  # SSL_CERT_FILE=/etc/ssl/ca.pem: a path, not a secret
            continue
        if own_setting(name):  # IAC_KERNEL_EGRESS_ALLOW_PRIVATE: a host, not a key
            continue
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH:
            found[value] = name
    return found


class _Maskers(tuple):
    """One masker per secret, and one over them all (:attr:`gate`): a text it finds no
    form in is left as it is by every one of them, so it is searched once, not once per
    secret."""

    gate: ValueMasker


@functools.lru_cache(maxsize=8)
def _maskers(secrets: frozenset[tuple[str, str]]) -> _Maskers:
    # Longest value first, so a secret that contains another is replaced whole.
    ordered = sorted(secrets, key=lambda kv: -len(kv[0]))
    maskers = _Maskers(ValueMasker([value], f"[REDACTED:{name}]") for value, name in ordered)
    maskers.gate = ValueMasker([value for value, _ in ordered], "")
    return maskers


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace every secret value in ``text`` (and its encoded forms) with
    ``[REDACTED:NAME]``, and every credential-shaped part with ``[REDACTED:kind]``."""
    if not text:
        return text
    return _redact_with(text, _maskers(frozenset(secret_values(env).items())))


def redactor(env: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """:func:`redact` with the environment's secrets read once (for many texts)."""
    maskers = _maskers(frozenset(secret_values(env).items()))
    return lambda text: _redact_with(text, maskers) if text else text


def values_redactor(secrets: Mapping[str, str]) -> Callable[[str], str]:
    """Replace each of ``secrets`` (value -> its variable's name) with ``[REDACTED:NAME]``,
    leaving credential shapes alone: for a text masked of them already."""
    maskers = _maskers(frozenset(secrets.items()))
    return lambda text: _redact_values(text, maskers) if text else text


def value_redactor(env: Mapping[str, str] | None = None) -> Callable[[Any], Any]:
    """:func:`redact_value` with the environment's secrets read once (for many values)."""
    maskers = _maskers(frozenset(secret_values(env).items()))
    return lambda value: _redact_tree(value, maskers)


def _redact_with(text: str, maskers: _Maskers) -> str:
    return mask_shapes(_redact_values(text, maskers))


def _redact_values(text: str, maskers: _Maskers) -> str:
    if maskers.gate.finds(text):
        for masker in maskers:
            text = masker.sub(text)
    return text


def redact_every_masker(text: str, env: Mapping[str, str] | None = None) -> str:
    """:func:`redact` without the one search for all secrets (the reference it must agree
    with)."""
    for masker in _maskers(frozenset(secret_values(env).items())):
        text = masker.sub(text)
    return mask_shapes(text)


def redact_diff(diff: _DiffLike, env: Mapping[str, str] | None = None) -> _DiffLike:
    """A copy of a file diff (``path``, ``old_text``, ``new_text``) with secrets redacted.

    Diffs go to the permission request, tool call updates and notebook cards: the loop
    redacts each one once where its event is built.
    """
    old = diff.old_text
    return dataclasses.replace(
        diff,
        path=redact(diff.path, env),
        old_text=redact(old, env) if old is not None else None,
        new_text=redact(diff.new_text, env),
    )


def redact_value(value: Any, env: Mapping[str, str] | None = None) -> Any:
    """:func:`redact` applied to every string in nested dicts and lists."""
    # The environment is read once, not once per string.
    return _redact_tree(value, _maskers(frozenset(secret_values(env).items())))


def _redact_tree(value: Any, maskers: _Maskers) -> Any:
    if isinstance(value, str):
        return _redact_with(value, maskers) if value else value
    if isinstance(value, dict):
        return {k: _redact_tree(v, maskers) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_tree(v, maskers) for v in value]
    return value


def longest_secret(env: Mapping[str, str] | None = None) -> int:
    """The longest printed form of a secret environment value (what a stream holds back)."""
    return max((m.longest for m in _maskers(frozenset(secret_values(env).items()))), default=0)
