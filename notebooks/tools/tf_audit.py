"""Audit a Terraform tree with python-hcl2: untagged resources, unpinned providers, open ingress.

Usage::

    python3 tools/tf_audit.py {tags,versions,ingress,all} PATH [--strict]

It parses every ``*.tf`` file under PATH (skipping ``.terraform``) and prints one finding per
line as ``file:line: message``, sorted, then a count. It exits 0 (findings are a report,
not a failure) unless ``--strict`` is given, then 1 when it found something (for CI); bad
input (missing path, unparsable file, no python-hcl2) exits 2.

The checks are static: ``tags`` looks for a ``tags`` argument (or ``tag`` blocks on auto
scaling groups) on AWS resource types that take tags; ``versions`` flags
``required_providers`` entries and registry module calls without a version constraint;
``ingress`` flags security group ingress open to ``0.0.0.0/0`` or ``::/0``. Egress open to
the world is common and reported by ``grep``, not here.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: AWS resource types that have no ``tags`` argument (they attach to a tagged parent).
UNTAGGABLE = frozenset(
    {
        "aws_iam_role_policy_attachment",
        "aws_lb_listener_certificate",
        "aws_route",
        "aws_route_table_association",
        "aws_s3_bucket_acl",
        "aws_s3_bucket_lifecycle_configuration",
        "aws_s3_bucket_ownership_controls",
        "aws_s3_bucket_policy",
        "aws_s3_bucket_public_access_block",
        "aws_s3_bucket_server_side_encryption_configuration",
        "aws_s3_bucket_versioning",
        "aws_security_group_rule",
        "aws_volume_attachment",
    }
)
WORLD = ("0.0.0.0/0", "::/0")
SKIP_DIRS = {".terraform", ".terragrunt-cache", ".git"}


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class AuditError(Exception):
    """Bad input: the message is printed and the exit code is 2."""


def tf_files(root: Path) -> list[Path]:
    if not root.exists():
        raise AuditError(f"no such file or directory: {root}")
    if root.is_file():
        return [root]
    return sorted(
        p for p in root.rglob("*.tf") if not SKIP_DIRS.intersection(p.relative_to(root).parts)
    )


def parse(path: Path) -> dict[str, Any]:
    try:
        import hcl2
        from hcl2.utils import SerializationOptions
    except ImportError:
        raise AuditError("python-hcl2 is not installed: pip install python-hcl2") from None
    options = SerializationOptions(strip_string_quotes=True, with_comments=False)
    try:
        with path.open() as fh:
            return hcl2.load(fh, serialization_options=options)
    except Exception as exc:  # hcl2 raises lark errors of many kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuditError(f"{path}: cannot parse: {first}") from None


def line_of(text: str, pattern: str) -> int:
    """1-based line of the first match of ``pattern`` in ``text`` (1 when not found)."""
    match = re.search(pattern, text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def blocks(doc: dict[str, Any], kind: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(type, name, body)`` of every ``resource``/``data`` block of a parsed file."""
    found = []
    for entry in doc.get(kind, []):
        for rtype, named in entry.items():
            for name, body in named.items():
                if isinstance(body, dict):
                    found.append((rtype, name, body))
    return found


def has_tags(rtype: str, body: dict[str, Any]) -> bool:
    if "tags" in body:
        return True
    if rtype == "aws_autoscaling_group":
        if "tag" in body:
            return True
        return any("tag" in d for d in body.get("dynamic", []) if isinstance(d, dict))
    return False


def check_tags(rel: str, text: str, doc: dict[str, Any]) -> list[Finding]:
    findings = []
    for rtype, name, body in blocks(doc, "resource"):
        if not rtype.startswith("aws_") or rtype in UNTAGGABLE or has_tags(rtype, body):
            continue
        line = line_of(text, rf'^[ \t]*resource\s+"{rtype}"\s+"{name}"')
        findings.append(Finding(rel, line, f"{rtype}.{name} has no tags"))
    return findings


