"""The kernelspec (``kernel.json``) and ``iac-kernel install``."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from iac_kernel import __version__

KERNEL_NAME = "iac-kernel"
DISPLAY_NAME = "IaC Agent"


def kernel_spec(executable: str | None = None) -> dict[str, Any]:
    """The kernel.json content; ``executable`` defaults to this Python."""
    return {
        "argv": [
            executable or sys.executable,
            "-m",
            "iac_kernel",
            "kernel",
            "-f",
            "{connection_file}",
        ],
        "display_name": DISPLAY_NAME,
        "language": "markdown",
        "interrupt_mode": "signal",
        "metadata": {
            "debugger": False,
            "iac_kernel": {"version": __version__},
        },
    }


#: The launcher's kernel logos (iac_kernel/kernel/resources), copied beside kernel.json.
LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")


def write_spec(directory: Path, executable: str | None = None) -> Path:
    """Write kernel.json and the logos into ``directory`` (created); returns kernel.json."""
    from importlib import resources

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "kernel.json"
    path.write_text(json.dumps(kernel_spec(executable), indent=2) + "\n")
    package = resources.files("iac_kernel.kernel") / "resources"
    for name in LOGOS:
        (directory / name).write_bytes((package / name).read_bytes())
    return path


def install(user: bool = False, sys_prefix: bool = False, prefix: str | None = None) -> str:
    """Install the kernelspec and return what to tell the user.

    ``--user`` installs for this user, ``--sys-prefix`` into this environment (a venv or
    conda env), ``--prefix P`` under ``P/share/jupyter/kernels``. With none of them it
    installs for the user: a system-wide install usually needs root and is rarely wanted.
    Raises SystemExit with a readable message when the place is not writable.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if sum(bool(x) for x in (user, sys_prefix, prefix)) > 1:
        raise SystemExit("iac-kernel install: choose one of --user, --sys-prefix, --prefix")
    if sys_prefix:
        prefix = sys.prefix
    if not prefix:
        user = True
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / KERNEL_NAME
        write_spec(source)
        try:
            dest = KernelSpecManager().install_kernel_spec(
                str(source), KERNEL_NAME, user=user, prefix=prefix
            )
        except OSError as exc:
            where = prefix or "the user's Jupyter data directory"
            raise SystemExit(
                f"iac-kernel install: cannot write the kernelspec under {where}: "
                f"{exc.strerror or exc}. Try --user or --prefix."
            ) from None
    return f"Installed kernelspec {KERNEL_NAME} ({DISPLAY_NAME}) in {dest}\n" + which_spec_note(
        Path(dest)
    )


def which_spec_note(installed: Path) -> str:
    """Which ``iac-kernel`` kernelspec Jupyter will pick (the first on its search path),
    and why, when it is not ``installed``."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_core.paths import prefer_environment_over_user

    found = KernelSpecManager().find_kernel_specs().get(KERNEL_NAME)
    if found is None:
        return (
            f"Jupyter will not find it: {installed.parent} is not on Jupyter's search path "
            "(add it to JUPYTER_PATH)."
        )
    chosen = Path(found)
    if chosen.resolve() == installed.resolve():
        return f"Jupyter will use this kernelspec ({chosen})."
    why = "it comes earlier on Jupyter's search path (`jupyter --paths`)"
    if prefer_environment_over_user() and _is_under(chosen, sys.prefix):
        why = (
            "inside a virtualenv or conda env Jupyter prefers the environment's kernels "
            "(JUPYTER_PREFER_ENV_PATH); pip install put that one there"
        )
    return (
        f"Jupyter will use {chosen} instead: {why}. Use `iac-kernel install --sys-prefix` "
        f"to update that one, or `jupyter kernelspec remove {KERNEL_NAME}` removes it."
    )


def _is_under(path: Path, prefix: str) -> bool:
    try:
        path.resolve().relative_to(Path(prefix).resolve())
    except ValueError:
        return False
    return True
