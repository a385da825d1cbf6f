"""What a bash call's sandbox must not see: the agent's control plane and the user's
credentials, as paths (hidden under empty mounts) and environment variables (removed).

Two kinds, because they are treated differently:

* control plane (the runtime folder with the kernel endpoint's file and socket, the
  session store, the MCP trust file, all of ``~/.iac-code``, the team store's file or
  its PostgreSQL server's socket folder (:func:`iac_kernel.team.reach.store_paths`: a
  sandbox runs as the requester and must not write approvals or audit records as them),
  Jupyter's runtime folder with kernel connection files and the server's configuration
  files, found by :mod:`jupyter_core.paths`, and the default runtime folder a server
  started without Jupyter's variables uses, plus whatever the fronts :func:`register`;
  and every ``JUPYTER_*``, ``JPY_*``, ``JUPYTERHUB_*`` variable): hidden from every
  process of a call, the guarded programs the guard runs included;
* credentials (every store of :data:`iac_kernel.egress.stores.STORES` wherever its
  variables move it, the ``sandbox_hidden_paths`` setting, and secret-bearing
  variables): hidden from the shell; a guarded program the guard runs gets each store as
  its table says - a placeholder copy, empty, or (what cannot be brokered) itself - and
  the variables back (placeholders where brokered), so ``aws s3 ls`` still works and a
  script's own HTTP client has nothing to send.

And what a guarded program never gets from the shell: the variables that make the
dynamic loader, a shell or a pyenv shim run other code inside the real program.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iac_kernel.control_paths import register as register
from iac_kernel.control_paths import registered
from iac_kernel.control_paths import unregister as unregister
from iac_kernel.egress import stores
from iac_kernel.masking.own_names import own_setting
from iac_kernel.team.reach import store_paths

#: Variables that are never secret whatever their name or value looks like.
_PLAIN = {"PATH", "HOME", "PWD", "OLDPWD", "SHELL", "USER", "LOGNAME", "TERM", "LANG"}
_PLAIN |= {"TMPDIR", "HOSTNAME", "SHLVL", "_", "LS_COLORS", "PS1", "PS2", "PS4"}
_PLAIN |= {"KUBECONFIG", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"}
_SECRET_NAME = re.compile(
    r"(SECRET|TOKEN|PASSW|PASSPHRASE|_PASS$|^PASS_|_PASS_|_PWD$|^PWD_|PRIVATE|CREDENTIAL|"
    r"API_?KEY|ACCESS_?KEY|WEBHOOK|"
    r"AUTH|SESSION_?KEY|SIGNING|COOKIE|_DSN$|^DSN$|DATABASE_URL|CONN(ECTION)?_?STR|"
    r"_KEY$|_KEY_ID$|^TF_TOKEN_|CLIENT_KEY|SAS_?KEY|ACCOUNT_KEY)",
)
_SECRET_SHAPES = (
    re.compile(r"(AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}"),  # AWS access key ids
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"),
    re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"),  # URL with a password
    re.compile(r"(?i)(password|passwd|pwd|secret|token)\s*[=:]\s*\S"),  # DSN / key=value
    re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}"),  # JWT
    re.compile(
        r"(ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr]|sk|sk-ant|hvs)[-_][A-Za-z0-9_-]{16,}"
    ),
    re.compile(r'"(private_key|client_secret|refresh_token)"'),
    # Vault tokens: service, batch and recovery (``hvs.``, ``hvb.``, ``hvr.``), and the
    # legacy ``s.``/``b.`` forms when the value is nothing else.
    re.compile(r"(?<![A-Za-z0-9])hv[sbr]\.[A-Za-z0-9_-]{20,}"),
    re.compile(r"^\s*[sb]\.[A-Za-z0-9]{24,}\s*$"),
    # Connection strings with a key or signature (Azure storage, Service Bus, Event Hubs).
    re.compile(r"(?i)(AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*[^;\s]"),
    # HTTP credentials: ``Basic <base64>``, ``Bearer <token>``.
    # (the credential has a digit or a capital after a small letter: not "Basic setup").
    re.compile(
        r"^\s*(?i:basic|bearer|token)\s+(?=\S*(?:[0-9]|[a-z][A-Z]))[A-Za-z0-9._~+/=-]{8,}\s*$"
    ),
    re.compile(r"(?i)authorization\s*[:=]\s*\S"),
    # A shared access signature (an Azure SAS token, a signed URL): ``sig=``.
    re.compile(r"(?i)(^|[?&])sig=[A-Za-z0-9%+/=_-]{16,}"),
)
#: A long token-like value: letters and digits (and base64 / url-safe signs), no spaces.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9+/=_-]{32,}")


def home() -> Path:
    return Path(os.path.expanduser("~"))


def control_plane(settings: Any, env: Mapping[str, str] | None = None) -> list[Path]:
    """Every path through which the agent can be steered (see the module doc)."""
    env = os.environ if env is None else env
    paths = [home() / ".iac-code"]
    runtime = env.get("IAC_KERNEL_RUNTIME_DIR") or os.environ.get("IAC_KERNEL_RUNTIME_DIR")
    if runtime:
        paths.append(Path(runtime).expanduser())
    egress = env.get("IAC_KERNEL_EGRESS_DIR") or os.environ.get("IAC_KERNEL_EGRESS_DIR")
    if egress:  # the credential broker's table and the interception CA's key
        paths.append(Path(egress).expanduser())
    sessions = getattr(settings, "sessions_dir", None) or os.environ.get("IAC_KERNEL_SESSIONS_DIR")
    if sessions:
        sessions = Path(sessions).expanduser()
        paths += [sessions, sessions.parent / "mcp-trust.json"]
    paths += store_paths(env, sessions or None, make=True)  # there before a record is
    paths += jupyter_paths(env)
    paths += registered()
    # Every kernel's endpoint socket folder when its runtime path was too long (any
    # kernel of this user, not only this one's).
    paths += sorted(Path(tempfile.gettempdir()).glob("iac-kernel-endpoint-*"))
    return _existing(paths)


#: The Jupyter server's (and JupyterHub's) own configuration files: they may hold its
#: token or password (``c.IdentityProvider.token``, ``c.ServerApp.password``).
JUPYTER_CONFIG_FILES = tuple(
    f"{name}.{ext}"
    for name in ("jupyter_server_config", "jupyter_notebook_config", "jupyterhub_config")
    for ext in ("json", "py")
)


def jupyter_paths(env: Mapping[str, str]) -> list[Path]:
    """Jupyter's runtime folder (connection files with their keys, server files with
    tokens) and the server's configuration files, found as Jupyter finds them
    (:mod:`jupyter_core.paths`: ``JUPYTER_*``, ``XDG_*``, ``JUPYTER_PREFER_ENV_PATH``),
    for this process's environment and for the folders ``env`` names."""
    from jupyter_core import paths as jp

    runtime = [Path(jp.jupyter_runtime_dir()), *default_runtime_dirs(env)]
    # ~/.jupyter too: the server may run with another JUPYTER_CONFIG_DIR than the kernel.
    config = [Path(p) for p in jp.jupyter_config_path()] + [home() / ".jupyter"]
    if env.get("JUPYTER_RUNTIME_DIR"):
        runtime.append(Path(env["JUPYTER_RUNTIME_DIR"]))
    if env.get("JUPYTER_DATA_DIR"):
        runtime.append(Path(env["JUPYTER_DATA_DIR"]) / "runtime")
    if env.get("JUPYTER_CONFIG_DIR"):
        config.append(Path(env["JUPYTER_CONFIG_DIR"]))
    for item in (env.get("JUPYTER_CONFIG_PATH") or "").split(os.pathsep):
        if item.strip():
            config.append(Path(item.strip()))
    files = [folder / name for folder in config for name in JUPYTER_CONFIG_FILES]
    return [Path(os.path.expanduser(p)) for p in [*runtime, *files]]


