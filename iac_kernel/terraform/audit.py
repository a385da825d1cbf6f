"""The Terraform side of an apply's audit record: the plan reviewed and the state's mark.

A record (one per apply, tool or bash; see ``docs/audit.md``) holds what was reviewed
(:func:`plan_fields`), the state's lineage and serial before and after
(:func:`state_mark`), and is masked (:func:`masked`) before it is stored: environment
secrets and every sensitive value the workspace holds.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from iac_kernel.redact import redact_value
from iac_kernel.terraform.plan import Plan
from iac_kernel.terraform.sensitive import MASK, keep, mask_value
from iac_kernel.terraform.workspace import sensitive_values

#: The largest state file read for its lineage and serial.
MAX_STATE_BYTES = 256 * 1024 * 1024


def plan_fields(plan: Plan) -> dict[str, Any]:
    """The reviewed plan: file, hash, summary, counts (destroys first), policy results."""
    data = plan.to_dict()
    file = data.get("file") or {}
    counts = plan.counts
    return {
        "plan_file": file.get("path"),
        "plan_sha256": file.get("sha256"),
        "summary": data.get("summary"),
        "counts": {
            "delete": counts.get("delete", 0),
            "replace": counts.get("replace", 0),
            "update": counts.get("update", 0),
            "create": counts.get("create", 0),
        },
        "policy": {
            "failed": [{k: c.get(k) for k in ("address", "check_id", "name")} for c in plan.checks],
            "note": plan.checks_note or "",
        },
    }


def state_path(workdir: Path, env: Mapping[str, str], state_flag: str | None) -> Path | None:
    """The local state file an apply in ``workdir`` reads and writes, or None when the
    state lives in a remote backend."""
    if state_flag:
        return workdir / state_flag
    data_dir = workdir / env.get("TF_DATA_DIR", ".terraform")
    backend: dict[str, Any] = {}
    try:
        backend = json.loads((data_dir / "terraform.tfstate").read_text()).get("backend") or {}
    except (OSError, ValueError, AttributeError):
        backend = {}
    kind = backend.get("type") or "local"
    if kind != "local":
        return None
    config = backend.get("config") or {}
    workspace = workspace_name(workdir, env)
    if workspace != "default":
        root = config.get("workspace_dir") or "terraform.tfstate.d"
        return workdir / root / workspace / "terraform.tfstate"
    return workdir / (config.get("path") or "terraform.tfstate")


def _selected_workspace(data_dir: Path) -> str:
    try:
        return (data_dir / "environment").read_text().strip()
    except OSError:
        return ""


def workspace_name(workdir: Path, env: Mapping[str, str]) -> str:
    """The workspace terraform selects in ``workdir`` (``TF_WORKSPACE`` first)."""
    data_dir = workdir / env.get("TF_DATA_DIR", ".terraform")
    return env.get("TF_WORKSPACE") or _selected_workspace(data_dir) or "default"


def state_mark(workdir: Path, env: Mapping[str, str], state_flag: str | None = None) -> dict:
    """``{"path", "lineage", "serial", "workspace"}`` of the state now (no state yet:
    lineage and serial None)."""
    mark = _state_mark(workdir, env, state_flag)
    return {**mark, "workspace": workspace_name(workdir, env)}


def state_line(mark: Mapping[str, Any]) -> str:
    """The state an apply will read and write, for its question."""
    where = f"workspace {mark.get('workspace') or 'default'}"
    if mark.get("path") is None:
        return f"State: a remote backend's ({where}), not read here."
    if mark.get("note"):
        return f"State: {mark['path']} ({where}; {mark['note']})."
    if mark.get("serial") is None:
        return f"State: {mark['path']} ({where}; no state yet)."
    lineage = str(mark.get("lineage") or "")[:8]
    return f"State: {mark['path']} ({where}; serial {mark['serial']}, lineage {lineage})."


def _state_mark(workdir: Path, env: Mapping[str, str], state_flag: str | None) -> dict:
    path = state_path(workdir, env, state_flag)
    if path is None:
        return {"path": None, "note": "remote backend: its state was not read"}
    shown = _shown(path, workdir)
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            return {"path": shown, "note": "state too large to read"}
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {"path": shown, "lineage": None, "serial": None}
    except (OSError, ValueError) as exc:
        return {"path": shown, "note": f"unreadable: {type(exc).__name__}"}
    if not isinstance(doc, dict):
        return {"path": shown, "note": "not a state file"}
    return {"path": shown, "lineage": doc.get("lineage"), "serial": doc.get("serial")}


def _shown(path: Path, workdir: Path) -> str:
    try:
        return str(path.relative_to(workdir))
    except ValueError:
        return str(path)


def var_scrubber(assignments: Iterable[str]) -> Callable[[Any], Any] | None:
    """What removes the values of ``-var NAME=VALUE`` from a record: ``NAME=(sensitive)``
    in command lines (quoted or not), the bare value wherever it is long enough to mask.
    A value expanded at exec time (``-var "pw=$(cat f)"``) is in no file the workspace
    scan reads, and a variable given on the command line may be a secret whatever its
    declaration says."""
    swaps: dict[str, str] = {}
    values: set[str] = set()
    for assignment in assignments:
        name, eq, value = assignment.partition("=")
        if not eq or not value:
            continue
        values.add(value)
        for prefix in ("", "-var=", "--var="):
            shown = f"{prefix}{name}={MASK}"
            swaps[shlex.quote(prefix + assignment)] = shown
            swaps[prefix + assignment] = shown
    if not swaps:
        return None
    order = sorted(swaps, key=len, reverse=True)
    kept = keep(values)

    def text(value: str) -> str:
        for form in order:
            value = value.replace(form, swaps[form])
        return value

    def scrub(record: Any) -> Any:
        return mask_value(_strings(record, text), kept)

    return scrub


def _strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strings(v, fn) for v in value]
    return value


def masked(record: dict[str, Any], cwd: Path, extra: set[str] | None = None) -> dict[str, Any]:
    """``record`` with environment secrets and the workspace's sensitive values masked."""
    values = set(sensitive_values(cwd)) | (extra or set())
    return mask_value(redact_value(record), values)
