"""A plan as data: ``terraform show -json PLANFILE`` reduced to what a reviewer reads.

Counts by action, and per resource address its action, the reason, the paths that force
a replacement and the attribute-level changes (``before`` and ``after`` flattened to leaf
paths: ``tags.env``, ``ingress[0].cidr_blocks[1]``); output changes; drift
(``resource_drift``: changes made outside Terraform); errors. Values Terraform marks
sensitive (``before_sensitive`` / ``after_sensitive``) are replaced with
:data:`SENSITIVE` here, by path; :mod:`.sensitive` masks them again by value wherever
else they appear.

Review order (:attr:`Plan.changed`): replacements and deletes first (they destroy data),
then updates, then creates; inside an action, by module and resource type, then by
address in natural order (``old[2]`` before ``old[10]``). :meth:`Plan.to_dict` fits the
plan to a byte budget (long values clipped, changes counted by action and type, lists
shrunk); :mod:`.summary` shows it as text and as the card's rows.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.terraform.sensitive import mask_value, values_from_show

#: Terraform's actions (counts are kept in this order).
ACTIONS = ("delete", "replace", "create", "update", "read", "forget", "no-op")
#: Rows of changing resources in :meth:`Plan.to_dict` (cards, ``_meta``, the store).
ROWS_SHOWN = 500
#: What :meth:`Plan.to_dict` may weigh as JSON: the ACP update of a plan call carries it
#: twice (``rawOutput`` and ``_meta``) and must stay under 256 KB.
DICT_BYTES = 96 * 1024
REASONS = {
    "replace_because_cannot_update": "an attribute that cannot be updated changed",
    "replace_because_tainted": "the object is tainted",
    "replace_by_request": "replacement was requested (-replace)",
    "replace_by_triggers": "replace_triggered_by changed",
    "delete_because_no_resource_config": "no longer in the configuration",
    "delete_because_no_module": "its module is no longer in the configuration",
    "delete_because_wrong_repetition": "count/for_each changed shape",
    "delete_because_count_index": "count index out of range",
    "delete_because_each_key": "for_each key removed",
    "delete_because_no_move_target": "moved block without a target",
    "read_because_config_unknown": "its configuration is known only after apply",
    "read_because_dependency_pending": "a dependency has pending changes",
    "read_because_check_nested": "read by a check block",
}
SENSITIVE = "(sensitive)"
UNKNOWN = "(known after apply)"
#: Attribute changes kept per resource (a huge resource keeps the first ones).
MAX_CHANGES = 200
_MAX_DEPTH = 12
MAX_GROUPS = 200
#: Longest attribute value in :meth:`Plan.to_dict` (the whole one: terraform_plan_detail).
CLIP_CHARS = 1000
#: Review order of actions: what destroys data first.
REVIEW_ORDER = ("replace", "delete", "update", "create", "read", "forget")
_DIGITS = re.compile(r"(\d+)")


@dataclass
class AttributeChange:
    """One attribute path that changes: ``tags.env``, ``ingress[0].cidr_blocks[1]``."""

    path: str
    before: Any = None
    after: Any = None
    sensitive: bool = False
    unknown: bool = False
    forces_replace: bool = False


@dataclass
class ResourceChange:
    address: str
    action: str
    type: str = ""
    name: str = ""
    mode: str = "managed"
    reason: str = ""
    replace_paths: list[str] = field(default_factory=list)
    changes: list[AttributeChange] = field(default_factory=list)
    previous_address: str = ""


@dataclass
class OutputChange:
    name: str
    action: str
    before: Any = None
    after: Any = None
    sensitive: bool = False
    unknown: bool = False


@dataclass
class PlanFile:
    """Which plan file this is: the path as given (relative to the workspace), the hash
    of its bytes, its size and when it was written."""

    path: str
    sha256: str
    size: int
    mtime: float

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]

    @property
    def time(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.mtime))

    @classmethod
    def of(cls, path: Path, shown: str | None = None, data: bytes | None = None) -> PlanFile:
        data = path.read_bytes() if data is None else data
        stat = path.stat()
        return cls(shown or str(path), hashlib.sha256(data).hexdigest(), len(data), stat.st_mtime)


@dataclass
class Plan:
    """A parsed plan (see the module docstring)."""

    file: PlanFile | None = None
    program: str = "terraform"
    version: str = ""
    refresh_only: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    resources: list[ResourceChange] = field(default_factory=list)
    outputs: list[OutputChange] = field(default_factory=list)
    drift: list[ResourceChange] = field(default_factory=list)
    errored: bool = False
    applyable: bool = True
    errors: list[str] = field(default_factory=list)
    #: Policy findings (checkov): {"check_id", "name", "address", "guideline"}.
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: Why there are no checks: "" when checkov ran, else e.g. "checkov is not installed".
    checks_note: str = ""

    #: The review order, worked out once per list of resources (sorting 10,000 addresses
    #: in natural order is a tenth of a second).
    _order: tuple[int, int, list[ResourceChange]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def changed(self) -> list[ResourceChange]:
        """Resources that change, in review order: replacements and deletes first, then
        updates, then creates; by module and type, addresses in natural order."""
        key = (id(self.resources), len(self.resources))
        if self._order is None or self._order[:2] != key:
            self._order = (*key, in_review_order(self.resources))
        return list(self._order[2])

    def resource(self, address: str) -> ResourceChange | None:
        for item in (*self.resources, *self.drift):
            if item.address == address:
                return item
        return None

    def to_dict(self, max_rows: int = ROWS_SHOWN) -> dict[str, Any]:
        """The plan as data for cards, ``_meta`` and the store, under :data:`DICT_BYTES`
        whatever the plan's size: the changing resources (replacements and deletes first)
        up to ``max_rows``, fewer if their attribute changes are large, with ``groups``
        (counts by action and type) for all of them and ``rows_total`` / ``truncated``;
        the rest is one ``terraform_plan_detail`` away."""
        changed = self.changed
        data: dict[str, Any] = {
            "file": asdict(self.file) if self.file is not None else None,
            "program": self.program,
            "version": self.version,
            "refresh_only": self.refresh_only,
            "counts": dict(self.counts),
            "resources": [_resource_dict(r) for r in changed[:max_rows]],
            "outputs": [asdict(o) for o in self.outputs[:max_rows]],
            "drift": [_resource_dict(r) for r in self.drift[:max_rows]],
            "errored": self.errored,
            "applyable": self.applyable,
            "errors": self.errors[:20],
            "checks": self.checks[:max_rows],
            "checks_note": self.checks_note,
            "summary": summary_line(self),
            "groups": groups_of(changed),
            "rows_total": len(changed),
            "drift_total": len(self.drift),
        }
        if self.file is not None:
            data["file"].update(short_hash=self.file.short_hash, time=self.file.time)
        fit(data, DICT_BYTES)
        data["truncated"] = (
            len(data["resources"]) < data["rows_total"]
            or len(data["drift"]) < data["drift_total"]
            or len(data["outputs"]) < len(self.outputs)
            or len(data["checks"]) < len(self.checks)
        )
        return data


def _resource_dict(resource: ResourceChange) -> dict[str, Any]:
    """One row as data (``why``: the reason in words, for renderers), values clipped to
    :data:`CLIP_CHARS`."""
    shown = dict(vars(resource), replace_paths=list(resource.replace_paths))
    shown["changes"] = [
        dict(vars(c), before=clipped(c.before), after=clipped(c.after)) for c in resource.changes
    ]
    shown["why"] = reason_text(resource)
    return shown


def reason_text(resource: ResourceChange) -> str:
    text = REASONS.get(resource.reason, resource.reason.replace("_", " "))
    if resource.replace_paths:
        forced = ", ".join(resource.replace_paths)
        text = f"{text}; forces replacement: {forced}" if text else f"forces replacement: {forced}"
    if resource.previous_address:
        text = (text + "; " if text else "") + f"moved from {resource.previous_address}"
    return text


def action_of(actions: list[str]) -> str:
    """One word for Terraform's action list (``["delete", "create"]`` is a replace)."""
    if sorted(actions) == ["create", "delete"]:
        return "replace"
    if len(actions) == 1 and actions[0] in ACTIONS:
        return actions[0]
    return "+".join(actions) or "no-op"