def default_runtime_dirs(env: Mapping[str, str]) -> list[Path]:
    """Where a Jupyter server started without ``JUPYTER_RUNTIME_DIR`` and
    ``JUPYTER_DATA_DIR`` writes its files, whatever this process has them set to: the
    data folder's ``runtime`` as :mod:`jupyter_core.paths` finds it with them unset, for
    the ``XDG_DATA_HOME`` of this process, of ``env`` and none, and with
    ``JUPYTER_PLATFORM_DIRS`` on or off (a server is often started in another shell)."""
    import platformdirs
    from jupyter_core import paths as jp

    home = Path(jp.get_home_dir())
    data = [home / ".local" / "share"]
    data += [Path(x) for x in (os.environ.get("XDG_DATA_HOME"), env.get("XDG_DATA_HOME")) if x]
    folders = [d / jp.APPNAME for d in data]
    folders.append(Path(platformdirs.user_data_dir(jp.APPNAME, appauthor=False)))
    if sys.platform == "darwin":
        folders.append(home / "Library" / "Jupyter")
    return list(dict.fromkeys(folder / "runtime" for folder in folders))


def credential_paths(settings: Any, env: Mapping[str, str]) -> list[Path]:
    """Credential stores (:func:`iac_kernel.egress.stores.shell_paths`: the defaults and
    where ``env``'s variables move them) and the ``sandbox_hidden_paths`` setting (``:``
    or ``,`` separated)."""
    paths = stores.shell_paths(env, home())
    raw = getattr(settings, "sandbox_hidden_paths", "") or ""
    items = raw if isinstance(raw, (list, tuple)) else str(raw).replace(",", os.pathsep).split(":")
    paths += [Path(os.path.expanduser(str(i).strip())) for i in items if str(i).strip()]
    return _existing(paths)


