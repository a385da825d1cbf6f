"""Terraform's sensitive values in what the tools read and the agent shows.

* **Files at their source**: the file tools and the shell see terraform's sensitive files
  only as masked copies (:mod:`iac_kernel.terraform.tffiles`); copies live in this
  process's guard folder, which every sandbox hides. The file tools never rewrite
  terraform's own files (a plan, a state) that hold such values.
* **Results** (:func:`after_tool_call`, once per call): sensitive values are masked
  (``(sensitive)``) in the text, raw output and diff: the workspace's known values
  (:mod:`iac_kernel.terraform.workspace`) and those of any state / plan / output JSON the
  result itself prints. A result that printed or read Terraform state or plan JSON (a
  ``.tfstate`` read, ``cat``, ``grep``, ``terraform show -json``, ``state pull``,
  ``output -json``) says so in its first line and in ``raw_output["terraform_state"]``:
  such a read is always visible on its card. Live output is masked as it streams
  (:func:`live_masker`).
* **Questions and call inputs** (:func:`mask_question`, :func:`mask_shown`): masked when
  they go out, with the values known *then*: a value a running bash call created (a
  state it wrote) is already masked in that call's exec-time question. Values passed to
  variables the configuration declares sensitive (``-var tok=...``, ``TF_VAR_tok``) are
  masked too: an expanded ``-var "tok=$(cat f)"`` shows no value.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iac_kernel.guard.sandbox.bwrap import process_dir
from iac_kernel.masking import shapes
from iac_kernel.redact import longest_secret, redact, redact_value
from iac_kernel.terraform import tffiles
from iac_kernel.terraform.commands import find_commands
from iac_kernel.terraform.sensitive import (
    MASK,
    StreamMasker,
    mask_text,
    mask_value,
    values_from_state,
    values_in_text,
)
from iac_kernel.terraform.workspace import (
    MaskedFiles,
    known_values,
    limit_note,
    remember,
    sensitive_names,
    sensitive_values,
)
from iac_kernel.tools.base import Tool, ToolError, ToolResult

STATE_SUFFIXES = (".tfstate", ".tfstate.backup")
STATE_MARKERS = ('"sensitive_attributes"', '"terraform_version"', '"prior_state"')
#: terraform subcommands whose output may carry sensitive values no file on disk holds
#: (remote state): their live output is held back and masked as a whole.
HOLD_SUBCOMMANDS = {"output", "show", "state", "console"}
#: Kinds that are terraform's own files: the file tools never rewrite them.
TERRAFORM_OWN = {"plan", "state", "backend"}
#: Shell text the shell has not expanded yet (``$(cat tok.txt)``, ``$TOKEN``): no value
#: (the exec-time question shows the expanded argv, masked).
UNEXPANDED = re.compile(r"\$[({A-Za-z_]|`")


# -- files at their source --------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _masked_files(out_dir: Path) -> MaskedFiles:
    return MaskedFiles(out_dir)


def masked_files() -> MaskedFiles:
    return _masked_files(process_dir() / "masked")


def readable(path: Path, cwd: Path) -> Path:
    """What a file tool reads for ``path``: its masked copy, or the file itself."""
    return masked_files().copy_for(path, Path(cwd)) or path


def mounts(cwd: Path, under: Path | None = None) -> list[tuple[Path, Path]]:
    """``(masked copy, original)`` for the sensitive terraform files under ``under``
    (default: ``cwd``), with what is known of the workspace at ``cwd``."""
    return masked_files().mounts(Path(cwd), under)


def refuse_rewrite(path: Path, cwd: Path, shown: str) -> None:
    """A ToolError when ``path`` is terraform's own file holding sensitive values (its
    diff would show them): change it with terraform instead."""
    if readable(path, cwd) == path:
        return
    try:
        found = tffiles.recognise(path.read_bytes())
    except OSError:
        return
    if found is not None and found.kind in TERRAFORM_OWN:
        raise ToolError(
            f"{shown} is terraform's {found.kind} file and holds sensitive values; "
            "change it with terraform (the file tools see it masked)"
        )


@contextlib.contextmanager
def rg_masking(root: Path, cwd: Path) -> Iterator[list[str]]:
    """ripgrep flags that make it search the masked copy of each sensitive terraform
    file under ``root`` in place of the file (``--pre``: a script that prints the copy),
    with its ignore rules, globs and path names unchanged."""
    found = mounts(cwd)
    root_real = Path(os.path.realpath(root))
    if not root_real.is_relative_to(Path(os.path.realpath(cwd))):
        found += mounts(root_real)
    found = [(c, o) for c, o in found if o == root_real or o.is_relative_to(root_real)]
    if not found:
        yield []
        return
    folder = Path(tempfile.mkdtemp(prefix="rgpre-", dir=process_dir()))
    try:
        lines = ["#!/bin/sh", 'p=$(realpath -- "$1" 2>/dev/null) || p=$1', 'case "$p" in']
        lines += [f"  {shlex.quote(str(o))}) exec cat -- {shlex.quote(str(c))};;" for c, o in found]
        lines += ["esac", 'exec cat -- "$1"', ""]
        script = folder / "pre"
        script.write_text("\n".join(lines))
        os.chmod(script, 0o700)
        flags = [f"--pre={script}"]
        for name in sorted({o.name for _, o in found}):
            flags.append("--pre-glob=" + re.sub(r"([*?\\[\]{}!])", r"\\\1", name))
        yield flags
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- results ---------------------------------------------------------------------------


def _all_values(cwd: Path, text: str, args: dict[str, Any]) -> set[str]:
    """The workspace's values, those printed in ``text``, and those of state files the
    call names (a state outside the working directory, or cut short in the output)."""
    found = set(sensitive_values(cwd)) | values_in_text(text)
    for path in _named_state_files(args, cwd):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            found |= values_from_state(json.loads(path.read_text(errors="replace") or "{}"))
    return found


def _named_state_files(args: dict[str, Any], cwd: Path) -> list[Path]:
    words = [str(args.get("path", ""))]
    command = args.get("command")
    if isinstance(command, str):
        words += command.replace(";", " ").replace("|", " ").replace("&", " ").split()
    names = [w.strip("'\"") for w in words if w.strip("'\"").endswith(STATE_SUFFIXES)]
    return [p for p in ((cwd / n) for n in names) if p.is_file()][:20]


def live_masker(args: dict[str, Any], cwd: Path) -> StreamMasker:
    """The masker for a call's live output (``Tool.prints_live``)."""
    command = str(args.get("command", "")) if isinstance(args, dict) else ""
    hold = "tfstate" in command or any(
        tf.subcommand in HOLD_SUBCOMMANDS for tf in find_commands(command)
    )

    def found(values: set[str]) -> None:  # the final, maybe cut, result masks them too
        remember(cwd, f"printed:{hash(frozenset(values))}", values)

    # The known values now, a fresh scan before each chunk goes out (in the pump's thread).
    return StreamMasker(
        known_values(cwd),
        hold_all=hold,
        on_found=found,
        refresh=lambda: sensitive_values(cwd),
        redact=redact,
        redact_hold=max(longest_secret(), shapes.HOLD),
    )


