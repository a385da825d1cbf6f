"""Read-only commands that print credentials: asked per call like a change (the guard
runs guarded programs with the user's real credentials, so their output is the one way
a credential reaches the model from a bash call)."""

from __future__ import annotations

from iac_kernel.guard.ruleset import Rule
from iac_kernel.guard.ruleset import rule as _r

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
