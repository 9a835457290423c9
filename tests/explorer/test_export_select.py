"""`python -m explorer export --layers --heads --format npz --out`: each format writes exactly the chosen layers and
heads, the .npz holds the trace's own numbers, the export reads one layer at a time, and bad choices are one line."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import weakref

import numpy as np
import pytest

from attention_explorer.explorer.__main__ import main
from attention_explorer.explorer.app import export
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry

TRANSLATE = "the small red cat sees a big dog"
GPT2 = "the cat sat on the mat because it was tired"
KINDS = ("encoder_self", "decoder_self", "cross")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def folders(monkeypatch, gpt2_folder, llama_folder):
    """The catalogue with the tiny GPT-2 and Llama folders in it, as `folder:tiny-gpt2` and `folder:tiny-llama`."""
    folders = f"tiny-gpt2={gpt2_folder};tiny-llama={llama_folder}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: folders}))


def expected_files(kinds, layers, what=("weights",), extra=()) -> set[str]:
    names = {"model", "tokens/source", "readable_tokens/source", *extra}
    for kind in kinds:
        names |= {f"{kind}/layers", f"{kind}/heads"}
        names |= {f"{kind}/layer{n}/{name}" for n in layers for name in what}
    return names


@pytest.mark.parametrize(
    "key,text,layers,heads",
    [
        ("translate", TRANSLATE, None, None),
        ("translate", TRANSLATE, "2", "1,3-4"),
        ("folder:tiny-gpt2", GPT2, None, None),
        ("folder:tiny-gpt2", GPT2, "2,1", "4,2-2"),
    ],
)
def test_npz_holds_the_traces_numbers(capsys, tmp_path, folders, key, text, layers, heads):
    out = tmp_path / "attention.npz"
    chosen = [f"--layers={layers}"] * (layers is not None) + [f"--heads={heads}"] * (heads is not None)
    code, stdout, err = run_cli(
        capsys, "export", "--model", key, "--text", text, "--format", "npz", "--out", str(out), *chosen
    )
    assert code == 0 and stdout == "" and err == ""
    expected = trace.run(registry.load(key), text)
    layer_numbers = [1, 2] if layers is None else sorted({int(n) for n in layers.split(",")})
    head_numbers = [1, 2, 3, 4] if heads is None else {"1,3-4": [1, 3, 4], "4,2-2": [2, 4]}[heads]
    with np.load(out) as npz:  # plain numpy.load: no pickles
        with_target = expected.target_tokens is not None and not expected.decoder_only
        extra = ["tokens/target", "readable_tokens/target"] if with_target else []
        assert set(npz.files) == expected_files(expected.kinds, layer_numbers, extra=extra)
        assert npz["model"] == key and npz["tokens/source"].tolist() == list(expected.source_tokens)
        # beside the raw tokens ('Ġcat' in the GPT-2 folder), the readable ones the pages show ('␣cat')
        assert npz["readable_tokens/source"].tolist() == list(expected.readable(expected.source_tokens))
        if key == "folder:tiny-gpt2":  # byte-level BPE: the two spellings differ
            assert npz["readable_tokens/source"].tolist() != npz["tokens/source"].tolist()
        if extra:
            assert npz["tokens/target"].tolist() == list(expected.target_tokens)
            assert npz["readable_tokens/target"].tolist() == list(expected.readable(expected.target_tokens))
        for kind in expected.kinds:
            assert npz[f"{kind}/layers"].tolist() == layer_numbers and npz[f"{kind}/heads"].tolist() == head_numbers
            for n in layer_numbers:
                written = npz[f"{kind}/layer{n}/weights"]
                assert written.dtype == np.float32
                rows = [h - 1 for h in head_numbers]
                np.testing.assert_array_equal(written, expected.attention(kind).layer(n - 1).weights[rows])


def test_npz_what_writes_the_scores_and_q_k_v_of_the_chosen_heads(capsys, tmp_path, folders):
    """A grouped-query model with rotary positions: q and k as rotated, a key/value head repeated per query head."""
    out = tmp_path / "llama.npz"
    argv = ("--format", "npz", "--out", str(out), "--layers", "2", "--heads", "2-3,6", "--what", "scores,qkv")
    code, _, err = run_cli(capsys, "export", "--model", "folder:tiny-llama", "--text", GPT2, *argv)
    assert code == 0 and err == ""
    attention = trace.run(registry.load("folder:tiny-llama"), GPT2).decoder_self
    rows = [1, 2, 5]
    with np.load(out) as npz:
        assert set(npz.files) == expected_files(["decoder_self"], [2], ("scores", "q", "k", "v"))
        np.testing.assert_array_equal(npz["decoder_self/layer2/scores"], attention.scaled_scores[1][rows])
        for name in "qkv":
            np.testing.assert_array_equal(npz[f"decoder_self/layer2/{name}"], getattr(attention.layer(1), name)[rows])
        # heads 2 and 3 read the same key/value head (6 query heads share 2): the same keys, written twice
        np.testing.assert_array_equal(npz["decoder_self/layer2/k"][0], npz["decoder_self/layer2/k"][1])


def test_json_and_csv_write_the_chosen_layers_and_heads(capsys, translate):
    expected = trace.run(translate, TRANSLATE)
    code, out, _ = run_cli(capsys, "export", "--model", "translate", "--text", TRANSLATE)
    full = json.loads(out)
    assert code == 0 and full["attention_layers"] == {kind: [1, 2] for kind in KINDS}
    assert full["attention_heads"] == {kind: [1, 2, 3, 4] for kind in KINDS}
    chosen = ("--layers", "2", "--heads", "3,1")
    code, out, _ = run_cli(capsys, "export", "--model", "translate", "--text", TRANSLATE, *chosen)
    doc = json.loads(out)
    assert code == 0 and doc["attention_layers"] == {kind: [2] for kind in KINDS}
    assert doc["attention_heads"] == {kind: [1, 3] for kind in KINDS}
    for kind in KINDS:
        np.testing.assert_array_equal(
            np.array(doc["attention"][kind], np.float32), expected.attention(kind).layer(1).weights[[0, 2]][None]
        )
    assert doc["sublayers"] == full["sublayers"]  # the choice is the attention's; the rest of the run is whole
    code, out, _ = run_cli(capsys, "export", "--model", "translate", "--text", TRANSLATE, "--format", "csv", *chosen)
    rows = list(csv.DictReader(io.StringIO(out)))
    cells = sum(len(q) * len(k) for q, k in map(expected.tokens_for, KINDS))
    assert code == 0 and len(rows) == 2 * cells
    assert {(r["layer"], r["head"]) for r in rows} == {("1", "0"), ("1", "2")}  # the CSV counts from 0, as before
    for r in rows:
        weights = expected.attention(r["kind"]).layer(1).weights
        assert np.float32(float(r["weight"])) == weights[int(r["head"]), int(r["query_index"]), int(r["key_index"])]


def test_out_writes_the_same_json_and_csv_as_stdout(capsys, tmp_path):
    for form in ("json", "csv"):
        argv = ("export", "--model", "induction", "--example", "--format", form, "--layers", "2")
        code, out, _ = run_cli(capsys, *argv)
        assert run_cli(capsys, *argv, "--out", str(tmp_path / form)) == (0, "", "")
        assert code == 0 and (tmp_path / form).read_text(encoding="utf-8") == out


class OneLayerAtATime:
    """An attention kind that hands out copies of one layer, and fails the test when the export reads every layer's
    arrays at once or asks for a layer while arrays of one it read before are still alive."""

    def __init__(self, real: trace.AttentionTrace, handed_out: list):
        self.real, self.handed_out, self.read = real, handed_out, []
        self.n_layers, self.n_heads = real.n_layers, real.n_heads

    def layer(self, i: int) -> trace.AttentionLayer:
        held = sum(ref() is not None for ref in self.handed_out)
        assert held == 0, f"layer {i + 1} read while {held} arrays of an earlier layer are held"
        real = self.real.layer(i)
        copies = {f.name: getattr(real, f.name) for f in dataclasses.fields(real)}
        copies = {name: None if a is None else a.copy() for name, a in copies.items()}
        self.handed_out += [weakref.ref(a) for a in copies.values() if a is not None]
        self.read.append(i)
        return trace.AttentionLayer(**copies)

    def __getattr__(self, name: str):  # weights, q, raw_scores, ...: every layer of them at once
        raise AssertionError(f"the export read {name!r} of every layer")


@pytest.mark.parametrize("form", ["json", "csv", "npz"])
def test_the_export_reads_one_layer_at_a_time_and_lets_it_go(tmp_path, translate, form):
    real = trace.run(translate, TRANSLATE)
    handed_out: list = []
    guards = {kind: OneLayerAtATime(real.attention(kind), handed_out) for kind in real.kinds}
    guarded = dataclasses.replace(real, **guards)
    chosen = export.Selection(layers=(0, 1), heads=(1, 3))
    if form == "json":
        written = export.to_document(guarded, chosen)["attention"]
        assert written == export.to_document(real, chosen)["attention"]
    elif form == "csv":
        export.write_csv(guarded, io.StringIO(), chosen)
    else:
        export.write_npz(guarded, tmp_path / "a.npz", chosen, export.NPZ_WHAT)
    assert all(guard.read == [0, 1] for guard in guards.values())


def test_a_failed_npz_export_leaves_no_file(tmp_path, translate, monkeypatch):
    real = trace.run(translate, TRANSLATE)
    written = []

    def fail_on_the_second_layer(layer, heads, what):
        if written:
            raise OSError("no space left on device")
        written.append(layer)
        yield "weights", layer.weights

    monkeypatch.setattr(export, "layer_arrays", fail_on_the_second_layer)
    with pytest.raises(OSError, match="no space"):
        export.write_npz(real, tmp_path / "a.npz")
    assert list(tmp_path.iterdir()) == []


def test_numbers_and_ranges_count_from_1():
    assert export.numbers("2, 1-3,3", 5, "--layers") == (0, 1, 2)
    assert export.numbers("5", 5, "--heads") == (4,)
    with pytest.raises(ValueError, match="there is no head 2; the model has only head 1"):
        export.numbers("1-2", 1, "--heads")
    # one choice applies to every attention kind: a layer only the encoder has is refused
    shapes = {"encoder_self": (6, 8), "decoder_self": (4, 8), "cross": (4, 8)}
    assert export.selection("1-4", None, shapes) == export.Selection((0, 1, 2, 3), None)
    with pytest.raises(ValueError, match="there is no layer 5; choose from 1-4"):
        export.selection("5", "8", shapes)


NPZ = ["--format", "npz", "--out", "OUT/a.npz"]


@pytest.mark.parametrize(
    "argv,message",
    [
        ([*NPZ, "--layers=0"], "--layers '0': there is no layer 0; choose from 1-2"),
        ([*NPZ, "--layers=3"], "--layers '3': there is no layer 3; choose from 1-2"),
        ([*NPZ, "--layers=1-3"], "there is no layer 3; choose from 1-2"),
        ([*NPZ, "--layers=2-1"], "--layers '2-1': the range 2-1 runs backwards; write 1-2"),
        ([*NPZ, "--layers=1,,2"], "write numbers and ranges counted from 1, such as 1,3-5; choose from 1-2"),
        ([*NPZ, "--layers="], "such as 1,3-5; choose from 1-2"),
        ([*NPZ, "--layers=-1"], "such as 1,3-5; choose from 1-2"),
        ([*NPZ, "--layers=1.5"], "such as 1,3-5; choose from 1-2"),
        ([*NPZ, "--heads=5"], "--heads '5': there is no head 5; choose from 1-4"),
        (["--heads=one"], "--heads 'one': write numbers and ranges counted from 1, such as 1,3-5; choose from 1-4"),
        (["--format", "csv", "--heads=0-4"], "there is no head 0; choose from 1-4"),
        ([*NPZ, "--what", "weights,attention"], "--what 'weights,attention': 'attention' is not one of weights"),
        (["--format", "npz"], "--format npz needs --out FILE"),
        (["--what", "qkv"], "--what applies to the npz export only"),
        (["--format", "csv", "--what", "qkv"], "--what applies to the npz export only"),
        (["--out", "OUT/missing/a.json"], "the folder"),
        (["--format", "npz", "--out", "OUT"], "is a folder; name a file"),
    ],
)
def test_a_bad_choice_is_one_line_and_exit_status_2(capsys, tmp_path, argv, message):
    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, "export", "--model", "translate", "--example", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.slow
def test_smollm2_npz_is_the_models_own_attention(capsys, tmp_path, smollm2):
    """A real grouped-query model: 30 layers x 9 heads, the chosen ones written as the trace holds them."""
    text, out = "The capital of France is", tmp_path / "smollm2.npz"
    argv = ("--format", "npz", "--out", str(out), "--layers", "1,30", "--heads", "7-9")
    code, _, err = run_cli(capsys, "export", "--model", "smollm2", "--text", text, *argv)
    assert code == 0 and err == ""
    attention = trace.run(smollm2, text).decoder_self
    with np.load(out) as npz:
        assert npz["decoder_self/layers"].tolist() == [1, 30] and npz["decoder_self/heads"].tolist() == [7, 8, 9]
        for n in (1, 30):
            np.testing.assert_array_equal(npz[f"decoder_self/layer{n}/weights"], attention.layer(n - 1).weights[6:])
