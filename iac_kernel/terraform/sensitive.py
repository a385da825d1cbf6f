"""Values Terraform marks sensitive, collected from documents, masked by value.

Where the values come from (:func:`values_in_document` reads any of these shapes):

* state files (``terraform.tfstate``, ``state pull``): ``sensitive_attributes`` of each
  resource instance and outputs with ``"sensitive": true``;
* ``show -json`` of a plan or of the state: ``before_sensitive`` / ``after_sensitive`` /
  ``sensitive_values`` masks, sensitive outputs, and root variables declared sensitive;
* ``output -json``: outputs with ``"sensitive": true``;
* the configuration (:mod:`.workspace`): variables declared ``sensitive = true`` with their
  defaults, ``*.tfvars`` values and ``TF_VAR_*`` values.

Masking is by value, not only by path: in Terraform 1.11 a ``terraform_data`` marks
``input`` sensitive while its ``output`` holds the same value unmarked, and a value
printed by ``output -raw`` or ``cat`` carries no mark at all.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from iac_kernel.masking.shapes import open_block
from iac_kernel.masking.values import ValueMasker

MASK = "(sensitive)"
#: Values shorter than this ("on", "80") are masked only as whole tokens or JSON strings
#: (iac_kernel.masking.values); they are still collected.
MIN_LENGTH = 4
_TRIVIAL = {"true", "false", "null", "none", "string", "number", "bool"}


def leaves(value: Any, depth: int = 0) -> Iterator[str]:
    """Every scalar inside ``value`` as the text it prints as."""
    if depth > 20:
        return
    if isinstance(value, dict):
        if set(value) == {"value", "type"}:  # a dynamic-typed value in a state file
            yield from leaves(value["value"], depth + 1)
            return
        for item in value.values():
            yield from leaves(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, depth + 1)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float | str):
        yield str(value)


def keep(values: Iterable[str]) -> set[str]:
    """The values worth masking: not blank, not a keyword, and not :data:`MASK` itself (a
    document read after masking, such as a guarded ``output -json``, shows it where the
    secret was; learnt as a secret it would count as one in every later result)."""
    return {v for v in values if v.strip() and v.lower() not in _TRIVIAL and v != MASK}


def masked_leaves(value: Any, mask: Any) -> Iterator[str]:
    """The leaves of ``value`` where ``mask`` (a sensitive_values-style tree) is true."""
    if mask is True:
        yield from leaves(value)
    elif isinstance(mask, dict) and isinstance(value, dict):
        for key, sub in mask.items():
            if key in value:
                yield from masked_leaves(value[key], sub)
    elif isinstance(mask, list) and isinstance(value, list):
        for sub, item in zip(mask, value, strict=False):
            yield from masked_leaves(item, sub)


def at_path(value: Any, steps: list[Any]) -> Any:
    """The part of a state instance's attributes a ``sensitive_attributes`` path names."""
    for step in steps:
        if isinstance(value, dict) and set(value) == {"value", "type"}:
            value = value["value"]
        kind = step.get("type") if isinstance(step, dict) else None
        key = step.get("value") if isinstance(step, dict) else step
        if isinstance(key, dict) and "value" in key:  # {"value": 0, "type": "number"}
            key = key["value"]
        if kind in ("get_attr", "index", None) and isinstance(value, dict):
            value = value.get(str(key)) if not isinstance(key, str) else value.get(key)
        elif isinstance(value, list) and isinstance(key, int | float):
            index = int(key)
            value = value[index] if 0 <= index < len(value) else None
        else:
            return None
    return value


def values_from_state(state: dict[str, Any]) -> set[str]:
    """A state file (format version 4, as ``state pull`` prints it too)."""
    found: list[str] = []
    for output in (state.get("outputs") or {}).values():
        if isinstance(output, dict) and output.get("sensitive"):
            found += leaves(output.get("value"))
    for resource in state.get("resources") or []:
        for instance in resource.get("instances") or [] if isinstance(resource, dict) else []:
            attributes = instance.get("attributes") or {}
            for path in instance.get("sensitive_attributes") or []:
                if isinstance(path, dict) and "path" in path:  # newer tofu/terraform shape
                    path = path["path"]
                if isinstance(path, list):
                    found += leaves(at_path(attributes, path))
    return keep(found)


