"""``iac-kernel demo``: execute the quickstart runbook headless into a folder of its own.

The quickstart (``notebooks/01-quickstart.ipynb``) runs on the scripted model against the
sample Terraform tree shipped beside it, so the demo needs no API key and no network. Its
``%model scripted:scripts/...`` and ``%cwd workspaces/...`` lines are relative to the
notebook, so the demo copies the notebook *with* the script and the sample workspace into
a new folder (``./iac-kernel-demo/`` by default) and executes it there. The executed
notebook then runs again where it is, from any folder: in JupyterLab, or with
``jupyter nbconvert --execute``. The packaged quickstart is never written to. The demo
also makes the bash sandboxes' egress proxy environment when it is missing
(:func:`prepare_egress`), so the first command of the README leaves a working sandbox
network.
"""

from __future__ import annotations

import atexit
import filecmp
import functools
import importlib.util
import json
import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from iac_kernel.kernel.app import KERNEL_NAME
from iac_kernel.kernel.render.cards import CARD_MIME

QUICKSTART = "01-quickstart.ipynb"
#: What the quickstart reads, relative to it (the wheel ships the same files).
SUPPORT_FILES = ("scripts/quickstart.json", "workspaces/aws-web-stack")
DEFAULT_FOLDER = "iac-kernel-demo"
CELL_TIMEOUT = 300
LABEXTENSION = "@iac-kernel/jupyterlab"
#: What installs JupyterLab, nbconvert and papermill with the kernel.
#: The package is installed from its clone (not published on PyPI).
LAB_EXTRA = """'.[lab]' (in the iac-kernel clone)"""


class DemoError(Exception):
    """Something the user can fix; the message says what."""


def quickstart_path() -> Path:
    """The quickstart: in the source tree (editable installs), else packaged with the wheel."""
    candidates = [Path(__file__).resolve().parent.parent / "notebooks" / QUICKSTART]
    try:
        packaged = resources.files("iac_kernel").joinpath("_notebooks", QUICKSTART)
        candidates.append(Path(str(packaged)))
    except (ModuleNotFoundError, TypeError):
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise DemoError(
        "cannot find the quickstart notebook (looked for "
        + ", ".join(str(p) for p in candidates)
        + "); reinstall iac-kernel from a source checkout or a wheel that includes notebooks/"
    )


def output_path(output: str | None, source: Path) -> Path:
    """Where to write: ``output`` as given, else ``./iac-kernel-demo[-N]/01-quickstart.ipynb``
    in a folder that does not exist yet (an earlier demo is never overwritten)."""
    if output:
        path = Path(output).expanduser().resolve()
        if path.is_dir():
            raise DemoError(f"{output} is a directory; give a notebook file name")
        if path.suffix != ".ipynb":
            raise DemoError(f"{output}: the output must be a .ipynb file")
    else:
        folder = Path.cwd() / DEFAULT_FOLDER
        n = 1
        while folder.exists():
            folder = Path.cwd() / f"{DEFAULT_FOLDER}-{n}"
            n += 1
        path = (folder / QUICKSTART).resolve()
    if path == source.resolve():
        raise DemoError(f"refusing to overwrite the quickstart itself ({source})")
    return path


def copy_support(source: Path, target: Path) -> None:
    """Put the script and the sample workspace beside ``target``, as beside ``source``.

    Files already there with the same content are kept; a different file is never
    overwritten (DemoError names it)."""
    for name in SUPPORT_FILES:
        src, dest = source.parent / name, target.parent / name
        if src.resolve() == dest.resolve():
            continue
        pairs = (
            [(f, dest / f.relative_to(src)) for f in sorted(src.rglob("*")) if f.is_file()]
            if src.is_dir()
            else [(src, dest)]
        )
        for s, d in pairs:
            if d.exists() and not (d.is_file() and filecmp.cmp(s, d, shallow=False)):
                raise DemoError(
                    f"{d} exists and differs from the demo's copy; choose another output folder"
                )
        for s, d in pairs:
            d.parent.mkdir(parents=True, exist_ok=True)
            if not d.exists():
                shutil.copy2(s, d)


def check_kernelspec() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise DemoError(
            f"the Jupyter kernelspec {KERNEL_NAME!r} is not installed. Install it with "
            "`iac-kernel install --sys-prefix` (inside a virtualenv or conda env) or "
            "`iac-kernel install --user`, then run `iac-kernel demo` again"
        ) from None


