"""Git and the user's credentials.

Git runs programs and loads files that its options, its environment and its
configuration name (``core.fsmonitor``, ``--upload-pack``, ``GIT_SSH_COMMAND``,
``GIT_TEMPLATE_DIR``, filter drivers, credential helpers, hooks ...), and a bash call can
set all of those. So a git command the guard runs gets the credential stores and secret
variables only when it talks to a remote (push, fetch, pull, clone, ls-remote ...); local
commands (status, log, diff, commit ...) run with them hidden like the shell.

A remote command runs unasked only when nothing git would run or load comes from what the
call could write or set (:func:`remote_reason`, the exec-time step that catches what the
rules cannot see in an argv: git's configuration, its hooks, the variables the call
set). The rule is by class, not by example:

* configuration: every key in effect that comes from a place the call can write or set
  (the repository, ``-c``, ``--config-env``, clone's ``--config``, ``GIT_CONFIG_*``, a
  file under the working folder or /tmp) must be an inert key (:data:`INERT_KEYS`: URLs,
  refspecs, names, booleans git writes itself); any other key is asked, whatever it is
  called - and a key from the user's own files whose value names a file or folder in such
  a place (``core.hooksPath``, ``init.templateDir``, ``include.path``) is asked too;
* options: those of a remote command that name a program or a folder git copies hooks
  from (:data:`PROGRAM_OPTIONS`, any unique prefix git accepts), ``--exec-path``, and
  ``git submodule foreach``;
* environment: every ``GIT_*`` variable the call set or changed but the inert ones, and
  the variables that name a program, a path or a program's options (:data:`CODE_VARIABLES`);
  those that only pick the configuration (``HOME``, ``GIT_CONFIG_*``, ``GIT_DIR``) count
  by the configuration and hooks git then finds;
* hooks: the repository has some (a clone's come from its template: the rules above);
* other processes of the call running beside it (they could write any of this between
  the guard's read and git's: the last exec-time step, :mod:`.verdict`).

Git itself runs helpers for a remote command through the same launchers: its remote
transport (``git remote-https``), credential helpers (``git credential-store get``) and
internal commands (``git submodule--helper``). Such a helper, started from inside a
guarded git's own run, is part of that run (:func:`placement`; an exec-time step before
the rules, which would ask ``git credential``): unasked, with the credentials the run
has - so a helper reading ``~/.git-credentials`` answers the broker's placeholder, which
the egress proxy swaps on that remote's host.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from iac_kernel.guard.policy.gitconfig import GLOBAL_VALUE, GitConfigReader, config_options
from iac_kernel.guard.policy.rules import git_argv
from iac_kernel.guard.sandbox.hidden import inside
from iac_kernel.guard.sandbox.processes import nearest

#: Git commands that talk to a remote (they need the user's credentials).
REMOTE = {"push", "fetch", "pull", "clone", "ls-remote", "remote", "submodule", "lfs"}
REMOTE |= {"archive", "send-email", "send-pack", "fetch-pack", "request-pull"}
#: Configuration keys that neither run nor load anything (lower-case section and name, as
#: ``git config --list`` prints them); every other key from a place the call can write
#: or set makes a remote command asked.
INERT_KEYS = re.compile(
    r"core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase"
    r"|precomposeunicode|symlinks|autocrlf|eol|safecrlf|quotepath|abbrev|sharedrepository"
    r"|sparsecheckout|sparsecheckoutcone|worktree|checkstat|trustctime|compression)"
    r"|extensions\.(objectformat|worktreeconfig|partialclone|preciousobjects|noop)"
    r"|remote\..+\.(url|pushurl|fetch|push|mirror|tagopt|prune|prunetags|promisor"
    r"|partialclonefilter|skipdefaultupdate|skipfetchall)"
    r"|branch\..+\.(remote|pushremote|merge|rebase|description)"
    r"|submodule\..+\.(url|active|branch|shallow|ignore|fetchrecursesubmodules)"
    r"|submodule\.(active|recurse|fetchjobs)"
    r"|(user|author|committer)\.(name|email)|user\.useconfigonly|init\.defaultbranch"
    r"|pull\.(rebase|ff)|push\.(default|autosetupremote|followtags)|clone\.defaultremotename"
    r"|fetch\.(prune|prunetags|parallel|recursesubmodules|fsckobjects)|transfer\.fsckobjects"
    r"|protocol\.version|http\.(postbuffer|version|lowspeedlimit|lowspeedtime)"
    r"|gc\.(auto|autodetach)|receive\.(denynonfastforwards|denycurrentbranch)"
    r"|lfs\.repositoryformatversion|safe\.directory|color\..+|advice\..+"
    r"|index\.(sparse|version)|maintenance\.(auto|strategy)|user\.signingkey"
    r"|(commit|tag)\.gpgsign|rebase\.(autostash|autosquash)|merge\.(ff|conflictstyle)"
    r"|rerere\.enabled",
    re.IGNORECASE | re.DOTALL,
)
#: Options of remote commands that name a program git runs, a folder it copies hooks
#: from, or configuration of the new repository: long names (git takes any unique
#: prefix) and short letters.
PROGRAM_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "clone": (("upload-pack", "template"), "u"),
    "fetch": (("upload-pack",), ""),
    "pull": (("upload-pack",), ""),
    "ls-remote": (("upload-pack",), "u"),
    "push": (("receive-pack", "exec"), ""),
    "send-pack": (("receive-pack", "exec"), ""),
    "fetch-pack": (("upload-pack", "exec"), ""),
    "archive": (("exec",), ""),
    "send-email": (("smtp-server", "to-cmd", "cc-cmd", "header-cmd", "sendmail-cmd"), ""),
}
#: Options that add configuration (clone's ``-c``/``--config``): read like ``git -c``.
CONFIG_OPTIONS: dict[str, tuple[str, str]] = {"clone": ("config", "c")}
#: git variables that neither run nor load anything (every other ``GIT_*`` counts).
INERT_GIT_VARIABLES = frozenset(
    "GIT_TERMINAL_PROMPT GIT_TRACE GIT_TRACE_PERFORMANCE GIT_TRACE_SETUP GIT_TRACE2 "
    "GIT_TRACE2_EVENT GIT_TRACE2_PERF GIT_PROGRESS_DELAY GIT_FLUSH GIT_AUTHOR_NAME "
    "GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_COMMITTER_DATE "
    "GIT_MERGE_VERBOSITY GIT_MERGE_AUTOEDIT GIT_LFS_SKIP_SMUDGE GIT_HTTP_LOW_SPEED_LIMIT "
    "GIT_HTTP_LOW_SPEED_TIME GIT_HTTP_MAX_REQUESTS GIT_HTTP_USER_AGENT GIT_REDACT_COOKIES "
    "GIT_DEFAULT_HASH GIT_LITERAL_PATHSPECS GIT_NO_REPLACE_OBJECTS GIT_REFLOG_ACTION "
    "GIT_OPTIONAL_LOCKS GIT_ADVICE GIT_QUIET".split()
)
#: Variables that pick git's configuration, repository or object store: judged by the
#: configuration and hooks git then finds (read with them, :func:`config_reason`), not
#: by being set (``HOME=/tmp/h git fetch`` is asked only when ``/tmp/h/.gitconfig``
#: names something); ``*`` ends a prefix.
CONFIG_PLACES = tuple(
    "HOME XDG_CONFIG_HOME GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_CONFIG_NOSYSTEM GIT_CONFIG_COUNT "
    "GIT_CONFIG_KEY_* GIT_CONFIG_VALUE_* GIT_CONFIG_PARAMETERS GIT_DIR GIT_WORK_TREE "
    "GIT_COMMON_DIR GIT_CEILING_DIRECTORIES GIT_DISCOVERY_ACROSS_FILESYSTEM GIT_INDEX_FILE "
    "GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE".split()
)
#: Variables (besides ``GIT_*``) that name a program, a place code is loaded from, or a
#: program's options, for git or what it runs (ssh, a shell, a pager or editor, Perl and
#: Python helpers, the TLS libraries): names and name patterns.
CODE_VARIABLES = tuple(
    "PATH SHELL EDITOR VISUAL BROWSER *PAGER* LESS* *ASKPASS* XDG_* *PATH *_PATH_* *LIB PERL* "
    "PYTHON* RUBY* NODE_* JAVA_* _JAVA_* DOTNET_* OPENSSL_* GNUTLS_* P11_KIT_* SSL_* CURL_* "
    "*_PROXY *CONFIG* *_PLUGIN* *_HOME *_COMMAND *_CMD *_PROGRAM *_EXEC* *_OPTIONS *_OPTS *_DIR "
    "*_FILE".split()
)
#: A run of the guard: (program, whether it has the credentials, whether the user
#: approved it).
Run = tuple[str, bool, bool]


def command(argv: Sequence[str]) -> str:
    """The git subcommand of ``argv`` (after global options; a dashed ``git-x`` is
    ``x``), or ``""``."""
    words = _split(argv)[1]
    return words[0] if words else ""


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(global options, the subcommand and its arguments) of a git argv."""
    words = git_argv(argv)[1:]
    options: list[str] = []
    while words and words[0].startswith("-"):
        option = words.pop(0)
        options.append(option)
        if option in GLOBAL_VALUE and words:
            options.append(words.pop(0))
    return options, words


