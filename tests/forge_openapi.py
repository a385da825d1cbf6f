"""GitHub's published OpenAPI description (npm ``@octokit/openapi``, pinned), cached for
the forge tests, and a validator of requests and responses against it.

``python tests/forge_openapi.py`` fetches it into the cache (``.ci/run`` does, before the
suite); a test that needs it and finds neither the cache nor npm's registry is skipped
with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

#: The pinned release of @octokit/openapi (GitHub's description with Octokit's notes).
OCTOKIT_OPENAPI = "23.0.2"
MEMBER = "package/generated/api.github.com.json"


class Unavailable(Exception):
    """The description is neither cached nor fetchable; the message says why."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "iac-kernel-tests" / f"octokit-openapi-{OCTOKIT_OPENAPI}"


def fetch() -> Path:
    """The cached ``api.github.com.json``, fetched with ``npm pack`` when missing."""
    target = cache_dir() / "api.github.com.json"
    if target.is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed (needed once to fetch @octokit/openapi)")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [npm, "pack", f"@octokit/openapi@{OCTOKIT_OPENAPI}", "--silent"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=300,
        )
        packs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not packs:
            why = (done.stderr.strip().splitlines() or ["no package"])[-1]
            raise Unavailable(f"npm pack @octokit/openapi@{OCTOKIT_OPENAPI} failed: {why}")
        with tarfile.open(packs[0]) as tar:
            member = tar.getmember(MEMBER)
            data = tar.extractfile(member)
            assert data is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            partial.write_bytes(data.read())
            partial.replace(target)
    return target


@cache
def github_description() -> dict[str, Any]:
    return json.loads(fetch().read_text())


def pointer(*parts: str) -> str:
    """A JSON pointer URI into the description (registered as ``urn:github``)."""
    return "urn:github#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class GitHubSpec:
    """Matches a request to its operation and validates bodies (OpenAPI 3.0 schemas,
    ``openapi-schema-validator`` on ``jsonschema``)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT4

        self.doc = doc
        self.registry = Registry().with_resource(
            "urn:github", Resource.from_contents(doc, default_specification=DRAFT4)
        )
        self.routes: list[tuple[re.Pattern[str], str]] = []
        for template in doc["paths"]:
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
            self.routes.append((re.compile(f"^{regex}$"), template))

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        """(template, operation) of ``METHOD path``; LookupError when GitHub has none."""
        matches = [t for regex, t in self.routes if regex.match(path)]
        # The most literal template wins (/repos/{o}/{r}/pulls over /repos/{o}/{r}/{x}).
        matches.sort(key=lambda t: t.count("{"))
        for template in matches:
            found = self.doc["paths"][template].get(method.lower())
            if found is not None:
                return template, found
        raise LookupError(f"GitHub's API has no {method} {path}")

    def errors(self, ref: str, instance: Any) -> list[str]:
        import openapi_schema_validator as osv

        validator = osv.OAS30Validator(
            {"$ref": ref}, registry=self.registry, format_checker=osv.oas30_format_checker
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in validator.iter_errors(instance)
        ]

    def request_errors(self, method: str, path: str, body: Any) -> list[str]:
        template, op = self.operation(method, path)
        if "requestBody" not in op:
            return [] if body is None else [f"{method} {template} takes no body"]
        ref = pointer("paths", template, method.lower(), "requestBody", "content")
        if body is None:
            return (
                [f"{method} {template} needs a body"] if op["requestBody"].get("required") else []
            )
        return self.errors(ref + "/application~1json/schema", body)

    def response_ref(self, method: str, path: str, status: int) -> str | None:
        """The schema a ``status`` answer must match; None: GitHub documents none."""
        template, op = self.operation(method, path)
        described = op["responses"].get(str(status))
        if described is None:
            return None
        if "$ref" in described:
            described = self.resolve(described["$ref"])
        content = described.get("content", {}).get("application/json")
        if content is None:
            return None
        if "$ref" in op["responses"][str(status)]:
            name = op["responses"][str(status)]["$ref"].rpartition("/")[2]
            return pointer("components", "responses", name, "content", "application/json", "schema")
        parts = ("paths", template, method.lower(), "responses", str(status), "content")
        return pointer(*parts, "application/json", "schema")

    def resolve(self, ref: str) -> Any:
        node: Any = self.doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def example(self, name: str) -> Any:
        return json.loads(json.dumps(self.doc["components"]["examples"][name]["value"]))

    def complete(self, ref: str, instance: Any) -> Any:
        """``instance`` with every property the schema requires and it lacks filled with
        a value of the right type (GitHub's examples leave a few out)."""
        for _ in range(50):
            missing = self._first_missing(ref, instance)
            if missing is None:
                return instance
            target, name, schema = missing
            target[name] = self.value_of(schema)
        raise AssertionError(f"cannot complete an instance of {ref}")

    def _first_missing(self, ref: str, instance: Any) -> tuple[dict, str, dict] | None:
        import openapi_schema_validator as osv

        validator = osv.OAS30Validator({"$ref": ref}, registry=self.registry)
        for error in validator.iter_errors(instance):
            if error.validator != "required":
                continue
            name = re.match(r"'([^']+)' is a required property", error.message)
            if name is None:
                continue
            target: Any = instance
            for step in error.absolute_path:
                target = target[step]
            return target, name.group(1), error.schema.get("properties", {}).get(name.group(1), {})
        return None

    def value_of(self, schema: dict[str, Any], depth: int = 0) -> Any:
        """A plain value valid for ``schema`` (required members only)."""
        if "$ref" in schema:
            return self.value_of(self.resolve(schema["$ref"]), depth + 1)
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                return self.value_of(schema[key][0], depth + 1)
        if schema.get("nullable") or depth > 12:
            return None
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type")
        if kind == "object":
            props = schema.get("properties", {})
            return {
                k: self.value_of(props.get(k, {}), depth + 1) for k in schema.get("required", [])
            }
        if kind == "array":
            return []
        if kind == "integer" or kind == "number":
            return 1
        if kind == "boolean":
            return False
        if schema.get("format") == "date-time":
            return "2026-01-01T00:00:00Z"
        if schema.get("format") == "uri":
            return "https://example.invalid/"
        return "x"


if __name__ == "__main__":
    try:
        print(fetch())
    except Unavailable as exc:
        print(f"GitHub's OpenAPI description unavailable: {exc}", file=sys.stderr)
        sys.exit(0)  # the forge tests then skip, saying why
