"""Guarded execution: a sandbox for every bash call and exec-time approval of changing
commands of infrastructure CLIs.

Below the tools layer: nothing here imports ``agent``, ``kernel`` or ``acp``.
"""
