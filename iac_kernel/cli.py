"""The ``iac-kernel`` command: ``acp`` (stdio agent for editors), ``kernel`` (what Jupyter
launches), ``install`` (the kernelspec) and ``demo`` (run the quickstart notebook)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iac-kernel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("acp", help="serve the Agent Client Protocol on stdio (editors launch this)")

    kernel = sub.add_parser("kernel", help="run the Jupyter kernel (Jupyter launches this)")
    kernel.add_argument("-f", dest="connection_file", help="kernel connection file")

    install = sub.add_parser("install", help="install the Jupyter kernelspec")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user")
    where.add_argument("--sys-prefix", action="store_true", help="install into sys.prefix")
    where.add_argument("--prefix", help="install under this prefix")

    demo = sub.add_parser("demo", help="execute the quickstart notebook with the scripted model")
    demo.add_argument("-o", "--output", help="where to write the executed notebook")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "acp":
        from iac_kernel.acp.stdio import run_stdio

        return run_stdio()
    if args.command == "kernel":
        from iac_kernel.kernel.app import launch

        return launch(args.connection_file)
    if args.command == "install":
        from iac_kernel.kernel.install import install

        print(install(user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix))
        return 0
    if args.command == "demo":
        from iac_kernel.demo import run_demo

        return run_demo(args.output)
    return 2


if __name__ == "__main__":
    sys.exit(main())
