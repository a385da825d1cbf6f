"""iac-kernel: an infrastructure-as-code agent for Jupyter and ACP editors."""

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lives (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "@iac-kernel/jupyterlab"}]
