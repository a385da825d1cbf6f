"""No module of iac_kernel uses another package's private modules or attributes: an
upstream patch release must not break us (pydantic 2.14 broke a wrapper of one)."""

from __future__ import annotations

import ast
from pathlib import Path

import iac_kernel

PACKAGE = Path(iac_kernel.__file__).parent
OTHERS = ("pydantic", "pydantic_core", "acp", "ipykernel", "jupyter_client", "jupyter_server",
          "anthropic", "openai", "mcp", "traitlets", "comm", "ipywidgets", "hcl2",
          "jupyter_ai", "jupyter_ai_acp_client", "jupyter_ai_persona_manager",
          "jupyterlab_chat")  # fmt: skip


def _private_uses(source: str) -> list[str]:
    """Imports of another package's underscored module or name, and attribute reads of
    an underscored name on a module imported from another package."""
    found: list[str] = []
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OTHERS:
                    modules.add((alias.asname or alias.name).split(".")[0])
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        found.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in OTHERS:
                parts = node.module.split(".")
                if any(part.startswith("_") for part in parts):
                    found.append(node.module)
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{node.module}.{alias.name}")
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                and node.value.id in modules):  # fmt: skip
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_scanner_finds_private_uses():
    assert "pydantic._internal" in _private_uses("from pydantic._internal import _config")
    assert _private_uses("from pydantic.plugin import _loader") == ["pydantic.plugin._loader"]
    assert _private_uses("import acp\nacp._x = 1") == ["acp._x"]
    assert _private_uses("from acp import schema\nschema.Thing.__name__") == []


def test_no_module_uses_another_packages_private_internals():
    found = {
        str(path.relative_to(PACKAGE)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if (uses := _private_uses(path.read_text(encoding="utf-8")))
    }
    assert found == {}
