"""papermill support: parameters for iac-kernel notebooks, whose cells are prompts.

papermill writes the parameters it is given into a new cell, in the kernel's language. An
iac-kernel cell is a prompt, so the injected cell is one too::

    Runbook parameters (injected by papermill):
    - environment = "staging"

The agent reads it like any prompt (the scripted model picks values out of it with its
``vars``); the values are JSON, and every line starts with ``- ``, so a value can never
turn into a ``%`` magic.

papermill finds translators by kernel name, but loads only *engines* from entry points.
Importing this module registers the translator; the ``papermill.engine`` entry point
``iac-kernel`` (the plain nbclient engine under another name) imports it whenever papermill
starts, so the ``papermill`` command line works too. From Python::

    import iac_kernel.papermill  # noqa: F401  (registers the translator)
    import papermill as pm

    pm.execute_notebook("04-incident-triage.ipynb", "out.ipynb",
                        kernel_name="iac-kernel", parameters={"environment": "staging"})
"""

from __future__ import annotations

import json
import re
from typing import Any

from papermill.engines import NBClientEngine
from papermill.models import Parameter
from papermill.translators import Translator, papermill_translators

KERNEL_NAME = "iac-kernel"
HEADER = "Runbook parameters (injected by papermill):"
#: ``- name = value`` lines of a parameters cell; the value is JSON (anything after it, help).
PARAMETER_LINE = re.compile(r"^\s*[-*]\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>.+?)\s*$")


class IacKernelTranslator(Translator):
    """Renders papermill parameters as a Markdown list the agent reads as a prompt."""

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
    """papermill's nbclient engine; registered as ``iac-kernel`` so importing it registers
    the translator (see the module docstring)."""


def register() -> None:
    papermill_translators.register(KERNEL_NAME, IacKernelTranslator)


register()
