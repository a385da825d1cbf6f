"""What a secret looks like (by its shape, or by the name of the key holding it), and the
check that a placeholder copy of a credential file holds none (:func:`leftover`)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from urllib.parse import quote, unquote

#: Values that are secrets by their shape (a known prefix, a key, a signed token).
SECRET_SHAPES = (
    re.compile(r"(?<![A-Z0-9])(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(glpat-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,})"),
    re.compile(r"\b(sk-[A-Za-z0-9_-]{20,}|hv[sbr]\.[A-Za-z0-9_-]{20,}|dckr_pat_[\w-]{16,})"),
    re.compile(r"\b(pul-[0-9a-f]{40}|dop_v1_[0-9a-f]{40,}|npm_[A-Za-z0-9]{30,}|pypi-[\w-]{30,})"),
    re.compile(r"\b(ya29\.[\w-]{20,}|1//0[\w-]{20,}|AIza[\w-]{35}|dapi[0-9a-f]{32})"),
    re.compile(r"[A-Za-z0-9]{10,}\.atlasv1\.[A-Za-z0-9_-]{20,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),  # JWT
    re.compile(r"(?i)AccountKey=[A-Za-z0-9+/=]{20,}"),
)
#: Key names whose value is a secret (``client-secret``, ``oauth_token``, ``password``).
_SECRET_KEY = re.compile(
    r"(?i)(pass(word|wd|phrase)?|secret|token|api[_-]?key|^auth|private[_-]?key|"
    r"access[_-]?key|credential)([_-]?data)?$|secret|token"
)
#: ... unless it names a file, a program, an id or a setting (``tokenFile``,
#: ``credential_process``, ``aws_access_key_id``, ``token_helper``).
_PLAIN_KEY = re.compile(
    r"(?i)(file|path|helper|process|command|cmd|name|url|uri|_id|-id|expir\w*|type|"
    r"endpoint|store|helpers|format|ttl|information|_at|info)$"
)


def secret_key(key: str) -> bool:
    """``key`` names a secret value (by its name)."""
    return bool(_SECRET_KEY.search(key)) and not _PLAIN_KEY.search(key)


def secret_shape(value: str) -> str | None:
    """The first secret-shaped piece of ``value`` (a known token prefix, a private key,
    an AWS key id, a JWT ...), or None."""
    for shape in SECRET_SHAPES:
        found = shape.search(value)
        if found:
            return found.group(0)
    return None


_KEY_VALUE = re.compile(
    r"""(?m)["']?(?P<key>[A-Za-z][\w.-]*)["']?[ \t]*[:=][ \t]*"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;#}\]]+)"""
)
#: Values that are no secret (empty, null, a YAML block or flow marker).
_NOT_A_VALUE = {
    "",
    "null",
    "~",
    "none",
    "true",
    "false",
    "{",
    "[",
    "|",
    ">",
    "{}",
    "[]",
    "|-",
    ">-",
}
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def _decoded_runs(text: str) -> Iterator[tuple[str, str]]:
    """(run, decoded text) of every base64 run of ``text`` that decodes to text."""
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        padded = run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 4)
        for alt in (None, b"-_"):
            try:
                raw = base64.b64decode(padded, altchars=alt, validate=True)
            except (binascii.Error, ValueError):
                continue
            decoded = raw.decode("utf-8", errors="ignore")
            if len(decoded) >= len(raw) * 0.9:
                yield run, decoded
            break


def leftover(text: str, reals: list[str], fakes: set[str], kept: list[str] = ()) -> str | None:
    """Why ``text`` (a placeholder copy) still holds a secret, or None: a real value
    (raw, URL-quoted, JSON-escaped or base64, also inside a decoded base64 run), a
    secret-shaped value that is no placeholder, or a secret-named key whose value holds
    no placeholder. ``kept``: values left as they are by design (never reported)."""
    for value in kept:
        text = text.replace(value, " ")
    decoded = [d for _run, d in _decoded_runs(text)]
    for real in reals:
        if len(real) < 6:
            continue  # a short value is found by parsing the copy again, not by search
        forms = {real, quote(real, safe=""), quote(real), json.dumps(real)[1:-1]}
        forms |= {base64.b64encode(real.encode()).decode().rstrip("=")}
        forms |= {base64.urlsafe_b64encode(real.encode()).decode().rstrip("=")}
        forms = {f for f in forms if len(f) >= 6}
        if any(_whole(f, text) for f in forms) or any(real in d for d in decoded):
            return "a real credential value is left in it"
    for found in _KEY_VALUE.finditer(text):
        key, value = found.group("key"), found.group("value").strip("\"'")
        if not secret_key(key) or value.lower() in _NOT_A_VALUE or value.startswith("$"):
            continue
        if not _holds_fake(value, fakes):
            return f"the value of {key!r} is no placeholder"
    for found in _URL_USERINFO.finditer(text):
        if not _holds_fake(unquote(found.group(1)), fakes):
            return "a URL with a password that is no placeholder"
    scrubbed = text
    for fake in sorted(fakes, key=len, reverse=True):
        scrubbed = scrubbed.replace(fake, " ")
    for piece in [scrubbed, *decoded]:
        for fake in fakes:
            piece = piece.replace(fake, " ")
        shape = secret_shape(piece)
        if shape:
            return f"a secret-shaped value ({shape[:4]}...) that is no placeholder"
    return None


def _whole(form: str, text: str) -> bool:
    """``form`` occurs in ``text`` (a short one: not as part of a longer word)."""
    if len(form) >= 12:
        return form in text
    start = text.find(form)
    while start >= 0:
        before = text[start - 1] if start else " "
        end = start + len(form)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() and form[0].isalnum()) and not (
            after.isalnum() and form[-1].isalnum()
        ):
            return True
        start = text.find(form, start + 1)
    return False


def _holds_fake(value: str, fakes: set[str]) -> bool:
    """``value`` holds a placeholder, as it is or base64-encoded (a docker ``auth``)."""
    if any(fake in value for fake in fakes):
        return True
    for _run, decoded in _decoded_runs(value):
        if any(fake in decoded for fake in fakes):
            return True
    return False
