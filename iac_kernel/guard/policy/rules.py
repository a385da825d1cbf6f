"""Per-program rules: is this exact argv a changing, read-only or other command?

The rules read the argv a program actually receives (after every shell expansion), so
they are exact where the text check in ``tools/danger.py`` can only guess. They err on
the side of asking: a changing verb anywhere among the positional arguments counts.
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Mapping, Sequence

from iac_kernel.guard.policy import grammar
from iac_kernel.guard.policy.cloud_rules import CLOUD, CLOUD_TABLES, aws_positionals, classify_cloud
from iac_kernel.guard.policy.grammar import (
    CHANGE,
    OTHER,
    READ,
    Rule,
    Verdict,
    has_flag,
    matches,
    positionals,
    program_name,
)
from iac_kernel.guard.policy.grammar import each_verb as _each
from iac_kernel.guard.policy.grammar import rule as _r
from iac_kernel.guard.policy.secret_reads import PRINTS_CREDENTIALS, k8s_secret_read

__all__ = ["CHANGE", "DEFAULT_PROGRAMS", "OTHER", "READ", "Rule", "Verdict", "classify"]
__all__ += ["git_argv", "has_flag", "matches", "positionals", "program_name"]

#: Guarded programs by default (the ``guarded_programs`` setting overrides it).
DEFAULT_PROGRAMS = tuple(
    "terraform tofu terragrunt kubectl helm aws gcloud gsutil az pulumi git".split()
)


_TF_CHANGE = (
    _r("apply", "applies infrastructure changes"),
    _r("destroy", "destroys infrastructure"),
    _r("import", "writes to the state"),
    _r("state rm", "removes resources from the state"),
    _r("state mv", "moves resources in the state"),
    _r("state push", "overwrites the remote state"),
    _r("state replace-provider", "rewrites providers in the state"),
    _r("force-unlock", "breaks a state lock"),
    _r("taint", "forces resources to be replaced"),
    _r("untaint", "changes the state"),
    _r("workspace delete", "deletes a workspace"),
    _r("apply-all", "applies infrastructure changes"),
    _r("destroy-all", "destroys infrastructure"),
    _r("test", "applies and destroys the run blocks' infrastructure"),
    _r("refresh", "writes the refreshed state (apply -refresh-only -auto-approve)"),
    _r("init", "copies the state into another backend", "-migrate-state -force-copy"),
    _r("workspace new", "creates a workspace in the backend"),
    _r("workspace select", "creates a workspace in the backend", "-or-create"),
)
_TF_READ = {"plan", "validate", "fmt", "show", "output", "version", "providers", "graph"}
_TF_READ |= {"get", "state list", "state show", "workspace list", "workspace show", "-version"}

_K8S_CHANGE = (
    *_each(
        "apply create delete replace patch edit scale drain cordon uncordon taint set "
        "label annotate run expose autoscale",
        "changes Kubernetes resources",
    ),
    _r("rollout restart", "restarts a rollout"),
    _r("rollout undo", "rolls a deployment back"),
    _r("rollout pause", "pauses a rollout"),
    _r("rollout resume", "resumes a rollout"),
    *_each("debug cp exec attach proxy port-forward", "runs or writes inside the cluster"),
    _r("auth reconcile", "writes RBAC rules"),
    _r("certificate approve", "approves a certificate"),
    _r("certificate deny", "denies a certificate"),
)
#: ``kubectl config`` commands that read the kubeconfig; every other one changes it.
_K8S_CONFIG_READS = ("view", "current-context", "get-*")
#: Context switchers (guarded when listed in ``guarded_programs``): what they switch, and
#: the options that only read.
_SWITCHERS = {
    "kubectx": "the kube context",
    "kubens": "the namespace of the current kube context",
}
_SWITCHER_READS = {"-c", "--current", "-h", "--help", "-V", "--version"}
_K8S_READ = {"get", "describe", "logs", "top", "explain", "version", "api-resources"}
_K8S_READ |= {"api-versions", "cluster-info", "diff", "auth", "events", "wait"}
#: Other kubectl commands; any word beyond these may be a plugin (``kubectl-<word>`` on
#: PATH, run with the user's credentials), so it is asked.
_K8S_KNOWN = _K8S_READ | set(
    "config completion plugin kustomize convert options help alpha rollout certificate "
    "apply create delete replace patch edit scale drain cordon uncordon taint set label "
    "annotate run expose autoscale debug cp exec attach proxy port-forward".split()
)

#: Local changes to the user's own CLI configuration outside the workspace: what every
#: later command (the user's own terminals too) targets or pulls from.
_KUBECONFIG = (
    "changes the kubeconfig (the context, cluster or credentials every later command uses)"
)
_REPOS = "changes the chart repositories every later helm command pulls from"
_REGISTRY = "changes the registry credentials helm stores"
_HELM_CHANGE = (
    *_each("install upgrade uninstall un del delete rollback", "changes a Helm release"),
    _r("test", "runs the release's test pods"),
    _r("push", "pushes a chart to a registry"),
    _r("plugin install", "installs a plugin (runs its hooks)"),
    _r("plugin update", "updates a plugin (runs its hooks)"),
    *(_r(f"repo {verb}", _REPOS) for verb in ("add", "remove")),
    *(_r(f"registry {verb}", _REGISTRY) for verb in ("login", "logout")),
)
_HELM_READ = {"list", "ls", "status", "get", "history", "hist", "show", "inspect", "search"}
_HELM_READ |= {"template", "version", "lint", "env", "diff", "verify"}
#: Other helm commands; any other word may be a plugin (asked).
_HELM_KNOWN = _HELM_READ | set(
    "install upgrade uninstall rollback test push plugin repo dependency package pull "
    "create completion registry help history".split()
)

_PULUMI_CHANGE = (
    _r("up", "applies infrastructure changes"),
    _r("update", "applies infrastructure changes"),
    _r("destroy", "destroys infrastructure"),
    _r("refresh", "rewrites the state (its prompt is answered on any terminal: `script`)"),
    _r("import", "writes to the state"),
    _r("state delete", "removes resources from the state"),
    _r("state unprotect", "changes the state"),
    _r("state rename", "changes the state"),
    _r("state move", "changes the state"),
    _r("stack rm", "removes a stack"),
    _r("cancel", "cancels an update"),
    _r("watch", "deploys every change continuously"),
    _r("state edit", "edits the state"),
    _r("state repair", "rewrites the state"),
    _r("stack import", "overwrites the stack's state"),
    _r("deployment run", "runs a deployment (an update) in Pulumi Deployments"),
    _r("stack rename", "renames a stack in the backend"),
    _r("stack init", "creates a stack in the backend"),
    _r("stack select", "creates a stack in the backend", "-c --create"),
    _r("stack change-secrets-provider", "re-encrypts the stack's secrets"),
    _r("stack tag set", "changes the stack's tags"),
    _r("stack tag rm", "changes the stack's tags"),
    _r("state upgrade", "rewrites the state"),
    _r("policy publish", "publishes a policy pack"),
    _r("policy enable", "enables a policy pack"),
    _r("policy disable", "disables a policy pack"),
    _r("policy rm", "removes a policy pack"),
    *(_r(f"env {verb}", "changes a Pulumi ESC environment") for verb in ("set", "rm", "edit")),
    *(_r(f"env {verb}", "changes a Pulumi ESC environment") for verb in ("init", "rotate")),
    _r("env run", "runs a command with the Pulumi ESC environment's secrets"),
    _r("stack select", "changes the current stack (what every later pulumi command targets)"),
    _r("stack unselect", "changes the current stack (what every later pulumi command targets)"),
    _r("login", "changes the backend every later pulumi command uses, and its credentials"),
    _r("logout", "changes the backend every later pulumi command uses"),
    _r("org set-default", "changes the default organization of every later pulumi command"),
    _r("plugin install", "installs a plugin (code later commands run with your credentials)"),
    _r("plugin rm", "removes plugins"),
    _r("install", "installs the project's packages and plugins (their install scripts run)"),
    _r("new", "creates a project and a stack in the backend"),
)
#: pulumi groups whose every command but these reads changes something.
_PULUMI_GROUPS = {
    "state": ("changes the state", ()),
    "config": ("changes the stack's configuration", ("get",)),
    "env": ("changes a Pulumi ESC environment", ("ls", "get", "diff", "version", "tag")),
    "env version": ("changes a Pulumi ESC environment", ("history", "ls")),
    "env tag": ("changes a Pulumi ESC environment", ("ls", "get")),
}
#: pulumi commands that only preview with ``--preview-only``.
_PULUMI_PREVIEWS = ("refresh", "destroy", "import")
_PULUMI_READ = {"preview", "whoami", "version", "about", "logs", "stack ls", "stack output"}
_PULUMI_READ |= {"config get", "stack", "stack history", "stack graph", "config", "plugin ls"}

_GIT_READ = {"status", "diff", "log", "show", "ls-files", "rev-parse", "blame", "describe"}
_GIT_READ |= {"grep", "shortlog", "fetch", "remote", "branch", "tag", "ls-remote", "version"}
_GIT_READ |= {"reflog", "whatchanged", "cat-file", "ls-tree", "rev-list", "help"}
#: Dashed helpers git runs itself (``git-upload-pack`` for a fetch from a local path).
_GIT_READ |= {"upload-pack", "upload-archive", "index-pack", "unpack-objects"}
#: Git commands known to be builtins; any other word may be an alias hiding a push.
_GIT_BUILTINS = _GIT_READ | set(
    (
        "add am apply archive bisect bundle checkout cherry cherry-pick clean clone commit "
        "commit-tree config count-objects diff-files diff-index diff-tree difftool fast-export "
        "fast-import fetch-pack for-each-ref format-patch fsck gc hash-object init "
        "init-db instaweb interpret-trailers maintenance merge merge-base merge-file "
        "mergetool mktag mktree mv name-rev notes pack-objects pack-refs prune pull push "
        "range-diff read-tree rebase repack replace request-pull rerere reset restore revert "
        "rm send-email show-branch show-ref sparse-checkout stash submodule switch "
        "symbolic-ref update-index update-ref var verify-commit verify-pack verify-tag "
        "worktree write-tree lfs credential check-ignore check-attr column"
    ).split()
)
#: Git global options that take a value in the next argument.
_GIT_VALUE_OPTS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}
_GIT_FORCE_FLAGS = ("-f", "--force", "--force-with-lease", "--force-if-includes", "--delete")
_GIT_FORCE_FLAGS += ("-d", "--mirror", "--prune")

_TABLES: dict[str, tuple[tuple[Rule, ...], set[str] | tuple[str, ...]]] = {
    "terraform": (_TF_CHANGE, _TF_READ),
    "tofu": (_TF_CHANGE, _TF_READ),
    "terragrunt": (_TF_CHANGE, _TF_READ),
    "kubectl": (_K8S_CHANGE, _K8S_READ),
    "oc": (_K8S_CHANGE, _K8S_READ),
    "helm": (_HELM_CHANGE, _HELM_READ),
    **CLOUD_TABLES,
    "pulumi": (_PULUMI_CHANGE, _PULUMI_READ),
}


def classify(program: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Verdict:
    """Classify ``argv`` (``argv[0]`` is the program as invoked) of guarded ``program``;
    ``env`` is the program's environment (``TF_CLI_ARGS*``, ``PULUMI_SKIP_CONFIRMATIONS``)."""
    name = program_name(program)
    env = env or {}
    if name == "git":
        return _classify_git(git_argv(argv)[1:])
    args = [str(a) for a in argv[1:]]
    if name in _SWITCHERS:
        return _switcher(name, args)
    if name in ("terraform", "tofu", "terragrunt"):
        args = _tf_env_args(args, env)
    if name == "pulumi" and _truthy(env.get("PULUMI_SKIP_CONFIRMATIONS", "")):
        args.append("--yes")
    table = _TABLES.get(name)
    if table is None:
        return Verdict(OTHER)
    changes, reads = table
    positional = grammar.canonical(name, positionals(args))
    strict = aws_positionals(args) if name == "aws" else positional
    if name == "pulumi" and _preview_only(args, positional):
        return Verdict(READ)
    # kubectl, oc, helm: the argv as they parse it (option values left out, aliases).
    parsed = _parsed(name, args) if name in ("kubectl", "oc", "helm") else None
    words = grammar.canonical(name, parsed.words) if parsed is not None else []
    if name in ("kubectl", "oc"):
        local = _kubeconfig_change(name, words)
        if local:
            return Verdict(CHANGE, local)
    for rule in changes:
        if matches(rule, args, positional) or matches(rule, args, strict):
            if parsed is not None and grammar.dry_run(parsed, _DRY_VALUES):
                return Verdict(READ)
            return Verdict(CHANGE, f"{' '.join([name, *rule.words])}: {rule.reason}")
    for rule in PRINTS_CREDENTIALS.get(name, ()):
        if matches(rule, args, strict):
            said = _matched_words(rule.words, strict) if rule.words != ("*",) else None
            shown = " ".join([name, *(said or rule.flags[:1])])
            return Verdict(CHANGE, f"{shown}: {rule.reason}")
    if name in ("kubectl", "oc"):
        secret = k8s_secret_read(args, words)
        if secret:
            return Verdict(CHANGE, secret)
    if name == "pulumi":
        grouped = _pulumi_group(positional)
        if grouped:
            return Verdict(CHANGE, grouped)
    if parsed is not None:
        unknown = _k8s_unknown(name, words)
        if unknown:
            return Verdict(CHANGE, unknown, by_default=True)
    if name in CLOUD:
        return classify_cloud(name, args, tuple(reads))
    if not positional:
        return Verdict(READ) if any(a in reads for a in args) or not args else Verdict(OTHER)
    head = positional[0]
    two = " ".join(positional[:2])
    if two in reads or head in reads:
        return Verdict(READ)
    return Verdict(OTHER)


