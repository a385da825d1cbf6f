"""The vocabulary of the guard's rules, and argv as each program reads it.

A :class:`Verdict` says what one exec gets; a :class:`Rule` matches words among an
argv's positionals (and flags). The parsers say which options take a value, where
``--`` ends the options, which word is the command, and which words are aliases of
others. The rules in :mod:`.rules` ask on any changing verb among the positionals (erring
towards asking); what this module decides errs the same way: a word counts as the
program's own flag (``--dry-run``) or as a read verb only when the program would read
it so. An option we do not know may take a value, so the word after it never counts.
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
#: Exec-time only: the program never runs and the reason goes to the launcher (refuse),
#: or it is answered as if it had run, with exit status 0 (skip).
REFUSE = "refuse"
SKIP = "skip"


@dataclass(frozen=True)
class Verdict:
    """What an argv does, or gets: ``kind`` is change (asked), read or other (run
    unasked), refuse or skip; ``reason`` says why."""

    kind: str
    reason: str = ""
    #: Changing only because the verb is not a known read (cloud CLIs ask by default).
    by_default: bool = False

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


def rule(words: str, reason: str, flags: str = "") -> Rule:
    return Rule(tuple(words.split()), reason, tuple(flags.split()))


def each_verb(verbs: str, reason: str) -> tuple[Rule, ...]:
    """One single-word rule per verb in ``verbs``."""
    return tuple(Rule((verb,), reason) for verb in verbs.split())


def program_name(path: str) -> str:
    """The program a path names: ``/usr/local/bin/terraform`` -> ``terraform``."""
    return os.path.basename(path.rstrip("/"))


def positionals(args: Sequence[str]) -> list[str]:
    """The arguments that are not options (``-x``, ``--x=y``)."""
    return [a for a in args if not a.startswith("-")]


def matches(rule: Rule, args: Sequence[str], positional: Sequence[str] | None = None) -> bool:
    """True when ``rule`` matches ``args`` (see :class:`Rule`)."""
    if positional is None:
        positional = positionals(args)
    if rule.words and not has_words(rule.words, positional):
        return False
    return not rule.flags or any(has_flag(args, flag) for flag in rule.flags)


def has_words(words: Sequence[str], positional: Sequence[str]) -> bool:
    """``words`` (fnmatch patterns) match consecutive items of ``positional``."""
    n = len(words)
    return any(
        all(fnmatch.fnmatchcase(positional[j + k], w) for k, w in enumerate(words))
        for j in range(len(positional) - n + 1)
    )


def has_flag(args: Sequence[str], flag: str) -> bool:
    """``flag`` is present: exactly, as ``--flag=value``, or inside a short cluster (``-rf``)."""
    letter = flag[1] if len(flag) == 2 and flag[0] == "-" and flag[1] != "-" else None
    # Go's flag package (terraform): `-long` is also `--long`, and `-long=value`.
    forms = (flag, "-" + flag) if len(flag) > 2 and flag[1] != "-" else (flag,)
    for arg in args:
        if arg == "--":
            return False
        if arg in forms or (len(flag) > 2 and any(arg.startswith(f + "=") for f in forms)):
            return True
        if letter and re.fullmatch(r"-[a-zA-Z]+", arg) and letter in arg[1:]:
            return True
    return False


#: Options of kubectl (and oc) that take the next word as their value.
K8S_VALUE = set(
    (
        "-f --filename -n --namespace -l --selector -o --output -c --container --context "
        "--cluster --user --kubeconfig -s --server --token --as --as-group --as-uid "
        "--field-manager --field-selector --image --type --port --replicas --timeout "
        "--grace-period -p --patch --patch-file -k --kustomize --template --sort-by "
        "--from-literal --from-file --from-env-file --env --labels --overrides --restart "
        "--cascade --request-timeout --certificate-authority --client-key "
        "--client-certificate --tls-server-name --cache-dir --log-file -v --v "
        "--prune-allowlist --subresource --for --chunk-size --password --username "
        "--resource-version --since --since-time --tail --max-log-requests --local-port "
        "--address --pod-running-timeout --target --profile --session-affinity "
        "--external-ip --name --protocol --target-port --cpu-percent --min --max "
        "--helm-command --helm-api-versions --helm-kube-version --load-restrictor --mount "
        "--network-name"
    ).split()
)
#: kubectl options that take no value.
K8S_BOOL = set(
    (
        "-A --all-namespaces --all -R --recursive --overwrite --wait --prune --force "
        "--server-side --force-conflicts --record --validate -w --watch -i --stdin -t --tty "
        "-q --quiet --show-labels --no-headers --ignore-not-found --local --raw --minify "
        "--flatten --insecure-skip-tls-verify --rm --attach --now --dry-run --keep-going "
        "--enable-alpha-plugins --enable-exec --enable-helm --enable-managedby-label "
        "--as-current-user --network --reorder --current"
    ).split()
)
HELM_VALUE = set(
    (
        "-n --namespace -f --values --set --set-string --set-file --set-json --set-literal "
        "--version --kube-context --kubeconfig --description --timeout --repo --username "
        "--password --post-renderer --post-renderer-args -o --output --name-template "
        "--registry-config --repository-cache --repository-config --ca-file --cert-file "
        "--key-file --history-max --max --kube-apiserver --kube-as-user --kube-as-group "
        "--kube-token --kube-ca-file --burst-limit --qps --keyring -l --labels "
        "--show-only -s --api-versions --kube-version --release-name --output-dir"
    ).split()
)
HELM_BOOL = set(
    (
        "--install -i --atomic --wait --wait-for-jobs --force --debug --create-namespace "
        "--reuse-values --reset-values --reset-then-reuse-values --dependency-update "
        "--no-hooks --skip-crds --devel --cleanup-on-fail --disable-openapi-validation "
        "--render-subchart-notes -g --generate-name --keep-history --verify --dry-run "
        "--insecure-skip-tls-verify --plain-http --pass-credentials --enable-dns -a --all "
        "--include-crds --skip-tests --validate --take-ownership --rollback-on-failure"
    ).split()
)

#: Aliases of each program's commands, by command path.
ALIASES: dict[str, dict[tuple[str, ...], tuple[str, ...]]] = {
    "pulumi": {
        ("down",): ("destroy",),
        ("dn",): ("destroy",),
        ("update",): ("up",),
        ("pre",): ("preview",),
        ("stack", "remove"): ("stack", "rm"),
        ("stack", "list"): ("stack", "ls"),
    },
    "helm": {
        ("un",): ("uninstall",),
        ("del",): ("uninstall",),
        ("delete",): ("uninstall",),
        ("ls",): ("list",),
        ("hist",): ("history",),
        ("inspect",): ("show",),
        ("fetch",): ("pull",),
        ("dep",): ("dependency",),
        ("dependencies",): ("dependency",),
        ("repo", "rm"): ("repo", "remove"),
    },
}


@dataclass
class Parsed:
    """One argv (without argv[0]) as the program reads it."""

    #: Positionals before ``--`` (option values left out).
    words: list[str]
    #: Options that are surely options (not the value of one, not after ``--``).
    options: list[str]
    #: Everything after ``--`` (the program passes it on: a command, its arguments).
    rest: list[str]


def parse(args: Sequence[str], values: set[str], bools: set[str]) -> Parsed:
    """Split ``args`` with options ``values`` taking a value and ``bools`` none; any other
    option may take a value, so the word after it is neither an option nor a word."""
    words: list[str] = []
    options: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            return Parsed(words, options, list(args[i + 1 :]))
        if arg.startswith("-") and arg != "-":
            options.append(arg)
            name = arg.partition("=")[0]
            if "=" in arg or name in bools or _attached(arg, values):
                continue
            skip = True  # a value option, or one we do not know: the next word is its
        else:
            words.append(arg)
    return Parsed(words, options, [])


def _attached(arg: str, values: set[str]) -> bool:
    """``-nprod``: a short value option with its value attached."""
    return len(arg) > 2 and arg[1] != "-" and arg[:2] in values


def dry_run(parsed: Parsed, dry_values: set[str]) -> bool:
    """``--dry-run`` among the program's own options, every form of it a dry value."""
    seen = [a for a in parsed.options if a == "--dry-run" or a.startswith("--dry-run=")]
    return bool(seen) and all(
        a == "--dry-run" or a[len("--dry-run=") :] in dry_values for a in seen
    )


