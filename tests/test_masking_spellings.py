"""Issue 32 item 2: masking by value finds each encoding family in every spelling - case
(hex, ``\\u`` escapes, ``%2f``), each character escaped (``\\x41``, ``\\u0041``, ``%41``,
``&#65;``, ``&#x41;``, octal), and split forms (base64 and hex wrapped by real ``base64``,
``xxd``, ``od``, ``hexdump``; one character per line). Controls stay readable."""

from __future__ import annotations

import base64
import shlex
import shutil
import subprocess

import pytest

from iac_kernel.masking.encodings import caseless_forms, forms, quoted_forms
from iac_kernel.masking.values import ValueMasker
from iac_kernel.redact import redact
from iac_kernel.terraform.sensitive import MASK, StreamMasker, mask_text

VALUE = "Zq9-Secret&Value<77>"
DATA = VALUE.encode()


def each(fmt: str, upper: bool = False) -> str:
    out = "".join(fmt.format(b) for b in DATA)
    return out.upper() if upper else out


SPELLINGS = {
    "hex lower": DATA.hex(),
    "hex upper": DATA.hex().upper(),
    "hex mixed": "".join(c.upper() if i % 3 else c for i, c in enumerate(DATA.hex())),
    "\\x each": each("\\x{:02x}"),
    "\\X each upper": each("\\x{:02X}"),
    "%XX each": each("%{:02X}"),
    "%xx each": each("%{:02x}"),
    "url %2f-style lower": "Zq9-Secret%26Value%3c77%3e",
    "\\u each": "".join(f"\\u{ord(c):04x}" for c in VALUE),
    "\\u each upper": "".join(f"\\u{ord(c):04X}" for c in VALUE),
    "go json upper escapes": "Zq9-Secret\\u0026Value\\u003C77\\u003E",
    "&#dd;": "".join(f"&#{ord(c)};" for c in VALUE),
    "&#xhh;": "".join(f"&#x{ord(c):x};" for c in VALUE),
    "&#XHH;": "".join(f"&#X{ord(c):X};" for c in VALUE),
    "html escape": "Zq9-Secret&amp;Value&lt;77&gt;",
    "octal escapes": each("\\{:03o}"),
    "one char per line": "\n".join(VALUE),
    "split in two lines": VALUE[:9] + "\n" + VALUE[9:],
    "base64 wrapped at 76": base64.encodebytes(b"x" * 70 + DATA + b"y" * 70).decode(),
    "hex, bytes colon-separated": ":".join(f"{b:02x}" for b in DATA),
    "HEX, bytes colon-separated": ":".join(f"{b:02X}" for b in DATA),
    "C array (xxd -i)": ", ".join(f"0x{b:02x}" for b in DATA),
    "C array upper (xxd -i -u)": ", ".join(f"0X{b:02X}" for b in DATA),
    "0x each, spaced": " ".join(f"0x{b:02x}" for b in DATA),
    "value upper-cased": VALUE.upper(),
    "value lower-cased": VALUE.lower(),
    "base64 wrapped at 8": "\n".join(
        base64.b64encode(DATA)[i : i + 8].decode() for i in range(0, 28, 8)
    ),
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_spelling_is_masked(name: str):
    text = f"before\n{SPELLINGS[name]}\nafter"
    masked = mask_text(text, {VALUE})
    assert MASK in masked and "before" in masked and "after" in masked, masked
    assert masked.count("\n") == text.count("\n")  # line breaks kept


DUMPS = ["xxd", "xxd -p -c 4", "xxd -g 1", "od -c", "od -tx1", "od -An -tx1", "od -b"]
DUMPS += ["hexdump -C", "base64 -w 8", "base64 -w 64", "base64 -w 76", "xxd -i", "xxd -i -u"]
DUMPS += ["tr a-z A-Z"]


@pytest.mark.parametrize("command", DUMPS)
def test_real_dumps_are_masked(command: str):
    if shutil.which(command.split()[0]) is None:
        pytest.skip(f"{command.split()[0]} is not installed")
    done = subprocess.run(command.split(), input=b"k=" + DATA + b";", capture_output=True)
    text = done.stdout.decode()
    masked = mask_text(text, {VALUE})
    assert MASK in masked, masked
    assert "Secret" not in masked and DATA.hex()[8:20] not in masked.replace(" ", "")


def test_secret_env_values_get_the_same_spellings():
    env = {"API_TOKEN": VALUE}
    for name in ("\\x each", "&#xhh;", "one char per line", "hex upper"):
        assert "[REDACTED:API_TOKEN]" in redact(SPELLINGS[name], env), name


def test_a_stream_masks_a_split_value_when_whole():
    stream = StreamMasker({VALUE})
    out = "".join(stream.feed(c + "\n") for c in VALUE) + stream.flush()
    assert MASK in out and "Secret" not in out.replace("\n", "")


CONTROLS = [
    "a1b2c3d fix the thing\n9f8e7d6 add more\n",  # git log --oneline
    "00000000: 6865 6c6c 6f20 776f 726c 640a            hello world.\n",  # a harmless dump
    "The quick brown fox\njumps over the lazy dog\n",
    "Zq9-Secret and Value are words; 77 is a number\n",  # the value's parts, apart
    base64.encodebytes(b"nothing secret here, just a long text " * 4).decode(),
    "SHA1 fingerprint 65:3a:ef:ff:5c:d3:71:2a:e4:45:2e:e4:ce:56:f4:97:cf:2b:f8:73\n",
    "unsigned char x[] = {\n  0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x0a\n};\n",  # xxd -i of hello
    "ZQ9-SECRET AND VALUE, apart\n",
]


def test_a_short_value_in_another_case_stays():
    """Only a value of 8 characters or more is looked for in any case."""
    assert mask_text("Test, TEST and tEsT\n", {"test"}) == "Test, TEST and tEsT\n"
    assert MASK in mask_text("the TESTING-42 run\n", {"testing-42"})


@pytest.mark.parametrize("text", CONTROLS)
def test_controls_stay_readable(text: str):
    assert mask_text(text, {VALUE}) == text


def test_caseless_forms_are_forms_of_the_value_only():
    assert DATA.hex() in caseless_forms(VALUE)
    assert caseless_forms("abc") == set()  # short values: whole tokens only
    assert all(len(f) >= len(VALUE) for f in forms(VALUE) | caseless_forms(VALUE))


@pytest.mark.parametrize("name", sorted(SPELLINGS))
async def test_every_spelling_is_masked_where_results_go(name: str, tmp_path):
    """The place every tool result passes before the model, the store, notebook cards
    and ACP updates: a state (renamed: found by content) holds VALUE."""
    from iac_kernel.terraform.workspace import MaskedFiles
    from iac_kernel.tools.base import ToolResult
    from iac_kernel.tools.bash import BashTool
    from iac_kernel.tools.tf_masking import after_tool_call

    state = {
        "version": 4,
        "serial": 1,
        "lineage": "l",
        "outputs": {"tok": {"value": VALUE, "type": "string", "sensitive": True}},
        "resources": [],
    }
    (tmp_path / "notes.json").write_text(__import__("json").dumps(state))
    MaskedFiles(tmp_path / "copies").mounts(tmp_path)  # what a bash call does first
    raw = ToolResult(f"out: {SPELLINGS[name]}\n", raw_output={})
    shown = await after_tool_call(BashTool(), {"command": "cat x"}, tmp_path, raw)
    assert MASK in shown.content, shown.content


#: A password with every character shells quote.
QUOTED = "p@ss w0rd!$x`y\\z\"q'r<&>(1);*?[2]{3}|^,#~"
SHELL_PRINTS = {
    "printf %q": 'printf "%q\\n" "$V"',
    "declare -p": "declare -p V",
    "export -p": "export -p | grep ' V='",
    "set -x": 'set -x; : "$V"',
    "echo": 'echo "$V"',
}


@pytest.mark.parametrize("name", sorted(SHELL_PRINTS))
def test_a_value_quoted_by_the_shell_is_masked(name: str):
    """Issue 32 item 2: ``set -x`` traces, ``declare -p`` and ``printf %q`` print a
    password with special characters escaped or quoted."""
    done = subprocess.run(
        ["bash", "-c", SHELL_PRINTS[name]], env={"V": QUOTED}, capture_output=True, text=True
    )
    text = done.stdout + done.stderr
    assert "w0rd" in text  # the shell did print it
    masked = mask_text(text, {QUOTED})
    assert "w0rd" not in masked and MASK in masked, masked


@pytest.mark.parametrize("quote", [repr, shlex.quote])
def test_a_value_quoted_by_python_is_masked(quote):
    masked = mask_text(f"value = {quote(QUOTED)}\n", {QUOTED})
    assert "w0rd" not in masked and MASK in masked, masked


def test_a_plain_value_has_no_quoted_forms():
    assert quoted_forms("sk-live_4f9A.b/c+d=e:f@g%h") == set()


@pytest.mark.parametrize("size", [1, 7, 64])
@pytest.mark.parametrize("value", [VALUE, "Long-" + "k3Y_" * 24], ids=["20 chars", "101 chars"])
def test_a_stream_masks_a_c_array_cut_anywhere(size: int, value: str):
    """Live output: ``xxd -i`` of a value (wrapped at 12 bytes a line, longer than any
    other form of it), arriving in pieces of ``size`` characters."""
    data = value.encode()
    rows = [", ".join(f"0x{b:02x}" for b in data[i : i + 12]) for i in range(0, len(data), 12)]
    text = "unsigned char v[] = {\n  " + ",\n  ".join(rows) + "\n};\n"
    stream = StreamMasker({value})
    out = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size))
    out += stream.flush()
    assert MASK in out and data.hex()[:8] not in "".join(out.split()).replace("0x", "")


def test_ascii_text_lowercased_is_masked_as_with_ignorecase():
    """ASCII text is searched lower-cased (fast); the result is IGNORECASE's."""
    masker = ValueMasker([VALUE, "Another-Secret-99"], "<m>")
    forms_ = sorted(caseless_forms(VALUE) | caseless_forms("Another-Secret-99"))
    for i, form in enumerate(forms_):
        cased = "".join(c.upper() if (i + j) % 2 else c.lower() for j, c in enumerate(form))
        text = f"a {cased} b {forms_[i - 1]}\nc"
        assert text.isascii()
        assert masker.sub(text) == masker.sub(text + "é")[:-1]  # é: the IGNORECASE path
        assert "<m>" in masker.sub(text), text