def _matched_words(words: Sequence[str], positional: Sequence[str]) -> list[str] | None:
    """The first consecutive items of ``positional`` that ``words`` (fnmatch patterns)
    match (``* list-keys`` -> ``redis list-keys``), or None."""
    n = len(words)
    for j in range(len(positional) - n + 1):
        if all(fnmatch.fnmatchcase(positional[j + k], w) for k, w in enumerate(words)):
            return list(positional[j : j + n])
    return None


def _tf_env_args(args: list[str], env: Mapping[str, str]) -> list[str]:
    """``args`` as terraform runs them: ``TF_CLI_ARGS`` after the subcommand (at the
    front when there is none), and every ``TF_CLI_ARGS_<sub>`` too (any could apply)."""
    extra: list[str] = []
    front: list[str] = []
    for key, value in sorted(env.items()):
        upper = key.upper()
        if not upper.startswith(("TF_CLI_ARGS", "TOFU_CLI_ARGS")) or not value.strip():
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        (front if upper in ("TF_CLI_ARGS", "TOFU_CLI_ARGS") else extra).extend(words)
    if not front and not extra:
        return args
    sub = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
    if sub is None:
        return [*front, *args, *extra]
    return [*args[: sub + 1], *front, *extra, *args[sub + 1 :]]


