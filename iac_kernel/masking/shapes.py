"""Credentials recognisable by their shape, masked without knowing their values.

Each rule names its kind; the secret part becomes ``[REDACTED:kind]`` and the context
(the key name, the URL's user and host) stays readable. Rules want context or a
distinctive prefix: commit hashes, UUIDs, resource ids and ARNs are not credentials.
Every rule starts only where its run of characters starts (a lookbehind on the same
class) and bounds what it backtracks over: output crafted to make a rule try every
position costs linear time, not quadratic.
"""

from __future__ import annotations

import re

_NOT_MASKED = r"(?!\[REDACTED|\(sensitive\))"

#: (kind, pattern); group ``s`` is the secret part.
RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY(?P<b>(?: BLOCK)?)-----(?P<s>.+?)"
            r"(?:-----END \1PRIVATE KEY(?P=b)-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("aws-access-key-id", re.compile(r"(?<![A-Z0-9])(?P<s>(?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Z0-9])")),
    (
        "aws-secret",
        re.compile(
            r"(?i:aws_secret_access_key|secret_access_key|secretaccesskey|aws_session_token"
            r"|session_token|sessiontoken)[\"']?\s*[=:]\s*[\"']?"
            + _NOT_MASKED
            + r"(?P<s>[^\s\"',}]+)"
        ),
    ),
    (  # a bare 40-character AWS secret: base64 alphabet, mixed case and a digit
        "aws-secret",
        re.compile(
            r"(?<![A-Za-z0-9/+=])(?P<s>(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])"
            r"(?=[A-Za-z0-9/+]*[0-9])[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "json-secret",
        re.compile(
            r"\"(?:private_key|client_secret|refresh_token|access_token|id_token|api_key"
            r"|password|secret)\"\s*:\s*\"" + _NOT_MASKED + r"(?P<s>(?:[^\"\\]|\\.)+)\""
        ),
    ),
    (
        "kube-secret",
        re.compile(
            r"(?m)^[ \t-]*(?:token|client-key-data|id-token|refresh-token|access-token"
            r"|password|auth-provider-token)[ \t]*:[ \t]*[\"']?" + _NOT_MASKED + r"(?P<s>[^\s\"']+)"
        ),
    ),
    (
        "url-password",
        re.compile(
            r"(?<![\w.+-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\[\]]*:"
            + _NOT_MASKED
            + r"(?P<s>[^\s@/]+)@"
        ),
    ),
    (
        "password",
        re.compile(
            r"(?:(?<![A-Za-z0-9])(?i:password|passwd)|(?<=[;?&])(?i:pwd))="
            + _NOT_MASKED
            + r"(?P<s>[^\s;&'\"]+)"
        ),
    ),
    (  # NAME=value of a secret-named variable (``env``, ``.env`` files, ``export``)
        "env-secret",
        re.compile(
            r"(?<![A-Za-z0-9_])(?=[A-Z0-9_]{1,128}=)[A-Z][A-Z0-9_]{0,63}?(?:PASSWORD|PASSWD"
            r"|_PWD|SECRET|TOKEN(?!S)|API_KEY|PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]{0,63}="
            + _NOT_MASKED
            + r"(?P<s>\"[^\"]*\"|'[^']*'|[^\s\"']+)"
        ),
    ),
    ("github-token", re.compile(r"(?P<s>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,}))")),
    ("slack-token", re.compile(r"(?P<s>\bxox[abposr]-[A-Za-z0-9-]{10,})")),
    ("google-api-key", re.compile(r"(?P<s>\bAIza[0-9A-Za-z_\-]{35})")),
    (
        "jwt",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?P<s>eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+"
            r"\.[A-Za-z0-9_-]{8,}+)"
        ),
    ),
    (
        "netrc-password",
        re.compile(r"\blogin\s+\S+\s+password\s+" + _NOT_MASKED + r"(?P<s>\S+)"),
    ),
    (  # Vault service, batch and recovery tokens
        "vault-token",
        re.compile(r"(?<![A-Za-z0-9_.-])(?P<s>hv[sbr]\.[A-Za-z0-9_-]{20,}+)"),
    ),
    (  # a legacy Vault token (``s.`` + 24) where a token is named
        "vault-token",
        re.compile(
            r"(?i:token)[\"']?\s*[=:]?\s*[\"']?(?<![A-Za-z0-9_.-])(?P<s>[sb]\.[A-Za-z0-9]{24})"
            r"(?![A-Za-z0-9_.-])"
        ),
    ),
    (  # the key of a connection string (Azure storage, Service Bus, Event Hubs, IoT)
        "connection-key",
        re.compile(
            r"(?<![A-Za-z0-9])(?i:AccountKey|SharedAccessKey)\s*=\s*"
            + _NOT_MASKED
            + r"(?P<s>[^;\s\"'&]+)"
        ),
    ),
    (  # HTTP Basic credentials: base64 of user:password (a digit or a capital after a
        # small letter: not "basic configuration")
        "basic-auth",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?i:basic)[ \t]+"
            r"(?P<s>(?=[A-Za-z0-9+/]{0,512}(?:[0-9]|[a-z][A-Z]))[A-Za-z0-9+/]{8,}+={0,2})"
            r"(?![A-Za-z0-9+/=])"
        ),
    ),
    (  # an HTTP bearer token (with a digit: not prose)
        "bearer-token",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?i:bearer)[ \t]+"
            + _NOT_MASKED
            + r"(?P<s>(?=[A-Za-z0-9._~+/-]{0,512}[0-9])[A-Za-z0-9._~+/-]{16,}+=*)"
        ),
    ),
    (  # the signature of a shared access signature or a signed URL
        "url-signature",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?i:sig|x-amz-signature|x-goog-signature)="
            r"(?P<s>[A-Za-z0-9%+/=_-]{16,}+)"
        ),
    ),
]