def needs_credentials(argv: Sequence[str]) -> bool:
    """A git argv that talks to a remote (:data:`REMOTE`)."""
    return command(argv) in REMOTE


#: git's own remote transports (a ``<name>::`` URL names any other ``git-remote-<name>``
#: program, which is judged like any command) and the commands they run for a fetch or
#: a push (``send-pack --stateless-rpc``).
TRANSPORTS = {"remote-http", "remote-https", "remote-ftp", "remote-ftps", "remote-ext"}
TRANSPORTS |= {"remote-fd", "send-pack", "fetch-pack"}


def is_helper(argv: Sequence[str]) -> bool:
    """An argv git runs itself for a remote command: one of its transports
    (``remote-https``, ``send-pack``), a credential helper its configuration names
    (``credential-store``) or ``git credential fill`` (git-lfs asks that way), or an
    internal command (``submodule--helper``, ``checkout--worker``)."""
    name = command(argv)
    return (
        name in TRANSPORTS
        or name.startswith("credential-")
        or name == "credential"
        or ("--" in name and not name.startswith("-"))
    )


def _writes_a_store(argv: Sequence[str]) -> bool:
    """A credential helper's ``store``/``erase`` (``git credential approve|reject``)."""
    _, words = _split(argv)
    if words and words[0].startswith("credential-"):
        return words[-1] in ("store", "erase")
    return words[:1] == ["credential"] and words[1:2] in (["approve"], ["reject"])