def _truthy(value: str) -> bool:
    """An environment flag that is set (anything but empty, 0, false, no, off)."""
    return value.strip().lower() not in ("", "0", "false", "no", "off", "f")


#: Dry-run values kubectl (strconv.ParseBool) and helm treat as a dry run: a bare
#: ``--dry-run`` or one of these as the program's own option (not an option's value, not
#: after ``--``); anything else (``none``, ``false``, ``0``, empty) is a real run.
_DRY_VALUES = {"client", "server", "true", "1", "t", "T", "TRUE", "True"}


def _parsed(name: str, args: list[str]) -> grammar.Parsed:
    if name == "helm":
        return grammar.parse(args, grammar.HELM_VALUE, grammar.HELM_BOOL)
    return grammar.parse(args, grammar.K8S_VALUE, grammar.K8S_BOOL)


def _kubeconfig_change(name: str, words: list[str]) -> str | None:
    """Why a ``kubectl config`` command changes the kubeconfig (``use-context``,
    ``set-context --current --namespace``, ``set-credentials``, ``set``, ``delete-*``,
    ``rename-context`` ...: every one but ``view``, ``current-context``, ``get-*``)."""
    if len(words) < 2 or words[0] != "config":
        return None
    if any(fnmatch.fnmatchcase(words[1], p) for p in _K8S_CONFIG_READS):
        return None
    return f"{name} config {words[1]}: {_KUBECONFIG}"