#: A cheap first look for text that is not ASCII: with none of these it matches no rule.
_HINTS = re.compile(
    r"PRIVATE KEY|AKIA|ASIA|[A-Za-z0-9/+]{40}|(?i:secret|token|password|passwd|pwd|key|"
    r"credential|basic|bearer|sig=|signature=)|://|gh[pousr]_|github_pat_|xox|AIza|eyJ|hv[sbr]\."
)

#: What is searched for in lower-cased ASCII text before any rule runs.
GATE = (
    "private key", "akia", "asia", "secret", "token", "_key", "client-key", "passw", "pwd=",
    "_pwd", "://", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "aiza", "eyj",
    "login", "credential", "hvs.", "hvb.", "hvr.", "accountkey", "sharedaccesskey", "basic",
    "bearer", "sig=", "signature=",
)  # fmt: skip
#: Per rule of :data:`RULES` (same order): strings of :data:`GATE` one of which every
#: match of the rule holds once lower-cased (``None``: the bare AWS secret, which needs a
#: run of 40 of its characters instead). For ASCII text ``lower()`` is exact and a
#: case-insensitive rule matches only ASCII letters, so a rule none of whose strings is in
#: the text cannot match and is not run.
ANCHORS: list[tuple[str, ...] | None] = [
    ("private key",),
    ("akia", "asia"),
    ("secret", "token"),  # every keyword holds "secret" or "token"
    None,
    ("_key", "secret", "token", "passw"),
    ("token", "client-key", "passw"),
    ("://",),
    ("passw", "pwd="),
    ("passw", "_pwd", "secret", "token", "_key", "credential"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ("xox",),
    ("aiza",),
    ("eyj",),
    ("login",),  # and "password": checked in :func:`rules_wanted`
    ("hvs.", "hvb.", "hvr."),
    ("token",),
    ("accountkey", "sharedaccesskey"),
    ("basic",),
    ("bearer",),
    ("sig=", "signature="),
]
#: ASCII bytes of the bare secret's class -> ``a``, every other byte -> space.
_RUN_CLASS = bytes(
    97 if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "/+") else 32 for i in range(256)
)
_RUN = b"a" * 40
_GATE_BYTES = [(a, a.encode("ascii")) for a in GATE]


def mask_shapes(text: str) -> str:
    """``text`` with every credential-shaped part replaced by ``[REDACTED:kind]``.

    ASCII text runs only the rules whose strings (:data:`ANCHORS`) it holds: the same
    result as :func:`mask_every_rule` at a fraction of the cost."""
    if not text:
        return text
    if not text.isascii():
        return text if not _HINTS.search(text) else mask_every_rule(text)
    wanted = rules_wanted(text)
    if not any(wanted):
        return text  # the usual case: a few searches at C speed
    for i, (kind, pattern) in enumerate(RULES):
        if wanted[i]:
            masked = pattern.sub(lambda m, k=kind: _replace(m, k), text)
            if masked != text:  # what a later rule looks for may have changed
                text, wanted = masked, rules_wanted(masked)
    return text


#: Rules that match case as it is: what the text itself (not lower-cased) must hold.
CASED = {
    "private-key": lambda text: "PRIVATE KEY" in text,
    "aws-access-key-id": lambda text: "AKIA" in text or "ASIA" in text,
    "slack-token": lambda text: _SLACK.search(text) is not None,
    "google-api-key": lambda text: "AIza" in text,
    "jwt": lambda text: "eyJ" in text,
    "netrc-password": lambda text: "login" in text and "password" in text,
    "vault-token": lambda text: _VAULT.search(text) is not None,
}
_VAULT = re.compile(r"hv[sbr]\.|[sb]\.")
_SLACK = re.compile(r"xox[abposr]-")


def rules_wanted(text: str) -> list[bool]:
    """Which rules could match ASCII ``text``."""
    data = text.encode("ascii")
    lower = data.lower()  # bytes: searched faster than str
    present = {a for a, b in _GATE_BYTES if b in lower}
    run = _RUN in data.translate(_RUN_CLASS)
    wanted = [run if anchors is None else not present.isdisjoint(anchors) for anchors in ANCHORS]
    for i, (kind, _pattern) in enumerate(RULES):
        if wanted[i] and kind in CASED:
            wanted[i] = CASED[kind](text)
    return wanted


def mask_every_rule(text: str) -> str:
    """Every rule of :data:`RULES` applied in order, with no first look (the reference
    :func:`mask_shapes` must agree with)."""
    for kind, pattern in RULES:
        text = pattern.sub(lambda m, k=kind: _replace(m, k), text)
    return text


def _replace(match: re.Match[str], kind: str) -> str:
    start, end = match.span("s")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + f"[REDACTED:{kind}]" + whole[end - offset :]


_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
#: How much of a line without its end a stream holds back when the line is very long (a
#: shape is matched within a line: the unfinished line is held up to this and beyond).
HOLD = 512


def open_block(text: str) -> int | None:
    """Where a private key block that has not ended yet starts in ``text`` (a stream
    must hold from there until its END arrives), or None."""
    starts = list(_BEGIN.finditer(text))
    if not starts:
        return None
    return None if _END.search(text, starts[-1].end()) else starts[-1].start()
