"""Red team of the exec-time masking of values given to sensitive variables: routes the
first version missed. Each value is read from a file by the shell (no scan could know
it), and terraform itself prints it (a failed validation quotes the value; ``console``
prints what it is asked), or the guard's refusal quotes the argv. None of them may reach
the notebook or the store; a headless kernel refuses what needs a question.

Categories: other subcommands that take ``-var`` (plan, console, test, import), ``-chdir``
with the variable declared in ``*.tf.json`` there, a ``-var-file`` written during the call
outside the workspace, a ``-chdir`` folder outside the workspace whose ``*.auto.tfvars``
the call wrote, an HCL-typed value (a list: terraform prints its elements, not the text
given), a quoted value with a space through ``TF_CLI_ARGS_test``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terraform_support import TERRAFORM, needs_terraform, no_checkov_by_default, tf  # noqa: F401

pytestmark = needs_terraform

MAIN = """
variable "tok" {
  type      = string
  sensitive = true
  default   = "unset"
  validation {
    condition     = length(var.tok) < 8
    error_message = "too long"
  }
}
variable "lst" {
  type      = list(string)
  sensitive = true
  default   = []
}
resource "terraform_data" "x" {
  input = var.tok
}
"""
JSON_MAIN = {
    "variable": {
        "jtok": {
            "type": "string",
            "sensitive": True,
            "default": "unset",
            "validation": [{"condition": "${length(var.jtok) < 8}", "error_message": "too long"}],
        }
    },
    "resource": {"terraform_data": {"j": {"input": "${var.jtok}"}}},
}

TEST_RUN = 'run "plans_it" {\n  command = plan\n}\n'
#: A folder in the call's own /tmp (the sandbox's): outside the workspace.
OUTSIDE = "/tmp/redteam-outside"

#: route name -> (the value, a bash command giving it to a sensitive variable that way)
ROUTES = {
    "plan -var": ("GivenToPlan-6201", 'terraform plan -input=false -var "tok=$(cat {f})"'),
    "plan TF_VAR_": ("GivenToPlanEnv-6202", "TF_VAR_tok=$(cat {f}) terraform plan -input=false"),
    "plan TF_CLI_ARGS_plan": (
        "GivenToPlanArgs-6203",
        'TF_CLI_ARGS_plan="-var tok=$(cat {f})" terraform plan -input=false',
    ),
    "test -var": ("GivenToTest-6205", 'terraform test -var "tok=$(cat {f})"'),
    "test TF_CLI_ARGS_test quoted": (
        "GivenToTest Spaced-6206",
        "TF_CLI_ARGS_test=\"-var 'tok=$(cat {f})'\" terraform test",
    ),
    "-chdir tf.json plan": (
        "GivenToJson-6208",
        'terraform -chdir=j plan -input=false -var "jtok=$(cat {f})"',
    ),
    "-var-file outside": (
        "GivenInVarFile-6209",
        'printf \'tok = "%s"\\n\' "$(cat {f})" > /tmp/given.tfvars && '
        "terraform plan -input=false -var-file=/tmp/given.tfvars",
    ),
    "-chdir outside, auto.tfvars": (
        "GivenOutside-6210",
        f"mkdir {OUTSIDE} && cp main.tf {OUTSIDE}/ && "
        f'printf \'tok = "%s"\\n\' "$(cat {{f}})" > {OUTSIDE}/x.auto.tfvars && '
        f"terraform -chdir={OUTSIDE} plan -input=false",
    ),
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("redteam") / "ws"
    (root / "j").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "main.tf").write_text(MAIN)
    (root / "tests" / "a.tftest.hcl").write_text(TEST_RUN)
    (root / "j" / "main.tf.json").write_text(json.dumps(JSON_MAIN))
    for i, (value, _command) in enumerate(ROUTES.values()):
        (root / f"v{i}.txt").write_text(value)
    tf(root, "init", "-input=false", "-no-color")
    tf(root / "j", "init", "-input=false", "-no-color")
    return root


@pytest.fixture(scope="module")
def seen(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Everything the cell and the store hold after every route ran."""
    from kernel_harness import scripted_kernel

    tmp = tmp_path_factory.mktemp("kernel")
    commands = [c.format(f=f"v{i}.txt") for i, (_v, c) in enumerate(ROUTES.values())]
    turns = [
        {"text": f"Route {i}.", "tool_use": [{"name": "bash", "input": {"command": c}}]}
        for i, c in enumerate(commands)
    ]
    turns.append({"text": "Done."})
    script = tmp / "g.json"
    script.write_text(json.dumps({"name": "g", "exchanges": [{"match": "go", "turns": turns}]}))
    env = {"IAC_KERNEL_HEADLESS_POLICY": "allow", "TF_CLI_CONFIG_FILE": "/dev/null"}
    kernel = scripted_kernel(tmp, ws, script, env)
    try:
        cell = kernel.execute("go every way")
    finally:
        kernel.stop()
    wire = json.dumps([m["content"] for m in cell.messages], ensure_ascii=False)
    store = "\n".join(
        p.read_text(errors="replace") for p in (tmp / "sessions").rglob("*") if p.is_file()
    )
    return wire + "\n" + store


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_value_given_by_this_route_never_reaches_a_cell_or_the_store(seen: str, route: str):
    value = ROUTES[route][0]
    assert value not in seen
    # json.dumps of the wire escapes nothing in these values; the parts of a spaced one:
    assert all(part not in seen for part in value.split() if len(part) > 8)


