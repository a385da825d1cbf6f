"""Guarded programs run with the user's real credentials, so a read-only command is asked
when the bash call points it somewhere else: another API server or endpoint, a proxy or
CA bundle that can read its traffic (bearer tokens travel in headers), or configuration
and interpreter paths that make it run code the call wrote (a kubeconfig ``exec`` plugin,
aws ``credential_process``, ``PYTHONPATH`` for the Python CLIs, terraform's CLI config
``dev_overrides``, git's ssh/askpass/pager commands).

Variables are matched by name and by pattern (``*_CONFIG_FILE``, ``*_PLUGIN*``,
``*_HOME`` ..., :mod:`.target`); ``PATH`` counts for the programs that find plugins or
credential helpers on it. A variable of the program's own family (``KUBE*``, ``HELM_*``,
``AWS_*``, ``CLOUDSDK_*``/``GOOGLE_*``/``BOTO*``, ``AZURE_*``, ``PULUMI_*``) that the
call set to a path or a URL counts too, whatever its name. A variable that names a
folder or program the CLI loads code from (``*_PLUGIN*``, ``*_EXTENSION*``,
``*_EXTERNAL_DIFF``, ``*_DATA_HOME`` ..., :data:`.target.CODE_PATTERNS`) counts even when
the session set it, if it names a place the call can write. Options that make the
program run plugins or programs (kustomize's ``--enable-alpha-plugins``,
``--enable-exec``, ``--enable-helm``, ``--helm-command``) or override its configuration
from the command line (gsutil's ``-o Section:key=value``) count like the variables.
git is checked by its own configuration (git_creds.py);
terraform by where its CLI configuration and plugin folders are (:func:`terraform_reason`:
a place the call can write), since its workspace files (``.terraform/providers``) already
let a call run code in it, a known limit (docs/sandbox-secrets.md)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from iac_kernel.guard.policy.git_creds import needs_credentials
from iac_kernel.guard.policy.target import by_pattern, in_family, loads_code
from iac_kernel.guard.sandbox.hidden import inside, is_secret
from iac_kernel.textsafe import printable

#: Options that send the program's credentials elsewhere or run a program it names.
FLAGS: dict[str, tuple[str, ...]] = {
    "kubectl": tuple(
        "--server -s --insecure-skip-tls-verify --certificate-authority --tls-server-name "
        "--kubeconfig".split()
    ),
    "helm": tuple(
        "--kube-apiserver --kube-insecure-skip-tls-verify --kube-ca-file --kube-tls-server-name "
        "--kubeconfig --registry-config".split()
    ),
    "aws": ("--endpoint-url", "--no-verify-ssl", "--ca-bundle"),
    "gcloud": ("--access-token-file",),
    "pulumi": ("--cloud-url",),
}
FLAGS["oc"] = FLAGS["kubectl"]
#: Options that make the program run plugins or a program they name: kustomize's exec
#: and KRM function plugins, helm for charts (``--helm-command`` names the program).
RUNS: dict[str, tuple[str, ...]] = {
    "kubectl": ("--enable-alpha-plugins", "--enable-exec", "--enable-helm", "--helm-command"),
}
RUNS["oc"] = RUNS["kustomize"] = RUNS["kubectl"]
#: Options that override the program's configuration from the command line: gsutil's
#: ``-o Section:key=value`` sets any boto option (credentials, token URIs, hosts, proxies).
OVERRIDES: dict[str, tuple[str, ...]] = {"gsutil": ("-o",)}
#: Proxies: they see the program's traffic.
_PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
#: Programs git runs (ssh, askpass, proxy, its own commands).
_GIT_RUNS = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND")
_GIT_RUNS += ("GIT_EXEC_PATH",)
#: Variables that do the same, when the bash call set or changed them (besides those that
#: :data:`PREFIXES` and the patterns of :mod:`.target` name: a config file or folder, a
#: CA bundle, a proxy, plugins, a home).
VARIABLES = (
    *_GIT_RUNS,
    *"SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS NODE_OPTIONS PULUMI_API PULUMI_BACKEND_URL "
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE CLOUDSDK_AUTH_DISABLE_SSL_VALIDATION PYTHONPATH PYTHONHOME "
    "AZURE_CLI_DISABLE_CONNECTION_VERIFICATION PYTHONUSERBASE PYTHONSTARTUP PYTHONINSPECT "
    "GIT_PAGER PAGER GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT "
    "HOME".split(),
)
PREFIXES = ("AWS_ENDPOINT_URL", "CLOUDSDK_API_ENDPOINT_OVERRIDES_", "CLOUDSDK_PROXY_")
#: Programs that run workspace code anyway (see the module doc).
_OWN_CODE = ("terraform", "tofu", "terragrunt")
#: git's own: for a remote command (its configuration is checked in git_creds.py).
GIT_VARIABLES = (
    *_GIT_RUNS,
    *_PROXIES,
    *"GIT_TEMPLATE_DIR GIT_SSL_CAINFO GIT_SSL_CAPATH GIT_SSL_NO_VERIFY GIT_TRACE_CURL "
    "GIT_CURL_VERBOSE GIT_TRACE_REDACT GIT_TRACE_PACKET PATH".split(),
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
    the patterns of :func:`~.target.by_pattern` and :func:`~.target.loads_code`) that
    ``env`` sets differently from ``base``."""
    found = []
    for key in sorted(set(env) | set(base)):
        upper = key.upper()
        if names is not None:
            if upper not in names:
                continue
        elif upper not in VARIABLES and not upper.startswith(PREFIXES):
            if not by_pattern(upper) and not loads_code(upper):
                continue
        if env.get(key) != base.get(key) and env.get(key):
            found.append(key)
    return found


