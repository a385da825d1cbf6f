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
)
PRINTS_CREDENTIALS["oc"] = PRINTS_CREDENTIALS["kubectl"]
PRINTS_CREDENTIALS["terragrunt"] = PRINTS_CREDENTIALS["terraform"]
