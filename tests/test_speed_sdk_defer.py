"""The SDK is imported by public means only: no other package's private modules or
attributes are touched (an upstream patch release must not break us), and pydantic's
plugin scan is skipped only when it would find nothing."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
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


PLUGINS = """
import importlib.metadata, json, os, sys
calls = []
real = importlib.metadata.distributions
importlib.metadata.distributions = lambda *a, **k: calls.append(1) or real(*a, **k)
from iac_kernel.acp.sdk import import_sdk
import_sdk()
import pydantic.plugin._loader as loader  # the test may look: only iac_kernel may not
print(json.dumps([len(list(loader.get_plugins())), len(calls),
                  os.environ.get("PYDANTIC_DISABLE_PLUGINS")]))
"""


def test_plugin_scan_skipped_only_when_pydantic_finds_none(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp())
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    run = subprocess.run([sys.executable, "-c", PLUGINS], capture_output=True, text=True,
                         env=env, check=True, timeout=120)  # fmt: skip
    plugins, scans_during_import, left = json.loads(run.stdout.splitlines()[-1])
    # No plugin: none found, and the import itself listed no distributions (the scan
    # after it is pydantic's own, made by this test); the setting is not left behind.
    assert plugins == 0 and left is None
    assert scans_during_import <= 1
    # A distribution declaring a pydantic plugin: pydantic scans and finds it.
    dist = tmp_path / "fakeplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nfake = fakeplugin_mod:plugin\n")
    (tmp_path / "fakeplugin_mod.py").write_text(
        "class P:\n    def new_schema_validator(self, *a, **k):\n"
        "        return None, None, None\nplugin = P()\n"
    )
    env["PYTHONPATH"] = str(tmp_path)
    run = subprocess.run([sys.executable, "-c", PLUGINS], capture_output=True, text=True,
                         env=env, check=True, timeout=120)  # fmt: skip
    plugins, scans, left = json.loads(run.stdout.splitlines()[-1])
    assert plugins == 1 and scans >= 1 and left is None


def test_the_sdk_validates_a_prompt_answer_after_the_import():
    code = (
        "from iac_kernel.acp.sdk import import_sdk\nimport_sdk()\nimport acp.schema as s\n"
        "r = s.PromptResponse.model_validate({'stopReason': 'end_turn'})\n"
        "print(r.model_dump_json(by_alias=True, exclude_none=True))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert json.loads(run.stdout)["stopReason"] == "end_turn"