def execute(notebook: Path, timeout: int = CELL_TIMEOUT) -> Any:
    """``notebook``, executed headless in its own directory, titled after it."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    try:
        nb = nbformat.read(notebook, as_version=4)
    except (OSError, ValueError) as exc:
        raise DemoError(f"cannot read {notebook}: {exc}") from None
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=timeout,
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    # Jupyter's servers tell a kernel its notebook this way; the session is named after it.
    env = {**os.environ, "JPY_SESSION_NAME": str(notebook)}
    try:
        client.execute(env=env)
    except CellTimeoutError:
        raise DemoError(f"a cell of {notebook.name} ran longer than {timeout}s") from None
    except DeadKernelError as exc:
        raise DemoError(f"the {KERNEL_NAME} kernel died while running the demo: {exc}") from None
    except CellExecutionError as exc:
        raise DemoError(f"a cell of {notebook.name} failed: {_first_line(exc)}") from None
    except RuntimeError as exc:  # e.g. the kernel did not start
        raise DemoError(f"cannot run the {KERNEL_NAME} kernel: {_first_line(exc)}") from None
    finally:
        # nbclient leaves an exit hook behind when the kernel never started (it then fails
        # with a traceback at exit); the kernel is gone either way.
        atexit.unregister(client._cleanup_kernel)
    return nb


def summary(nb: Any) -> tuple[int, str | None]:
    """How many tool cards the executed notebook shows, and the agent session's id."""
    cards = 0
    session_id = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            card = out.get("data", {}).get(CARD_MIME)
            if isinstance(card, str):
                card = json.loads(card)
            if isinstance(card, dict):
                cards += 1
                session_id = card.get("sessionId") or session_id
    return cards, session_id


def labextension_installed() -> bool:
    """Whether JupyterLab will find the iac-kernel extension."""
    from jupyter_core.paths import jupyter_path

    return any(
        (Path(d) / LABEXTENSION / "package.json").is_file() for d in jupyter_path("labextensions")
    )


def labextension_note() -> str:
    """The one line said when the JupyterLab extension is missing."""
    return (
        "Note: the JupyterLab extension is not installed (it is built with npm when "
        "Node.js is present at install time); notebooks show the HTML tool cards instead. "
        "To get it: install Node.js, then run the pip install again (in a checkout: "
        '`pip install -e ".[test]"`).'
    )


def run_demo(output: str | None = None) -> int:
    """Execute the quickstart into a new notebook file and print how to open it."""
    try:
        source = quickstart_path()
        target = output_path(output, source)
        check_kernelspec()
        prepare_egress()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_support(source, target)
            shutil.copyfile(source, target)
        except OSError as exc:
            raise DemoError(f"cannot write {target.parent}: {exc.strerror or exc}") from None
        print(f"Running {_short(target)} with the {KERNEL_NAME} kernel (scripted model, offline)…")
        nb = execute(target)
        import nbformat

        try:
            nbformat.write(nb, target)
        except OSError as exc:
            raise DemoError(f"cannot write {target}: {exc.strerror or exc}") from None
    except DemoError as exc:
        print(f"iac-kernel demo: {exc}", file=sys.stderr)
        return 1
    cards, session_id = summary(nb)
    shown = shlex.quote(_short(target))
    print(f"Executed notebook: {target}")
    print(f"  {len(nb.cells)} cells, {cards} tool calls; the sample workspace is beside it.")
    for line in next_steps(shown):
        print(f"  {line}")
    if session_id:
        print(f"  Agent session {session_id} is in the session store; editors can resume it.")
    if not labextension_installed():
        print(labextension_note())
    return 0


def prepare_egress() -> None:
    """Make the sandboxes' egress proxy environment unless it is there (one progress line
    while pip installs it). The demo itself needs no network: a failure is one line and
    the demo goes on."""
    from iac_kernel.egress import environment

    if environment.egress_python() is not None:
        return
    try:
        environment.ensure_environment(progress=functools.partial(print, flush=True))
    except environment.EgressInstallError as exc:
        print(
            f"Note: {exc}. Bash sandboxes have no network until it is installed "
            "(iac-kernel egress install)."
        )


def next_steps(shown: str) -> list[str]:
    """How to open and re-run the notebook, with only the programs this install has
    (``jupyter lab``, ``jupyter nbconvert``); else how to get them."""
    lines = []
    if jupyter_has("lab", "jupyterlab"):
        lines.append(f"Open it:   jupyter lab {shown}")
    if jupyter_has("nbconvert", "nbconvert"):
        lines.append(f"Re-run it: jupyter nbconvert --to notebook --execute --inplace {shown}")
    if len(lines) < 2:
        lines.append(f"To open and re-run it in JupyterLab: pip install {LAB_EXTRA}")
    return lines


def jupyter_has(subcommand: str, module: str) -> bool:
    """``jupyter SUBCOMMAND`` runs here: ``jupyter`` and ``jupyter-SUBCOMMAND`` on PATH
    and its package importable by this interpreter."""
    return (
        shutil.which("jupyter") is not None
        and shutil.which(f"jupyter-{subcommand}") is not None
        and importlib.util.find_spec(module) is not None
    )


def _short(path: Path) -> str:
    """``path`` relative to the current folder when it is below it (shorter to type)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    # nbclient puts the failing cell's source first and the error last.
    return lines[-1].strip() if lines else type(exc).__name__
