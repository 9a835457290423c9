"""`python -m explorer export --corrupt ... --answer ... --wrong ...`: the patching entry is the experiment's own
numbers beside the usual export; bad input is one line on stderr and exit status 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_explorer.explorer.__main__ import main
from attention_explorer.explorer.experiments import patching
from tests import tolerance
from tests.explorer.test_patching import _share_bound

CLEAN = "alpha bravo seven kilo alpha bravo seven"
CORRUPT = "alpha bravo seven lima alpha bravo seven"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_patching_entry_is_the_experiments_own(capsys):
    argv = ("--model", "induction", "--text", CLEAN, "--corrupt", CORRUPT, "--answer", "kilo", "--wrong", "lima")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    document = json.loads(out)
    found = document["patching"]
    assert document["tokens"] and found["answer"] == "kilo" and found["changed"] == [4]
    from attention_explorer.models import registry

    loaded = registry.load("induction")
    setup = patching.setup(loaded, CLEAN, CORRUPT, "kilo", "lima", loaded.max_tokens)
    clean, corrupt = (patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    assert (found["clean"], found["corrupted"]) == (clean.difference, corrupt.difference)
    heads = patching.measure(loaded, setup, clean, corrupt, patching.head_patches(loaded))
    # the export's own measure of the same patches, in the same batches: bit for bit (JSON keeps a float64 exactly)
    np.testing.assert_array_equal(found["heads"], heads.reshape(2, 4))
    residual = np.array(found["residual"])
    assert residual.shape == (3, 8)  # the embedding, then each of the 2 layers' outputs; 8 positions (<bos> first)
    # a patch restoring all: 1 within a share's rounding (batched patched forwards, tests/explorer/test_patching.py)
    bound = _share_bound(loaded, setup, clean, corrupt)
    tolerance.assert_within(residual[0, 4], 1.0, bound, "the changed embedding restores all")
    tolerance.assert_within(residual[-1, -1], 1.0, bound, "the last state restores all")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--corrupt", "alpha bravo seven lima alpha bravo"), "needs all three"),
        (("--corrupt", "alpha bravo seven lima alpha bravo", "--answer", "kilo", "--wrong", "lima"), "8 tokens and"),
        (("--corrupt", CORRUPT, "--answer", "kilo", "--wrong", "kilo"), "the same token"),
        (("--corrupt", CORRUPT, "--answer", "kilo", "--wrong", "lima", "--format", "csv"), "JSON export"),
    ],
)
def test_bad_patching_input_is_one_line_and_exit_status_2(capsys, argv, message):
    code, out, err = run_cli(capsys, "--model", "induction", "--text", CLEAN, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_an_encoder_decoders_entry_has_every_attention_kind_and_an_encoder_needs_an_output(capsys):
    argv = ("--corrupt", "the small red dog sees a big dog", "--answer", "chat", "--wrong", "chien")
    code, out, err = run_cli(capsys, "--model", "translate", "--text", "the small red cat sees a big dog", *argv)
    assert code == 0, err
    found = json.loads(out)["patching"]
    assert set(found["heads"]) == {"encoder_self", "decoder_self", "cross"}
    assert found["decoder_input"] == ["<bos>", "le"] and len(found["residual"]) == 3  # 2 encoder layers + embedding
    # the changed source word's embedding restores all: 1 within a share's rounding (tests/explorer/test_patching.py)
    from attention_explorer.models import registry

    translate = registry.load("translate")
    text, corrupted = "the small red cat sees a big dog", "the small red dog sees a big dog"
    setup = patching.setup(translate, text, corrupted, "chat", "chien", translate.max_tokens)
    clean, corrupt = (patching.read(translate, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    bound = _share_bound(translate, setup, clean, corrupt)
    tolerance.assert_within(found["residual"][0][3], 1.0, bound, "the changed source word's embedding restores all")
    argv = ("--corrupt", "a dog", "--answer", "cat", "--wrong", "dog")
    code, _, err = run_cli(capsys, "--model", "minilm", "--text", "a cat", *argv)
    assert code == 2 and "no output layer" in err