#: Never hidden: what every program needs (``KUBECONFIG=/dev/null`` is common).
_SYSTEM = (Path("/"), Path("/dev"), Path("/proc"), Path("/sys"), Path("/usr"), Path("/etc"))


def _existing(paths: Iterable[Path]) -> list[Path]:
    """Existing folders, files and sockets, and their real paths (a symlinked ``~/.aws``
    hides its target too); never devices nor system folders."""
    found: list[Path] = []
    for path in paths:
        for candidate in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
            if candidate in found or candidate in _SYSTEM or _under_dev(candidate):
                continue
            try:
                mode = candidate.lstat().st_mode
            except OSError:
                continue
            # A link's target is the other candidate.
            if (
                stat.S_ISDIR(mode)
                or stat.S_ISREG(mode)
                or stat.S_ISSOCK(mode)
                or stat.S_ISLNK(mode)
            ):
                found.append(candidate)
    return found


def _under_dev(path: Path) -> bool:
    return any(part in path.parents or part == path for part in _SYSTEM[1:4])


def is_secret(name: str, value: str) -> bool:
    """A variable that carries a credential, by its name or by the shape of its value."""
    upper = name.upper()
    if upper in _PLAIN or upper.startswith("LC_"):
        return False
    if _SECRET_NAME.search(upper) and not own_setting(name):
        return True
    if any(shape.search(value) for shape in _SECRET_SHAPES):
        return True
    token = _TOKEN_LIKE.fullmatch(value)
    return bool(token) and not value.startswith("/") and _mixed(value)


def _mixed(value: str) -> bool:
    """Letters and digits mixed like a random token (not a word, a number, a path)."""
    return (
        sum(c.isdigit() for c in value) >= 4
        and sum(c.isalpha() for c in value) >= 8
        and (any(c.isupper() for c in value) or sum(c in "abcdef" for c in value) >= 8)
    )


#: Variables of Jupyter and JupyterHub (tokens, session names, folders, the hub's API):
#: the control plane, removed from every process of a call, guarded programs included.
CONTROL_PREFIXES = ("JUPYTER_", "JPY_", "JUPYTERHUB_")


def is_control(name: str) -> bool:
    """A Jupyter or JupyterHub variable (:data:`CONTROL_PREFIXES`), whatever its value."""
    return name.upper().startswith(CONTROL_PREFIXES)


def split_env(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(what the shell sees, the secrets taken out); control-plane variables are in
    neither (:func:`is_control`)."""
    shown: dict[str, str] = {}
    secret: dict[str, str] = {}
    for key, value in env.items():
        if not is_control(key):
            (secret if is_secret(key, value) else shown)[key] = value
    return shown, secret


def inside(path: str | Path, folders: Iterable[str | Path]) -> bool:
    """``path`` is one of ``folders`` or lies under one (as written: links not followed)."""
    path = os.path.normpath(path)
    for folder in map(os.path.normpath, folders):
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return True
    return False


def names_a_secret(args: Iterable[str], cwd: str, secrets: Iterable[Path]) -> str | None:
    """The first argument naming a path inside ``secrets`` (a credential store hidden
    from the shell), resolved from ``cwd``, the home folder and every folder the argv
    names (``git -C ~``), symlinks followed; ``--opt=PATH``, ``file://PATH`` and
    ``@PATH`` forms too. A guarded program runs with the real files, so reading one of
    them through its argv is asked."""
    stores = [Path(os.path.realpath(p)) for p in secrets]
    if not stores:
        return None
    words = [str(a) for a in args]
    candidates = []
    for word in words:
        # `--opt=PATH`, and `key=PATH` (`git -c include.path=PATH`) as well as the word
        for value in {word, word.partition("=")[2]}:
            for prefix in ("fileb://", "file://", "@"):
                if value.startswith(prefix):
                    value = value[len(prefix) :]
            if value:
                candidates.append((word, os.path.expanduser(value)))
    bases = [cwd, str(home())]
    bases += [os.path.join(cwd, v) for _w, v in candidates if os.path.isdir(os.path.join(cwd, v))]
    for word, value in candidates:
        for base in bases:
            real = Path(os.path.realpath(os.path.join(base, value)))
            if inside(real, stores):
                return word
    return None


#: Variables that make the dynamic loader run other code inside the real program.
LOADER_VARIABLES = {"GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH"}
LOADER_VARIABLES |= {"MALLOC_TRACE", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS"}
#: Variables that make a shell or a pyenv shim run other code first: a script CLI's
#: children inherit the descriptor of the real script, so that code could exec it.
LOADER_VARIABLES |= {"BASH_ENV", "ENV", "PYENV_HOOK_PATH"}


def without_loader_variables(env: dict[str, str]) -> dict[str, str]:
    """``env`` without ``LD_*`` and :data:`LOADER_VARIABLES`."""
    return {k: v for k, v in env.items() if not (k.startswith("LD_") or k in LOADER_VARIABLES)}