def summary_line(plan: Plan) -> str:
    """Terraform's own wording: ``Plan: 2 to add, 1 to change, 1 to destroy.``"""
    counts = plan.counts
    if plan.errored:
        return "Plan failed: " + (plan.errors[0] if plan.errors else "terraform reported errors.")
    if plan.refresh_only:
        n = len(plan.drift)
        changed = [o.name for o in plan.outputs if o.action != "no-op"]
        text = f"Drift: {n} resource{'s' if n != 1 else ''} changed outside Terraform"
        if changed:
            many = "s" if len(changed) != 1 else ""
            text += f"; {len(changed)} output{many} changed ({', '.join(changed)})"
        return text + "."
    add = counts.get("create", 0) + counts.get("replace", 0)
    change = counts.get("update", 0)
    destroy = counts.get("delete", 0) + counts.get("replace", 0)
    if not (add or change or destroy or counts.get("forget", 0)):
        outputs = sum(1 for o in plan.outputs if o.action != "no-op")
        if outputs:
            return f"No resource changes; {outputs} output{'s' if outputs != 1 else ''} change."
        return "No changes. Your infrastructure matches the configuration."
    text = f"Plan: {add} to add, {change} to change, {destroy} to destroy"
    if counts.get("replace"):
        text += f" ({counts['replace']} replaced)"
    if counts.get("forget"):
        text += f", {counts['forget']} to forget"
    return text + "."


