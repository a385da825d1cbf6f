"""Rules of the cloud CLIs (aws, gcloud, gsutil, az): a verb that is not a known read
is asked by default, so an unlisted changing verb never runs unasked; a read whose name
says it returns a credential is asked too (:func:`.secret_reads.cloud_credential_read`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from iac_kernel.guard.policy import grammar
from iac_kernel.guard.policy.grammar import CHANGE, OTHER, READ, Rule, Verdict
from iac_kernel.guard.policy.grammar import each_verb as _each
from iac_kernel.guard.policy.grammar import rule as _r
from iac_kernel.guard.policy.secret_reads import cloud_credential_read

_AWS_CHANGE = (
    *_each(
        "delete-* terminate-* put-* modify-* update-* create-* deregister-* remove-* "
        "detach-* disassociate-* stop-* reboot-* run-instances restore-* reset-* revoke-* "
        "attach-* authorize-* start-* send-* associate-* schedule-* disable-* enable-* "
        "set-* execute-* invoke purge-* import-* register-* replace-* tag-* untag-*",
        "changes AWS resources",
    ),
    _r("s3 rm", "deletes S3 objects"),
    _r("s3 mv", "moves S3 objects"),
    _r("s3 rb", "deletes an S3 bucket"),
    _r("s3 sync", "deletes S3 objects", "--delete"),
    _r("s3 sync", "overwrites S3 objects"),
    _r("s3 cp", "writes S3 objects"),
    _r("s3 mb", "creates an S3 bucket"),
    _r("cloudformation deploy", "deploys a CloudFormation stack"),
)
_AWS_READ_PATTERNS = ("describe-*", "list-*", "get-*", "batch-get-*", "search-*", "lookup-*")
_AWS_READ_PATTERNS += ("filter-*", "head-*", "validate-*", "simulate-*", "scan", "query")
_AWS_READ_PATTERNS += ("wait", "tail", "ls", "presign", "help")
#: aws global options that take a value (the next argument when not ``--opt=value``).
_AWS_VALUE_OPTS = {"--region", "--profile", "--output", "--endpoint-url", "--query"}
_AWS_VALUE_OPTS |= {"--color", "--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout"}
_AWS_VALUE_OPTS |= {"--cli-binary-format"}

_GCLOUD_CHANGE = _each(
    "delete create update update-* deploy rm set-* add-* remove-* resize stop reset patch "
    "import start ssh scp suspend resume restart",
    "changes Google Cloud resources",
)
_GCLOUD_READ_PATTERNS = ("list", "describe", "info", "version", "ls", "get-*", "cat", "du")
_GCLOUD_READ_PATTERNS += ("list-*", "describe-*", "help", "stat", "hash", "print-*", "get")
_GSUTIL_VALUE_OPTS = {"-o", "-h", "-u", "-i"}
_GSUTIL_CHANGE = (
    *_each("rm rb mv setmeta", "changes Cloud Storage objects"),
    _r("rsync", "deletes Cloud Storage objects", "-d"),
    _r("acl ch", "changes an ACL"),
    _r("acl set", "changes an ACL"),
    _r("iam ch", "changes IAM"),
)

_AZ_CHANGE = _each(
    "delete create update *delete-batch set remove start stop restart deallocate purge "
    "invoke scale upgrade swap regenerate* upload* import reset* rotate* assign",
    "changes Azure resources",
)
_AZ_READ_PATTERNS = ("list", "show", "version", "list-*", "show-*", "wait", "exists")
_AZ_READ_PATTERNS += ("get-*", "check-*", "download*")

#: program -> (changing rules, read patterns).
CLOUD_TABLES: dict[str, tuple[tuple[Rule, ...], tuple[str, ...]]] = {
    "aws": (_AWS_CHANGE, _AWS_READ_PATTERNS),
    "gcloud": (_GCLOUD_CHANGE, _GCLOUD_READ_PATTERNS),
    "gsutil": (_GSUTIL_CHANGE, _GCLOUD_READ_PATTERNS),
    "az": (_AZ_CHANGE, _AZ_READ_PATTERNS),
}

CLOUD = ("aws", "gcloud", "gsutil", "az")


def classify_cloud(name: str, args: list[str], reads: tuple[str, ...]) -> Verdict:
    """Cloud CLIs: read only for a known read verb whose name says no credential comes
    back; any other verb is asked."""
    path: list[str] = []
    if name == "aws":
        words = aws_positionals(args)
        if len(words) < 2:  # `aws --version`, `aws s3`: usage or version only
            return Verdict(READ if not words else OTHER)
        verbs = words[1:2]
        path = words[:2]
    elif name == "gsutil":  # gsutil [-m -o x ...] command args: the command is first
        words = aws_positionals(args, _GSUTIL_VALUE_OPTS)
        if grammar.gsutil_read(words):
            return Verdict(READ)
        verbs = []
    else:  # gcloud and az: GROUP... COMMAND, the verb is read from the command path
        words = _without_option_values(args)
        if not words:
            return Verdict(READ)
        path = grammar.command_path(words, reads)
        verbs = path[-1:]
    if name != "gsutil" and not path:  # no read verb: asked anyway, the reason may say why
        path = grammar.leading_words(words)
    credential = cloud_credential_read(name, path)
    if credential:
        return Verdict(CHANGE, credential)
    if any(fnmatch.fnmatchcase(v, pat) for v in verbs for pat in reads):
        return Verdict(READ)
    shown = " ".join([name, *words[:3]])
    return Verdict(CHANGE, f"{shown}: not a known read-only {name} command", by_default=True)


def aws_positionals(args: Sequence[str], value_opts: set[str] | None = None) -> list[str]:
    """aws's service and operation words: positionals minus global options' values."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in (_AWS_VALUE_OPTS if value_opts is None else value_opts):
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words


def _without_option_values(args: Sequence[str]) -> list[str]:
    """Positionals when every option without ``=`` takes the next word as its value
    (errs towards fewer read words: a read verb hidden as a value is asked)."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = "=" not in arg and arg != "--"
        else:
            words.append(arg)
    return words