def _remote(argv: Sequence[str]) -> bool:
    return needs_credentials(argv)


def family_paths(program: str, env: Mapping[str, str], base: Mapping[str, str]) -> list[str]:
    """Variables of ``program``'s family (:data:`~.target.FAMILIES`) that ``env`` sets
    differently from ``base`` to a path or a URL (a file, folder or endpoint the program
    reads: ``BOTO_PATH``, ``AWS_DATA_PATH``, ``CLOUDSDK_PYTHON=/tmp/py`` ...)."""
    return [
        key
        for key in sorted(env)
        if in_family(program, key)
        and env[key] != base.get(key)
        and any(_is_path(w) or "://" in w for w in _words(env[key]))
    ]


def code_in_writable(program: str, env: Mapping[str, str], writable: Sequence[str]) -> list[str]:
    """Variables of ``program``'s family naming a folder or program it loads code from
    (:func:`~.target.loads_code`, a ``*_HOME`` or ``*_CONFIG_DIR``: plugins, extensions
    and components live there) that point into ``writable``, wherever they were set."""
    found = []
    for key in sorted(env):
        upper = key.upper()
        if not in_family(program, key):
            continue
        if not (loads_code(upper) or upper.endswith(("_HOME", "_CONFIG_DIR"))):
            continue
        if any(_is_path(w) and _writable(w, writable) for w in _words(env[key])):
            found.append(key)
    return found


def _words(value: str) -> list[str]:
    """A value's words: a command line's (``diff -u``), a path list's items."""
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    listed = (w.split(os.pathsep) if w.startswith(("/", "~", ".")) else [w] for w in words)
    return [item for items in listed for item in items if item]


def _is_path(word: str) -> bool:
    """A file or folder name as a path is written: absolute, ``~``, ``./``, ``../`` (not
    an ARN's ``role/x``, not a passphrase with a ``/`` in it)."""
    return word.startswith(("/", "~", "./", "../"))


def _writable(word: str, writable: Sequence[str]) -> bool:
    """``word`` names a place in ``writable``; a relative path is in the call's folder."""
    path = os.path.expanduser(word)
    return not os.path.isabs(path) or inside(path, writable)


def _shown(env: Mapping[str, str], key: str) -> str:
    """``KEY=value`` for a question, a secret value as ``***``."""
    value = "***" if is_secret(key, env[key]) else env[key]
    return printable(f"{key}={value}")


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
        if (
            upper in (*TF_VARIABLES, *TF_SET_BY_COMMAND)
            and os.path.isabs(value)
            and inside(value, writable)
        ):
            named.append(f"{key}={value}")
        elif upper.startswith(("TF_CLI_ARGS", "TOFU_CLI_ARGS")) and "-plugin-dir" in value:
            named.append(f"{key}={value}")
    if not named:
        return None
    return (
        f"{program} with {', '.join(named)}: its CLI configuration or plugins come from a "
        "place the command can write (provider overrides run that code with your credentials)"
    )


def reason(
    program: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    base: Mapping[str, str],
    writable: Sequence[str] = ("/tmp",),
) -> str | None:
    """Why this command is asked although it only reads, or None (``writable``: the
    folders the call can write, as it sees them)."""
    flagged = _options_reason(program, argv)
    if flagged:
        return flagged
    if program in _OWN_CODE:
        return terraform_reason(program, env, base, writable)
    if program == "git":
        names = [n for n in changed(env, base, GIT_VARIABLES) if _remote(argv)]
    else:
        names = changed(env, base) + family_paths(program, env, base)
        if program in _PATH_RUNS:
            names += changed(env, base, ("PATH",))
    if names:
        shown = ", ".join(sorted(set(names)))
        return (
            f"{program} with {shown} set by the command: it could send your credentials "
            "elsewhere or run code the command wrote"
        )
    loading = code_in_writable(program, env, writable) if program != "git" else []
    if loading:
        shown = ", ".join(_shown(env, key) for key in loading)
        return (
            f"{program} with {shown}: it loads plugins or runs programs from a place the "
            "command can write"
        )
    return None


def _options_reason(program: str, argv: Sequence[str]) -> str | None:
    """Why an option of ``argv`` makes a read a question (:data:`FLAGS`, :data:`RUNS`,
    :data:`OVERRIDES`), or None."""
    flags = FLAGS.get(program, ())
    runs = RUNS.get(program, ())
    overrides = OVERRIDES.get(program, ())
    args = list(argv[1:])
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name = arg.partition("=")[0]
        short = arg[:2] if len(arg) > 2 and arg[1] != "-" else ""
        if name in flags or short in flags:
            return f"{program} {name}: sends your credentials to, or runs, what it names"
        if name in runs:
            return f"{program} {name}: runs the plugins or the program it enables"
        if name in overrides or short in overrides:
            value = arg[2:].lstrip("=") if short in overrides else "".join(args[i + 1 : i + 2])
            setting = printable(value.partition("=")[0])  # the value may be a secret
            return (
                f"{program} {short or name} {setting}: overrides its configuration (credentials, "
                "token endpoints, hosts, proxies)"
            )
    return None