def enclosing_run(pid: int | None, runs: Mapping[int, Run]) -> Run | None:
    """The run of the guard (``runs``: by the pid the guard started) that the process
    ``pid`` runs inside, nearest first; None when it runs in the call's own shell."""
    found = nearest(pid, runs)
    return runs[found] if found is not None else None


@dataclass(frozen=True)
class Placement:
    """How the guard runs one request: with the credentials or not (``reveal``); as a
    helper of the guarded git it runs inside (``helper``: unasked, as that run, approved
    when that run was: ``approved``); from inside a run of the guard (``nested``: the
    variables it finds were set by that run, and the call's other processes were counted
    when that run started)."""

    reveal: bool
    helper: bool = False
    nested: bool = False
    approved: bool = False
    #: A credential helper asked to store or erase: not run (exit 0). A guarded run only
    #: holds placeholder or hidden copies of the user's stores; written back, a
    #: placeholder would replace the real password (a keyring), and a refused
    #: placeholder would erase it.
    skip: bool = False


def placement(
    program: str, argv: Sequence[str], pid: int | None, runs: Mapping[int, Run]
) -> Placement:
    """The :class:`Placement` of a request of ``program`` from the process ``pid``
    (``runs``: the guard's running programs). A git run never gives a git it starts more
    than it has: a git asked for from inside a run without the credentials gets none."""
    own = program != "git" or needs_credentials(argv)
    run = enclosing_run(pid, runs)
    if run is None:
        return Placement(own)
    if program == "git" and run[0] == "git" and is_helper(argv):
        skip = _writes_a_store(argv)
        return Placement(run[1], helper=True, nested=True, approved=run[2], skip=skip)
    return Placement(own and (run[1] or program != "git"), nested=True)


