"""papermill support: parameters for iac-kernel notebooks, whose cells are prompts.

papermill writes the parameters it is given into a new cell, in the kernel's language. An
iac-kernel cell is a prompt, so the injected cell is one too::

    Runbook parameters (injected by papermill):
    - environment = "staging"

The kernel reads such a cell (and the runbook's own ``parameters`` cell, which has the
same shape) as parameters, not as a prompt: no model call, and the values go to the agent
with the next prompt, where a scripted model's ``vars`` find them too (see
:mod:`iac_kernel.kernel.magics.cell`). The values are JSON, and every line starts with
``- ``, so a value can never turn into a ``%`` magic.

papermill finds translators by kernel name, but loads only *engines* from entry points.
Importing this module registers the translator and :class:`IacKernelEngine` (which tells
the kernel the notebook's path, so its session is titled after it); the
``papermill.engine`` entry point ``iac-kernel`` imports it whenever papermill starts, so
the ``papermill`` command line works too. From Python::

    import iac_kernel.papermill  # noqa: F401  (registers the translator)
    import papermill as pm

    pm.execute_notebook("04-incident-triage.ipynb", "out.ipynb",
                        kernel_name="iac-kernel", parameters={"environment": "staging"})
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

if "papermill.engines" not in sys.modules:
    # Importing papermill loads its engine entry points, and ours is this module: while it
    # is half-imported here, that load would fail. Let it import a complete copy instead
    # (papermill.engines is far enough along by then); this module registers itself last.
    _this = sys.modules.pop(__name__)
    try:
        import papermill.engines  # noqa: F401
    finally:
        sys.modules[__name__] = _this

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from papermill.log import logger
from papermill.models import Parameter
from papermill.translators import Translator, papermill_translators
from papermill.utils import merge_kwargs, remove_args

from iac_kernel.kernel.app import KERNEL_NAME

HEADER = "Runbook parameters (injected by papermill):"
#: ``- name = value`` lines of a parameters cell; the value is JSON (anything after it, help).
PARAMETER_LINE = re.compile(r"^\s*[-*]\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>.+?)\s*$")


class IacKernelTranslator(Translator):
    """Renders papermill parameters as the ``- name = value`` list the kernel reads as
    parameters."""

    @classmethod
    def translate(cls, val: Any) -> str:
        return json.dumps(val, ensure_ascii=False, default=str)

    @classmethod
    def comment(cls, cmd_str: str) -> str:
        return f"({cmd_str})"

    @classmethod
    def assign(cls, name: str, str_val: str) -> str:
        return f"- {name} = {str_val}"

    @classmethod
    def inspect(cls, parameters_cell: Any) -> list[Parameter]:
        """The ``- name = value`` lines of the cell tagged ``parameters`` (``--help-notebook``)."""
        found = []
        for line in str(parameters_cell.get("source", "")).splitlines():
            match = PARAMETER_LINE.match(line)
            if not match:
                continue
            value = match.group("value")
            try:
                kind = type(json.loads(value)).__name__
            except ValueError:
                kind = "None"
            found.append(Parameter(match.group("name"), kind, value, ""))
        return found

    @classmethod
    def codify(cls, parameters: dict[str, Any], comment: str = "Parameters") -> str:
        lines = [HEADER]
        lines += [cls.assign(name, cls.translate(value)) for name, value in parameters.items()]
        return "\n".join(lines)


class IacKernelEngine(NBClientEngine):
    """papermill's nbclient engine that tells an iac-kernel kernel which notebook it runs.

    Jupyter's servers pass the notebook's path in ``JPY_SESSION_NAME``; this engine does
    the same, so the agent session is titled after the notebook (``04-incident-triage``)
    and stores its path, as in JupyterLab. Other kernels run exactly as with the plain
    nbclient engine. It is registered as ``iac-kernel`` and as papermill's default engine.
    """

    @classmethod
    def execute_managed_notebook(  # type: ignore[override]
        cls,
        nb_man: Any,
        kernel_name: str,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: int = 60,
        execution_timeout: int | None = None,
        **kwargs: Any,
    ) -> Any:
        input_path = kwargs.pop("input_path", None)
        timeout = execution_timeout or kwargs.get("timeout")
        final_kwargs = merge_kwargs(
            remove_args(["timeout", "startup_timeout"], **kwargs),
            timeout=timeout,
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=logger,
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        client = PapermillNotebookClient(nb_man, **final_kwargs)
        env = kernel_env(kernel_name, input_path)
        return client.execute(env=env) if env is not None else client.execute()


def kernel_env(kernel_name: str | None, input_path: Any) -> dict[str, str] | None:
    """The kernel's environment naming the notebook, for iac-kernel kernels only."""
    if kernel_name != KERNEL_NAME or not isinstance(input_path, str) or not input_path:
        return None
    return {**os.environ, "JPY_SESSION_NAME": input_path}


def register() -> None:
    papermill_translators.register(KERNEL_NAME, IacKernelTranslator)
    papermill_engines.register(KERNEL_NAME, IacKernelEngine)
    papermill_engines.register(None, IacKernelEngine)  # type: ignore[arg-type]


register()