def mask_diff(diff: Any, cwd: Path) -> Any:
    """A file diff (``path``, ``old_text``, ``new_text``) with sensitive values masked."""
    if diff is None:
        return None
    values = sensitive_values(cwd)
    if not values:
        return diff
    old = diff.old_text
    return type(diff)(
        diff.path,
        mask_text(old, values) if old is not None else None,
        mask_text(diff.new_text, values),
    )


async def after_tool_call(tool: Tool, args: Any, cwd: Path, result: ToolResult) -> ToolResult:
    """The result as it may reach the model, front ends and the store (see module doc)."""
    args = args if isinstance(args, dict) else {}
    values = await asyncio.to_thread(_all_values, cwd, result.content, args)
    before = result.content
    result.content = mask_text(result.content, values)
    if result.masked_with is not None:  # redacted before: now these values too
        result.masked_with = result.masked_with | frozenset(values)
    named = str(args.get("path", "")).endswith(STATE_SUFFIXES) and tool.shows_contents
    if named or any(marker in before for marker in STATE_MARKERS):
        count = sum(before.count(v) for v in values)
        note = f"[Terraform state/plan data: {count} sensitive value(s) shown as {MASK}]"
        result.content = f"{note}\n{result.content}"
        raw = result.raw_output if isinstance(result.raw_output, dict) else {}
        result.raw_output = {**raw, "terraform_state": {"masked": count}}
    note = limit_note(cwd)
    if note and tool.shows_contents:
        result.content = f"{note}\n{result.content}"
    result.raw_output = mask_value(result.raw_output, values)
    result.plan_rows = mask_value(result.plan_rows, values)
    if result.diff is not None:
        result.diff = mask_diff(result.diff, cwd)
    return result