def check_versions(rel: str, text: str, doc: dict[str, Any]) -> list[Finding]:
    findings = []
    for terraform in doc.get("terraform", []):
        for required in terraform.get("required_providers", []):
            for local_name, spec in required.items():
                if not isinstance(spec, dict) or spec.get("version"):
                    continue
                line = line_of(text, rf"^[ \t]*{re.escape(local_name)}\s*=\s*\{{")
                source = spec.get("source", local_name)
                message = f"provider {local_name} ({source}) has no version constraint"
                findings.append(Finding(rel, line, message))
    for entry in doc.get("module", []):
        for name, body in entry.items():
            source = str(body.get("source", ""))
            local = source.startswith(("./", "../"))
            pinned_ref = "?ref=" in source
            if local or pinned_ref or body.get("version"):
                continue
            line = line_of(text, rf'^[ \t]*module\s+"{re.escape(name)}"')
            findings.append(Finding(rel, line, f'module {name} ("{source}") has no version'))
    return findings


def world_ingress_lines(text: str, rtype: str, name: str) -> list[int]:
    """Lines inside resource ``rtype.name`` that open an ingress to the world, in order."""
    start = line_of(text, rf'^[ \t]*resource\s+"{rtype}"\s+"{name}"')
    lines = text.splitlines()
    found, block = [], "ingress" if rtype != "aws_security_group" else ""
    for number in range(start, len(lines) + 1):
        line = lines[number - 1]
        if number > start and re.match(r"^(resource|data|module)\s", line):
            break
        opener = re.match(r"^[ \t]*(ingress|egress)\s*\{", line)
        if opener:
            block = opener.group(1)
        if block == "ingress" and any(f'"{cidr}"' in line for cidr in WORLD):
            found.append(number)
    return found


def check_ingress(rel: str, text: str, doc: dict[str, Any]) -> list[Finding]:
    findings = []
    for rtype, name, body in blocks(doc, "resource"):
        open_lines = world_ingress_lines(text, rtype, name)
        rules: list[dict[str, Any]] = []
        if rtype == "aws_security_group":
            rules = [r for r in body.get("ingress", []) if isinstance(r, dict)]
        elif rtype == "aws_security_group_rule" and body.get("type") == "ingress":
            rules = [body]
        elif rtype == "aws_vpc_security_group_ingress_rule":
            rules = [{**body, "cidr_blocks": [body.get("cidr_ipv4", "")]}]
        for rule in rules:
            cidrs = [*rule.get("cidr_blocks", []), *rule.get("ipv6_cidr_blocks", [])]
            world = [c for c in cidrs if c in WORLD]
            if not world:
                continue
            ports = f"{rule.get('from_port')}-{rule.get('to_port')}"
            if rule.get("from_port") == rule.get("to_port"):
                ports = str(rule.get("from_port"))
            fallback = line_of(text, rf'^[ \t]*resource\s+"{rtype}"\s+"{name}"')
            line = open_lines.pop(0) if open_lines else fallback
            message = (
                f"{rtype}.{name} allows {rule.get('protocol', '?')}/{ports} from {', '.join(world)}"
            )
            if rule.get("description"):
                message += f' ("{rule["description"]}")'
            findings.append(Finding(rel, line, message))
    return findings


CHECKS = {"tags": check_tags, "versions": check_versions, "ingress": check_ingress}


def audit(root: Path, names: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    base = root if root.is_dir() else root.parent
    for path in tf_files(root):
        text = path.read_text()
        doc = parse(path)
        rel = str(path.relative_to(base))
        for name in names:
            findings += CHECKS[name](rel, text, doc)
    return sorted(findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=[*CHECKS, "all"])
    parser.add_argument("path", type=Path)
    parser.add_argument("--strict", action="store_true", help="exit 1 when there are findings")
    args = parser.parse_args(argv)
    names = list(CHECKS) if args.check == "all" else [args.check]
    try:
        findings = audit(args.path, names)
    except AuditError as exc:
        print(f"tf_audit: {exc}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s) ({', '.join(names)}) in {args.path}")
    return 1 if findings and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
