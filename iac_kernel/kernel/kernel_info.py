"""What the kernel tells Jupyter about itself: implementation, language, banner, the
``kernel_info`` reply and the execution count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iac_kernel import __version__


class KernelInfoMixin:
    """Mixed into :class:`~iac_kernel.kernel.kernel.IacKernel` before ipykernel's kernel."""

    log: Any
    _count: int
    session_info: Callable[[], dict[str, Any]]  # ConsoleMixin's

    implementation = "iac-kernel"
    implementation_version = __version__
    language_info = {
        "name": "markdown",
        "version": "1.0",
        "mimetype": "text/markdown",
        "file_extension": ".md",
        "pygments_lexer": "markdown",
        "codemirror_mode": "markdown",
        "nbconvert_exporter": "markdown",
    }

    @property
    def banner(self) -> str:
        return (
            f"iac-kernel {__version__}: an infrastructure-as-code agent. Each cell is a prompt; "
            "%help lists the magics."
        )

    @property
    def kernel_info(self) -> dict[str, Any]:
        info = dict(super().kernel_info)  # type: ignore[misc]
        # The status bar's model, mode and session from the start (see kernel/status.py).
        try:
            info["iac_kernel"] = self.session_info()
        except Exception:  # kernel_info must always answer
            self.log.exception("session info failed")
        # Python debugging makes no sense for prompts.
        info["supported_features"] = [
            f for f in info.get("supported_features", []) if f != "debugger"
        ]
        return info

    @property
    def execution_count(self) -> int:
        # IPythonKernel reads the IPython shell's counter, which never moves here.
        return getattr(self, "_count", 0)

    @execution_count.setter
    def execution_count(self, value: int) -> None:
        self._count = value