# -- questions and call inputs ---------------------------------------------------------


def variable_values(value: Any, names: frozenset[str]) -> set[str]:
    """Values given to the ``names`` variables anywhere in ``value`` (argv lists,
    ``TF_VAR_name`` keys, ``-var name=...`` and ``TF_VAR_name=...`` in text)."""
    if not names:
        return set()
    found: set[str] = set()
    for text in _strings(value, names, found):
        for name in names:
            flag = rf"-var[= ]\s*(['\"])?{re.escape(name)}=(.+?)(?(1)\1)(?=[\s;|&)]|$)"
            env = rf"TF_VAR_{re.escape(name)}=(['\"])?(.+?)(?(1)\1)(?=[\s;|&)]|$)"
            for match in (*re.finditer(flag, text), *re.finditer(env, text)):
                if match.group(1) == "'" or not UNEXPANDED.search(match.group(2)):
                    found.add(match.group(2))
    return {v for v in found if v}


def _strings(value: Any, names: frozenset[str], found: set[str]) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.startswith("TF_VAR_") and key[7:] in names:
                found.add(str(item))
            yield from _strings(item, names, found)
    elif isinstance(value, list | tuple):
        words = [w for w in value if isinstance(w, str)]
        for i, word in enumerate(words):
            given = words[i + 1] if word == "-var" and i + 1 < len(words) else word[5:]
            if (word == "-var" or word.startswith("-var=")) and "=" in given:
                name, _, val = given.partition("=")
                if name in names:
                    found.add(val)
        for item in value:
            yield from _strings(item, names, found)


def mask_shown(value: Any, cwd: Path, fresh: bool = True) -> Any:
    """``value`` (text, or strings at any depth) with every known secret masked: secret
    environment values and credential shapes, the workspace's sensitive values (as of now
    with ``fresh``, else as of the last scan), and values given to sensitive variables."""
    values = set(sensitive_values(cwd) if fresh else known_values(cwd))
    values |= variable_values(value, sensitive_names(cwd))
    return mask_value(redact_value(value), values)


def mask_question(request: Any, cwd: Path, fresh: bool = True) -> Any:
    """A copy of a permission request with every shown field masked (:func:`mask_shown`),
    saying when the sensitive-value scan stopped early. A question asked while the call
    runs (exec time) wants ``fresh``: the call may have created values."""
    fields = {"title": request.title, "input": request.input, "reason": request.reason}
    fields["review"] = request.review
    fields["labels"] = dict(request.labels)  # "Allow always: `...`" quotes the command
    masked = mask_shown(fields, cwd, fresh)
    note = limit_note(cwd)
    if note:
        masked["reason"] = f"{masked['reason']}\n{note}"
    diff = request.diff
    if diff is not None:
        shown = mask_shown([diff.path, diff.old_text, diff.new_text], cwd, fresh)
        diff = dataclasses.replace(diff, path=shown[0], old_text=shown[1], new_text=shown[2])
    return dataclasses.replace(request, **masked, diff=diff)
