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
