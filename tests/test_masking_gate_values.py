"""Secret environment values are searched for once, all together, before each secret's
own masker runs; and split forms are searched in text squeezed at C speed when it holds
no dump offsets. Neither changes a result: for every form and spelling of a value (hex
dumps from the real tools included), with several secrets at once, ``redact`` gives what
running every secret's masker gives, and ``squeeze`` what taking out the noise gives."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from iac_kernel.masking import values
from iac_kernel.masking.values import ValueMasker, squeeze
from iac_kernel.redact import redact, redact_every_masker
from test_masking_forms import PRINTED
from test_masking_forms import VALUE as FORMS_VALUE
from test_masking_spellings import DATA, SPELLINGS
from test_masking_spellings import VALUE as SPELLED_VALUE

ENV = {
    "FIRST_API_KEY": FORMS_VALUE,
    "SECOND_TOKEN": SPELLED_VALUE,
    "SHORT_PASSWORD": "pw1234",
    "UNRELATED_SECRET": "nothing-like-the-others-93",
}
NOISE = re.compile(values._NOISE.pattern)


def _dumps() -> list[str]:
    out = []
    for command in ("xxd", "xxd -g 1", "od -c", "od -tx1", "hexdump -C", "base64 -w 8"):
        if shutil.which(command.split()[0]):
            done = subprocess.run(command.split(), input=b"k=" + DATA + b";", capture_output=True)
            out.append(done.stdout.decode())
    return out


TEXTS = [
    *PRINTED.values(),
    *SPELLINGS.values(),
    *_dumps(),
    "plain output\nwith lines\n  and  spaces\t\n",
    "00000000: 6b3d 5a71  k=Zq\n00000010: 3930",
    'pw1234 alone, xpw1234x inside, "pw1234" quoted',
]


@pytest.mark.parametrize("text", TEXTS)
def test_one_search_for_all_secrets_masks_what_each_masker_masks(text: str):
    for wrapped in (text, f"before\n{text}\nafter", text.upper(), text.lower()):
        assert redact(wrapped, ENV) == redact_every_masker(wrapped, ENV)


@pytest.mark.parametrize("text", TEXTS)
def test_squeeze_takes_out_what_the_noise_pattern_takes_out(text: str):
    for wrapped in (text, f" x\n{text}\n\t", text.replace("\n", "\r\n")):
        assert squeeze(wrapped) == NOISE.sub("", wrapped)


def test_a_masker_that_finds_nothing_changes_nothing():
    maskers = [ValueMasker([v], "[M]") for v in ENV.values()]
    maskers += [ValueMasker(list(ENV.values()), "[M]"), ValueMasker(["abc", "q1w2e"], "[M]")]
    changed = 0
    for masker in maskers:
        for text in [*TEXTS, "abc", '"abc"', "q1w2e here", "q1w2\ne", "a b c"]:
            for variant in (text, f"{text}\n00000010: 00", text.replace("\n", " ")):
                if masker.sub(variant) != variant:
                    changed += 1
                    assert masker.finds(variant), (masker.mask, variant)
    assert changed > 100
    assert not maskers[-2].finds("plain output")


def test_every_form_is_still_masked_with_many_secrets():
    for text in PRINTED.values():
        assert "[REDACTED:FIRST_API_KEY]" in redact(text, ENV), text