def _switcher(name: str, args: list[str]) -> Verdict:
    """kubectx/kubens: listing and ``-c`` read; any name, ``-``, ``-d`` or ``-u`` switches
    (or deletes) what every later command targets."""
    if all(a in _SWITCHER_READS for a in args):
        return Verdict(READ)
    shown = " ".join([name, *args[:2]])
    why = f"switches {_SWITCHERS[name]} (what every later command targets)"
    return Verdict(CHANGE, f"{shown}: {why}")


def _pulumi_group(positional: list[str]) -> str | None:
    """Why a command of a pulumi group that changes by default (``state``, ``config``,
    ``env``) is asked: any command of it that is not one of its reads."""
    for i in range(len(positional)):
        for group, (why, reads) in _PULUMI_GROUPS.items():
            size = len(group.split())
            if positional[i : i + size] != group.split() or len(positional) <= i + size:
                continue
            verb = positional[i + size]
            if verb in reads:
                continue
            return f"pulumi {group} {verb}: {why}"
    return None


def _preview_only(args: list[str], positional: list[str]) -> bool:
    """``--preview-only`` (true) on a pulumi command that then only previews."""
    if not any(w in _PULUMI_PREVIEWS for w in positional[:1]):
        return False
    seen = []
    for arg in args:
        if arg == "--":
            break
        if arg == "--preview-only" or arg.startswith("--preview-only="):
            seen.append(arg.partition("=")[2] or "true")
    return bool(seen) and all(v.lower() in ("true", "1", "t") for v in seen)


