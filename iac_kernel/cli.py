"""The ``iac-kernel`` command: ``acp`` (stdio agent for editors), ``kernel`` (what Jupyter
launches), ``install`` (the kernelspec) and ``demo`` (run the quickstart notebook)."""

from __future__ import annotations

import argparse
import sys
import textwrap

from iac_kernel import __version__
from iac_kernel.models.providers import BASE_URL_ENV, DETECT_ORDER, PROVIDER_ENV, PROVIDERS
from iac_kernel.team import commands as team_commands

DESCRIPTION = """\
An infrastructure-as-code agent for Jupyter notebooks and ACP editors.
In a notebook on the iac-kernel kernel every cell is a prompt to the agent; editors
(Zed, JetBrains, Neovim) run "iac-kernel acp" and share the same sessions."""

EXAMPLES = """\
examples:
  iac-kernel demo                  run the quickstart notebook offline, then open it
  iac-kernel install --sys-prefix  make the kernel visible to this environment's Jupyter
  iac-kernel acp                   what an editor launches (ACP over stdin/stdout)
  iac-kernel SUBCOMMAND --help     details and environment variables of one subcommand"""

_PICKED = ", ".join(PROVIDERS[n].switch_env or str(PROVIDERS[n].key_env) for n in DETECT_ORDER)
_PROVIDER_HELP = textwrap.fill(
    f"{', '.join(PROVIDERS)}: who serves the model (docs/providers.md); unset, the first"
    f" of {_PICKED} that is set picks it, else the offline scripted model answers",
    88,
    initial_indent=f"  {PROVIDER_ENV:<23}  ",
    subsequent_indent=" " * 27,
)
SETTINGS_ENV = f"""\
  IAC_KERNEL_<SETTING>     any setting, e.g. IAC_KERNEL_MAX_TURN_REQUESTS=40 (all of them:
                           %config in a notebook, or docs/settings.md); a bad value is
                           reported in one line and the default is used
  IAC_KERNEL_SESSIONS_DIR  the session store (default ~/.iac-code/sessions)
{_PROVIDER_HELP}
  {BASE_URL_ENV:<23}  the endpoint of the provider {PROVIDER_ENV} names"""

ACP_HELP = f"""\
Serve the Agent Client Protocol (version 1) on stdin/stdout. Editors launch this
command themselves; stdout carries only JSON-RPC, logs go to stderr.

example (Zed, ~/.config/zed/settings.json):
  "agent_servers": {{"iac-kernel": {{"type": "custom", "command": "iac-kernel",
                                   "args": ["acp"]}}}}

remote (a Jupyter server or JupyterHub with iac-kernel installed; docs/remote.md):
  IAC_KERNEL_REMOTE_TOKEN=... iac-kernel acp --remote wss://hub.example.org/user/NAME/iac-kernel/acp
  The agent runs on that server; this process relays stdio to it, reconnects after a
  dropped connection and resumes the editor's sessions.

environment:
  IAC_KERNEL_LOG_LEVEL     DEBUG, INFO, WARNING (default), ERROR or CRITICAL
  IAC_KERNEL_LOG_FILE      write logs to this file instead of stderr
  IAC_KERNEL_RUNTIME_DIR   where running kernels advertise their endpoints, to attach
                           to a notebook's live session (default ~/.iac-code/run)
  IAC_KERNEL_REMOTE_TOKEN  with --remote: the Jupyter or JupyterHub API token (else
                           JUPYTERHUB_API_TOKEN); sent only in the Authorization header
  IAC_KERNEL_REMOTE_RECONNECT  with --remote: seconds to keep reconnecting after a drop
                           (default 300)
{SETTINGS_ENV}"""

