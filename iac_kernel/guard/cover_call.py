"""Runs ``cover_helper.py`` (mounts in a shell's mount namespace) for :mod:`.cover`."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from iac_kernel.interpreter import sandbox_python

HELPER = os.path.realpath(Path(__file__).with_name("cover_helper.py"))


def run_helper(fd: int, items: list[dict], ours: list[list[int]]) -> list[str]:
    """The helper's result for each of ``items`` in the namespace open at ``fd``
    (``ours``: ``[dev, ino]`` of the copies a path may show to be mounted over)."""
    try:
        done = subprocess.run(
            [sandbox_python(), "-IS", HELPER, str(fd)],
            input=json.dumps({"items": items, "ours": ours}),
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            timeout=30,
            check=False,
        )
        results = json.loads(done.stdout or "null")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return [f"cannot run the helper: {exc}"] * len(items)
    if not isinstance(results, list) or len(results) != len(items):
        text = (done.stderr or "").strip().splitlines()
        return [text[-1] if text else "the helper failed"] * len(items)
    return [str(r) for r in results]


def copies(folders: set[Path]) -> list[list[int]]:
    """``[dev, ino]`` of every masked copy in ``folders`` (a path showing one is masked)."""
    found: list[list[int]] = []
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    found.append([st.st_dev, st.st_ino])
    return found
