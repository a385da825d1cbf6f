"""Print the resolved version of every direct dependency of iac-kernel (extras included),
so a failure on a new machine names the release that caused it."""

import re
from importlib import metadata

names = set()
for requirement in metadata.requires("iac-kernel") or []:
    name = re.match(r"[A-Za-z0-9_.\-]+", requirement)
    if name and name.group(0) != "iac-kernel":
        names.add(name.group(0))
for name in sorted(names, key=str.lower):
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"{name}: not installed")
