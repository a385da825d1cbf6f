"""``%pr`` in a real kernel process: the magic asks the agent (scripted model) for the
``pull_request`` call, the user approves the diff through stdin, the request is opened on
the loopback GitHub Enterprise and its address is shown in the cell."""

from __future__ import annotations

from pathlib import Path

from forge_support import (
    PROJECT,
    TOKEN,
    Site,
    forge_kernel,
    host_git,
    needs_git_sandbox,
    site_fixture,  # noqa: F401 (the site fixture)
    spec_fixture,  # noqa: F401 (the spec fixture)
)
from iac_kernel.tools.pull_request import request_prompt
from kernel_harness import KernelHarness

pytestmark = needs_git_sandbox


def test_pr_magic_opens_the_request_and_shows_its_address(site: Site, outside_tmp: Path):
    assert "open a pull request" in request_prompt("x").lower()  # what the script matches
    kernel: KernelHarness = forge_kernel(site, outside_tmp)
    try:
        edited = kernel.execute("change the input")
        assert edited.status == "ok", edited.reply["content"]
        prompts: list[str] = []

        def answer(prompt: str) -> str:
            prompts.append(prompt)
            return "1"  # allow once

        result = kernel.execute("%pr Bump the input", allow_stdin=True, on_stdin=answer)
        assert result.status == "ok", result.reply["content"]
    finally:
        kernel.stop()
    assert len(prompts) == 1 and "pull_request" in prompts[0]
    assert '+  input = "two"' in prompts[0]  # the question carried the diff
    [pull] = site.forge.pulls
    url = f"http://{site.forge.host}/{PROJECT}/pull/1"
    assert url in result.markdown()
    assert {c for _m, _p, c in site.forge.api_seen} == {f"token {TOKEN}"}
    bare = site.forge.repos / f"{PROJECT}.git"
    assert '"two"' in host_git("--git-dir", str(bare), "show", f"{pull['head']}:main.tf")