def test_the_routes_ran(seen: str):
    """terraform printed where the values stood (masked): the routes were exercised."""
    assert seen.count("var.tok is") >= 3
    assert "(sensitive)" in seen


#: Calls a person approves (one session each): route -> (the value, the command).
APPROVED = {
    "console -var": (
        "GivenToConsole-6301",
        "echo 'nonsensitive(var.tok)' | terraform console -var \"tok=$(cat {f})\"",
    ),
    "import -var": (
        "GivenToImport-6302",
        'terraform import -input=false -var "tok=$(cat {f})" terraform_data.x abc',
    ),
    "test -var, run": ("GivenToTestRun-6303", 'terraform test -no-color -var "tok=$(cat {f})"'),
    "HCL list value": (
        "GivenInList-6304",
        'echo \'nonsensitive(var.lst)\' | terraform console -var "lst=[\\"$(cat {f})\\"]"',
    ),
}


@pytest.mark.parametrize("route", list(APPROVED))
def test_an_approved_call_prints_no_value_given_by_this_route(
    ws: Path, isolated_store: Path, route: str
):
    from apply_support import run_call

    value, command = APPROVED[route]
    (ws / "given.txt").write_text(value)
    run = run_call(ws, "bash", {"command": command.format(f="given.txt")}, lambda _r: "allow_once")
    assert run.result is not None and run.result.status in ("completed", "failed")
    shown = json.dumps([run.result.output, run.result.raw_output], ensure_ascii=False, default=str)
    stored = b"".join(p.read_bytes() for p in isolated_store.rglob("*") if p.is_file())
    assert "(sensitive)" in shown  # terraform printed it; masked where it stood
    assert value not in shown and value.encode() not in stored


@pytest.mark.parametrize(
    "command",
    [
        "terraform test -no-color",
        # By its path: asked by the call's own question (the guard may not see it), and
        # then not again at exec time for the same literal command.
        f"{TERRAFORM} test -no-color",
        "terraform -chdir=. test -no-color",
    ],
)
def test_terraform_test_is_asked_once_and_recorded_with_its_answer(
    ws: Path, isolated_store: Path, command: str
):
    from apply_support import APPROVER, run_call

    run = run_call(ws, "bash", {"command": command}, lambda _r: "allow_once")
    assert len(run.asked) == 1, [r.title for r in run.asked]
    (record,) = run.records
    assert record["kind"] == "terraform_test" and record["outcome"] == "applied"
    assert record["answer"] == "allow_once" and record["approver"] == APPROVER
    assert record["question"] == f"{run.asked[0].title}\n{run.asked[0].reason}"
