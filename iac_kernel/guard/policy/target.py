"""What a guarded command acts on besides its argv: the environment that retargets it
(workspace, profile, region, kubeconfig, extra CLI arguments, variables) and, where it is
cheap to know, the resolved terraform workspace and kube context. An exec-time question
shows them, so approving ``terraform apply`` never hides ``TF_WORKSPACE=prod``."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from iac_kernel.config import ENV_PREFIX
from iac_kernel.guard.sandbox.hidden import is_secret
from iac_kernel.masking.trust_store import is_path, is_trust_store
from iac_kernel.textsafe import printable

#: Variables that change what a guarded program acts on: exact names besides those the
#: prefixes and patterns below name (``AWS_PROFILE``, ``KUBECONFIG``, ``HELM_KUBECONTEXT``).
RETARGETING = ("TF_WORKSPACE", "TF_DATA_DIR", "GIT_DIR", "GIT_WORK_TREE")
#: Prefixes of such variables: terraform's and the CLIs' own, and every family that the
#: CLIs and terraform's providers read an account, project, region, cluster, namespace,
#: endpoint or credential from (``GOOGLE_PROJECT``, ``KUBE_CTX``, ``KUBE_CONFIG_PATHS``,
#: ``HELM_KUBECONTEXT``, ``ARM_SUBSCRIPTION_ID``, ``AZURE_*`` ...).
RETARGETING_PREFIXES = tuple(
    "TF_CLI_ARGS TOFU_CLI_ARGS TF_VAR_ TG_ TERRAGRUNT_ CLOUDSDK_ PULUMI_ GIT_CONFIG_ AWS_ GOOGLE_ "
    "GCLOUD_ GCE_ KUBE HELM_ ARM_ AZURE_ BOTO_ VAULT_".split()
)
#: Name patterns of the same kind for providers of any family (shown, never asked for by
#: themselves: ``CLOUDFLARE_ACCOUNT_ID``, ``DIGITALOCEAN_REGION``, ``CONSUL_HTTP_ADDR``).
SHOWN_PATTERNS = tuple(
    "*_PROJECT *_PROJECT_ID *_REGION *_ZONE *_SUBSCRIPTION_ID *_TENANT_ID *_ACCOUNT_ID "
    "*_NAMESPACE *_CONTEXT *_ENDPOINT* *_HOST *_ADDR *_API_URL".split()
)
#: Name patterns of variables that name a folder or program from which a CLI loads and
#: runs code: plugins, extensions, components, an external diff or editor, an
#: interpreter (``KUBECTL_EXTERNAL_DIFF``, ``KUBECTL_PLUGINS_PATH``, ``HELM_PLUGINS``,
#: ``HELM_DATA_HOME``, ``AZURE_EXTENSION_DIR``, ``CLOUDSDK_PYTHON`` ...). Asked when the
#: command sets one, or when one names a place the command can write (:mod:`.redirect`).
CODE_PATTERNS = tuple(
    "*_PLUGIN* *_EXTENSION* *_COMPONENT* *_EXTERNAL_DIFF *_EDITOR *_DATA_HOME *_PYTHON* *_COMMAND "
    "*_PROGRAM *_HOOK*".split()
)
#: The variables each CLI reads (its family): one of them set by the command to a path or
#: a URL points the program at something the command chose (:mod:`.redirect`).
FAMILIES: dict[str, tuple[str, ...]] = {
    "kubectl": ("KUBE", "KUSTOMIZE_"),
    "kustomize": ("KUSTOMIZE_", "KUBE"),
    "helm": ("HELM_", "KUBE"),
    "aws": ("AWS_", "BOTO"),
    "gcloud": ("CLOUDSDK_", "GOOGLE_", "GCE_", "BOTO", "GCLOUD_"),
    "az": ("AZURE_", "AZ_"),
    "pulumi": ("PULUMI_",),
}
FAMILIES["oc"] = FAMILIES["kubectl"]
FAMILIES["gsutil"] = FAMILIES["gcloud"]
FAMILIES["kubectx"] = FAMILIES["kubens"] = FAMILIES["kubectl"]
#: Name patterns of such variables: a program's config file or folder, plugin folders,
#: its home, CA bundles and proxies, extra CLI arguments (``HELM_PLUGINS``,
#: ``TF_PLUGIN_CACHE_DIR``, ``CLOUDSDK_CONFIG``, ``DOCKER_CONFIG``, ``PULUMI_HOME`` ...).
RETARGETING_PATTERNS = tuple(
    "*_CONFIG_FILE *_CONFIG_DIR *_CONFIG_PATH *CONFIG *_PLUGIN* *_HOME *_CREDENTIALS_FILE "
    "*_CA_BUNDLE *_PROXY TF_CLI_ARGS* TOFU_CLI_ARGS*".split()
)
_TERRAFORM = ("terraform", "tofu", "terragrunt")


def is_retargeting(name: str) -> bool:
    """``name`` (any case) is a retargeting variable: an exact name, a prefix or a
    pattern above."""
    upper = name.upper()
    if upper.startswith(ENV_PREFIX):  # the agent's own settings: never a program's target
        return False
    return (
        upper in RETARGETING
        or upper.startswith(RETARGETING_PREFIXES)
        or by_pattern(upper)
        or loads_code(upper)
        or any(fnmatch.fnmatchcase(upper, p) for p in SHOWN_PATTERNS)
    )


def by_pattern(name: str) -> bool:
    """``name`` matches one of :data:`RETARGETING_PATTERNS` (a config file or folder,
    plugins, a home, a CA bundle, a proxy, extra CLI arguments)."""
    return any(fnmatch.fnmatchcase(name.upper(), p) for p in RETARGETING_PATTERNS)


def loads_code(name: str) -> bool:
    """``name`` matches one of :data:`CODE_PATTERNS` (a folder or program a CLI runs)."""
    return any(fnmatch.fnmatchcase(name.upper(), p) for p in CODE_PATTERNS)


def in_family(program: str, name: str) -> bool:
    """``name`` is one of the variables ``program`` reads (:data:`FAMILIES`)."""
    return name.upper().startswith(FAMILIES.get(program, ("\0",)))


_KUBE = ("kubectl", "oc", "helm")


def retargeting_env(env: Mapping[str, str]) -> dict[str, str]:
    """The retargeting variables of ``env``, secret values shown as ``***`` (trust-store
    variables are not among them: :func:`trust_store`)."""
    found = {
        k: ("***" if is_secret(k, v) else v)
        for k, v in env.items()
        if is_retargeting(k) and k.upper() not in ("HOME", "PATH") and not is_trust_store(k)
    }
    return dict(sorted(found.items()))


def trust_store(env: Mapping[str, str]) -> dict[str, str]:
    """The trust-store variables of ``env`` (``SSL_CERT_FILE``, ``AWS_CA_BUNDLE``, ...),
    each under its own name with its path (a path is not a secret; certificate text in a
    value is shown as such, not as the text)."""
    found = {k: (v if is_path(v) else "(certificate text)") for k, v in env.items()}
    return {k: found[k] for k in sorted(found) if is_trust_store(k)}


def resolved(program: str, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> dict:
    """The terraform workspace or kube context the command will use, when cheap to tell."""
    if program in _TERRAFORM:
        return {"terraform workspace": terraform_workspace(argv, cwd, env)}
    if program in _KUBE:
        context = kube_context(program, argv, env)
        return {"kube context": context} if context else {}
    return {}


def terraform_workspace(argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> str:
    """``TF_WORKSPACE``, else ``.terraform/environment`` of the ``-chdir`` folder, else
    ``default``."""
    if env.get("TF_WORKSPACE"):
        return env["TF_WORKSPACE"]
    folder = cwd
    for arg in argv[1:]:
        if arg.startswith(("-chdir=", "--chdir=")):
            folder = os.path.join(cwd, arg.partition("=")[2])
    data = env.get("TF_DATA_DIR") or ".terraform"
    try:
        text = (Path(folder) / data / "environment").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return "default"
    return text or "default"


def kube_context(program: str, argv: Sequence[str], env: Mapping[str, str]) -> str:
    """``--context``/``--kube-context``, ``HELM_KUBECONTEXT``, else the kubeconfig's
    ``current-context`` (its first file), else empty."""
    flags = ("--kube-context",) if program == "helm" else ("--context",)
    args = list(argv[1:])
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                return f"{args[i + 1]} (from {flag})"
            if arg.startswith(flag + "="):
                return f"{arg.partition('=')[2]} (from {flag})"
    if program == "helm" and env.get("HELM_KUBECONTEXT"):
        return f"{env['HELM_KUBECONTEXT']} (from HELM_KUBECONTEXT)"
    config = (env.get("KUBECONFIG") or "").split(os.pathsep)[0]
    path = Path(config).expanduser() if config else Path.home() / ".kube" / "config"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1_000_000)
    except OSError:
        return ""
    found = re.search(r"^current-context:\s*['\"]?([^'\"\n]+)", text, re.M)
    return f"{found.group(1).strip()} (from {path})" if found else ""


def describe(
    program: str,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    base: Mapping[str, str] | None = None,
) -> list[str]:
    """Lines for a question: the retargeting environment, the trust stores the command
    set or changed (against ``base``, the environment it inherited; all of them without
    it), and what it resolves to."""
    lines = []
    shown = retargeting_env(env)
    if shown:
        pairs = ", ".join(f"{k}={v}" for k, v in shown.items())
        lines.append("Environment: " + printable(pairs))  # no lines or controls of its own
    stores = trust_store(env)
    if base is not None:  # the user's own trust setup is no news; a change by the command is
        inherited = trust_store(base)
        stores = {k: v for k, v in stores.items() if inherited.get(k) != v}
    if stores:
        pairs = ", ".join(f"{k}={v}" for k, v in stores.items())
        lines.append("Trust store set by the command: " + printable(pairs))
    for key, value in resolved(program, argv, cwd, env).items():
        lines.append(printable(f"Target: {key} {value}"))
    return lines
