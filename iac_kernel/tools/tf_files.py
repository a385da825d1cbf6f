"""The file tools and the shell see terraform's sensitive files only as masked copies
(:mod:`iac_kernel.terraform.masked_files`); copies live in this process's guard folder,
which every sandbox hides."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from iac_kernel.guard.sandbox import process_dir
from iac_kernel.terraform import tffiles
from iac_kernel.terraform.masked_files import MaskedFiles
from iac_kernel.tools.base import ToolError

#: Kinds that are terraform's own files: the file tools never rewrite them.
TERRAFORM_OWN = {"plan", "state", "backend"}


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
