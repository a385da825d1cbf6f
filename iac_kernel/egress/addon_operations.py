"""What a request that carries a brokered credential does: the operation, read from the
request itself (part of the broker's mitmdump addon; stdlib and botocore only, never the
agent's package; botocore is imported on first use, so the agent imports the names too).

* AWS: the service from the Signature V4 scope (its signing name; botocore's service
  models say which services sign with it), the operation from the request as each
  protocol carries it: ``X-Amz-Target`` (JSON), the ``Action`` parameter (query, EC2),
  ``/service/S/operation/O`` (RPC v2), else the method and path matched against every
  operation's ``requestUri`` (REST: S3, Lambda, EKS ...). Never a hand-written table.
* Bearer APIs (GitHub, GitLab, Azure Resource Manager, Google APIs, HCP Terraform,
  registries, git over HTTP): the method and path.

Each operation is a ``read``, a ``change`` or a ``secret`` (a read that returns a secret
or a credential). For AWS a read is a REST ``GET``/``HEAD`` or an operation whose name
starts with a read verb; a read whose output holds a member the model marks sensitive
with a secret's name (``SecretString``, ``Plaintext``, ``Variables``, ``PasswordData``,
``SecretAccessKey`` ...) is decided when its answer comes: :func:`holds_secret` looks for
such a member with a value in the response. What cannot be read is a change (asked).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote

READ, CHANGE, SECRET = "read", "change", "secret"
#: AWS's own domains (its API hosts are below them).
AWS_DOMAINS = ("amazonaws.com", "amazonaws.com.cn", "api.aws")
#: Operation names of reads (query, JSON and RPC protocols name their verbs).
READ_VERBS = re.compile(
    r"^(Get|List|Describe|Head|Search|Lookup|BatchGet|Query|Scan|Select|Validate|"
    r"Estimate|Preview|Simulate|View)(?![a-z])"
)
#: Sensitive output members whose name says they hold a secret or a credential.
SECRET_MEMBER = re.compile(
    r"secret|password|passwd|token|credential|plaintext|privatekey|keymaterial|"
    r"presharedkey|sharedsecret|authstring|connectionstring|^variables$|^value$|^values$|"
    r"^secretkey$|seed|userdata",
    re.IGNORECASE,
)
#: Output members that hold a secret though the models do not mark them sensitive.
UNMARKED_SECRET = re.compile(
    r"^(authorizationToken|ConnectionProperties|PasswordData|DbPassword|SecretString)$",
    re.IGNORECASE,
)
#: Input members that name the resource an operation acts on.
RESOURCE_MEMBER = re.compile(r"(Name|Id|Arn|Identifier|Bucket|Key|Path)$")
_LABEL = re.compile(r"\{([^}+]+)(\+?)\}")


@functools.cache
def _loader() -> Any:
    from botocore.loaders import Loader

    return Loader()


@functools.cache
def service_model(name: str) -> Any | None:
    """botocore's model of service ``name``, or None."""
    from botocore.exceptions import DataNotFoundError
    from botocore.model import ServiceModel

    try:
        return ServiceModel(_loader().load_service_model(name, "service-2"), name)
    except DataNotFoundError:
        return None


_INDEX_LOCK = threading.Lock()


@functools.cache
def _signing_index() -> dict[str, list[str]]:
    """Signing name and endpoint prefix -> the services that use it (every model read
    once, about 3 s; only when a scope's name is not itself a service's)."""
    with _INDEX_LOCK:
        index: dict[str, list[str]] = {}
        for name in _loader().list_available_services("service-2"):
            model = service_model(name)
            if model is None:
                continue
            meta = model.metadata
            for key in {meta.get("signingName"), meta.get("endpointPrefix")} - {None}:
                index.setdefault(key, []).append(name)
        return index


def services_for(signing_name: str) -> Iterable[Any]:
    """The service models that sign with ``signing_name``: the same-named one first,
    then (read once, only when needed) the others."""
    first = service_model(signing_name)
    if first is not None:
        yield first
    for name in _signing_index().get(signing_name, []):
        if name != signing_name and (model := service_model(name)) is not None:
            yield model