def option_reason(argv: Sequence[str]) -> str | None:
    """Why the options of a remote git argv name a program or hooks to run, or None."""
    options, words = _split(argv)
    for option in options:
        if option.startswith("--exec-path="):
            return f"git {option}: git runs its commands from that folder"
    if not words:
        return None
    name, args = words[0], words[1:]
    if name == "submodule" and "foreach" in args:
        return "git submodule foreach: runs a command in each submodule"
    longs, shorts = PROGRAM_OPTIONS.get(name, ((), ""))
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            given = arg[2:].partition("=")[0]
            if given and any(full.startswith(given) for full in longs):
                return f"git {name} {arg}: names a program or hooks git runs"
        elif arg.startswith("-") and _short(arg, shorts) is not None:
            return f"git {name} {arg}: names a program git runs"
    return None


#: Short options of remote commands that take a value (the rest of the word, if any).
_SHORT_VALUES = "bcjou"


def _short(arg: str, letters: str) -> int | None:
    """Where one of ``letters`` stands among the bundled short options ``arg``
    (``-qu``), or None (letters after one that takes a value are that value)."""
    for index, letter in enumerate(arg[1:], 1):
        if letter in letters:
            return index
        if letter in _SHORT_VALUES:
            return None
    return None


def added_config(argv: Sequence[str]) -> list[str]:
    """``-c`` words for the configuration a subcommand's own options add (clone's
    ``-c key=value``, ``--config=key=value``, any unique prefix)."""
    _, words = _split(argv)
    if not words or words[0] not in CONFIG_OPTIONS:
        return []
    long, short = CONFIG_OPTIONS[words[0]]
    found: list[str] = []
    args = words[1:]
    for index, arg in enumerate(args):
        if arg == "--":
            break
        following = args[index + 1] if index + 1 < len(args) else ""
        if arg.startswith("--") and arg[2:] and long.startswith(arg[2:].partition("=")[0]):
            found += ["-c", arg.partition("=")[2] if "=" in arg else following]
        elif arg.startswith("-") and not arg.startswith("--"):
            index = _short(arg, short)
            if index is not None:
                found += ["-c", arg[index + 1 :] or following]
    return found


def env_reason(env: Mapping[str, str], base: Mapping[str, str]) -> str | None:
    """Why variables the call set or changed could make a remote git run or load
    something, or None."""
    names = []
    for key in sorted(env):
        if env[key] == base.get(key, None) or not env[key]:
            continue
        upper = key.upper()
        if any(fnmatch.fnmatchcase(upper, place) for place in CONFIG_PLACES):
            continue
        if upper.startswith("GIT_"):
            if upper not in INERT_GIT_VARIABLES:
                names.append(key)
        elif any(fnmatch.fnmatchcase(upper, pattern) for pattern in CODE_VARIABLES):
            names.append(key)
    if not names:
        return None
    return f"with {', '.join(names)} set by the command: git could run or load what it names"


def writable_origin(origin: str, cwd: str, writable: Sequence[str]) -> bool:
    """A ``--show-origin`` origin the bash call could have written (a repository's own
    ``.git/config`` is shown relative to ``cwd``)."""
    kind, _, path = origin.partition(":")
    if kind != "file":
        return True  # command line, blob, standard input
    return inside(os.path.join(cwd, path), writable)


