"""The egress proxy's own Python environment: mitmproxy and botocore, apart from ours.

mitmproxy pins old releases of libraries Jupyter needs newer (tornado, h11,
cryptography), so it cannot share the agent's environment. It lives in a virtual
environment of its own, made once per install by ``iac-kernel egress install`` (or
:func:`ensure_environment`) under ``$IAC_KERNEL_EGRESS_ENV`` (default
``~/.cache/iac-kernel/egress``). This module imports nothing of it: the proxy runs as a
separate process (``mitmdump``) with our addons.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: What the environment holds: the proxy engine (newest release for Python 3.11) and
#: botocore for re-signing AWS requests with Signature V4.
REQUIREMENTS = ("mitmproxy==11.0.2", "botocore>=1.34")
#: The status line when the environment is missing.
INSTALL_HINT = "no egress proxy: sandboxes have no network (install it: iac-kernel egress install)"


def environment_dir() -> Path:
    """Where the egress environment lives (``$IAC_KERNEL_EGRESS_ENV`` moves it)."""
    env = os.environ.get("IAC_KERNEL_EGRESS_ENV")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "iac-kernel" / "egress"


def _stamp() -> str:
    return "\n".join(REQUIREMENTS) + "\n"


def egress_python() -> Path | None:
    """The environment's Python when it is installed with today's requirements, else None."""
    root = environment_dir()
    python = root / "bin" / "python"
    stamp = root / "iac-kernel-requirements.txt"
    try:
        ready = python.exists() and stamp.read_text() == _stamp()
    except OSError:
        return None
    return python if ready else None


def mitmdump() -> Path | None:
    """The environment's ``mitmdump`` program, or None when it is not installed."""
    python = egress_python()
    return python.parent / "mitmdump" if python is not None else None


def ensure_environment(quiet: bool = True) -> Path:
    """Make (or repair) the environment and return its Python. Raises ``RuntimeError``
    with pip's last line when the install fails."""
    found = egress_python()
    if found is not None:
        return found
    root = environment_dir()
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, *(["-q"] if quiet else []), *REQUIREMENTS],
        capture_output=quiet,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr or "").strip().splitlines()[-1:] or ["pip failed"]
        raise RuntimeError(f"could not install the egress proxy environment: {last[0]}")
    (root / "iac-kernel-requirements.txt").write_text(_stamp())
    python = egress_python()
    assert python is not None
    return python
