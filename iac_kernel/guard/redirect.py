"""Guarded programs run with the user's real credentials, so a read-only command is asked
when the bash call points it somewhere else: another API server or endpoint, a proxy or
CA bundle that can read its traffic (bearer tokens travel in headers), or configuration
and interpreter paths that make it run code the call wrote (a kubeconfig ``exec`` plugin,
aws ``credential_process``, ``PYTHONPATH`` for the Python CLIs, terraform's CLI config
``dev_overrides``, git's ssh/askpass/pager commands).

Variables are matched by name and by pattern (``*_CONFIG_FILE``, ``*_PLUGIN*``,
``*_HOME`` ..., :mod:`.target`); ``PATH`` counts for the programs that find plugins or
credential helpers on it. git is checked by its own configuration (git_creds.py);
terraform by where its CLI configuration and plugin folders are (:func:`terraform_reason`:
a place the call can write), since its workspace files (``.terraform/providers``) already
let a call run code in it, a known limit (docs/sandbox-secrets.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from iac_kernel.guard.git_creds import needs_credentials
from iac_kernel.guard.target import by_pattern

#: Options that send the program's credentials elsewhere or run a program it names.
FLAGS: dict[str, tuple[str, ...]] = {
    "kubectl": (
        "--server",
        "-s",
        "--insecure-skip-tls-verify",
        "--certificate-authority",
        "--tls-server-name",
        "--kubeconfig",
    ),
    "helm": (
        "--kube-apiserver",
        "--kube-insecure-skip-tls-verify",
        "--kube-ca-file",
        "--kube-tls-server-name",
        "--kubeconfig",
        "--registry-config",
    ),
    "aws": ("--endpoint-url", "--no-verify-ssl", "--ca-bundle"),
    "gcloud": ("--access-token-file",),
    "pulumi": ("--cloud-url",),
}
FLAGS["oc"] = FLAGS["kubectl"]
#: Proxies: they see the program's traffic.
_PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
#: Programs git runs (ssh, askpass, proxy, its own commands).
_GIT_RUNS = (
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXEC_PATH",
)
#: Variables that do the same, when the bash call set or changed them.
VARIABLES = (
    *_PROXIES,
    "KUBECONFIG",
    "AWS_CA_BUNDLE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "NODE_OPTIONS",
    "CLOUDSDK_CONFIG",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "CLOUDSDK_AUTH_DISABLE_SSL_VALIDATION",
    "AZURE_CONFIG_DIR",
    "AZURE_CLI_DISABLE_CONNECTION_VERIFICATION",
    "PULUMI_API",
    "PULUMI_BACKEND_URL",
    "PULUMI_HOME",
    "HELM_PLUGINS",
    "HELM_REGISTRY_CONFIG",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    *_GIT_RUNS,
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "PAGER",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "XDG_CONFIG_HOME",
    "HOME",
)
PREFIXES = ("AWS_ENDPOINT_URL", "CLOUDSDK_API_ENDPOINT_OVERRIDES_", "CLOUDSDK_PROXY_")
#: Programs that run workspace code anyway (see the module doc).
_OWN_CODE = ("terraform", "tofu", "terragrunt")
#: git's own: for a remote command (its configuration is checked in git_creds.py).
GIT_VARIABLES = (
    *_GIT_RUNS,
    "GIT_TEMPLATE_DIR",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "GIT_TRACE_CURL",
    "GIT_CURL_VERBOSE",
    "GIT_TRACE_REDACT",
    "GIT_TRACE_PACKET",
    "PATH",
    *_PROXIES,
)


#: Programs that find programs on PATH with your credentials: kubeconfig ``exec``
#: plugins, aws ``credential_process``, helm and kubectl plugins, the Python CLIs.
_PATH_RUNS = ("kubectl", "oc", "helm", "aws", "gcloud", "gsutil", "az", "pulumi")
#: terraform's CLI configuration and plugin folders: asked when they name a place the
#: call can write (``dev_overrides``, ``provider_installation``, a plugin cache), wherever
#: the value comes from; ``HOME`` and ``XDG_DATA_HOME`` only when the command set them.
TF_VARIABLES = ("TF_CLI_CONFIG_FILE", "TERRAFORM_CONFIG", "TF_PLUGIN_CACHE_DIR")
TF_SET_BY_COMMAND = ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")


def changed(
    env: Mapping[str, str], base: Mapping[str, str], names: Sequence[str] | None = None
) -> list[str]:
    """Redirecting variables (``names``, else :data:`VARIABLES`, :data:`PREFIXES` and
    the patterns of :func:`~.target.by_pattern`) that ``env`` sets differently from
    ``base``."""
    found = []
    for key in sorted(set(env) | set(base)):
        upper = key.upper()
        if names is not None:
            if upper not in names:
                continue
        elif upper not in VARIABLES and not upper.startswith(PREFIXES):
            if not by_pattern(upper):
                continue
        if env.get(key) != base.get(key) and env.get(key):
            found.append(key)
    return found


def _remote(argv: Sequence[str]) -> bool:
    return needs_credentials(argv)


def terraform_reason(
    program: str, env: Mapping[str, str], base: Mapping[str, str], writable: Sequence[str]
) -> str | None:
    """Why a terraform command is asked: its CLI config or plugin folders come from a
    place the call can write (``writable``: folders as the sandbox sees them)."""
    named: list[str] = []
    for key in sorted(env):
        upper = key.upper()
        value = env[key]
        if upper in TF_SET_BY_COMMAND and base.get(key) == value:
            continue
        if upper in (*TF_VARIABLES, *TF_SET_BY_COMMAND) and _inside(value, writable):
            named.append(f"{key}={value}")
        elif upper.startswith(("TF_CLI_ARGS", "TOFU_CLI_ARGS")) and "-plugin-dir" in value:
            named.append(f"{key}={value}")
    if not named:
        return None
    return (
        f"{program} with {', '.join(named)}: its CLI configuration or plugins come from a "
        "place the command can write (provider overrides run that code with your credentials)"
    )


def _inside(value: str, folders: Sequence[str]) -> bool:
    path = os.path.normpath(value) if os.path.isabs(value) else ""
    return bool(path) and any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def reason(
    program: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    base: Mapping[str, str],
    writable: Sequence[str] = ("/tmp",),
) -> str | None:
    """Why this command is asked although it only reads, or None (``writable``: the
    folders the call can write, as it sees them)."""
    flags = FLAGS.get(program, ())
    for arg in argv[1:]:
        if arg == "--":
            break
        name = arg.partition("=")[0]
        if name in flags or (len(arg) > 2 and arg[:2] in flags and arg[1] != "-"):
            return f"{program} {name}: sends your credentials to, or runs, what it names"
    if program in _OWN_CODE:
        return terraform_reason(program, env, base, writable)
    if program == "git":
        names = [n for n in changed(env, base, GIT_VARIABLES) if _remote(argv)]
    else:
        names = changed(env, base)
        if program in _PATH_RUNS:
            names += changed(env, base, ("PATH",))
    if names:
        shown = ", ".join(names)
        return (
            f"{program} with {shown} set by the command: it could send your credentials "
            "elsewhere or run code the command wrote"
        )
    return None