def _by_host(models: Iterable[Any], host: str) -> Iterable[Any]:
    """``models``, those whose endpoint prefix names an AWS host first (S3 Control's
    ``ACCOUNT.s3-control.REGION.amazonaws.com`` signs as ``s3`` too)."""
    if not host.endswith(tuple(f".{domain}" for domain in AWS_DOMAINS)):
        yield from models
        return
    labels = set(host.split("."))
    later = []
    for model in models:
        if model.metadata.get("endpointPrefix") in labels:
            yield model
        else:
            later.append(model)
    yield from later


class Request:
    """The parts of one HTTP request an operation is read from."""

    def __init__(
        self,
        method: str,
        host: str,
        path: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        body: bytes,
    ) -> None:
        self.method = method.upper()
        self.host = host.lower()
        raw_path, _, raw_query = path.partition("?")
        self.path = unquote(raw_path) or "/"
        self.query = parse_qsl(raw_query, keep_blank_values=True)
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        #: every value of each header (a repeated one may be read either way upstream)
        self.header_lists: dict[str, list[str]] = {}
        for name, value in pairs:
            self.header_lists.setdefault(name.lower(), []).append(value)
        self.headers = {name: values[0] for name, values in self.header_lists.items()}
        self.body = body

    @functools.cached_property
    def form_pairs(self) -> list[tuple[str, str]]:
        """Query parameters, then a form body's (query and EC2 protocols)."""
        found = list(self.query)
        if "x-www-form-urlencoded" in self.headers.get("content-type", "").lower():
            try:
                found += parse_qsl(self.body.decode("utf-8"), keep_blank_values=True)
            except UnicodeDecodeError:
                pass
        return found

    @functools.cached_property
    def form(self) -> dict[str, str]:
        return dict(self.form_pairs)

    @functools.cached_property
    def json_body(self) -> dict[str, Any]:
        try:
            value = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


def aws_operation(signing_name: str, request: Request) -> dict[str, Any]:
    """The AWS operation ``request`` calls (``service``, ``operation``, ``resource``,
    ``access``, and for a read that may return a secret, ``secret_members``)."""
    for model in _by_host(services_for(signing_name), request.host):
        found = _operation_of(model, request)
        if found is not None:
            operation, params = found
            return _described(model, operation, params, request)
    return {
        "service": signing_name,
        "operation": f"{request.method} {request.path[:80]}",
        "access": CHANGE,
        "note": "not an operation botocore's models know",
    }


def _operation_of(model: Any, request: Request) -> tuple[Any, dict[str, str]] | None:
    """(operation model, parameters naming its resource) of ``request`` in ``model``, read
    the way each protocol the service speaks reads it (botocore's ``protocols``). When
    they disagree, or a protocol finds it twice (a repeated ``Action`` or
    ``X-Amz-Target``, which the service may read either way), None: a change."""
    protocols = model.metadata.get("protocols") or [model.metadata.get("protocol")]
    # A service may still read a protocol its model no longer lists (SQS reads the
    # query protocol too): markers of two protocols in one request are a change.
    if sum(bool(_names_by(p, request)) for p in ("json", "query", "smithy-rpc-v2-cbor")) > 1:
        return None
    found: dict[str, tuple[Any, dict[str, str]]] = {}
    for protocol in protocols:
        names = _names_by(protocol, request)
        if len(names) > 1:
            return None
        for name in names:
            if name not in model.operation_names:
                return None
            params = request.json_body if protocol == "json" else request.form
            found[name] = (model.operation_model(name), params)
        if protocol in ("rest-json", "rest-xml") and (rest := _rest_operation(model, request)):
            found[rest[0].name] = rest
    return next(iter(found.values())) if len(found) == 1 else None


def _names_by(protocol: str, request: Request) -> set[str]:
    """The operation names a non-REST protocol reads from the request."""
    if protocol == "json":
        targets = ",".join(request.header_lists.get("x-amz-target", [])).split(",")
        return {t.strip().rpartition(".")[2] for t in targets if t.strip()}
    if protocol in ("query", "ec2"):
        return {value for key, value in request.form_pairs if key == "Action"}
    if protocol.startswith("smithy-rpc-v2"):
        rpc = re.fullmatch(r"/service/[^/]+/operation/([^/]+)", request.path)
        return {rpc.group(1)} if rpc else set()
    return set()