def parse_plan(
    data: dict[str, Any],
    file: PlanFile | None = None,
    program: str = "terraform",
    refresh_only: bool = False,
    values: set[str] | None = None,
) -> Plan:
    """A :class:`Plan` from the ``show -json`` document of a plan file (``values``: its
    sensitive values when the caller already has them, else they are collected here)."""
    plan = Plan(
        file=file,
        program=program,
        version=str(data.get("terraform_version", "")),
        refresh_only=refresh_only,
        errored=bool(data.get("errored")),
        applyable=bool(data.get("applyable", True)),
    )
    counts = {action: 0 for action in ACTIONS}
    for item in data.get("resource_changes") or []:
        change = _resource_change(item)
        plan.resources.append(change)
        counts[change.action] = counts.get(change.action, 0) + 1
    plan.counts = {k: v for k, v in counts.items() if v}
    plan.drift = [_resource_change(item) for item in data.get("resource_drift") or []]
    for name, item in sorted((data.get("output_changes") or {}).items()):
        plan.outputs.append(_output_change(name, item))
    _mask_by_value(plan, values_from_show(data) if values is None else values)
    return plan


def _mask_by_value(plan: Plan, values: set[str] | frozenset[str]) -> None:
    """Sensitive values that reappear unmarked (terraform_data ``output``) are masked too."""
    if not values:
        return
    values = frozenset(values)
    for resource in (*plan.resources, *plan.drift):
        for change in resource.changes:
            masked_before = mask_value(change.before, values)
            masked_after = mask_value(change.after, values)
            if (masked_before, masked_after) != (change.before, change.after):
                change.before, change.after, change.sensitive = masked_before, masked_after, True
    for output in plan.outputs:
        output.before = mask_value(output.before, values)
        output.after = mask_value(output.after, values)


def _resource_change(item: dict[str, Any]) -> ResourceChange:
    change = item.get("change") or {}
    replace_paths = [_path_text(p) for p in change.get("replace_paths") or []]
    return ResourceChange(
        address=str(item.get("address", "")),
        action=action_of(list(change.get("actions") or [])),
        type=str(item.get("type", "")),
        name=str(item.get("name", "")),
        mode=str(item.get("mode", "managed")),
        reason=str(item.get("action_reason", "") or ""),
        replace_paths=replace_paths,
        changes=attribute_changes(change, set(replace_paths)),
        previous_address=str(item.get("previous_address", "") or ""),
    )


def _output_change(name: str, item: dict[str, Any]) -> OutputChange:
    sensitive = bool(item.get("before_sensitive") or item.get("after_sensitive"))
    unknown = bool(item.get("after_unknown"))
    return OutputChange(
        name=name,
        action=action_of(list(item.get("actions") or [])),
        before=SENSITIVE if sensitive else item.get("before"),
        after=SENSITIVE if sensitive else (UNKNOWN if unknown else item.get("after")),
        sensitive=sensitive,
        unknown=unknown,
    )


def _path_text(steps: list[Any]) -> str:
    text = ""
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


