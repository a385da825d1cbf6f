"""A plan as data: ``terraform show -json PLANFILE`` reduced to what a reviewer reads.

Counts by action, and per resource address its action, the reason, the paths that force
a replacement and the attribute-level changes; output changes; drift (``resource_drift``:
changes made outside Terraform); errors. Values Terraform marks sensitive
(``before_sensitive`` / ``after_sensitive``) are replaced with :data:`SENSITIVE` here, by
path; :mod:`.sensitive` masks them again by value wherever else they appear.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.terraform.plan_attrs import (
    MAX_CHANGES,
    SENSITIVE,
    UNKNOWN,
    AttributeChange,
    attribute_changes,
)
from iac_kernel.terraform.plan_fit import clipped, fit, groups_of
from iac_kernel.terraform.plan_rows import (
    compact_rows,
    in_review_order,
    remember,
)
from iac_kernel.terraform.sensitive import mask_value, values_from_show

__all__ = ["MAX_CHANGES", "SENSITIVE", "UNKNOWN", "AttributeChange", "attribute_changes"]

#: Terraform's actions (counts are kept in this order; review order: .plan_rows).
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

    def rows(self) -> dict[str, Any]:
        """Every changing row in the compact form of :func:`.plan_rows.compact_rows`; with
        a plan file, ``key`` (its sha256) asks for a row's diff that did not fit
        (:func:`.plan_rows.row_diff`)."""
        changed = self.changed
        rows = compact_rows(changed, {id(r): reason_text(r) for r in self.resources})
        if self.file is not None:
            remember(self.file.sha256, changed)
            rows["key"] = self.file.sha256
        return rows

    def resource(self, address: str) -> ResourceChange | None:
        for item in (*self.resources, *self.drift):
            if item.address == address:
                return item
        return None

    def to_dict(self, max_rows: int | None = ROWS_SHOWN) -> dict[str, Any]:
        """The plan as data for cards, ``_meta`` and the store. With ``max_rows`` (the
        default) it stays under :data:`DICT_BYTES` whatever the plan's size: the changing
        resources (replacements and deletes first) up to ``max_rows``, fewer if their attribute
        changes are large, with ``groups`` (counts by action and type) for all of them and
        ``rows_total`` / ``truncated``; the rest is one ``terraform_plan_detail`` away.
        ``max_rows=None`` keeps every resource, no-ops included."""
        changed = self.changed if max_rows is not None else []
        rows = self.resources if max_rows is None else changed[:max_rows]
        drift = self.drift if max_rows is None else self.drift[:max_rows]
        data: dict[str, Any] = {
            "file": asdict(self.file) if self.file is not None else None,
            "program": self.program,
            "version": self.version,
            "refresh_only": self.refresh_only,
            "counts": dict(self.counts),
            "resources": [_resource_dict(r, max_rows is not None) for r in rows],
            "outputs": [asdict(o) for o in self.outputs[: max_rows or None]],
            "drift": [_resource_dict(r, max_rows is not None) for r in drift],
            "errored": self.errored,
            "applyable": self.applyable,
            "errors": list(self.errors[:20] if max_rows else self.errors),
            "checks": list(self.checks[: max_rows or None]),
            "checks_note": self.checks_note,
        }
        if self.file is not None:
            data["file"]["short_hash"] = self.file.short_hash
            data["file"]["time"] = self.file.time
        data["summary"] = summary_line(self)
        if max_rows is None:
            return data
        data["groups"] = groups_of(changed)
        data["rows_total"] = len(changed)
        data["drift_total"] = len(self.drift)
        fit(data, DICT_BYTES)
        data["truncated"] = (
            len(data["resources"]) < data["rows_total"]
            or len(data["drift"]) < data["drift_total"]
            or len(data["outputs"]) < len(self.outputs)
            or len(data["checks"]) < len(self.checks)
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        file = data.get("file")
        return cls(
            file=PlanFile(**{k: file[k] for k in ("path", "sha256", "size", "mtime")})
            if file
            else None,
            program=data.get("program", "terraform"),
            version=data.get("version", ""),
            refresh_only=bool(data.get("refresh_only")),
            counts=dict(data.get("counts") or {}),
            resources=[_resource_from(r) for r in data.get("resources") or []],
            outputs=[OutputChange(**o) for o in data.get("outputs") or []],
            drift=[_resource_from(r) for r in data.get("drift") or []],
            errored=bool(data.get("errored")),
            applyable=bool(data.get("applyable", True)),
            errors=list(data.get("errors") or []),
            checks=list(data.get("checks") or []),
            checks_note=data.get("checks_note", ""),
        )


def _resource_dict(resource: ResourceChange, clip: bool = True) -> dict[str, Any]:
    shown = asdict(resource)
    shown["why"] = reason_text(resource)  # the reason in words, for renderers
    if clip:
        for change in shown["changes"]:
            change["before"] = clipped(change["before"])
            change["after"] = clipped(change["after"])
    return shown


def _resource_from(data: dict[str, Any]) -> ResourceChange:
    changes = [AttributeChange(**c) for c in data.get("changes") or []]
    fields = {k: v for k, v in data.items() if k not in ("why", "changes_total")}
    return ResourceChange(**{**fields, "changes": changes})


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


def _mask_by_value(plan: Plan, values: set[str]) -> None:
    """Sensitive values that reappear unmarked (terraform_data ``output``) are masked too."""
    if not values:
        return
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
