"""Read-only commands that print credentials: asked per call like a change (the guard
runs guarded programs with the user's real credentials, so their output is the one way
a credential reaches the model from a bash call).

Known commands are listed (:data:`PRINTS_CREDENTIALS`); the cloud CLIs' reads are also
judged by class, from the words of their command's name (:func:`cloud_credential_read`:
``get-password-data``, ``get-auth-string``, ``appsettings list``, a function's
environment ...), so a command nobody listed is asked too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from iac_kernel.guard.policy.grammar import Rule, has_words
from iac_kernel.guard.policy.grammar import rule as _r

_PRINTS = "prints credentials"

#: program -> rules (words among the positionals, and one of the flags when given).
PRINTS_CREDENTIALS: dict[str, tuple[Rule, ...]] = {
    "gcloud": (
        _r("auth print-*", f"{_PRINTS} (an access or identity token)"),
        _r("auth application-default print-*", f"{_PRINTS} (an access token)"),
        _r("config config-helper", f"{_PRINTS} (an access token)"),
        _r("secrets versions access", f"{_PRINTS} (a secret's value)"),
        _r("iam service-accounts keys create", f"{_PRINTS} (a new key)"),
        _r("sql generate-login-token", f"{_PRINTS} (a login token)"),
        _r("* get-credentials", "writes credentials into the kubeconfig and switches its context"),
    ),
    "aws": (
        _r("sts get-session-token", f"{_PRINTS} (session credentials)"),
        _r("sts get-federation-token", f"{_PRINTS} (federation credentials)"),
        _r("secretsmanager get-secret-value", f"{_PRINTS} (a secret's value)"),
        _r("secretsmanager batch-get-secret-value", f"{_PRINTS} (secret values)"),
        _r("ssm get-parameter*", f"{_PRINTS} (decrypted parameters)", "--with-decryption"),
        _r("ecr get-login-password", f"{_PRINTS} (a registry password)"),
        _r("ecr-public get-login-password", f"{_PRINTS} (a registry password)"),
        _r("ecr get-authorization-token", f"{_PRINTS} (a registry token)"),
        _r("eks get-token", f"{_PRINTS} (a cluster token)"),
        _r("codeartifact get-authorization-token", f"{_PRINTS} (a token)"),
        _r("configure get", f"{_PRINTS} (a configured value, keys included)"),
        _r("configure export-credentials", f"{_PRINTS} (your credentials)"),
        _r("sso get-role-credentials", f"{_PRINTS} (role credentials)"),
        _r("cognito-identity get-credentials-for-identity", f"{_PRINTS} (credentials)"),
        _r("lambda get-function", f"{_PRINTS} (the function's environment)"),
        _r("s3 presign", "signs a URL with your credentials (anyone holding it gets access)"),
        _r("rds generate-db-auth-token", f"{_PRINTS} (a database token)"),
        _r("sts assume-role*", f"{_PRINTS} (role credentials)"),
        _r("iam create-service-specific-credential", f"{_PRINTS} (a new credential)"),
    ),
    "az": (
        _r("account get-access-token", f"{_PRINTS} (an access token)"),
        _r("keyvault secret show", f"{_PRINTS} (a secret's value)"),
        _r("keyvault secret download", f"{_PRINTS} (a secret's value)"),
        _r("acr login", f"{_PRINTS} (a registry token)", "--expose-token -t"),
        _r("storage account keys list", f"{_PRINTS} (storage account keys)"),
        _r("storage account show-connection-string", f"{_PRINTS} (a connection string)"),
        _r("cosmosdb keys list", f"{_PRINTS} (database keys)"),
        _r("webapp deployment list-publishing-credentials", f"{_PRINTS} (publishing)"),
        _r("* list-publishing-profiles", f"{_PRINTS} (publishing profiles)"),
        _r("* generate-sas", f"{_PRINTS} (a shared access signature)"),
        _r("* show-connection-string", f"{_PRINTS} (a connection string)"),
        _r("* keys list", f"{_PRINTS} (access keys)"),
        _r("* list-keys", f"{_PRINTS} (access keys)"),
        _r("acr credential show", f"{_PRINTS} (registry passwords)"),
        _r("aks get-credentials", "writes the cluster's credentials into a kubeconfig"),
    ),
    "kubectl": (
        _r("config view", f"{_PRINTS} (the kubeconfig with its keys and tokens)", "--raw"),
        _r("create token", f"{_PRINTS} (a service account token)"),
    ),
    "pulumi": (
        _r("stack output", f"{_PRINTS} (secret outputs)", "--show-secrets"),
        _r("stack export", f"{_PRINTS} (the state's secrets)", "--show-secrets"),
        _r("config", f"{_PRINTS} (secret config values)", "--show-secrets"),
        _r("config get", f"{_PRINTS} (a config value, secrets decrypted)"),
        _r("env open", f"{_PRINTS} (an environment's secrets)"),
        _r("env get", f"{_PRINTS} (an environment's secrets)", "--show-secrets"),
    ),
    "terraform": (
        _r("console", "evaluates expressions (file(), ...) with your files and credentials"),
    ),
    "tofu": (_r("console", "evaluates expressions (file(), ...) with your files and credentials"),),
}
PRINTS_CREDENTIALS["helm"] = (
    _r("*", "runs the --post-renderer program with your credentials", "--post-renderer"),
    *(
        _r(f"get {what}", f"{_PRINTS} (the release's values and rendered Secrets)")
        for what in ("values", "all", "manifest", "hooks")
    ),
)
PRINTS_CREDENTIALS["oc"] = PRINTS_CREDENTIALS["kubectl"]

#: kubectl output formats that show a Secret's data (``name`` and ``wide`` do not).
_SAFE_OUTPUT = {"name", "wide", ""}


def k8s_secret_read(args: list[str], words: list[str]) -> str | None:
    """Why a kubectl ``get`` prints Secret data (``get secret X -o yaml``, ``-ojson``,
    ``--output=jsonpath=...``, ``--template``, a ``cm,secret`` list, ``secrets.v1/x``)
    or any raw API path (``get --raw /api/v1/.../secrets``), or None. ``words`` are the
    positionals as kubectl reads them (option values left out)."""
    if not words or words[0] != "get":
        return None
    if any(a == "--raw" or a.startswith("--raw=") for a in args):
        return f"kubectl get --raw: {_PRINTS} (any API path, Secrets included)"
    if not any(_is_secret_resource(w) for w in words[1:]):
        return None
    formats = _outputs(args)
    if any(f.split("=")[0] not in _SAFE_OUTPUT for f in formats):
        return f"kubectl get secret -o {formats[-1]}: {_PRINTS} (the Secret's data)"
    return None


def _is_secret_resource(word: str) -> bool:
    """``secret``, ``secrets``, ``secrets.v1``, ``secret/name``, ``cm,secret``."""
    for item in word.split(","):
        kind = item.split("/")[0].split(".")[0].lower()
        if kind in ("secret", "secrets"):
            return True
    return False


def _outputs(args: list[str]) -> list[str]:
    """Every output format the argv gives (``-o X``, ``-oX``, ``-o=X``, ``--output X``,
    ``--output=X``; a ``--template`` counts as ``go-template``)."""
    found: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        following = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-o", "--output"):
            found.append(following)
        elif arg.startswith("--output="):
            found.append(arg[len("--output=") :])
        elif arg.startswith("-o") and not arg.startswith("--"):
            found.append(arg[2:].removeprefix("="))
        elif arg == "--template" or arg.startswith("--template="):
            found.append("go-template")
    return found


PRINTS_CREDENTIALS["terragrunt"] = PRINTS_CREDENTIALS["terraform"]


#: Words of a command's name (its path and verb, split at ``-``) that say it returns a
#: credential, wherever they stand.
CREDENTIAL_WORDS = frozenset(
    "password passwords passwd credential credentials creds token tokens kubeconfig "
    "appsettings plaintext decrypted sas".split()
)
#: Two such words in a row that do.
CREDENTIAL_PAIRS = frozenset(
    "api-key api-keys stream-key stream-keys auth-string auth-strings connection-string "
    "connection-strings app-settings secret-value secret-values environment-variables "
    "env-vars".split()
)
#: The thing a fetching verb returns (``get-key``, ``secret show``, ``admin-key show``).
FETCHED = frozenset("secret secrets login key keys".split())
#: Verbs that return one thing whole (``batch-get`` too; ``list`` of keys too, for az).
_FETCH_VERBS = frozenset("get show download access export print reveal retrieve".split())
#: Reads that return a function's or service's environment variables.
FUNCTION_ENVIRONMENTS: dict[str, tuple[str, ...]] = {
    "aws": (
        "get-function",
        "get-function-configuration",
        "list-functions",
        "list-versions-by-function",
    ),
    "gcloud": ("functions describe", "run * describe", "app versions describe"),
}


def cloud_credential_read(program: str, path: Sequence[str]) -> str | None:
    """Why a cloud CLI's command returns a credential, judged by the words of its name,
    or None. ``path``: aws's service and operation, gcloud's and az's groups and verb
    (operands and option values left out)."""
    if not path:
        return None
    shown = " ".join([program, *path])
    if _function_environment(program, path):
        return f"{shown}: {_PRINTS} (a function's environment variables)"
    groups = path[1:-1] if program == "aws" else path[:-1]  # an aws service is no noun
    head, _, rest = path[-1].partition("-")
    own = rest.split("-") if rest else []  # the verb's own noun: get-[password-data]
    nouns = [seg for word in groups for seg in word.split("-")] + own
    for i, seg in enumerate(nouns):
        pair = "-".join(nouns[i : i + 2])
        if pair in CREDENTIAL_PAIRS:
            return f"{shown}: {_PRINTS} ('{pair}' in its name)"
        if seg in CREDENTIAL_WORDS:
            return f"{shown}: {_PRINTS} ('{seg}' in its name)"
    # What a fetching verb returns: an aws operation's own noun (`get-key`, not
    # `get-key-policy`); else the group before the verb (`secret show`) or its own noun.
    fetched = own[-1:]
    if program != "aws":
        fetched += [w.split("-")[-1] for w in groups[-1:]]
    if head == "batch" and own[:1] == ["get"]:
        head = "get"
    wanted = FETCHED if head in _FETCH_VERBS else set()
    if program == "az" and head == "list":  # az lists keys with their values
        wanted = {"key", "keys"}
    found = next((word for word in fetched if word in wanted), None)
    return f"{shown}: {_PRINTS} (it returns a {found})" if found else None


def _function_environment(program: str, path: Sequence[str]) -> bool:
    patterns = FUNCTION_ENVIRONMENTS.get(program, ())
    if program == "aws":
        return len(path) > 1 and any(fnmatch.fnmatchcase(path[1], p) for p in patterns)
    return any(len(p.split()) == len(path) and has_words(p.split(), path) for p in patterns)
