"""Variables a guarded program never gets from the shell: they make the dynamic loader,
a shell or a pyenv shim run other code inside the real program."""

from __future__ import annotations

#: Variables that make the dynamic loader run other code inside the real program.
LOADER_VARIABLES = {"GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH"}
LOADER_VARIABLES |= {"MALLOC_TRACE", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS"}
#: Variables that make a shell or a pyenv shim run other code first: a script CLI's
#: children inherit the descriptor of the real script, so that code could exec it.
LOADER_VARIABLES |= {"BASH_ENV", "ENV", "PYENV_HOOK_PATH"}


def without_loader_variables(env: dict[str, str]) -> dict[str, str]:
    """``env`` without ``LD_*`` and :data:`LOADER_VARIABLES`."""
    return {k: v for k, v in env.items() if not (k.startswith("LD_") or k in LOADER_VARIABLES)}
