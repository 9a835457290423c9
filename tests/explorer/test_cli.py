"""`python -m explorer export`: good input, truncation, and every bad input as a one-line error."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_explorer.explorer.__main__ import main
from attention_explorer.explorer.run import trace
from tests import tolerance

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_models(capsys):
    code, out, _ = run_cli(capsys, "export", "--list-models")
    keys = ["minilm", "smollm2", "gemma3", "minilm-random", "paper-random", "translate", "reverse", "induction"]
    assert code == 0 and out.split() == keys


def test_toy_model_export_gives_decoder_and_cross_attention_of_the_greedy_output(capsys):
    code, out, err = run_cli(capsys, "export", "--model", "reverse", "--example")
    assert code == 0 and err == ""
    doc = json.loads(out)
    words = ["one", "two", "three", "four", "five", "six"]
    assert doc["tokens"] == {"source": [*words, "<eos>"], "target": ["<bos>", *words[::-1]]}
    assert doc["output"] == [*words[::-1], "<eos>"]
    assert set(doc["attention"]) == {"encoder_self", "decoder_self", "cross"}
    cross = np.array(doc["attention"]["cross"], np.float32)
    assert cross.shape == (2, 4, 7, 7)
    # each softmax weight within its own rounding (reordered over n + 3 terms, of the weight), summed over n keys:
    # within reordered(2n + 3) of 1 (tests/tolerance.py). A worst case of IEEE roundings, nothing estimated (the
    # shift's and exp's errors even cancel: each row's same exp values are both its numerators and its sum), so a
    # row of a few keys stands at a few times its difference on any machine and none can cross it
    bound = tolerance.reordered(2 * cross.shape[-1] + 3, 1.0)
    tolerance.assert_within(cross.sum(-1), np.ones(cross.shape[:-1]), bound, "cross rows", worst_case=True)


def test_unknown_word_is_one_line_naming_it(capsys):
    code, out, err = run_cli(capsys, "export", "--model", "reverse", "--text", "one twoo")
    assert code == 2 and out == ""
    assert err.strip() == "error: This word is not in the model's vocabulary: 'twoo' (did you mean 'two'?)"


def test_json_export_equals_the_model(capsys, minilm):
    code, out, err = run_cli(capsys, "export", "--model", "minilm", "--text", "Thinking Machines")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["model"] == "minilm"
    assert doc["tokens"] == {"source": ["[CLS]", "thinking", "machines", "[SEP]"]}
    assert set(doc["attention"]) == {"encoder_self"}
    expected = trace.run(minilm, "Thinking Machines").encoder_self.weights
    got = np.array(doc["attention"]["encoder_self"], dtype=np.float32)
    assert got.shape == (6, 12, 4, 4)
    np.testing.assert_array_equal(got, expected)


def test_example_for_encoder_decoder_gives_all_kinds(capsys, paper_random):
    code, out, _ = run_cli(capsys, "export", "--model", "paper-random", "--example")
    doc = json.loads(out)
    assert code == 0 and set(doc["attention"]) == {"encoder_self", "decoder_self", "cross"}
    source, target = doc["tokens"]["source"], doc["tokens"]["target"]
    assert source[:4] == ["[CLS]", "the", "agreement", "on"]
    assert np.array(doc["attention"]["cross"]).shape == (6, 8, len(target), len(source))
    assert np.array(doc["attention"]["decoder_self"]).shape == (6, 8, len(target), len(target))


def test_csv_export(capsys, minilm):
    code, out, _ = run_cli(capsys, "export", "--model", "minilm", "--text", "a, b", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == [
        "kind",
        "layer",
        "head",
        "query_index",
        "query_token",
        "query_readable",
        "key_index",
        "key_token",
        "key_readable",
        "weight",
    ]
    assert len(rows) == 1 + 6 * 12 * 5 * 5
    weights = trace.run(minilm, "a, b").encoder_self.weights
    kind, layer, head, qi, qt, qr, ki, kt, kr, w = rows[1 + 3 * 12 * 25 + 4 * 25 + 2 * 5 + 1]
    assert (kind, layer, head, qi, qt, qr, ki, kt, kr) == ("encoder_self", "3", "4", "2", ",", ",", "1", "a", "a")
    assert np.float32(float(w)) == weights[3, 4, 2, 1]


def test_long_input_is_truncated_with_a_warning(capsys):
    code, out, err = run_cli(capsys, "export", "--model", "minilm", "--text", "word " * 40, "--max-tokens", "10")
    assert code == 0
    assert err.strip() == "warning: input truncated to 10 tokens (32 tokens cut)"
    assert len(json.loads(out)["tokens"]["source"]) == 10


@pytest.mark.parametrize(
    "argv,message",
    [
        (["export", "--model", "minilm", "--text", ""], "empty"),
        (["export", "--model", "minilm", "--text", "  \t "], "empty"),
        (["export", "--model", "nope", "--text", "hi"], "unknown model 'nope'"),
        (["export", "--text", "hi"], "--model is required"),
        (["export", "--model", "minilm"], "give --text TEXT or --example"),
        (["export", "--model", "minilm", "--text", "hi", "--max-tokens", "1"], "between 3 and 512"),
        (["export", "--model", "minilm", "--text", "hi", "--max-tokens", "x"], "invalid int value"),
        (["export", "--model", "minilm", "--text", "hi", "--format", "xml"], "invalid choice"),
        (["export", "--model", "minilm", "--text", "hi", "--example"], "not allowed with"),
        (["frobnicate"], "invalid choice"),
        ([], "choose a command"),
    ],
)
def test_bad_input_is_one_line_on_stderr(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_real_process_exits_cleanly_without_traceback():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "explorer", "export", "--model", "minilm", "--text", " "]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: the text is empty: type a sentence\n"
    cmd[-1] = "Thinking Machines"
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and json.loads(done.stdout)["tokens"]["source"][1] == "thinking"


def test_json_export_has_every_sublayer_and_the_loss(capsys):
    from attention_explorer.explorer.run import forward, output
    from attention_explorer.models import registry

    translate = registry.load("translate")
    text = "the small red cat sees a big dog"
    code, out, err = run_cli(capsys, "export", "--model", "translate", "--text", text)
    assert code == 0 and err == ""
    doc = json.loads(out)
    expected = trace.run(translate, text)
    encoder = doc["sublayers"]["encoder"]
    assert len(encoder) == 2 and set(encoder[0]) == {"attention", "add_norm_1", "ffn", "add_norm_2"}
    np.testing.assert_array_equal(
        np.array(encoder[1]["add_norm_2"], np.float32), expected.encoder_states["after_ffn"][1]
    )
    np.testing.assert_array_equal(np.array(encoder[0]["attention"], np.float32), expected.encoder_self.output[0])
    decoder = doc["sublayers"]["decoder"][1]
    np.testing.assert_array_equal(
        np.array(decoder["add_norm_2"], np.float32), expected.decoder_states["after_cross_attn"][1]
    )
    step = forward.layer(translate, expected, "decoder", 1, 2).sublayers[2]
    # the export's FFN ran over every row at once, the walkthrough's over one row (post-LN: both read the traced
    # state itself): W_1's d_model terms (and its bias), carried through ReLU and |W_2|, then W_2's own d_ff terms
    ffn, module = step.ffn, translate.model.decoder.layers[1].ffn
    w1, b1 = module.linear1.weight.detach().numpy(), module.linear1.bias.detach().numpy()
    w2, b2 = module.linear2.weight.detach().numpy(), module.linear2.bias.detach().numpy()
    hidden = tolerance.reordered(len(ffn.x) + 1, np.abs(ffn.x) @ np.abs(w1.T) + np.abs(b1))
    own = tolerance.reordered(len(ffn.activated) + 1, np.abs(ffn.activated) @ np.abs(w2.T) + np.abs(b2))
    bound = hidden @ np.abs(w2.T) + own
    tolerance.assert_within(np.array(decoder["ffn"][2], np.float32), step.output, bound, "the FFN's output")
    loss = doc["loss"]
    assert loss["targets"] == ["le", "chat", "rouge", "petit", "voit", "un", "chien", "grand", "<eos>"]
    # the same float64 numbers (JSON writes a float64 exactly) and numpy's same mean of them: bit for bit
    assert loss["label_smoothing"] == 0.1 and loss["mean"] == np.mean(loss["per_token"])
    assert loss["mean"] > output.loss_floor(len(translate.target_vocabulary.words))
    # a typed wrong target costs more
    code, out, _ = run_cli(capsys, "export", "--model", "translate", "--text", text, "--target", "le chien voit")
    wrong = json.loads(out)["loss"]
    assert code == 0 and wrong["targets"] == ["le", "chien", "voit", "<eos>"] and wrong["mean"] > loss["mean"]


def test_minilm_export_has_sublayers_and_no_loss(capsys):
    code, out, _ = run_cli(capsys, "export", "--model", "minilm", "--text", "Thinking Machines")
    doc = json.loads(out)
    assert code == 0 and "loss" not in doc and len(doc["sublayers"]["encoder"]) == 6
    assert np.array(doc["sublayers"]["encoder"][5]["ffn"]).shape == (4, 384)
    code, _, err = run_cli(capsys, "export", "--model", "minilm", "--text", "hi", "--target", "x")
    assert code == 2 and "encoder-only" in err


def test_ablate_writes_the_run_with_those_heads_turned_off(capsys, translate):
    from attention_explorer.explorer.experiments import ablate
    from attention_explorer.explorer.run import output
    from attention_explorer.models.ablation import Head

    text = "the small red cat sees a big dog"
    code, out, err = run_cli(capsys, "export", "--model", "translate", "--text", text)
    clean = json.loads(out)
    assert code == 0 and err == "" and "ablated" not in clean and "ablation" not in clean
    heads = "cross:1.1,cross:1.2,cross:1.3,cross:1.4"
    code, out, err = run_cli(capsys, "export", "--model", "translate", "--text", text, "--ablate", heads)
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert doc["ablated"] == heads.split(",") and doc["ablation"] == "zero"
    # the model's own ablated run, greedy decoding included
    off = ablate.make(translate, [Head("cross", 0, h) for h in range(4)], "zero")
    expected = trace.run(translate, text, ablation=off)
    assert doc["output"] == list(expected.output_tokens) and doc != clean
    for kind in ("encoder_self", "decoder_self", "cross"):
        np.testing.assert_array_equal(np.array(doc["attention"][kind], np.float32), expected.attention(kind).weights)
    # the encoder runs before any cross-attention: the same maps; the decoder's second layer reads differently
    assert doc["attention"]["encoder_self"] == clean["attention"]["encoder_self"]
    assert doc["attention"]["cross"][1] != clean["attention"]["cross"][1]
    # the loss is the same run's, heads off
    ids = [translate.target_vocabulary.token_to_id(t) for t in doc["loss"]["targets"]]
    source = translate.tokenizer.encode(text, translate.max_tokens).ids
    scored = output.score(translate, source, ids, ablation=off)
    assert doc["loss"]["mean"] == scored.mean != clean["loss"]["mean"]
    # mean ablation writes each head's average output instead: another run again
    code, out, _ = run_cli(
        capsys, "export", "--model", "translate", "--text", text, "--ablate", heads, "--ablation", "mean"
    )
    mean = json.loads(out)
    assert code == 0 and mean["ablation"] == "mean" and mean["attention"]["cross"][1] != doc["attention"]["cross"][1]


def test_ablate_a_decoder_only_model_changes_the_layers_above_only(capsys):
    code, out, _ = run_cli(capsys, "export", "--model", "induction", "--example")
    clean = json.loads(out)
    code, out, err = run_cli(capsys, "export", "--model", "induction", "--example", "--ablate", "1.2")
    doc = json.loads(out)
    assert code == 0 and err == "" and doc["ablated"] == ["decoder_self:1.2"]
    assert doc["attention"]["decoder_self"][0] == clean["attention"]["decoder_self"][0]
    assert doc["attention"]["decoder_self"][1] != clean["attention"]["decoder_self"][1]
    # the CSV is the ablated attention too
    code, out, _ = run_cli(capsys, "export", "--model", "induction", "--example", "--ablate", "1.2", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))[1:]
    weights = np.array(doc["attention"]["decoder_self"], np.float32)
    assert code == 0 and len(rows) == weights.size
    assert [np.float32(float(row[-1])) for row in rows] == weights.ravel().tolist()


@pytest.mark.parametrize("key", ["induction", "translate"])
@pytest.mark.parametrize("ablate", [(), ("--ablate", "2.3")])
def test_logit_lens_last_layer_is_the_next_tokens(capsys, key, ablate):
    if ablate and key == "translate":
        ablate = ("--ablate", "decoder:1.3,cross:2.1")
    code, out, err = run_cli(capsys, "export", "--model", key, "--example", *ablate)
    doc = json.loads(out)
    assert code == 0 and err == ""
    lens, rows = doc["logit_lens"], len(doc["tokens"]["target" if key == "translate" else "source"])
    assert len(lens) == 2 and all(len(layer) == rows for layer in lens)
    assert lens[-1] == doc["next_tokens"]
    assert lens[0] != lens[-1]  # the first layer alone does not yet predict what the model does
    if key == "translate":
        assert doc["next_tokens"] == doc["output"]  # greedy decoding wrote each row's most likely token


def test_an_encoder_only_export_has_no_logit_lens(capsys):
    for extra in ((), ("--ablate", "3.4")):
        code, out, _ = run_cli(capsys, "export", "--model", "minilm", "--text", "Thinking Machines", *extra)
        doc = json.loads(out)
        assert code == 0 and "logit_lens" not in doc and "next_tokens" not in doc
    assert doc["ablated"] == ["encoder_self:3.4"]


@pytest.mark.parametrize(
    "model,heads,message",
    [
        ("translate", "9.9", "name one before the head, e.g. cross:9.9"),
        ("translate", "2", "'2' is not a head: write layer.head counted from 1"),
        ("translate", "1.1", "this model has 3 attention kinds: name one before the head"),
        ("translate", "cross:3.1", "head 3.1 does not exist"),
        ("translate", "sideways:1.1", "unknown attention kind 'sideways'"),
        ("induction", "9.9", "head 9.9 does not exist"),
        ("induction", "0.1", "head 0.1 does not exist"),
        ("induction", "", "'' is not a head"),
        ("induction", "1.1,1.2,1.3,1.4,2.1,2.2,2.3,2.4", "turns off all 8 heads"),
        ("induction", "cross:1.1", "no cross attention"),
    ],
)
def test_a_bad_head_is_one_line_and_exit_status_2(capsys, model, heads, message):
    code, out, err = run_cli(capsys, "export", "--model", model, "--example", "--ablate", heads)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_resample_ablation_writes_another_text_s_heads_and_says_which(capsys, translate):
    from attention_explorer.explorer.experiments import ablate, replacements
    from attention_explorer.models.ablation import Head

    text = "the small red cat sees a big dog"
    heads = "cross:2.1,cross:2.2"
    argv = ("export", "--model", "translate", "--text", text, "--ablate", heads, "--ablation", "resample")
    code, out, err = run_cli(capsys, *argv)
    doc = json.loads(out)
    assert code == 0 and err == "" and doc["ablation"] == "resample"
    source = translate.tokenizer.encode(text, translate.max_tokens).ids
    other, _ = replacements.other_text(translate, source)
    assert doc["ablation_other_text"] == other != text
    assert (doc["ablation_texts"], doc["ablation_tokens"]) == (1, len(source))
    assert doc["ablation_convention"].startswith("resample ablation:") and other in doc["ablation_convention"]
    # the model's own run with those heads writing the other text's outputs, greedy decoding included
    replaced = ablate.replacement(translate, "resample", source)
    off = ablate.make(translate, [Head("cross", 1, 0), Head("cross", 1, 1)], "resample", replaced)
    expected = trace.run(translate, text, ablation=off)
    assert doc["output"] == list(expected.output_tokens)
    np.testing.assert_array_equal(np.array(doc["attention"]["cross"], np.float32), expected.attention("cross").weights)
    # mean ablation says how many texts and positions its mean is over
    code, out, _ = run_cli(capsys, *argv[:-1], "mean")
    mean = json.loads(out)
    assert code == 0 and mean["ablation_texts"] == 200
    assert "200 inputs of the toy translate task" in mean["ablation_convention"]
    code, out, err = run_cli(capsys, *argv[:-1], "resampled")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: argument --ablation: invalid choice: 'resampled'") and "'resample'" in err


def test_ablation_method_needs_heads(capsys):
    code, out, err = run_cli(capsys, "export", "--model", "induction", "--example", "--ablation", "mean")
    assert code == 2 and out == "" and err == "error: --ablation needs --ablate: name the heads to turn off\n"
    code, _, err = run_cli(capsys, "export", "--model", "induction", "--example", "--ablate", "1.1", "--ablation", "x")
    assert code == 2 and err.count("\n") == 1 and "invalid choice" in err


@pytest.mark.slow
def test_smollm2_export_completes_the_capital_of_france(capsys, smollm2):
    """A real language model in the export: the last next token is ' Paris', the attention is the model's own."""
    text = "The capital of France is"
    code, out, err = run_cli(capsys, "export", "--model", "smollm2", "--text", text)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["tokens"] == {"source": ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]}  # as the tokenizer spells them
    assert doc["readable_tokens"] == {"source": ["The", "␣capital", "␣of", "␣France", "␣is"]}  # as the pages show them
    assert doc["next_tokens"][-1] == "ĠParis" and doc["logit_lens"][-1] == doc["next_tokens"]
    assert doc["readable_next_tokens"][-1] == "␣Paris"  # beside the raw one, as the pages show it
    expected = trace.run(smollm2, text).decoder_self.weights
    drawn = np.array(doc["attention"]["decoder_self"])
    assert drawn.shape == (30, 9, 5, 5)
    np.testing.assert_array_equal(drawn, expected)  # the same run's weights, float32 -> JSON -> float64 exactly


@pytest.mark.slow
def test_a_multi_token_answer_is_met_with_what_to_type_at_a_shell(capsys, smollm2):
    """' Sarah' is one SmolLM2 token and 'Sarah Jane' two: the error suggests the first as a shell takes it, its
    space quoted, never the tokenizer's 'ĠSarah'."""
    text = "When Sarah and Tom went to the market, Tom gave a bag to"
    corrupt = "When Tom and Sarah went to the market, Sarah gave a bag to"
    argv = ["export", "--model", "smollm2", "--text", text, "--corrupt", corrupt]
    code, out, err = run_cli(capsys, *argv, "--answer", "Sarah Jane", "--wrong", "Tom")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "2 tokens (␣Sarah + ␣Jane)" in err and err.rstrip().endswith("write one token, e.g. --answer ' Sarah'")
    assert "Ġ" not in err
    code, _, err = run_cli(capsys, *argv, "--answer", "Sarah", "--wrong", "Tom Jones")
    assert code == 2 and err.rstrip().endswith("e.g. --wrong ' Tom'")