KERNEL_HELP = f"""\
Run the Jupyter kernel on a connection file. Jupyter launches this through the
kernelspec (see: iac-kernel install --help); you do not run it by hand.

example:
  iac-kernel kernel -f /tmp/kernel-1234.json

environment:
  IAC_KERNEL_PERMISSION_UI auto (default), widgets, stdin or policy
  IAC_KERNEL_ENDPOINT=off  no local ACP endpoint (editors cannot attach)
  IAC_KERNEL_RUNTIME_DIR   where the endpoint is advertised (default ~/.iac-code/run)
  IAC_KERNEL_LOG_LEVEL     logging to the Jupyter server's terminal (default WARNING)
{SETTINGS_ENV}"""

INSTALL_HELP = """\
Install the Jupyter kernelspec "iac-kernel" (display name "IaC Agent"), pointing at
this Python. pip install already installs it into the environment; use this for
another place. It prints which kernelspec Jupyter will actually use.

examples:
  iac-kernel install --sys-prefix    into this virtualenv or conda env
  iac-kernel install --user          for this user (a virtualenv's own copy wins there)
  iac-kernel install --prefix /opt/jupyter

environment:
  JUPYTER_DATA_DIR         the user's Jupyter data folder (where --user installs)
  JUPYTER_PATH             extra folders Jupyter searches first
  JUPYTER_PREFER_ENV_PATH  whether an environment's kernels win over the user's"""

DEMO_HELP = """\
Copy the quickstart runbook, its scripted-model script and its sample Terraform
workspace into a new folder (./iac-kernel-demo/ by default), execute it headless with
the offline scripted model, and print how to open it. The notebook needs no API key and
no network. When the bash sandboxes' egress proxy is missing, the demo first makes it
(pip, from your package index; see iac-kernel egress --help).

examples:
  iac-kernel demo
  iac-kernel demo -o ~/tries/quickstart.ipynb

environment:
  IAC_KERNEL_SESSIONS_DIR  where the demo's agent session is stored"""


AUDIT_HELP = """\
Every change the agent ran or was asked to run leaves one record in the team store's
audit trail: terraform/tofu applies and destroys (the terraform_apply tool, or bash,
scripts included) with the plan file's sha256 and summary, the question's exact text,
the answer and who gave it, policy results, terraform's exit status and the state's
lineage and serial before and after; every other changing command of a guarded program
(terraform import and state changes, kubectl, helm, cloud CLIs, git pushes); cloud
operations judged at the wire; approval steps. Rejected and refused ones too. Secrets
are masked before a record is written. See docs/audit.md.
"iac-kernel audit verify" checks the trail's hash chain and names the first record
altered or removed (docs/approvals.md).

environment:
  IAC_KERNEL_TEAM_STORE    the team store's SQLAlchemy URL (default: SQLite in the
                           session store, ~/.iac-code/sessions/team.sqlite)
  IAC_KERNEL_SESSIONS_DIR  the session store (default ~/.iac-code/sessions), whose
                           older audit.jsonl is imported into the trail once"""


EGRESS_HELP = """\
Every bash sandbox has its own network namespace; its only way out is the egress proxy
(mitmproxy, in an environment of its own: its pins clash with Jupyter's). "iac-kernel
demo" makes that environment, and so does the first bash call that needs it; "install"
makes it ahead (or repairs it, or moves it to a newer mitmproxy when a newer Python is
here): mitmproxy 12.1.2 or later on Python 3.12 or newer, else 11.0.2 with HTTP/2 off.
"status" says which runs.

examples:
  iac-kernel egress install
  iac-kernel egress status

environment:
  IAC_KERNEL_EGRESS_ENV    where the environment lives (default ~/.cache/iac-kernel/egress)"""


