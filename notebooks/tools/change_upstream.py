"""Change the network workspace's state behind the app workspace's back (06-drift-check).

Usage: ``python change_upstream.py NETWORK_STATE NEW_CIDR``. It rewrites the VPC's CIDR
in the network state file as the network team's own apply would, so ``app``'s next
refresh-only plan sees its input change outside its configuration. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def change(path: Path, cidr: str) -> str:
    state = json.loads(path.read_text())
    old = state["outputs"]["cidr"]["value"]
    state["outputs"]["cidr"]["value"] = cidr
    for resource in state["resources"]:
        if resource["type"] == "terraform_data" and resource["name"] == "vpc":
            for instance in resource["instances"]:
                for key in ("input", "output"):
                    instance["attributes"][key]["value"]["cidr"] = cidr
    state["serial"] += 1
    path.write_text(json.dumps(state, indent=2) + "\n")
    return old


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path, cidr = Path(sys.argv[1]), sys.argv[2]
    old = change(path, cidr)
    print(f"network state: VPC CIDR {old} -> {cidr} (serial bumped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
