"""A synthetic ``terraform show -json`` of a large plan (what bench/plan_scale.py makes with
real terraform, which takes about a minute at 10,000 resources): resources in modules
with count indexes, every action, reasons, replace paths and a sensitive attribute."""

from __future__ import annotations

from typing import Any

SECRET = "hunter2-synthetic-secret"


def _resource(address: str, module: str, type_: str, name: str, index: int) -> dict[str, Any]:
    return {
        "address": address,
        **({"module_address": module} if module else {}),
        "mode": "managed",
        "type": type_,
        "name": name,
        "index": index,
        "provider_name": "terraform.io/builtin/terraform",
    }


def synthetic_show(resources: int = 10_000) -> dict[str, Any]:
    """A plan of ``resources`` changes: 1 in 250 a replacement, 1 in 8 a delete, 1 in 10
    an update, the rest creates, spread over five module instances and the root."""
    changes = []
    for i in range(resources):
        module = "" if i % 6 == 0 else f"module.app[{i % 6}]"
        type_ = "terraform_data" if i % 4 else "null_resource"
        prefix = f"{module}." if module else ""
        address = f"{prefix}{type_}.r[{i}]"
        item = _resource(address, module, type_, "r", i)
        before = {"input": {"name": f"r-{i}", "size": i}, "token": SECRET}
        after = {"input": {"name": f"r-{i}", "size": i + 1}, "token": SECRET}
        mask = {"token": True}
        if i % 250 == 7:
            actions, reason = ["delete", "create"], "replace_because_cannot_update"
            item["change"] = {"replace_paths": [["input"]]}
        elif i % 8 == 3:
            actions, reason, after = ["delete"], "delete_because_count_index", None
        elif i % 10 == 5:
            actions, reason = ["update"], ""
        else:
            actions, reason, before = ["create"], "", None
        item["change"] = {
            **item.get("change", {}),
            "actions": actions,
            "before": before,
            "after": after,
            "after_unknown": {},
            "before_sensitive": mask if before is not None else False,
            "after_sensitive": mask if after is not None else False,
        }
        if reason:
            item["action_reason"] = reason
        changes.append(item)
    return {
        "format_version": "1.2",
        "terraform_version": "1.11.4",
        "resource_changes": changes,
        "output_changes": {},
        "applyable": True,
        "errored": False,
    }
