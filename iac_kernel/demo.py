"""``iac-kernel demo``: execute the quickstart runbook headless and save the executed copy.

The quickstart (``notebooks/01-quickstart.ipynb``) runs on the scripted model against the
sample Terraform tree shipped beside it, so the demo needs no API key and no network. It
runs with the installed ``iac-kernel`` kernelspec, in the quickstart's own directory (its
``%model scripted:scripts/...`` and ``%cwd workspaces/...`` lines are relative to it; the
quickstart only reads files), and the executed notebook is written elsewhere: the source
is never overwritten.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

KERNEL_NAME = "iac-kernel"
QUICKSTART = "01-quickstart.ipynb"
DEFAULT_OUTPUT = "iac-kernel-demo.ipynb"
CELL_TIMEOUT = 300
CARD_MIME = "application/vnd.iac-kernel.toolcall+json"


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
    """Where to write: ``output`` as given, else a new ``iac-kernel-demo[-N].ipynb`` here."""
    if output:
        path = Path(output).expanduser().resolve()
        if path.is_dir():
            raise DemoError(f"{output} is a directory; give a notebook file name")
        if path.suffix != ".ipynb":
            raise DemoError(f"{output}: the output must be a .ipynb file")
    else:
        path = Path.cwd() / DEFAULT_OUTPUT
        n = 1
        while path.exists():  # never clobber an earlier demo or a file of the user's
            path = Path.cwd() / f"iac-kernel-demo-{n}.ipynb"
            n += 1
        path = path.resolve()
    if path == source.resolve():
        raise DemoError(f"refusing to overwrite the quickstart itself ({source})")
    return path


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


def execute(source: Path, timeout: int = CELL_TIMEOUT) -> Any:
    """The quickstart, executed headless in its own directory."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    try:
        nb = nbformat.read(source, as_version=4)
    except (OSError, ValueError) as exc:
        raise DemoError(f"cannot read {source}: {exc}") from None
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=timeout,
        resources={"metadata": {"path": str(source.parent)}},
    )
    try:
        client.execute()
    except CellTimeoutError:
        raise DemoError(f"a cell of {source.name} ran longer than {timeout}s") from None
    except DeadKernelError as exc:
        raise DemoError(f"the {KERNEL_NAME} kernel died while running the demo: {exc}") from None
    except CellExecutionError as exc:
        raise DemoError(f"a cell of {source.name} failed: {_first_line(exc)}") from None
    except RuntimeError as exc:  # e.g. the kernel did not start
        raise DemoError(f"cannot run the {KERNEL_NAME} kernel: {_first_line(exc)}") from None
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


def run_demo(output: str | None = None) -> int:
    """Execute the quickstart into a new notebook file and print where it is."""
    try:
        source = quickstart_path()
        target = output_path(output, source)
        check_kernelspec()
        print(f"Running {source} with the {KERNEL_NAME} kernel (scripted model, offline)…")
        nb = execute(source)
        import nbformat

        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
        except OSError as exc:
            raise DemoError(f"cannot write {target}: {exc.strerror or exc}") from None
    except DemoError as exc:
        print(f"iac-kernel demo: {exc}", file=sys.stderr)
        return 1
    cards, session_id = summary(nb)
    print(f"Executed notebook: {target}")
    print(f"  {len(nb.cells)} cells, {cards} tool calls. Open it with: jupyter lab {target}")
    if session_id:
        print(f"  Agent session {session_id} is in the session store; editors can resume it.")
    return 0


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    # nbclient puts the failing cell's source first and the error last.
    return lines[-1].strip() if lines else type(exc).__name__
