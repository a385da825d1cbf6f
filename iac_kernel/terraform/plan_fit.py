"""A plan's dict (:meth:`~iac_kernel.terraform.plan.Plan.to_dict`) made to fit its
byte budget: long values clipped, changes counted by action and type, lists shrunk."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from iac_kernel.terraform.plan_rows import action_rank

if TYPE_CHECKING:
    from iac_kernel.terraform.plan import ResourceChange

MAX_GROUPS = 200
#: Longest attribute value in :meth:`Plan.to_dict` (the whole one: terraform_plan_detail).
VALUE_CHARS = 1000


def clipped(value: Any) -> Any:
    """A value cut to :data:`VALUE_CHARS` (as its JSON text when it is not a string)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= VALUE_CHARS:
        return value
    return text[: VALUE_CHARS - 1] + "…"


def groups_of(resources: list[ResourceChange]) -> list[dict[str, Any]]:
    """Counts by action and resource type, in review order (replacements, deletes first)."""
    counts: dict[tuple[str, str], int] = {}
    for resource in resources:
        key = (resource.action, resource.type)
        counts[key] = counts.get(key, 0) + 1
    keys = sorted(counts, key=lambda k: (action_rank(k[0]), k[1]))
    return [{"action": a, "type": t, "count": counts[(a, t)]} for a, t in keys[:MAX_GROUPS]]


def fit(data: dict[str, Any], budget: int) -> None:
    """Shrink ``data``'s lists until its JSON fits ``budget``: attribute changes per row
    first (32, 8, 2, none), then the longest list by halves. A dozen encodings at most."""
    encoder = json.JSONEncoder(ensure_ascii=False, default=str)
    cap = 32
    while len(encoder.encode(data)) > budget:
        rows = [r for key in ("resources", "drift") for r in data[key] if len(r["changes"]) > cap]
        if rows:
            for row in rows:
                row.setdefault("changes_total", len(row["changes"]))
                row["changes"] = row["changes"][:cap]
            cap //= 4
            continue
        longest = max(("resources", "drift", "outputs", "checks"), key=lambda k: len(data[k]))
        if not data[longest]:
            return
        data[longest] = data[longest][: len(data[longest]) // 2]
