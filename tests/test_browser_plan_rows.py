"""Issue 43 item 4: every plan card reaches every row, in headless Chromium.

The scripted model calls ``terraform_plan`` on a plan of 10,000 changes (a ``terraform`` on
PATH: ``plan -out=FILE`` writes a plan file, ``show -json`` prints the synthetic plan of
bench/plan_scale.py's shape). The tool's own card, like an apply question's, holds every
row in compact form, not the bounded plan's first rows (125 here, none of them a create):
a filter for every action (create too), a search over all rows that finds the last create,
that row shown, and its attribute diff, which the card left out, from the kernel.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle
from browser.plans import SECRET, synthetic_show
from iac_kernel.terraform.plan import parse_plan
from iac_kernel.terraform.summary import card_rows, expand_rows

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_big_plan.json"
RESOURCES = 10_000
#: `terraform` as the tool runs it: ``plan -out=FILE`` saves a plan file, ``show`` prints
#: the synthetic plan.
FAKE_TERRAFORM = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in
    show) exec cat "{root}/show.json" ;;
    plan) plan=1 ;;
    -out=*) out="${{arg#-out=}}" ;;
  esac
done
if [ -n "$plan" ] && [ -n "$out" ]; then
  cp "{root}/saved.zip" "$out" && echo "Saved the plan to: $out" && exit 0
fi
echo "fake terraform: $*" >&2
exit 1
"""
ROW_ACTIONS = "n => [...n.querySelectorAll('.iac-plan-vrow')].map(r => r.dataset.action)"
ROWS = expand_rows(card_rows(parse_plan(synthetic_show(RESOURCES))))
CREATES = [r["address"] for r in ROWS if r["action"] == "create"]
#: The last row in review order: a create whose diff the card leaves out.
LAST = CREATES[-1]


def _workspace(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "show.json").write_text(json.dumps(synthetic_show(RESOURCES)))
    with zipfile.ZipFile(root / "saved.zip", "w") as plan:  # what the guard takes for a plan
        plan.writestr("tfplan", "a saved plan (the fake terraform prints show.json)")
    terraform = root / "bin" / "terraform"
    terraform.parent.mkdir()
    terraform.write_text(FAKE_TERRAFORM.format(root=root))
    terraform.chmod(0o755)


def test_the_terraform_plan_card_reaches_every_row(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    from playwright.sync_api import expect

    assert LAST == ROWS[-1]["address"] and len(CREATES) > 7000
    server = jupyter("jupyterlab")
    _workspace(server.root)
    server.kernel_env(
        {
            **server_env(tmp_path, SCRIPT),
            "PATH": f"{server.root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "TF_CLI_CONFIG_FILE": "/dev/null",
            "IAC_KERNEL_CHECKOV": "off",
        }
    )
    write_notebook(server.root / "plan.ipynb")
    page.goto(server.notebook_url("plan.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please plan the big stack")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "awaiting_permission")
        cell.locator(".iac-question").get_by_role("button", name="Allow once").click()
        expect(card).to_have_attribute("data-status", "done")
        review = cell.locator(".iac-plan-review")
        expect(review.locator(".iac-plan-status")).to_have_text(f"{RESOURCES} rows")
        assert review.locator(".iac-plan-more").count() == 0  # nothing left out
        filters = review.locator(".iac-plan-filter").all_inner_texts()
        assert [f.split()[1] for f in filters[1:]] == ["replace", "delete", "update", "create"]
        assert filters[4] == f"+ create {len(CREATES)}"

        # Creates only; then the last of them by search: shown, its diff from the kernel.
        review.locator(".iac-plan-filter", has_text="create").click()
        assert set(review.evaluate(ROW_ACTIONS)) == {"create"}
        review.locator(".iac-plan-search").fill(LAST)
        row = review.locator(f".iac-plan-vrow[data-address='{LAST}']")
        expect(row).to_be_visible()
        expect(review.locator(".iac-plan-status")).to_have_text(f"1 of {RESOURCES} rows")
        row.locator(".iac-plan-address").click()
        number = int(LAST.rsplit("[", 1)[1].rstrip("]"))
        diff = row.locator(".iac-plan-diff")
        expect(diff).to_contain_text(f"+ input.size = {number + 1}")
        expect(diff).to_contain_text("+ token = (sensitive)")
        expect(cell).to_contain_text("The plan is saved in big.tfplan.")
        assert SECRET not in cell.inner_text()
        page.screenshot(path=str(screenshots / "browser-plan-rows.png"))
    except Exception:
        page.screenshot(path=str(screenshots / "browser-plan-rows-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
