"""Wheel build hook: build the JupyterLab extension with npm when it can, never require it.

The prebuilt extension lives in ``iac_kernel/labextension/`` (gitignored). For an sdist
this hook builds it when it is missing or stale and npm is there (the sdist's
``artifacts`` carry it; without npm the sdist goes without and says so). For a wheel (or
an editable install) it:

* rebuilds it with npm when npm is on PATH and the build is missing or older than
  ``labextension/src`` (``npm install`` first when ``node_modules`` is missing);
* ships it as shared data (``share/jupyter/labextensions/@iac-kernel/jupyterlab``) when
  the build is there;
* otherwise builds the Python package without it and says so in one line: other Jupyter
  frontends show the kernel's HTML cards, and JupyterLab does too.

For an editable install it also writes the package's bytecode (:func:`compile_sources`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "iac_kernel"
BUILD_DIR = "iac_kernel/labextension"
SOURCE_DIR = "labextension"
TARGETS = ("package.json", "static/style.js")
SHARE = "share/jupyter/labextensions/@iac-kernel/jupyterlab"
HOW_TO_GET_IT = (
    "install Node.js (npm) and run the pip install again; notebooks show the HTML tool cards "
    "meanwhile"
)


class LabextensionBuildHook(BuildHookInterface):
    """Builds and ships the JupyterLab extension when possible (see the module docstring)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        if self.target_name == "sdist":  # pyproject's sdist `artifacts` carry the build
            problem = self._build_if_needed(root / BUILD_DIR, root / SOURCE_DIR, editable=False)
            if not all((root / BUILD_DIR / t).is_file() for t in TARGETS):
                note(
                    f"iac-kernel: the sdist carries no JupyterLab extension build ({problem}); "
                    "a wheel built from it builds the extension with npm, or goes without"
                )
            return
        if self.target_name != "wheel":
            return
        if version == "editable":
            compile_sources(root / PACKAGE)
        build, source = root / BUILD_DIR, root / SOURCE_DIR
        problem = self._build_if_needed(build, source, editable=version == "editable")
        if all((build / t).is_file() for t in TARGETS):
            build_data["shared_data"][str(build)] = SHARE
            if not (build / "install.json").is_file():  # some builders write it themselves
                build_data["shared_data"][str(source / "install.json")] = f"{SHARE}/install.json"
            if problem:
                note(f"iac-kernel: {problem}; shipping the earlier JupyterLab extension build")
        else:
            note(
                f"iac-kernel: the JupyterLab extension was not built ({problem}); "
                f"to get it, {HOW_TO_GET_IT}."
            )

    def _build_if_needed(self, build: Path, source: Path, *, editable: bool) -> str | None:
        """Run npm when the build is missing or stale; returns what went wrong, if anything."""
        if not needs_build(build, source / "src"):
            return None
        if not (source / "package.json").is_file():
            return f"{SOURCE_DIR}/package.json is missing"
        npm = shutil.which("npm")
        if npm is None:
            return "npm was not found on PATH"
        steps = []
        if not (source / "node_modules").is_dir():
            steps.append([npm, "install"])
        steps.append([npm, "run", "build" if editable else "build:prod"])
        for step in steps:
            self.app.display_info(f"iac-kernel: {' '.join(step[1:])} in {source}")
            done = subprocess.run(step, cwd=source, check=False)
            if done.returncode != 0:
                return f"`npm {' '.join(step[1:])}` failed with exit code {done.returncode}"
        return None


def compile_sources(package: Path) -> None:
    """Write the package's bytecode, as pip does for a wheel at install time.

    An editable install imports the source tree, and where ``PYTHONDONTWRITEBYTECODE`` is
    set (many CI machines) Python never writes it there: every kernel or ``iac-kernel
    acp`` start would compile every module again (about 60 ms of a kernel's start). A
    module edited later is compiled in memory until the next install, as Python does.
    """
    import compileall

    compileall.compile_dir(str(package), quiet=1)


def needs_build(build: Path, src: Path) -> bool:
    """The build is missing, or some source file is newer than it."""
    outputs = [build / t for t in TARGETS]
    if not all(p.is_file() for p in outputs):
        return True
    if not src.is_dir():
        return False
    built = min(p.stat().st_mtime for p in outputs)
    return any(f.stat().st_mtime > built for f in src.rglob("*") if f.is_file())


def note(line: str) -> None:
    """One line on stderr (pip shows it with ``-v``; ``iac-kernel demo`` repeats it)."""
    print(line, file=sys.stderr, flush=True)