def values_from_show(doc: dict[str, Any]) -> set[str]:
    """``show -json`` of a plan file or of the state."""
    found: list[str] = []
    for item in [*(doc.get("resource_changes") or []), *(doc.get("resource_drift") or [])]:
        change = item.get("change") or {}
        found += masked_leaves(change.get("before"), change.get("before_sensitive"))
        found += masked_leaves(change.get("after"), change.get("after_sensitive"))
    for change in (doc.get("output_changes") or {}).values():
        if change.get("before_sensitive") is True:
            found += leaves(change.get("before"))
        if change.get("after_sensitive") is True:
            found += leaves(change.get("after"))
    for key in ("values", "planned_values"):
        found += _values_tree(doc.get(key))
    prior = doc.get("prior_state")
    if isinstance(prior, dict):
        found += _values_tree(prior.get("values"))
    declared = ((doc.get("configuration") or {}).get("root_module") or {}).get("variables") or {}
    for name, decl in declared.items():
        if isinstance(decl, dict) and decl.get("sensitive"):
            found += leaves(decl.get("default"))
            found += leaves(((doc.get("variables") or {}).get(name) or {}).get("value"))
    return keep(found)


def _values_tree(values: Any) -> list[str]:
    """``values`` / ``planned_values``: outputs and modules' resources with sensitive_values."""
    if not isinstance(values, dict):
        return []
    found: list[str] = []
    for output in (values.get("outputs") or {}).values():
        if isinstance(output, dict) and output.get("sensitive"):
            found += leaves(output.get("value"))
    modules = [values.get("root_module") or {}]
    while modules:
        module = modules.pop()
        for resource in module.get("resources") or []:
            found += masked_leaves(resource.get("values"), resource.get("sensitive_values"))
        modules += module.get("child_modules") or []
    return found


def values_from_outputs(doc: dict[str, Any]) -> set[str]:
    """``output -json``: ``{"name": {"sensitive": bool, "type": ..., "value": ...}}``."""
    found: list[str] = []
    for item in doc.values():
        if isinstance(item, dict) and item.get("sensitive") is True:
            found += leaves(item.get("value"))
    return keep(found)


def values_in_document(doc: Any) -> set[str]:
    """Sensitive values of any Terraform JSON document (state, show -json, output -json)."""
    if not isinstance(doc, dict):
        return set()
    if "resources" in doc and "version" in doc and isinstance(doc.get("resources"), list):
        return values_from_state(doc)
    if any(
        k in doc
        for k in ("resource_changes", "planned_values", "prior_state", "values", "output_changes")
    ):
        return values_from_show(doc)
    if doc and all(isinstance(v, dict) and "sensitive" in v and "value" in v for v in doc.values()):
        return values_from_outputs(doc)
    return set()


def values_in_text(text: str) -> set[str]:
    """Sensitive values of a Terraform JSON document printed inside ``text`` (a command's
    output: ``state pull``, ``show -json``, ``output -json``, ``cat terraform.tfstate``)."""
    if '"sensitive' not in text:
        return set()
    found: set[str] = set()
    for line_doc in _json_documents(text):
        found |= values_in_document(line_doc)
    return found


def _json_documents(text: str) -> Iterator[Any]:
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        return
    try:
        yield json.loads(text[start : end + 1])
        return
    except json.JSONDecodeError:
        pass
    for line in text.splitlines():  # one document per line (show -json, output -json)
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


@functools.lru_cache(maxsize=32)
def _masker(values: frozenset[str]) -> ValueMasker:
    return ValueMasker(values, MASK)


