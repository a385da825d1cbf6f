"""The fast SDK import defers building the SDK's ``RootModel[...]`` parametrizations and
module-level ``TypeAdapter``s: they must behave exactly as after the plain import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CODE = """
import json, pydantic
from iac_kernel.acp.sdk import import_sdk
import_sdk()
import acp.schema as s, acp.client.router as r, acp.agent.connection as c
adapters = [r._CREATE_ELICITATION_REQUEST_ADAPTER, c._CREATE_ELICITATION_RESPONSE_ADAPTER]
roots = sorted({b for m in vars(s).values() if isinstance(m, type)
                and issubclass(m, pydantic.RootModel) for b in m.__bases__
                if b.__name__.startswith("RootModel[")}, key=lambda b: b.__name__)
complete = [a.pydantic_complete for a in adapters] + [b.__pydantic_complete__ for b in roots]
later = pydantic.RootModel[int]  # made after the import: not deferred
out = {
    "complete": complete, "later": later.__pydantic_complete__,
    "adapter_restored": pydantic.TypeAdapter.__init__.__module__,
    "schemas": [a.json_schema() for a in adapters]
        + [m.model_json_schema() for m in (s.AgentResponseMessage, s.ClientResponseMessage)]
        + [b.model_json_schema() for b in roots],
    "names": [b.__name__ for b in roots],
    "checked": [
        c._CREATE_ELICITATION_RESPONSE_ADAPTER.validate_python({"action": "cancel"}).model_dump(),
        s.AgentResponseMessage.model_validate(
            {"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "x"}}).model_dump(mode="json"),
    ],
}
try:
    r._CREATE_ELICITATION_REQUEST_ADAPTER.validate_python({"mode": "nope"})
except pydantic.ValidationError as exc:
    out["error"] = exc.error_count()
print(json.dumps(out))
"""


def _run(plain: bool) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp())
    env.pop("IAC_KERNEL_PLAIN_SDK_IMPORT", None)
    if plain:
        env["IAC_KERNEL_PLAIN_SDK_IMPORT"] = "1"
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         env=env, check=True, timeout=120)  # fmt: skip
    return json.loads(out.stdout)


def test_deferred_root_models_and_adapters_behave_as_the_plain_import():
    fast, plain = _run(False), _run(True)
    assert len(fast["names"]) >= 3
    assert not any(fast["complete"])  # really deferred by the fast import...
    assert all(plain["complete"])  # ...and built at once by the plain one
    assert fast["later"] is True and fast["adapter_restored"] == "pydantic.type_adapter"
    for key in ("names", "schemas", "checked", "error"):
        assert fast[key] == plain[key], key


PLUGINS = """
import importlib.metadata, json, sys
calls = []
real = importlib.metadata.distributions
importlib.metadata.distributions = lambda *a, **k: calls.append(1) or real(*a, **k)
from iac_kernel.acp.sdk import import_sdk
import_sdk()
from pydantic.plugin import _loader
seeded, scans = _loader._plugins, len(calls)
_loader._plugins = None
scanned = list(_loader.get_plugins())  # pydantic's own scan of the same environment
print(json.dumps([None if seeded is None else len(seeded), len(scanned), scans]))
"""


def test_plugin_scan_skipped_only_when_pydantic_finds_none(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp())
    env.pop("IAC_KERNEL_PLAIN_SDK_IMPORT", None)
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    run = subprocess.run([sys.executable, "-c", PLUGINS], capture_output=True, text=True,
                         env=env, check=True, timeout=120)  # fmt: skip
    assert json.loads(run.stdout) == [0, 0, 0]  # the same answer, without the scan
    # A distribution declaring a pydantic plugin: the scan is left to pydantic.
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
    seeded, scanned, scans = json.loads(run.stdout.splitlines()[-1])
    assert scanned == 1
    assert seeded == 1 and scans == 1  # pydantic scanned during the import, found it