def _k8s_unknown(name: str, words: list[str]) -> str:
    """Why the command of a kubectl/helm argv (``words``: as it parses them) is asked when
    it is no known command (a plugin runs with the user's credentials); empty when it is
    known."""
    known = _HELM_KNOWN if name == "helm" else _K8S_KNOWN
    if not words or words[0] in known:
        return ""
    return f"{name} {words[0]}: not a known {name} command (a plugin would run)"


def git_argv(argv: Sequence[str]) -> list[str]:
    """A dashed git argv (``git-receive-pack X``) as ``git receive-pack X``."""
    words = [str(a) for a in argv]
    head = program_name(words[0]) if words else "git"
    if head.startswith("git-") and len(head) > 4:
        return ["git", head[4:], *words[1:]]
    return words


def _classify_git(args: list[str]) -> Verdict:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in _GIT_VALUE_OPTS and rest:
            value = rest.pop(0)
            if option == "-c" and _forcing_config(value):
                return Verdict(CHANGE, f"git -c {value}: configures a forced or mirror push")
        elif option.startswith("-c") and _forcing_config(option[2:]):
            return Verdict(CHANGE, f"git {option}: configures a forced or mirror push")
    if not rest:
        return Verdict(READ)
    command, tail = rest[0], rest[1:]
    if command == "push":
        positional = positionals(tail)
        forced = any(has_flag(tail, flag) for flag in _GIT_FORCE_FLAGS) or _abbreviated(tail)
        refs = positional[1:]
        if forced or any(r.startswith(("+", ":")) for r in refs):
            return Verdict(CHANGE, "git push: rewrites or deletes remote history")
        return Verdict(OTHER)
    if command == "credential":
        return Verdict(CHANGE, "git credential: prints stored credentials")
    if command == "receive-pack":
        return Verdict(CHANGE, "git receive-pack: updates the refs of a local repository")
    if command not in _GIT_BUILTINS:
        return Verdict(CHANGE, f"git {command}: not a git builtin (an alias may hide a push)")
    return Verdict(READ) if command in _GIT_READ else Verdict(OTHER)


def _abbreviated(args: Sequence[str]) -> bool:
    """A prefix of a forcing long option (``--force-w``, ``--mirr``): git takes any unique
    prefix of a long option (ambiguous ones are asked too)."""
    longs = [f[2:] for f in _GIT_FORCE_FLAGS if f.startswith("--")]
    for arg in args:
        if arg == "--":
            return False
        name = arg[2:].partition("=")[0]
        if arg.startswith("--") and name and any(f.startswith(name) for f in longs):
            return True
    return False


def _forcing_config(value: str) -> bool:
    key, _, setting = value.partition("=")
    key = key.lower()
    if key.startswith("alias."):
        return True
    return key.startswith("remote.") and (
        (key.endswith(".push") and setting.lstrip().startswith("+")) or key.endswith(".mirror")
    )
