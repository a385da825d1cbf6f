"""Terraform's files recognised by their content, never by their name, and masked.

* a saved plan: a zip with terraform's members (``tfplan``, or ``tfstate`` with
  ``tfconfig/``); its values are its embedded states' and any the caller knows;
* a state: JSON with ``version``, ``serial`` and ``lineage`` (backups, ``errored.tfstate``,
  ``state pull > x.json``), gzip-compressed too;
* the backend cache ``init`` writes: JSON with ``backend.type`` and ``backend.config``
  (its secret settings: :mod:`.backends`);
* other terraform JSON documents (``show -json``, ``output -json`` saved to a file);
* HCL attribute files: var files giving values to variables declared sensitive, backend
  configuration files (``*.tfbackend``), configuration files whose ``terraform`` block
  sets a backend's, ``cloud``'s or OpenTofu ``encryption``'s secret settings.

:func:`masked` returns a file's masked bytes when it holds something sensitive, else
None (:class:`.workspace.MaskedFiles` writes the copies). Text is masked with
:data:`.sensitive.MASK` in every form a value prints in; binary plan members (protobuf,
msgpack) have each value overwritten with as many ``*``, so the archive stays whole.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from iac_kernel.terraform import backends
from iac_kernel.terraform.config_scan import parse_text
from iac_kernel.terraform.sensitive import (
    keep,
    leaves,
    mask_text,
    values_from_state,
    values_in_document,
)

#: Larger files are not read (terraform's own files are far smaller).
MAX_BYTES = 64 * 1024 * 1024
#: HCL attribute files larger than this are not var files or backend configs.
MAX_HCL_BYTES = 1024 * 1024
_ATTRIBUTE = re.compile(r'(?m)^[ \t]*"?([A-Za-z_][A-Za-z0-9_-]*)"?[ \t]*=')
#: A configuration file's ``terraform`` block with a backend, cloud or encryption block.
_TERRAFORM_BLOCK = re.compile(r'(?m)^[ \t]*"?(backend|cloud|encryption)"?\s*("[^"\n]*"\s*)?[{:]')


@dataclass(frozen=True)
class Found:
    """A terraform file: its kind and the sensitive values of its own."""

    kind: str  # "plan", "state", "backend", "document", "tfvars", "backend-config"
    values: frozenset[str]


def may_be(head: bytes, size: int) -> bool:
    """Whether a file starting with ``head`` (``size`` bytes long) may be one of
    terraform's files (a cheap look before reading it whole)."""
    if head[:2] == b"\x1f\x8b" or head[:4] == b"PK\x03\x04" or head.lstrip()[:1] == b"{":
        return size <= MAX_BYTES
    return size <= MAX_HCL_BYTES and b"\0" not in head


def recognise(data: bytes, names: Iterable[str] = ()) -> Found | None:
    """What terraform file ``data`` is (None: none), with the values it holds;
    ``names``: the variables the workspace declares sensitive (for var files)."""
    if data[:2] == b"\x1f\x8b":
        inner = _gunzip(data)
        return recognise(inner, names) if inner is not None else None
    if data[:4] == b"PK\x03\x04":
        return _plan(data)
    head = data[:64].lstrip()
    if head.startswith(b"{"):
        return _json(data, frozenset(names))
    return _hcl(data, frozenset(names))


def masked(data: bytes, names: Iterable[str] = (), known: Iterable[str] = ()) -> bytes | None:
    """``data`` masked (its own values and ``known`` ones) when it is a terraform file
    holding any; None when it is no terraform file or holds nothing sensitive."""
    names = frozenset(names)
    found = recognise(data, names)
    if found is None:
        return None
    values = found.values | keep(known)
    if not values:
        return None
    if data[:2] == b"\x1f\x8b":
        inner = _gunzip(data)
        out = masked(inner or b"", names, values)
        return gzip.compress(out, mtime=0) if out is not None else None
    if found.kind == "plan":
        return _masked_zip(data, values)
    text = data.decode("utf-8", "surrogateescape")
    out = mask_text(text, values)
    return out.encode("utf-8", "surrogateescape") if out != text else None


def _gunzip(data: bytes) -> bytes | None:
    try:
        inflate = zlib.decompressobj(wbits=31)
        out = inflate.decompress(data, MAX_BYTES)
    except zlib.error:
        return None
    return None if inflate.unconsumed_tail else out


def _plan(data: bytes) -> Found | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.namelist()
            is_plan = "tfplan" in members or (
                "tfstate" in members and any(m.startswith("tfconfig/") for m in members)
            )
            if not is_plan:
                return None
            found: set[str] = set()
            for member in ("tfstate", "tfstate-prev"):
                if member in members:
                    try:
                        found |= values_from_state(json.loads(archive.read(member) or b"{}"))
                    except (ValueError, AttributeError):
                        continue
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    return Found("plan", frozenset(found))


def _masked_zip(data: bytes, values: frozenset[str]) -> bytes | None:
    out = io.BytesIO()
    changed = False
    with (
        zipfile.ZipFile(io.BytesIO(data)) as archive,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy,
    ):
        for info in archive.infolist():
            body = archive.read(info)
            new = _masked_member(body, values)
            changed |= new != body
            copy.writestr(info, new)
    return out.getvalue() if changed else None


def _masked_member(body: bytes, values: frozenset[str]) -> bytes:
    if b"\0" not in body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return mask_text(text, values).encode("utf-8")
    for value in sorted(values, key=len, reverse=True):  # protobuf / msgpack: same length
        raw = value.encode("utf-8", "surrogatepass")
        if len(raw) >= 4 or body.count(raw) == 1:
            body = body.replace(raw, b"*" * len(raw))
    return body


def _json(data: bytes, names: frozenset[str]) -> Found | None:
    if len(data) > MAX_BYTES:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    backend = doc.get("backend")
    if isinstance(backend, dict) and isinstance(backend.get("config"), dict):
        kind = backend.get("type") if isinstance(backend.get("type"), str) else ""
        values = backends.secret_values(backend["config"], kind)
        return Found("backend", frozenset(keep(values)))
    if {"version", "serial", "lineage"} <= doc.keys():
        return Found("state", frozenset(values_from_state(doc)))
    if "terraform" in doc:  # a *.tf.json configuration: its terraform block's secrets
        settings = keep(backends.terraform_block_values(doc))
        if settings:
            return Found("backend-config", frozenset(settings))
    values = values_in_document(doc)
    if values:
        return Found("document", frozenset(values))
    given = [leaf for name in names & doc.keys() for leaf in leaves(doc[name])]
    return Found("tfvars", frozenset(keep(given))) if given else None


def _hcl(data: bytes, names: frozenset[str]) -> Found | None:
    if len(data) > MAX_HCL_BYTES or b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    keys = set(_ATTRIBUTE.findall(text))
    wanted = keys & (names | backends.ALL_SECRET_SETTINGS)
    if not wanted and not _TERRAFORM_BLOCK.search(text):
        return None
    doc = parse_text(text)
    if not isinstance(doc, dict):
        return None
    given = [leaf for name in names & doc.keys() for leaf in leaves(doc[name])]
    if given:
        return Found("tfvars", frozenset(keep(given)))
    found = backends.backend_config_values(doc) + backends.terraform_block_values(doc)
    values = keep(found)
    return Found("backend-config", frozenset(values)) if values else None
