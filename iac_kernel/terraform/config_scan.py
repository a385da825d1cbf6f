"""What a workspace's configuration says about sensitive values.

* variables declared ``sensitive = true`` (in ``*.tf`` and ``*.tf.json``) and their
  defaults; the values ``*.tfvars`` / ``*.tfvars.json`` anywhere in the workspace and
  ``TF_VAR_*`` give them (a var file is often in another folder: ``-var-file=envs/x``);
* backend state files: a ``backend "local" { path = ... }`` block, and the backend
  configuration terraform keeps in ``.terraform/terraform.tfstate`` (its ``path``, and
  its backend's secret settings: :mod:`.backends`);
* the secret settings a ``terraform`` block gives its ``backend``, ``cloud`` and
  OpenTofu ``encryption`` blocks, and ``TF_ENCRYPTION``'s.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iac_kernel.terraform import backends
from iac_kernel.terraform.backends import bodies
from iac_kernel.terraform.commands import flag_values
from iac_kernel.terraform.sensitive import keep, leaves

log = logging.getLogger(__name__)
#: A ``.tf`` file worth parsing (most declare nothing of interest and parsing is slow).
_WORTH_PARSING = re.compile(r'sensitive|backend|encryption|\bcloud"?\s*[{:]')


def unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value[1:-1]
    if isinstance(value, dict):
        return {k.strip('"'): unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unquote(v) for v in value]
    return value


def parse_text(text: str, json_syntax: bool = False) -> Any:
    """HCL (python-hcl2's shape, quotes taken off) or JSON syntax, or None when it is
    neither (skipped, not fatal: terraform refuses it too)."""
    try:
        if json_syntax:
            return json.loads(text)
        import hcl2

        return unquote(hcl2.loads(text))
    except Exception:
        log.debug("cannot parse %r", text[:80])
        return None


def parse(path: Path) -> Any:
    """A ``.tf`` / ``.tf.json`` / ``.tfvars`` / ``.tfvars.json`` file, or None."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return parse_text(text, path.name.endswith(".json"))


def given_leaves(text: str) -> list[str]:
    """The scalars of a value given on a command line (``-var``, ``TF_VAR_``): the text
    itself, and for an HCL value (a list, map or object variable: ``["a", "b"]``) each of
    its elements, which terraform prints one by one."""
    found = [text]
    if text.lstrip().startswith(("[", "{")):  # not HCL: terraform prints the text, found
        doc = parse_text(f"v = {text}\n")
        found += leaves(doc.get("v")) if isinstance(doc, dict) else []
    return found


def var_file_values(path: Path, names: set[str] | frozenset[str]) -> list[str]:
    """What the var file at ``path`` gives to the ``names`` variables."""
    doc = parse(path)
    if not isinstance(doc, dict):
        return []
    return [leaf for name in names if name in doc for leaf in leaves(doc[name])]


def declared(doc: Any) -> tuple[set[str], list[str]]:
    """Names of the variables ``doc`` declares sensitive, and their defaults' leaves."""
    names: set[str] = set()
    found: list[str] = []
    for block in bodies(doc.get("variable") if isinstance(doc, dict) else None):
        for name, body in block.items():
            if isinstance(body, list) and body:  # JSON syntax allows a list of bodies
                body = body[0]
            if isinstance(body, dict) and body.get("sensitive") in (True, "true"):
                names.add(name)
                found += leaves(body.get("default"))
    return names, found


def backend_paths(doc: Any, directory: Path) -> list[Path]:
    """State files a ``backend "local"`` block of ``doc`` names."""
    paths: list[Path] = []
    for block in bodies(doc.get("terraform") if isinstance(doc, dict) else None):
        for backend in bodies(block.get("backend")):
            for kind, body in backend.items():
                if isinstance(body, list) and body:
                    body = body[0]
                if kind == "local" and isinstance(body, dict) and isinstance(body.get("path"), str):
                    paths.append(directory / body["path"])
    return paths


def backend_cache(path: Path) -> tuple[list[Path], list[str]]:
    """``.terraform/terraform.tfstate``: the state file its backend names, and the values
    of its secret-named settings."""
    try:
        doc = json.loads(path.read_text(errors="replace") or "{}")
    except (OSError, ValueError):
        return [], []
    backend = doc.get("backend") if isinstance(doc, dict) else None
    config = backend.get("config") if isinstance(backend, dict) else None
    if not isinstance(config, dict):
        return [], []
    states: list[Path] = []
    if isinstance(config.get("path"), str):
        states.append(path.parent.parent / config["path"])
    kind = backend.get("type") if isinstance(backend.get("type"), str) else ""
    return states, backends.secret_values(config, kind)


def config_values(
    tf_files: list[Path], var_files: list[Path]
) -> tuple[set[str], list[Path], set[str]]:
    """Sensitive values the configuration gives, the backend state files it names, and
    the names of the variables declared sensitive."""
    names: set[str] = set()
    found: list[str] = []
    states: list[Path] = []
    for path in tf_files:
        if path.name.endswith(".tf"):
            try:  # parsing is slow; most files declare nothing of interest
                head = path.read_text(errors="replace")
            except OSError:
                continue
            if not _WORTH_PARSING.search(head):
                continue
        doc = parse(path)
        more, defaults = declared(doc)
        names |= more
        found += defaults + backends.terraform_block_values(doc)
        states += backend_paths(doc, path.parent)
    if names:
        for path in var_files:
            found += var_file_values(path, names)
        for name in names:
            if f"TF_VAR_{name}" in os.environ:
                found.append(os.environ[f"TF_VAR_{name}"])
    found += encryption_env_values(os.environ)
    return keep(found), states, names


def exec_given_secrets(words: list[str], env: Mapping[str, str]) -> list[str]:
    """Secrets a terraform/tofu command line gives outside any file: ``-backend-config``
    ``KEY=VALUE`` words setting a backend's secret setting, and ``TF_ENCRYPTION``'s."""
    found: list[str] = []
    for config in flag_values(words, "backend-config"):
        name, eq, value = config.partition("=")
        if eq and backends.is_secret_setting(name.strip().strip('"')):
            found += given_leaves(value)
    return found + encryption_env_values(env)


def encryption_env_values(env: Mapping[str, str]) -> list[str]:
    """The secret values of OpenTofu's ``TF_ENCRYPTION`` (an ``encryption`` block's body,
    HCL or JSON)."""
    text = env.get("TF_ENCRYPTION", "")
    if not text.strip():
        return []
    return backends.encryption_values(parse_text(text, text.lstrip().startswith("{")))
