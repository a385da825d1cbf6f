"""A cached 100,000-file tree for the search benchmarks (built once per machine).

``ensure_tree()`` returns ``$TMPDIR/iac-kernel-bench-tree-<N>`` and builds it only when its
marker file is missing: 50 top-level folders x 20 modules x 100 files (``.tf``, ``.tfvars``,
``.md``, ``.json``), a few lines each, some containing ``aws_s3_bucket``; plus a
``.gitignore`` that hides one folder, so ignore rules are exercised.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILES = 100_000
TOP, MODULES = 50, 20
PER_MODULE = FILES // (TOP * MODULES)
KINDS = ("tf", "tf", "tfvars", "md", "json")


def _content(i: int, kind: str) -> bytes:
    if kind == "tf":
        bucket = f'resource "aws_s3_bucket" "b{i}" {{\n  bucket = "b-{i}"\n}}\n'
        other = f'resource "null_resource" "n{i}" {{}}\n'
        body = bucket if i % 97 == 0 else other
        return body.encode() + b'variable "v" {\n  type = string\n}\n'
    if kind == "tfvars":
        return b'region = "eu-west-1"\nname = "x%d"\n' % i
    if kind == "md":
        return b"# module %d\n\nSome text about the module.\n" % i
    return b'{"name": "item-%d", "enabled": true}\n' % i


def ensure_tree(files: int = FILES) -> Path:
    """The tree's root; built if missing (a few seconds, once)."""
    root = Path(tempfile.gettempdir()) / f"iac-kernel-bench-tree-{files}"
    marker = root / ".complete"
    if marker.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    per_module = max(1, files // (TOP * MODULES))
    i = 0
    for top in range(TOP):
        for module in range(MODULES):
            folder = root / f"stack{top:02d}" / f"module{module:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            for n in range(per_module):
                kind = KINDS[n % len(KINDS)]
                fd = os.open(folder / f"file{n:03d}.{kind}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                try:
                    os.write(fd, _content(i, kind))
                finally:
                    os.close(fd)
                i += 1
    (root / ".gitignore").write_text("stack49/\n")
    marker.write_text(str(i))
    return root


if __name__ == "__main__":
    print(ensure_tree())
