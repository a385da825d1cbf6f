"""Guarded execution: a sandbox for every bash call and exec-time approval of changing
commands of infrastructure CLIs.

:mod:`.call` (``GuardedCall``) is the one entry for a bash call, :mod:`.confine` runs a
trusted program on workspace content. Inside, from the bottom up: ``sandbox/`` (bwrap,
launchers, starting programs), ``tfcover/`` (masking what terraform writes), ``policy/``
(the exec-time verdict: an ordered list of steps), ``approval/`` (the server that asks
and runs). Below the tools layer: nothing here imports ``agent``, ``kernel`` or ``acp``.
"""
