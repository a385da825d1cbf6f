"""The kernel as a program: its kernelspec (``kernel.json``), ``iac-kernel install``, and
the process the kernelspec's argv starts.

Inside a kernel, ``sys.stderr`` is ipykernel's IOPub stream: a record logged while no
cell runs (an editor's turn through the ACP endpoint, a refused endpoint connection)
would be sent with the last cell's parent header and show up under that finished cell.
Like ipykernel does for its own logger, the ``iac_kernel`` logger writes to the
kernel's original stderr instead (the terminal or log of the Jupyter server).
``IAC_KERNEL_LOG_LEVEL`` sets the level (default WARNING).
"""

from __future__ import annotations

import io
import ipaddress
import json
import logging
import os
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


#: ipykernel 7 warns about this at every start over TCP; on the loopback interface there is
#: nobody to eavesdrop (other users can only connect, and need the connection file's key).
TCP_WARNING = "Kernel is running over TCP without encryption"
LOGGER = "iac_kernel"


class LoopbackTcpFilter(logging.Filter):
    """Drops ipykernel's TCP-encryption warning when the kernel listens on loopback only."""

    def __init__(self, app: Any):
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(TCP_WARNING):
            return True
        return not is_loopback(str(getattr(self.app, "ip", "")))


def is_loopback(ip: str) -> bool:
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def without_debugger() -> None:
    """Keep ipykernel from importing debugpy (about a quarter of a second of every start):
    cells are prompts, not Python, and a ``None`` in ``sys.modules`` makes that import fail
    at once (ipykernel reads it as "not installed"), in this process only."""
    sys.modules.setdefault("debugpy", None)  # type: ignore[arg-type]


def route_to_original_stderr() -> logging.Handler | None:
    """Install the handler once; returns it (``None`` if there is no stderr to write to)."""
    logger = logging.getLogger(LOGGER)
    for handler in logger.handlers:
        if getattr(handler, "iac_kernel_stderr", False):
            return handler
    stream = _original_stderr()
    if stream is None:
        return None
    handler = logging.StreamHandler(stream)
    handler.iac_kernel_stderr = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("[iac-kernel] %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    level = os.environ.get("IAC_KERNEL_LOG_LEVEL", "WARNING").upper()
    logger.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")
    logger.propagate = False
    return handler


def _original_stderr() -> io.TextIOBase | None:
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        try:
            return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), line_buffering=True)
        except OSError:
            pass
    return sys.__stderr__


def launch(connection_file: str | None) -> int:
    """Run :class:`~iac_kernel.kernel.kernel.IacKernel` on ``connection_file`` until shutdown."""
    without_debugger()
    from ipykernel.kernelapp import IPKernelApp

    from iac_kernel.guard.sandbox import hidden
    from iac_kernel.kernel.kernel import IacKernel

    argv = ["-f", connection_file] if connection_file else []
    app = IPKernelApp.instance(kernel_class=IacKernel)
    app.log.addFilter(LoopbackTcpFilter(app))
    app.initialize(argv)
    route_to_original_stderr()  # ipykernel's initialize made sys.stderr the IOPub stream
    if app.abs_connection_file:  # its HMAC key steers the kernel: never in a bash call
        hidden.register(app.abs_connection_file)
    app.start()
    return 0
