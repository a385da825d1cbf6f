"""``terraform|tofu show -json PLANFILE`` of a workspace plan, never running workspace code.

``show`` of a plan starts the provider plugins the plan's configuration needs, from
``./.terraform/providers`` (or ``TF_DATA_DIR``), which a sandboxed bash call can write.
So the agent's own ``show`` (apply review, plan pick-up, plan tool, sensitive-value scan)
must not run on the host as is. :func:`prepared_show` copies the plan's bytes into a
private directory and gives the command that shows the copy:

* with bubblewrap: inside the sandbox (:func:`iac_kernel.guard.confine.confine`): the
  whole filesystem read-only, the working directory included, a private /tmp, guard
  launchers with no approval channel over every guarded program;
* without (reduced mode): on the host with ``TF_DATA_DIR``, ``TF_PLUGIN_CACHE_DIR`` and
  ``HOME`` pointing at empty private directories and a ``TF_CLI_CONFIG_FILE`` with no
  plugin sources, run from the private directory: ``show`` then fails for a plan that
  needs a provider plugin instead of starting one. Plans of built-in resources
  (``terraform_data``) need none and show either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from iac_kernel.guard.confine import confine
from iac_kernel.guard.sandbox import GUARD_MOUNT, state_dir

PLAN_NAME = "plan.tfplan"
#: Variables that make terraform run or reach plugins, or change its arguments.
DROPPED = ("TF_REATTACH_PROVIDERS", "TF_CLI_ARGS")
NO_PLUGINS_CONFIG = """\
disable_checkpoint = true
plugin_cache_dir   = "{empty}"
provider_installation {{
  filesystem_mirror {{
    path    = "{empty}"
    include = ["example.invalid/none/none"]
  }}
}}
"""


@dataclass
class PreparedShow:
    """Run ``argv`` in ``cwd`` with ``env``, passing ``pass_fds``."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    #: False in reduced mode (no sandbox; plugin discovery disabled instead).
    sandboxed: bool
    #: The sha256 of the bytes shown (the private copy's).
    sha256: str = ""


def _clean(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(DROPPED)}


@contextlib.contextmanager
def prepared_show(
    executable: str, plan_file: Path, workdir: Path, env: Mapping[str, str]
) -> Iterator[PreparedShow]:
    """The command showing a private copy of ``plan_file`` as JSON (module docstring)."""
    private = Path(tempfile.mkdtemp(prefix="show-", dir=state_dir()))
    try:
        os.chmod(private, 0o755)  # the sandbox reads it through a read-only bind
        copy = private / PLAN_NAME
        shutil.copyfile(plan_file, copy)
        os.chmod(copy, 0o444)
        with copy.open("rb") as fh:
            sha = hashlib.file_digest(fh, "sha256").hexdigest()
        args = ["show", "-json", "-no-color"]
        inside = f"{GUARD_MOUNT}/{PLAN_NAME}"
        confined = confine(executable, [*args, inside], workdir, _clean(env), share=private)
        if confined is not None:
            try:
                yield PreparedShow(
                    confined.argv, workdir, confined.env, confined.pass_fds, True, sha
                )
            finally:
                confined.close()
            return
        yield PreparedShow(
            [executable, *args, str(copy)], private, _no_plugins_env(env, private), (), False, sha
        )
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _no_plugins_env(env: Mapping[str, str], private: Path) -> dict[str, str]:
    """The reduced-mode environment: nowhere to find a provider plugin."""
    empty = private / "empty"
    for name in ("empty", "data", "home"):
        (private / name).mkdir(mode=0o700)
    config = private / "cli.tfrc"
    config.write_text(NO_PLUGINS_CONFIG.format(empty=empty))
    clean = _clean(env)
    clean.update(
        TF_DATA_DIR=str(private / "data"),
        TF_PLUGIN_CACHE_DIR=str(empty),
        TF_CLI_CONFIG_FILE=str(config),
        HOME=str(private / "home"),
    )
    return clean
