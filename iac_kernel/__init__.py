"""iac-kernel: an infrastructure-as-code agent for Jupyter and ACP editors."""

__version__ = "0.1.0"
