"""Every credential store we know: where it lives (and the variables that move it), and
what a guarded program the guard runs gets of it.

The shell of a bash call gets none of them (:func:`shell_paths`, hidden by
:func:`iac_kernel.guard.sandbox.hidden.credential_paths`). A guarded program gets each store by
its :attr:`Store.treat`:

* ``broker``: a placeholder copy (every real value replaced by its placeholder, swapped
  back by the egress proxy on the credential's own hosts; a file that cannot be parsed
  in full gets an empty copy), made by :mod:`.broker`;
* ``hide``: an empty file or folder (nothing a guarded program needs);
* ``give``: the real store (it cannot be brokered - a key that signs locally, an SSH
  agent - and the guarded programs need it); ``why`` says what protects it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

BROKER, HIDE, GIVE = "broker", "hide", "give"

Env = Mapping[str, str]


@dataclass
class Located:
    """Where one store is for one environment and home."""

    #: Files and folders the shell must not see.
    paths: list[Path] = field(default_factory=list)
    #: Brokered stores: (file, format name in :data:`.formats.FORMATS`).
    files: list[tuple[Path, str]] = field(default_factory=list)
    #: Folders a guarded program sees as a folder holding only the copies of ``files``
    #: inside them (their caches and other files are not shown).
    folders: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Store:
    name: str
    treat: str
    #: Where it is; reads every variable that moves it with ``env.get``, whatever their
    #: values (:func:`watched_variables` finds them so).
    locate: Callable[[Env, Path], Located]
    why: str = ""


def variable_paths(env: Env, *names: str) -> list[Path]:
    """The absolute paths the variables ``names`` hold (``:``-separated lists too)."""
    found = []
    for name in names:
        for item in (env.get(name) or "").split(os.pathsep):
            item = os.path.expanduser(item.strip())
            if item and os.path.isabs(item):
                found.append(Path(item))
    return found


def xdg_configs(env: Env, home: Path) -> list[Path]:
    """``~/.config`` and ``$XDG_CONFIG_HOME`` when it is elsewhere (programs read the
    latter; a store may sit in either)."""
    value = env.get("XDG_CONFIG_HOME", "")
    found = [home / ".config"]
    if value and os.path.isabs(value) and Path(value) != found[0]:
        found.append(Path(value))
    return found


def _helm_home(env: Env, home: Path) -> list[Path]:
    return [*variable_paths(env, "HELM_CONFIG_HOME"), *(c / "helm" for c in xdg_configs(env, home))]


@dataclass(frozen=True)
class At:
    """A store at fixed places: paths under home, under ``$XDG_CONFIG_HOME`` and those
    the ``variables`` name; with ``fmt``, a brokered store of single files (every place
    is read, the default ones and those the variables name: a program may read any)."""

    home: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()
    xdg: tuple[str, ...] = ()
    fmt: str | None = None
    absolute: tuple[str, ...] = ()

    def __call__(self, env: Env, home: Path) -> Located:
        paths = [Path(path) for path in self.absolute] + [home / rel for rel in self.home]
        paths += [config / rel for config in xdg_configs(env, home) for rel in self.xdg]
        paths += variable_paths(env, *self.variables)
        files = [(path, self.fmt) for path in paths] if self.fmt else []
        return Located(paths, files)


def _aws(env: Env, home: Path) -> Located:
    credentials = [
        home / ".aws" / "credentials",
        *variable_paths(env, "AWS_SHARED_CREDENTIALS_FILE"),
    ]
    config = [home / ".aws" / "config", *variable_paths(env, "AWS_CONFIG_FILE")]
    files = [(p, "aws-credentials") for p in credentials] + [(p, "aws-config") for p in config]
    return Located([home / ".aws", *credentials[1:], *config[1:]], files, [home / ".aws"])


def _kube(env: Env, home: Path) -> Located:
    folder = home / ".kube"
    named = variable_paths(env, "KUBECONFIG")
    files = [(path, "kubeconfig") for path in [folder / "config", *named]]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:  # other kubeconfigs kept there (KUBECONFIG=~/.kube/prod)
        if entry.is_file() and all(Path(entry.path) != path for path, _f in files):
            files.append((Path(entry.path), "kubeconfig?"))
    return Located([folder, *named], files)


def _docker(env: Env, home: Path) -> Located:
    folders = [home / ".docker", *variable_paths(env, "DOCKER_CONFIG")]
    files = [(folder / "config.json", "docker-config") for folder in folders]
    return Located(list(folders), files, list(folders))


def _helm_registry(env: Env, home: Path) -> Located:
    named = variable_paths(env, "HELM_REGISTRY_CONFIG")
    defaults = [folder / "registry" / "config.json" for folder in _helm_home(env, home)]
    paths = [folder / "registry" for folder in _helm_home(env, home)] + named
    return Located(paths, [(p, "docker-config") for p in [*defaults, *named]])


def _helm_repos(env: Env, home: Path) -> Located:
    files = [folder / "repositories.yaml" for folder in _helm_home(env, home)]
    files += variable_paths(env, "HELM_REPOSITORY_CONFIG")
    return Located(list(files), [(p, "helm-repositories") for p in files])


def _pulumi(env: Env, home: Path) -> Located:
    folders = [home / ".pulumi", *variable_paths(env, "PULUMI_HOME")]
    files = [folder / "credentials.json" for folder in folders]
    return Located(list(files), [(p, "pulumi-credentials") for p in files])


def _gh(env: Env, home: Path) -> Located:
    folders = [c / "gh" for c in xdg_configs(env, home)] + variable_paths(env, "GH_CONFIG_DIR")
    return Located(list(folders), [(folder / "hosts.yml", "gh-hosts") for folder in folders])


def _session_bus(env: Env, home: Path) -> Located:
    """The session bus and keyring sockets (a secret service answers any caller), but
    not the folder holding ``SSH_AUTH_SOCK``."""
    runtime = variable_paths(env, "XDG_RUNTIME_DIR")
    agent = variable_paths(env, "SSH_AUTH_SOCK")
    paths = [folder / name for folder in runtime for name in ("bus", "keyring", "gnupg")]
    bus = env.get("DBUS_SESSION_BUS_ADDRESS", "")
    if bus.startswith("unix:path="):
        paths.append(Path(bus[len("unix:path=") :].split(",")[0]))
    paths += [home / ".gnupg", *variable_paths(env, "GNUPGHOME")]
    return Located([p for p in paths if not any(a == p or p in a.parents for a in agent)])


#: Histories often hold a pasted token or ``export SECRET=...``.
HISTORIES = (
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".local/share/fish/fish_history",
)
#: A pod's service-account token, CA and namespace.
SERVICE_ACCOUNT = (
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/run/secrets/kubernetes.io/serviceaccount",
)
TFRC = ".terraform.d/credentials.tfrc.json"

STORES: tuple[Store, ...] = (
    Store("AWS credentials and config", BROKER, _aws),
    Store(
        "git credentials",
        BROKER,
        At((".git-credentials",), xdg=("git/credentials",), fmt="git-credentials"),
    ),
    Store(".netrc", BROKER, At((".netrc",), ("NETRC",), fmt="netrc")),
    Store("terraform credentials", BROKER, At((TFRC,), fmt="terraform-credentials")),
    Store(
        "terraform CLI configuration",
        BROKER,
        At(
            (".terraformrc",),
            ("TF_CLI_CONFIG_FILE", "TERRAFORM_CONFIG"),
            fmt="terraform-cli-config",
        ),
    ),
    Store("kubeconfig", BROKER, _kube),
    Store("docker config", BROKER, _docker),
    Store("helm registry", BROKER, _helm_registry),
    Store("helm repositories", BROKER, _helm_repos),
    Store("vault token", BROKER, At((".vault-token",), fmt="vault-token")),
    Store("pulumi credentials", BROKER, _pulumi),
    Store("gh hosts", BROKER, _gh),
    Store(
        "databricks", BROKER, At((".databrickscfg",), ("DATABRICKS_CONFIG_FILE",), fmt="databricks")
    ),
    # -- given: they cannot be brokered, and guarded programs need them
    Store(
        "SSH keys and agent",
        GIVE,
        At((".ssh",), ("SSH_AUTH_SOCK",)),
        why="the key signs inside the SSH handshake, end to end (git over SSH)",
    ),
    Store(
        "gcloud",
        GIVE,
        At(xdg=("gcloud",), variables=("CLOUDSDK_CONFIG", "GOOGLE_APPLICATION_CREDENTIALS")),
        why="service-account keys sign a JWT locally; refresh tokens sit in gcloud's databases",
    ),
    Store(
        "Azure CLI",
        GIVE,
        At((".azure",), ("AZURE_CONFIG_DIR",)),
        why="MSAL's token cache, read and rewritten by az (refresh tokens go in bodies)",
    ),
    Store(
        "OCI",
        GIVE,
        At((".oci",), ("OCI_CLI_CONFIG_FILE",)),
        why="the API key signs each request locally (HTTP signatures)",
    ),
    Store(
        "boto (gsutil)",
        GIVE,
        At((".boto",), ("BOTO_CONFIG",)),
        why="gsutil's configuration: HMAC keys sign locally",
    ),
    Store(
        "AWS web identity token",
        GIVE,
        At(variables=("AWS_WEB_IDENTITY_TOKEN_FILE",)),
        why="a short-lived token the SDK exchanges for role credentials",
    ),
    Store(
        "runtime folder",
        GIVE,
        At(variables=("XDG_RUNTIME_DIR",)),
        why="the SSH agent's socket may live there (its bus and keyrings are hidden)",
    ),
    Store(
        "Kubernetes service account",
        GIVE,
        At(absolute=SERVICE_ACCOUNT),
        why="kubectl in a pod authenticates with it to the API server, whose CA it pins",
    ),
    # -- hidden: nothing a guarded program needs
    Store("session bus, keyrings and gpg", HIDE, _session_bus),
    Store(
        "password managers",
        HIDE,
        At((".password-store", ".local/share/keyrings"), ("PASSWORD_STORE_DIR",), xdg=("op",)),
    ),
    Store("database passwords", HIDE, At((".pgpass", ".my.cnf"), ("PGPASSFILE",))),
    Store(
        "other clouds' and tools' CLIs",
        HIDE,
        At((".s3cfg",), ("RCLONE_CONFIG",), xdg=("doctl", "hcloud", "rclone", "hub")),
    ),
    Store(
        "container and package registries",
        HIDE,
        At(
            (
                ".npmrc",
                ".pypirc",
                ".cargo/credentials",
                ".cargo/credentials.toml",
                ".gem/credentials",
                ".m2/settings.xml",
                ".gradle/gradle.properties",
                ".composer/auth.json",
            ),
            ("REGISTRY_AUTH_FILE", "NPM_CONFIG_USERCONFIG"),
            xdg=("containers/auth.json",),
        ),
    ),
    Store("shell and client histories", HIDE, At(HISTORIES, ("HISTFILE",))),
)


def located(env: Env, home: Path) -> list[tuple[Store, Located]]:
    """Every store and where it is for ``env`` and ``home``."""
    return [(store, store.locate(env, home)) for store in STORES]


def shell_paths(env: Env, home: Path) -> list[Path]:
    """Every store's files and folders (existing or not): what the shell must not see."""
    return [path for _store, where in located(env, home) for path in where.paths]


class _Asked(dict):
    """An empty environment that notes the name of every variable looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def get(self, name: str, default: object = None) -> object:
        self.names.add(name)
        return default


@functools.cache
def watched_variables() -> frozenset[str]:
    """The variables that move a store (a change prepares the broker again): those its
    ``locate`` looks up."""
    env = _Asked()
    for store in STORES:
        store.locate(env, Path("/nonexistent"))
    return frozenset(env.names)
