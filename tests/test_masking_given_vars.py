"""A value given to a sensitive variable at exec time (read from a file by the shell, so
no scan could know it) never reaches the notebook or the store, by any route terraform
takes its variables from; a plain variable's value stays readable.

The applies are refused (a headless kernel): the refusal quotes the argv terraform would
have got, which is where such a value first shows (issue 23 point 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401

pytestmark = needs_terraform

MAIN = """
variable "tok" {
  type      = string
  sensitive = true
  default   = "unset"
}
variable "region" {
  type    = string
  default = "nowhere"
}
resource "terraform_data" "x" {
  input = "${var.region}-${nonsensitive(length(var.tok))}"
}
"""

#: route name -> (the value, a bash command giving it to ``tok`` through that route)
ROUTES = {
    "-var WORD": ("GivenBySpace-5101", 'terraform apply -input=false -var "tok=$(cat {f})"'),
    "-var=WORD": ("GivenByEquals-5102", "terraform apply -input=false -var=tok=$(cat {f})"),
    "--var": ("GivenByGoFlag-5103", "terraform apply -input=false --var tok=$(cat {f})"),
    "TF_VAR_": ("GivenByEnv-5104", "TF_VAR_tok=$(cat {f}) terraform apply -input=false"),
    "TF_CLI_ARGS_apply": (
        "GivenByCliArgs-5105",
        'TF_CLI_ARGS_apply="-var tok=$(cat {f})" terraform apply -input=false',
    ),
    "TF_CLI_ARGS": (
        "GivenByAllArgs-5106",
        'TF_CLI_ARGS="-var tok=$(cat {f})" terraform apply -input=false',
    ),
    "script": ("GivenByScript-5107", "printf 'terraform apply -var tok=%s\\n' $(cat {f}) | sh"),
}
PLAIN = "PlainRegion-9-Shown"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("given") / "ws"
    root.mkdir()
    (root / "main.tf").write_text(MAIN)
    for i, (value, _command) in enumerate(ROUTES.values()):
        (root / f"v{i}.txt").write_text(value)
    tf(root, "init", "-input=false", "-no-color")
    return root


def script(path: Path) -> Path:
    commands = [command.format(f=f"v{i}.txt") for i, (_v, command) in enumerate(ROUTES.values())]
    commands.append(f"terraform apply -input=false -var region={PLAIN}")
    turns = [
        {"text": f"Route {i}.", "tool_use": [{"name": "bash", "input": {"command": c}}]}
        for i, c in enumerate(commands)
    ]
    turns.append({"text": "Done."})
    path.write_text(json.dumps({"name": "g", "exchanges": [{"match": "apply", "turns": turns}]}))
    return path


def test_values_given_to_sensitive_variables_never_reach_a_cell(ws: Path, tmp_path: Path):
    from kernel_harness import scripted_kernel

    env = {"IAC_KERNEL_HEADLESS_POLICY": "allow", "TF_CLI_CONFIG_FILE": "/dev/null"}
    kernel = scripted_kernel(tmp_path, ws, script(tmp_path / "g.json"), env)
    try:
        cell = kernel.execute("apply it every way")
    finally:
        kernel.stop()
    wire = json.dumps([m["content"] for m in cell.messages], ensure_ascii=False)
    store = "\n".join(
        p.read_text(errors="replace") for p in (tmp_path / "sessions").rglob("*") if p.is_file()
    )
    assert wire.count("was not approved") >= len(ROUTES)  # each apply was refused, quoted
    leaked = [route for route, (value, _c) in ROUTES.items() if value in wire + store]
    assert not leaked
    assert wire.count("tok=(sensitive)") >= len(ROUTES) - 1  # masked where the value stood
    assert PLAIN in wire  # a variable nobody declared sensitive is not hidden