def canonical(program: str, words: list[str]) -> list[str]:
    """``words`` with an aliased command path replaced by the command it stands for."""
    for path, target in ALIASES.get(program, {}).items():
        if tuple(words[: len(path)]) == path:
            return [*target, *words[len(path) :]]
    return words


#: gcloud/gsutil words that are commands, never a group before a read verb.
_GCLOUD_ACTIONS = set(
    (
        "cp mv rsync submit run ssh scp execute call send apply attach detach enable disable "
        "login activate-service-account revoke configure init install copy move sign import "
        "export deploy create delete update patch set add remove reset start stop restart "
        "resume suspend resize rollback promote cancel upload download compose rewrite "
        "restore clone backup failover approve reject publish invoke submit-training "
        "ingest write tail connect proxy"
    ).split()
)
_WORD = re.compile(r"[a-z][a-z0-9-]*")


def command_path(words: list[str], reads: Sequence[str]) -> list[str]:
    """gcloud's (and az's) groups and read verb (``functions describe``): the first read
    verb of the command path, when every word before it is a group (a plain lowercase
    word, not itself a command). Empty when the command path holds no read verb
    (``gcloud storage rsync list gs://b``: ``rsync`` is the command, ``list`` its
    operand)."""
    for i, word in enumerate(words[:5]):
        if any(fnmatch.fnmatchcase(word, pattern) for pattern in reads):
            return words[: i + 1] if i > 0 or len(words) == 1 else []
        if not _WORD.fullmatch(word):
            return []
        if i == 0 and len(words) > 1:  # the top level holds groups (`run`, `deploy`)
            continue
        if word in _GCLOUD_ACTIONS or word.startswith(("set-", "add-", "remove-", "update-")):
            return []
    return []


def leading_words(words: list[str], limit: int = 5) -> list[str]:
    """The plain lowercase words a command path starts with (groups and a command)."""
    out: list[str] = []
    for word in words[:limit]:
        if not _WORD.fullmatch(word):
            break
        out.append(word)
    return out


#: gsutil commands whose first word is a sub-command (``acl get``, ``iam ch``).
GSUTIL_GROUPS = set(
    (
        "acl defacl iam label lifecycle cors logging versioning web retention notification "
        "kms ubla pap rpo autoclass bucketpolicyonly defstorageclass requesterpays hmac"
    ).split()
)
GSUTIL_READS = {"ls", "cat", "du", "stat", "hash", "version", "help", "list"}


def gsutil_read(words: list[str]) -> bool:
    """gsutil reads only with a read command, or ``get``/``list`` of a settings group."""
    if not words:
        return True
    if words[0] in GSUTIL_GROUPS:
        return words[1:2] in (["get"], ["list"])
    return words[0] in GSUTIL_READS
