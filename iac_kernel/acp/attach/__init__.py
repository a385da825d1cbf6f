"""Sessions a running Jupyter kernel holds: its runtime files, and driving its sessions
from ``iac-kernel acp`` through the kernel's endpoint."""