def _rest_operation(model: Any, request: Request) -> tuple[Any, dict[str, str]] | None:
    """The REST operation whose method and ``requestUri`` fit the request best (the most
    literal characters matched); S3's virtual-hosted bucket goes first in the path."""
    path = request.path
    if model.metadata.get("endpointPrefix") == "s3":
        bucket = _virtual_host_bucket(request.host)
        if bucket:
            path = f"/{bucket}{path}" if path != "/" else f"/{bucket}"
    keys = {k for k, _ in request.query}
    best: tuple[int, Any, dict[str, str]] | None = None
    for name in model.operation_names:
        operation = model.operation_model(name)
        http = operation.http
        if http.get("method", "").upper() != request.method:
            continue
        uri_path, _, uri_query = http.get("requestUri", "/").partition("?")
        params = _match_path(uri_path, path)
        if params is None:
            continue
        needed = [q.partition("=")[0] for q in uri_query.split("&") if q]
        if any(k not in keys for k in needed if k != "x-id"):
            continue
        headers = _required_headers(operation)
        if any(h not in request.headers for h in headers):
            continue
        score = len(_LABEL.sub("", uri_path)) + 10 * (len(needed) + len(headers))
        if best is None or score > best[0]:
            best = (score, operation, params)
    return (best[1], best[2]) if best else None


def _required_headers(operation: Any) -> list[str]:
    """The headers an operation cannot be sent without (S3's ``x-amz-copy-source``)."""
    shape = operation.input_shape
    if shape is None:
        return []
    return [
        str(shape.members[name].serialization.get("name", name)).lower()
        for name in shape.required_members
        if shape.members[name].serialization.get("location") == "header"
    ]


def _virtual_host_bucket(host: str) -> str | None:
    found = re.match(r"^(.+?)\.s3[.-]", host)
    return found.group(1) if found else None


