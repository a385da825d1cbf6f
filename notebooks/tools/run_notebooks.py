"""Execute runbooks in place with the iac-kernel kernel, the way ``pytest --nbval`` runs them.

Usage (from the repository root)::

    python notebooks/tools/run_notebooks.py                       # every notebooks/*.ipynb
    python notebooks/tools/run_notebooks.py notebooks/01-quickstart.ipynb

Each notebook runs headless in its own directory, with a fresh session store and no
Anthropic credentials (as ``notebooks/conftest.py`` sets up for nbval), and is saved with
its outputs. Commit those: they are what ``pytest --nbval`` compares against.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stand_in_forge import runbook_forge  # this directory (scripts run from here)

from iac_kernel.models.providers import CREDENTIAL_ENV as CREDENTIALS

NOTEBOOKS = Path(__file__).resolve().parent.parent
#: Terraform runbooks (06, 07): no checkov run, no CLI config file warning.
RUNBOOK_ENV = {"IAC_KERNEL_CHECKOV": "off", "TF_CLI_CONFIG_FILE": os.devnull}


@contextlib.contextmanager
def environ(values: dict[str, str], drop: tuple[str, ...] = ()) -> Iterator[None]:
    """``os.environ`` with ``values`` set and ``drop`` removed, as it was afterwards."""
    saved = {name: os.environ.get(name) for name in (*drop, *values)}
    try:
        for name in drop:
            os.environ.pop(name, None)
        os.environ.update(values)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute(nb: Any, path: Path, timeout: int, client_class: type | None = None) -> Any:
    """Execute ``nb`` (read from ``path``) headless, as nbval runs it: fresh session store,
    no Anthropic credentials, :data:`RUNBOOK_ENV`, the stand-in forge for a runbook that
    needs one (``stand_in_forge.runbook_forge``); returns the client (``client_class``,
    an nbclient ``NotebookClient`` by default). The environment is restored afterwards."""
    from nbclient import NotebookClient

    store = tempfile.mkdtemp(prefix="iac-kernel-run-sessions-")
    try:
        # The stand-in forge 08 needs (none for the others); as notebooks/conftest.py sets up.
        with runbook_forge(path) as forge_env:
            env = {**RUNBOOK_ENV, **forge_env, "IAC_KERNEL_SESSIONS_DIR": store}
            with environ(env, drop=tuple(CREDENTIALS)):
                client = (client_class or NotebookClient)(
                    nb,
                    kernel_name="iac-kernel",
                    timeout=timeout,
                    allow_errors=False,
                    resources={"metadata": {"path": str(path.parent)}},
                )
                client.execute()
    finally:
        shutil.rmtree(store, ignore_errors=True)
    return client


def run(path: Path, timeout: int) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    execute(nb, path, timeout)
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        print(f"executing {path}", flush=True)
        try:
            run(path.resolve(), args.timeout)
        except Exception as exc:  # a failing cell: say which notebook, not a traceback
            print(f"{path}: {type(exc).__name__}: {str(exc).strip()[:2000]}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
