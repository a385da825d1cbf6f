"""The answer as it is written, through a real kernel (jupyter_client): a client that opened
the status comm saying it renders text deltas gets deltas and one final Markdown update;
other clients get whole-text updates. IOPub bytes stay within 3x the text plus a few KB,
at a fast and a slow pace. (How often updates go out is checked on a fake clock in
test_kernel_display.py and measured by bench/bench_iopub.py.)"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iac_kernel.kernel.render.display import DELTA_MIME
from iac_kernel.kernel.session.status import STATUS_TARGET
from kernel_harness import CellResult, KernelHarness, scripted_kernel, wire_bytes

LONG = "\n\n".join(
    f"Paragraph {n}: " + " ".join(f"word{n}x{i}" for i in range(40)) for n in range(12)
)
SHORT = " ".join(f"w{i}" for i in range(60))
#: prompt -> (text, seconds between chunks): a fast long answer and a slow short one.
PACES = {"fast long.": (LONG, 0.001), "slow short.": (SHORT, 0.02)}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHarness]:
    root = tmp_path_factory.mktemp("kernel-streaming")
    work = root / "work"
    work.mkdir()
    script = root / "script.json"
    (work / "notes.txt").write_text("hello\n")
    exchanges = [
        {"match": f"{who} {prompt}", "turns": [{"text": text, "delay": delay}]}
        for who in ("plain", "live")
        for prompt, (text, delay) in PACES.items()
    ]
    exchanges.append(
        {
            "match": "read the notes",
            "turns": [
                {
                    "text": "Reading.",
                    "tool_use": [{"name": "read_file", "input": {"path": "notes.txt"}}],
                    "usage": {"input_tokens": 100, "output_tokens": 10},
                },
                {"text": "It says hello.", "usage": {"input_tokens": 200, "output_tokens": 20}},
            ],
        }
    )
    script.write_text(json.dumps({"name": "streaming", "exchanges": exchanges}))
    harness = scripted_kernel(root, Path(os.path.realpath(work)), script)
    try:
        yield harness
    finally:
        harness.stop()


def _bound(text: str, seconds: float) -> float:
    """The IOPub target: 3x the text plus 6 KB a second of streaming."""
    return 3 * len(text.encode()) + 6000 * max(seconds, 1.0)


def _bytes(kernel: KernelHarness, result: CellResult) -> int:
    """The wire bytes of the cell's text displays (the cell's fixed messages aside:
    status, execute_input, the status comm's session info, the footer)."""
    return sum(
        wire_bytes(kernel.kc.session, m)
        for m in result.messages
        if str(m["content"].get("transient", {}).get("display_id", "")).startswith("iac-text-")
    )


def _text_bundles(result: CellResult) -> list[dict]:
    (display_id,) = result.text_ids()
    return result.displays()[display_id]


@pytest.mark.parametrize("prompt", list(PACES))
def test_without_the_extension_updates_resend_the_text(kernel: KernelHarness, prompt: str) -> None:
    text = PACES[prompt][0]
    started = time.monotonic()
    result = kernel.execute(f"plain {prompt}")
    seconds = time.monotonic() - started
    assert result.status == "ok" and result.answer() == text
    bundles = [b for d in result.text_ids() for b in result.displays()[d]]
    assert not any(DELTA_MIME in b for b in bundles)
    assert "text/plain" in bundles[-1]
    assert _bytes(kernel, result) <= _bound(text, seconds)


@pytest.mark.parametrize("prompt", list(PACES))
def test_with_the_extension_updates_carry_only_new_text(kernel: KernelHarness, prompt: str) -> None:
    text = PACES[prompt][0]
    comm_id = kernel.open_comm(STATUS_TARGET, {"renders": [DELTA_MIME]})
    started = time.monotonic()
    try:
        result = kernel.execute(f"live {prompt}")
    finally:
        kernel.kc.shell_channel.send(
            kernel.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
        )
    assert result.status == "ok"
    bundles = _text_bundles(result)
    deltas = [b[DELTA_MIME] for b in bundles[:-1]]
    assert deltas, "the text was streamed as deltas"
    joined = ""
    for delta in deltas:
        # Only the offset and the new text ("kind" is said for thinking only).
        assert set(delta) == {"offset", "text"} and delta["offset"] == len(joined)
        joined += delta["text"]
    assert text.startswith(joined)
    assert bundles[-1] == {"text/markdown": text}
    assert result.answer() == text
    assert _bytes(kernel, result) <= _bound(text, time.monotonic() - started)


def test_after_the_extension_closes_its_comm_updates_resend_the_text(
    kernel: KernelHarness,
) -> None:
    comm_id = kernel.open_comm(STATUS_TARGET, {"renders": [DELTA_MIME]})
    kernel.kc.shell_channel.send(
        kernel.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
    )
    result = kernel.execute("plain slow short.")
    assert not any(DELTA_MIME in b for b in _text_bundles(result))


def test_tokens_reach_the_status_comm_after_each_model_call(kernel: KernelHarness) -> None:
    comm_id = kernel.open_comm(STATUS_TARGET, {})
    try:
        result = kernel.execute("Please read the notes")
    finally:
        kernel.kc.shell_channel.send(
            kernel.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
        )
    assert result.status == "ok" and "It says hello." in result.answer()
    infos = [
        m["content"]["data"]["info"]
        for m in result.of_type("comm_msg")
        if m["content"]["comm_id"] == comm_id and m["content"]["data"].get("type") == "session_info"
    ]
    mid_turn = [i["turnUsage"] for i in infos if i["busy"] and i["turnUsage"]]
    # The first model call's tokens are on the status comm while the turn still runs.
    assert {"input_tokens": 100, "output_tokens": 10}.items() <= mid_turn[0].items()
    assert any(i["turns"] and i["turns"][0]["msgId"] == result.msg_id for i in infos)


def _final_text_update(result: CellResult) -> dict:
    last = result.text_ids()[-1]
    return [
        m
        for m in result.of_type("display_data", "update_display_data")
        if m["content"]["transient"]["display_id"] == last
    ][-1]


def test_with_the_extension_the_session_info_comes_over_the_comm_alone(
    kernel: KernelHarness,
) -> None:
    """Without the extension the answer's final update carries the session info in its
    metadata; with it, that update has none (its bytes pay for updates), and the status
    comm says the same as the turn ends, the last turn's tokens included."""
    from iac_kernel.kernel.session.status import SESSION_MIME

    plain = kernel.execute("plain: read the notes")
    shown = _final_text_update(plain)["content"]["metadata"][SESSION_MIME]
    comm_id = kernel.open_comm(STATUS_TARGET, {"renders": [DELTA_MIME]})
    try:
        live = kernel.execute("live: read the notes")
    finally:
        kernel.kc.shell_channel.send(
            kernel.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
        )
    assert live.status == "ok" and live.answer() == plain.answer()
    assert _final_text_update(live)["content"]["metadata"] == {}
    infos = [
        m["content"]["data"]["info"]
        for m in live.of_type("comm_msg")
        if m["content"]["comm_id"] == comm_id and m["content"]["data"].get("type") == "session_info"
    ]
    ended = infos[-1]
    assert ended["busy"] is False and ended["turns"] == []
    for key in ("version", "sessionId", "model", "provider", "mode", "title", "cwd"):
        assert ended[key] == shown[key], key
    assert ended["turnUsage"] == shown["turnUsage"]  # the same script, the same tokens
    total = shown["usage"]["total_tokens"] + ended["turnUsage"]["total_tokens"]
    assert ended["usage"]["total_tokens"] == total