@functools.cache
def _path_pattern(uri: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    labels: list[str] = []
    out, last = [], 0
    for found in _LABEL.finditer(uri):
        out.append(re.escape(uri[last : found.start()]))
        labels.append(found.group(1))
        out.append("(.+)" if found.group(2) else "([^/]+)")
        last = found.end()
    out.append(re.escape(uri[last:]))
    return re.compile("".join(out) + "/?"), tuple(labels)


def _match_path(uri: str, path: str) -> dict[str, str] | None:
    pattern, labels = _path_pattern(uri)
    found = pattern.fullmatch(path)
    return dict(zip(labels, found.groups(), strict=True)) if found else None


def _described(
    model: Any, operation: Any, params: Mapping[str, Any], request: Request
) -> dict[str, Any]:
    name = operation.name
    rest = model.metadata.get("protocol") in ("rest-json", "rest-xml")
    read = request.method in ("GET", "HEAD") if rest else bool(READ_VERBS.match(name))
    described: dict[str, Any] = {
        "service": model.metadata.get("signingName") or model.service_name,
        "operation": name,
        "access": READ if read else CHANGE,
    }
    resource = _resource(operation, params)
    if resource:
        described["resource"] = resource
    if read:
        members = sorted(secret_members(model.service_name, name))
        if members:
            described["secret_members"] = members
    return described


def _resource(operation: Any, params: Mapping[str, Any]) -> str | None:
    """``user/ci``, ``bucket/key``: the first input member naming a resource."""
    shape = operation.input_shape
    if shape is None:
        return None
    for member in shape.members:
        value = params.get(member) or params.get(f"{member}.1")
        if isinstance(value, str) and value and RESOURCE_MEMBER.search(member):
            if value.startswith("arn:"):
                return value[:200]
            kind = RESOURCE_MEMBER.sub("", member) or member
            return f"{_kebab(kind)}/{value}"[:200]
    return None


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


@functools.cache
def secret_members(service: str, operation: str) -> frozenset[str]:
    """Names of the members of the operation's output (deeply) that the model marks
    sensitive and whose name says they hold a secret or a credential."""
    model = service_model(service)
    found: set[str] = set()
    if model is not None:
        _walk(model.operation_model(operation).output_shape, frozenset(), found)
    return frozenset(found)


def _walk(shape: Any, seen: frozenset[str], found: set[str]) -> None:
    if shape is None or shape.name in seen:
        return
    seen = seen | {shape.name}
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            sensitive = member.serialization.get("sensitive") or member.metadata.get("sensitive")
            if (sensitive and SECRET_MEMBER.search(name)) or UNMARKED_SECRET.match(name):
                found.add(name)
                # and as the answer writes it (EC2: ``passwordData``)
                found.add(str(member.serialization.get("name") or name))
            _walk(member, seen, found)
    elif shape.type_name == "list":
        _walk(shape.member, seen, found)
    elif shape.type_name == "map":
        _walk(shape.value, seen, found)


def holds_secret(members: Iterable[str], body: bytes, content_type: str = "") -> str | None:
    """The first of ``members`` that holds a value in a response ``body`` (JSON or XML),
    or None. Any other form (CBOR, an unknown type) holds one where the name appears."""
    kind = content_type.lower()
    for member in members:
        name = re.escape(member).encode()
        if "json" in kind:
            value = rb'"' + name + rb'"\s*:\s*(?:"[^"]|\{\s*"|\[\s*[^\]\s])'
            found = re.search(value, body, re.IGNORECASE)
        elif "xml" in kind or body.lstrip().startswith(b"<"):
            found = re.search(rb"<" + name + rb"(?:\s[^>]*)?>\s*[^<\s]", body, re.IGNORECASE)
        else:
            found = re.search(name, body, re.IGNORECASE)
        if found:
            return member
    return None


def bearer_operation(request: Request) -> dict[str, Any]:
    """The operation of a request with a brokered token (any API but AWS)."""
    path = request.path
    described: dict[str, Any] = {"service": request.host, "operation": _short(request)}
    if path.endswith("/git-receive-pack") or "upgrade" in request.header_lists:
        access = CHANGE
    elif _KUBE_ACTION.search(path):
        access = CHANGE
    elif path.endswith("/git-upload-pack"):
        access = READ
    elif _overridden(request):
        access = CHANGE
    elif request.method in ("GET", "HEAD", "OPTIONS"):
        vault = "x-vault-token" in request.headers and not path.startswith("/v1/sys/")
        secret = vault or path.endswith(":access") or bool(_SECRET_PATH.search(path))
        access = SECRET if secret else READ
    elif path.endswith("/graphql") and _graphql_query(request.json_body):
        access = READ
    else:
        access = CHANGE
    described["access"] = access
    return described


#: Kubernetes subresources that run something or open a tunnel, whatever the method.
_KUBE_ACTION = re.compile(r"/(exec|attach|portforward|proxy)(/|$)")
#: Reads that return secrets: Kubernetes Secrets, CI/CD variables, terraform state.
_SECRET_PATH = re.compile(
    r"/secrets(/|$)|/variables(/|$)|/state-versions/[^/]+/download|/hosted_state|"
    r"/current-state-version"
)
#: Headers and parameters some servers read as the request's real method.
_OVERRIDES = ("x-http-method-override", "x-http-method", "x-method-override")


def _overridden(request: Request) -> bool:
    """The request asks the server to read it as another method (or, for GraphQL over
    GET, carries a mutation): judged as a change."""
    if any(name in request.header_lists for name in _OVERRIDES):
        return True
    if any(key.lower() in ("_method", "method") for key, _ in request.query):
        return True
    query = " ".join(v for k, v in request.query if k == "query")
    return request.path.endswith("/graphql") and bool(_MUTATION.search(query))


_MUTATION = re.compile(r"\b(mutation|subscription)\b")


def _graphql_query(body: Mapping[str, Any]) -> bool:
    """A GraphQL request that only queries: no ``mutation`` or ``subscription`` anywhere
    in the document (any operation of it may be the one run)."""
    text = body.get("query")
    return isinstance(text, str) and bool(text.strip()) and not _MUTATION.search(text)


def _short(request: Request) -> str:
    path = re.sub(r"/[0-9a-f-]{16,}|/\d{3,}", "/…", request.path)
    return f"{request.method} {path[:120]}"