def attribute_changes(change: dict[str, Any], replace_paths: set[str]) -> list[AttributeChange]:
    """The leaf attributes whose value differs between ``before`` and ``after``."""
    before: dict[str, tuple[Any, bool, bool]] = {}
    after: dict[str, tuple[Any, bool, bool]] = {}
    _flatten(change.get("before"), change.get("before_sensitive"), None, before)
    _flatten(change.get("after"), change.get("after_sensitive"), change.get("after_unknown"), after)
    out: list[AttributeChange] = []
    absent = (None, False, False)
    for path in sorted(before.keys() | after.keys()):
        old, old_sensitive, _ = before.get(path, absent)
        new, new_sensitive, unknown = after.get(path, absent)
        if old == new and not unknown and old_sensitive == new_sensitive:
            continue
        forces = any(path == p or path.startswith((p + ".", p + "[")) for p in replace_paths)
        out.append(
            AttributeChange(
                path,
                SENSITIVE if old_sensitive and old is not None else old,
                UNKNOWN if unknown else (SENSITIVE if new_sensitive else new),
                old_sensitive or new_sensitive,
                unknown,
                forces,
            )
        )
        if len(out) >= MAX_CHANGES:
            break
    return out


def _flatten(
    value: Any,
    sensitive: Any,
    unknown: Any,
    leaves: dict[str, tuple[Any, bool, bool]],
    prefix: str = "",
    depth: int = 0,
) -> None:
    """Put ``path -> (value, sensitive, unknown)`` in ``leaves`` for every leaf of ``value``."""
    if value is None and unknown and isinstance(unknown, dict):
        value = {}  # a block that does not exist yet but has unknown members
    if sensitive is True or unknown is True or depth >= _MAX_DEPTH:
        leaves[prefix or "(value)"] = (value, sensitive is True, unknown is True)
    elif isinstance(value, dict) and (value or (unknown and isinstance(unknown, dict))):
        masks = sensitive if isinstance(sensitive, dict) else {}
        unknowns = unknown if isinstance(unknown, dict) else {}
        for key in (value.keys() | unknowns.keys()) if unknowns else value:
            path = f"{prefix}.{key}" if prefix else str(key)
            _flatten(value.get(key), masks.get(key), unknowns.get(key), leaves, path, depth + 1)
    elif isinstance(value, list) and value:
        masks = sensitive if isinstance(sensitive, list) else []
        unknowns = unknown if isinstance(unknown, list) else []
        for index, item in enumerate(value):
            mask = masks[index] if index < len(masks) else None
            more = unknowns[index] if index < len(unknowns) else None
            _flatten(item, mask, more, leaves, f"{prefix}[{index}]", depth + 1)
    else:
        leaves[prefix or "(value)"] = (value, False, False)


def natural_key(text: str) -> tuple[Any, ...]:
    """A sort key where runs of digits compare as numbers: ``r[2]`` before ``r[10]``."""
    parts = _DIGITS.split(text)
    # Strings at even positions, numbers at odd ones: tuples always compare like with like.
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def action_rank(action: str) -> int:
    return REVIEW_ORDER.index(action) if action in REVIEW_ORDER else len(REVIEW_ORDER)


def module_of(address: str, type_: str = "", mode: str = "managed") -> str:
    """The module part of an address (``module.a[3].module.b``; ``""`` for the root)."""
    if not type_:  # the last ``module.NAME[KEY]`` step, without the resource's own part
        found = list(re.finditer(r"module\.[^.\[]+(\[[^\]]*\])?", address))
        return address[: found[-1].end()] if found else ""
    own = ("data." if mode == "data" else "") + f"{type_}."
    at = address.rfind(own)
    return address[:at].rstrip(".") if at > 0 else ""


def review_key(action: str, address: str, type_: str = "", mode: str = "managed") -> tuple:
    """Sort key of one row: action, module, type, address (natural order)."""
    module = module_of(address, type_, mode)
    return (action_rank(action), natural_key(module), type_, natural_key(address))


def in_review_order(resources: list[ResourceChange]) -> list[ResourceChange]:
    """Changing resources (no-ops left out) in review order (see the module docstring)."""
    moving = [r for r in resources if r.action != "no-op"]
    return sorted(moving, key=lambda r: review_key(r.action, r.address, r.type, r.mode))


def clipped(value: Any) -> Any:
    """A value cut to :data:`CLIP_CHARS` (as its JSON text when it is not a string)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= CLIP_CHARS:
        return value
    return text[: CLIP_CHARS - 1] + "…"


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