def mask_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every sensitive value, in every form it prints in, replaced by
    :data:`MASK` (short values only as whole tokens, see :mod:`iac_kernel.masking.values`)."""
    if not text:
        return text
    return _masker(frozenset(values)).sub(text)


def mask_value(value: Any, values: Iterable[str]) -> Any:
    """``value`` (strings at any depth, dict keys too) with sensitive values masked."""
    values = frozenset(values)
    if not values:
        return value
    return _mask_tree(value, _masker(values), values)


def _mask_tree(value: Any, masker: ValueMasker, values: frozenset[str]) -> Any:
    if isinstance(value, str):
        return masker.sub(value)
    if isinstance(value, dict):
        return {masker.sub(str(k)): _mask_tree(v, masker, values) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_tree(v, masker, values) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return MASK if str(value) in values else value
    return value


#: An unfinished line up to this long is held whole by a redacting stream.
LINE_HOLD = 8192


class StreamMasker:
    """Masks a stream of chunks: holds back a tail that could be the start of a value.

    ``refresh`` (if given) returns the values known *now*; it is asked before each chunk
    is released, so a value a running call creates (a state it writes) is masked in the
    call's own live output. While ``ready`` (if given) says ``refresh`` would have to wait
    (a scan runs), text is held (:attr:`holding`) and :meth:`feed` returns at once: the
    program is not kept waiting on a full pipe. With ``hold_all`` nothing is released
    until :meth:`flush`, which also masks the values of any Terraform JSON the whole text
    holds (a remote ``state pull``).
    """

    def __init__(
        self,
        values: Iterable[str],
        hold_all: bool = False,
        on_found: Callable[[set[str]], None] | None = None,
        refresh: Callable[[], Iterable[str]] | None = None,
        redact: Callable[[str], str] | None = None,
        redact_hold: int = 0,
        ready: Callable[[], bool] | None = None,
    ):
        #: Secrets by environment and shape (:func:`iac_kernel.redact.redact`), applied to
        #: the held text too, so a secret cut across two chunks is still whole here.
        self.redact = redact
        self.redact_hold = redact_hold
        #: Called at :meth:`flush` with the values found in the held text, so that the
        #: call's final result (perhaps cut to its head and tail) masks them too.
        self.on_found = on_found
        self.refresh = refresh
        self.ready = ready
        self.holding = False
        self.values: frozenset[str] = frozenset(values)
        self.hold_all = hold_all
        self.pending = ""

    def _current(self) -> ValueMasker:
        if self.refresh is not None:
            self.values = self.values | frozenset(self.refresh())
        return _masker(self.values)

    def feed(self, chunk: str) -> str:
        if self.hold_all:
            self.pending += chunk
            return ""
        self.holding = self.ready is not None and not self.ready()
        if self.holding:
            self.pending += chunk
            return ""
        masker = self._current()
        text = self.pending + chunk
        held = ""
        if self.redact is not None:
            block = open_block(text)  # a private key whose END has not come yet: held raw
            if block is not None:
                text, held = text[:block], text[block:]
            text = self.redact(text)
        text = masker.sub(text)
        cut = max(len(text) - max(masker.longest - 1, 0), 0)
        if self.redact is not None and not held:
            # Shapes are matched within a line: hold the unfinished line (a long one, its
            # last redact_hold characters).
            line = max(text.rfind("\n"), text.rfind("\r")) + 1  # \r: progress bars
            cut = min(cut, line if len(text) - line <= LINE_HOLD else len(text) - self.redact_hold)
        # Never cut inside a mask we just wrote.
        for mark in (MASK, "[REDACTED:"):
            inside = text.rfind(mark, 0, cut)
            end = text.find("]", inside) + 1 if mark != MASK else inside + len(MASK)
            if 0 <= inside < cut < end:
                cut = inside
        self.pending = text[cut:] + held
        return text[:cut]

    def flush(self) -> str:
        text, self.pending = self.pending, ""
        extra = values_in_text(text) if self.hold_all else set()
        if extra and self.on_found is not None:
            self.on_found(extra)
        masker = self._current()
        if self.redact is not None:
            text = self.redact(text)
        return mask_text(masker.sub(text), extra) if extra else masker.sub(text)