def _named_paths(value: str, origin: str, cwd: str, home: str, include: bool) -> list[str]:
    """The absolute paths a configuration value names (``/x``, ``~/x``, a command's
    words; an include's relative path from its file's folder)."""
    found = []
    for word in re.split(r"[\s'\"=!:;]+", value):
        if word.startswith("~/") and home:
            found.append(os.path.join(home, word[2:]))
        elif word.startswith("/"):
            found.append(word)
    if include and value and not value.startswith(("/", "~")):
        kind, _, path = origin.partition(":")
        if kind == "file":
            found.append(os.path.join(os.path.dirname(os.path.join(cwd, path)), value))
    return found


def config_reason(
    output: bytes, cwd: str, writable: Sequence[str], home: str, name: str
) -> str | None:
    """Why the configuration ``git config -z --show-origin --list`` printed could make
    git run or load what the call wrote, or None."""
    records = output.decode(errors="replace").split("\0")
    if records[-1] != "" or len(records) % 2 != 1:
        return f"git {name}: its configuration could not be read (unexpected output)"
    for origin, entry in zip(records[0:-1:2], records[1::2], strict=True):
        key, _, value = entry.partition("\n")
        if INERT_KEYS.fullmatch(key):
            continue
        where = origin[5:] if origin.startswith("file:") else origin
        if writable_origin(origin, cwd, writable):
            return (
                f"git {name} with {key} from {where}: it could run code the command wrote "
                "with your credentials"
            )
        include = key.startswith(("include.", "includeif.")) and key.endswith(".path")
        for path in _named_paths(value, origin, cwd, home, include):
            if inside(path, writable):
                return (
                    f"git {name} with {key} = {value} from {where}: it names {path}, a place "
                    "the command can write"
                )
    return None


async def remote_reason(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    reader: GitConfigReader,
    writable: Sequence[str],
    host_path: Callable[[str], str],
    base_env: Mapping[str, str] | None = None,
) -> str | None:
    """Why a remote git command would run or load something the call could have written
    or set (or that cannot be told), or None; see the module doc."""
    name = command(argv)
    why = option_reason(argv)
    if why is None and base_env is not None:
        why = env_reason(env, base_env)
        why = f"git {name} {why}" if why else None
    if why is not None:
        return why
    options = [*config_options(argv), *added_config(argv)]
    args = ["--no-pager", *options, "config", "-z", "--show-origin", "--list"]
    code, output = await reader(args, cwd, env)
    if code != 0:
        return f"git {name}: its configuration could not be read"
    where = _workdir(cwd, options)
    why = config_reason(output, where, writable, env.get("HOME", ""), name)
    if why is not None:
        return why
    hooks_argv = ["--no-pager", *options, "rev-parse", "--git-path", "hooks"]
    code, output = await reader(hooks_argv, cwd, env)
    named = env.get("GIT_DIR") or env.get("GIT_COMMON_DIR") or _option_value(options, "--git-dir")
    if code != 0 and named:
        # git still reads the configuration of a folder that is no repository
        return f"git {name}: its repository {named} could not be read"
    if name == "clone":  # its hooks come from the template folder (checked above)
        return None
    hooks = output.decode(errors="replace").strip() if code == 0 else ""
    if hooks and _has_hooks(host_path(os.path.join(where, hooks))):
        return f"git {name}: the repository has hooks ({hooks}) that would run"
    return None


def _option_value(options: Sequence[str], name: str) -> str:
    """The value of the global option ``name`` (``--git-dir=X`` or ``--git-dir X``)."""
    for flag, value in itertools.pairwise(["", *options]):
        if value.startswith(name + "="):
            return value.partition("=")[2]
        if flag == name:
            return value
    return ""


def _workdir(cwd: str, options: Sequence[str]) -> str:
    """The folder git works in after the ``-C`` options."""
    for flag, value in itertools.pairwise(options):
        if flag == "-C" and value:
            cwd = os.path.join(cwd, value)
    return cwd


def _has_hooks(path: str) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(
        not n.endswith(".sample") and os.access(os.path.join(path, n), os.X_OK) for n in names
    )