def _subparser(
    sub: argparse._SubParsersAction, name: str, summary: str, text: str
) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=summary,
        description=text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iac-kernel",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"iac-kernel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    acp = _subparser(
        sub, "acp", "serve the Agent Client Protocol on stdio (editors launch this)", ACP_HELP
    )
    acp.add_argument(
        "--remote",
        metavar="URL",
        help="relay to the ACP endpoint of a Jupyter server (wss://HOST/BASE/iac-kernel/acp)",
    )
    acp.add_argument(
        "--allow-insecure",
        action="store_true",
        help="with --remote: allow unencrypted ws:// to a host other than loopback",
    )

    kernel = _subparser(
        sub, "kernel", "run the Jupyter kernel (Jupyter launches this)", KERNEL_HELP
    )
    kernel.add_argument("-f", dest="connection_file", help="the kernel connection file")

    install = _subparser(sub, "install", "install the Jupyter kernelspec", INSTALL_HELP)
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user (default)")
    where.add_argument("--sys-prefix", action="store_true", help="install into sys.prefix")
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")

    demo = _subparser(
        sub, "demo", "run the quickstart notebook offline into a new folder", DEMO_HELP
    )
    demo.add_argument(
        "-o",
        "--output",
        metavar="NOTEBOOK",
        help="the executed notebook (.ipynb); its script and workspace go beside it "
        "(default: ./iac-kernel-demo/01-quickstart.ipynb)",
    )
    audit = _subparser(
        sub,
        "audit",
        "list the audit trail's records (applies, changing commands, approvals)",
        AUDIT_HELP,
    )
    audit.add_argument(
        "--cwd", metavar="DIR", help="only records of sessions in DIR or below it (default: all)"
    )
    audit.add_argument("--json", action="store_true", help="one JSON record a line")
    audit.add_argument(
        "action", nargs="?", choices=("verify",), help="verify: check the team store's chain"
    )
    team_commands.add_commands(sub, _subparser)
    egress = _subparser(
        sub, "egress", "install the sandboxes' egress proxy (mitmproxy)", EGRESS_HELP
    )
    egress.add_argument("action", choices=("install", "status"))
    return parser


def _egress(action: str) -> int:
    from iac_kernel.egress import environment
    from iac_kernel.egress.proxy import status_text

    if action == "install":
        try:
            python = environment.ensure_environment(progress=print, again=True)
        except environment.EgressInstallError as exc:
            print(f"iac-kernel egress install: {exc}", file=sys.stderr)
            return 1
        print(f"egress proxy environment ready: {python.parent.parent}")
    print(status_text())
    return 0


def _audit(cwd: str | None, as_json: bool) -> int:
    import json

    from iac_kernel.config import Settings
    from iac_kernel.sessions.audit import AuditLog, describe, in_folder
    from iac_kernel.team.audit import trail
    from iac_kernel.team.store import TeamStoreError

    settings = Settings.from_env(problems=[])
    try:  # the older audit.jsonl's records are imported first
        entries = trail(AuditLog(settings.sessions_dir)).entries()
    except TeamStoreError as exc:
        print(f"iac-kernel audit: {exc}", file=sys.stderr)
        return 2
    records = [e.public() for e in entries if cwd is None or in_folder(e.record, cwd)]
    for record in records:
        if as_json:
            print(json.dumps(record, ensure_ascii=False))
        else:
            print("\n".join(describe(record)))
    if not records and not as_json:
        print("No audit records" + (f" for {cwd}" if cwd else "") + ".", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "acp" and args.remote:
        from iac_kernel.acp.remote.bridge import run_remote

        return run_remote(args.remote, allow_insecure=args.allow_insecure)
    if args.command == "acp":
        from iac_kernel.acp.serve.stdio import run_stdio

        return run_stdio()
    if args.command == "kernel":
        from iac_kernel.kernel.app import launch

        return launch(args.connection_file)
    if args.command == "install":
        from iac_kernel.kernel.app import install

        print(install(user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix))
        return 0
    if args.command == "egress":
        return _egress(args.action)
    if args.command in ("approvals", "team") or getattr(args, "action", None) == "verify":
        return team_commands.run(args)
    if args.command == "audit":
        return _audit(args.cwd, args.json)
    if args.command == "demo":
        from iac_kernel.demo import run_demo

        return run_demo(args.output)
    return 2


if __name__ == "__main__":
    sys.exit(main())
