"""Per-program rules: is this exact argv a changing, read-only or other command?

The rules read the argv a program actually receives (after every shell expansion), so
they are exact where the text check in ``tools/danger.py`` can only guess. They err on
the side of asking: a changing verb anywhere among the positional arguments counts.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

CHANGE = "change"
READ = "read"
OTHER = "other"

#: Guarded programs by default (the ``guarded_programs`` setting overrides it).
DEFAULT_PROGRAMS = (
    "terraform",
    "tofu",
    "terragrunt",
    "kubectl",
    "helm",
    "aws",
    "gcloud",
    "gsutil",
    "az",
    "pulumi",
    "git",
)


@dataclass(frozen=True)
class Verdict:
    """What an argv does: ``kind`` is change, read or other; ``reason`` says why."""

    kind: str
    reason: str = ""

    @property
    def changing(self) -> bool:
        return self.kind == CHANGE


@dataclass(frozen=True)
class Rule:
    """``words`` appear as consecutive positional arguments (fnmatch patterns), and at
    least one of ``flags`` is present when ``flags`` is not empty."""

    words: tuple[str, ...]
    reason: str
    flags: tuple[str, ...] = ()


def _r(words: str, reason: str, flags: str = "") -> Rule:
    return Rule(tuple(words.split()), reason, tuple(flags.split()))


def _each(verbs: str, reason: str) -> tuple[Rule, ...]:
    """One single-word rule per verb in ``verbs``."""
    return tuple(Rule((verb,), reason) for verb in verbs.split())


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
    _r("certificate approve", "approves a certificate"),
    _r("certificate deny", "denies a certificate"),
)
_K8S_READ = {"get", "describe", "logs", "top", "explain", "version", "api-resources"}
_K8S_READ |= {"api-versions", "cluster-info", "diff", "auth", "events", "wait"}

_HELM_CHANGE = _each("install upgrade uninstall un del delete rollback", "changes a Helm release")
_HELM_READ = {"list", "ls", "status", "get", "history", "hist", "show", "inspect", "search"}
_HELM_READ |= {"template", "version", "lint", "env", "diff", "verify"}

_AWS_CHANGE = (
    *_each(
        "delete-* terminate-* put-* modify-* update-* create-* deregister-* remove-* "
        "detach-* disassociate-* stop-* reboot-* run-instances restore-* reset-* revoke-*",
        "changes AWS resources",
    ),
    _r("s3 rm", "deletes S3 objects"),
    _r("s3 mv", "moves S3 objects"),
    _r("s3 rb", "deletes an S3 bucket"),
    _r("s3 sync", "deletes S3 objects", "--delete"),
    _r("cloudformation deploy", "deploys a CloudFormation stack"),
)
_AWS_READ_PATTERNS = ("describe-*", "list-*", "get-*", "ls", "help")

_GCLOUD_CHANGE = _each(
    "delete create update deploy rm set-* add-* remove-* resize stop reset patch import",
    "changes Google Cloud resources",
)
_GCLOUD_READ_PATTERNS = ("list", "describe", "info", "version", "ls", "get-*", "cat", "du")
_GSUTIL_CHANGE = (
    *_each("rm rb mv setmeta", "changes Cloud Storage objects"),
    _r("rsync", "deletes Cloud Storage objects", "-d"),
    _r("acl ch", "changes an ACL"),
    _r("acl set", "changes an ACL"),
    _r("iam ch", "changes IAM"),
)

_AZ_CHANGE = _each(
    "delete create update *delete-batch set remove start stop restart deallocate purge",
    "changes Azure resources",
)
_AZ_READ_PATTERNS = ("list", "show", "version", "list-*", "show-*")

_PULUMI_CHANGE = (
    _r("up", "applies infrastructure changes"),
    _r("update", "applies infrastructure changes"),
    _r("destroy", "destroys infrastructure"),
    _r("refresh", "rewrites the state", "--yes -y --skip-preview"),
    _r("import", "writes to the state"),
    _r("state delete", "removes resources from the state"),
    _r("state unprotect", "changes the state"),
    _r("state rename", "changes the state"),
    _r("state move", "changes the state"),
    _r("stack rm", "removes a stack"),
    _r("cancel", "cancels an update"),
)
_PULUMI_READ = {"preview", "whoami", "version", "about", "logs", "stack ls", "stack output"}
_PULUMI_READ |= {"config get"}

_GIT_READ = {"status", "diff", "log", "show", "ls-files", "rev-parse", "blame", "describe"}
_GIT_READ |= {"grep", "shortlog", "fetch", "remote", "branch", "tag", "ls-remote", "version"}
_GIT_READ |= {"reflog", "whatchanged", "cat-file", "ls-tree", "rev-list", "help"}
#: Git commands known to be builtins; any other word may be an alias hiding a push.
_GIT_BUILTINS = _GIT_READ | set(
    (
        "add am apply archive bisect bundle checkout cherry cherry-pick clean clone commit "
        "config count-objects diff-files diff-index diff-tree difftool fast-export "
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
    "aws": (_AWS_CHANGE, _AWS_READ_PATTERNS),
    "gcloud": (_GCLOUD_CHANGE, _GCLOUD_READ_PATTERNS),
    "gsutil": (_GSUTIL_CHANGE, _GCLOUD_READ_PATTERNS),
    "az": (_AZ_CHANGE, _AZ_READ_PATTERNS),
    "pulumi": (_PULUMI_CHANGE, _PULUMI_READ),
}


def program_name(path: str) -> str:
    """The program a path names: ``/usr/local/bin/terraform`` -> ``terraform``."""
    return os.path.basename(path.rstrip("/"))


def classify(program: str, argv: Sequence[str]) -> Verdict:
    """Classify ``argv`` (``argv[0]`` is the program as invoked) of guarded ``program``."""
    name = program_name(program)
    args = [str(a) for a in argv[1:]]
    if name == "git":
        return _classify_git(args)
    table = _TABLES.get(name)
    if table is None:
        return Verdict(OTHER)
    changes, reads = table
    if name in ("kubectl", "oc", "helm") and _dry_run(args):
        return Verdict(READ)
    positional = positionals(args)
    for rule in changes:
        if matches(rule, args, positional):
            shown = " ".join([name, *rule.words])
            return Verdict(CHANGE, f"{shown}: {rule.reason}")
    if name in ("aws", "gcloud", "gsutil", "az"):
        if any(fnmatch.fnmatchcase(p, pat) for p in positional for pat in reads):
            return Verdict(READ)
        return Verdict(OTHER)
    if not positional:
        return Verdict(READ) if any(a in reads for a in args) or not args else Verdict(OTHER)
    head = positional[0]
    two = " ".join(positional[:2])
    if two in reads or head in reads:
        return Verdict(READ)
    return Verdict(OTHER)


def _dry_run(args: list[str]) -> bool:
    """``--dry-run`` / ``--dry-run=client|server|true`` (not ``=none``/``=false``)."""
    values = [a.partition("=")[2] for a in args if a == "--dry-run" or a.startswith("--dry-run=")]
    return bool(values) and all(v not in ("none", "false") for v in values)


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
        forced = any(has_flag(tail, flag) for flag in _GIT_FORCE_FLAGS)
        refs = positional[1:]
        if forced or any(r.startswith(("+", ":")) for r in refs):
            return Verdict(CHANGE, "git push: rewrites or deletes remote history")
        return Verdict(OTHER)
    if command not in _GIT_BUILTINS:
        return Verdict(CHANGE, f"git {command}: not a git builtin (an alias may hide a push)")
    return Verdict(READ) if command in _GIT_READ else Verdict(OTHER)


def _forcing_config(value: str) -> bool:
    key, _, setting = value.partition("=")
    key = key.lower()
    if key.startswith("alias."):
        return True
    return key.startswith("remote.") and (
        (key.endswith(".push") and setting.lstrip().startswith("+")) or key.endswith(".mirror")
    )


def positionals(args: Sequence[str]) -> list[str]:
    """The arguments that are not options (``-x``, ``--x=y``)."""
    return [a for a in args if not a.startswith("-")]


def matches(rule: Rule, args: Sequence[str], positional: Sequence[str] | None = None) -> bool:
    """True when ``rule`` matches ``args`` (see :class:`Rule`)."""
    if positional is None:
        positional = positionals(args)
    n = len(rule.words)
    if rule.words and not any(
        all(fnmatch.fnmatchcase(positional[j + k], w) for k, w in enumerate(rule.words))
        for j in range(len(positional) - n + 1)
    ):
        return False
    return not rule.flags or any(has_flag(args, flag) for flag in rule.flags)


def has_flag(args: Sequence[str], flag: str) -> bool:
    """``flag`` is present: exactly, as ``--flag=value``, or inside a short cluster (``-rf``)."""
    letter = flag[1] if len(flag) == 2 and flag[0] == "-" and flag[1] != "-" else None
    for arg in args:
        if arg == "--":
            return False
        if arg == flag or (flag.startswith("--") and arg.startswith(flag + "=")):
            return True
        if letter and re.fullmatch(r"-[a-zA-Z]+", arg) and letter in arg[1:]:
            return True
    return False
