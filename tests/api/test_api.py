"""The notebook API (`import attention_explorer as ae`) is a door onto the app's own runs, experiments and figures:
its arrays are the trace's bit for bit, its figures draw those numbers, its patching and next tokens are the
export's, and bad input is one clear ValueError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_explorer as ae
from attention_explorer.explorer.app import downloads
from attention_explorer.explorer.run import positions, trace
from attention_explorer.models import registry
from attention_explorer.models.pretrained import minilm_folder

ROOT = Path(__file__).resolve().parents[2]
TEXT = "The animal didn't cross the street because it was too tired"
CLEAN = "alpha bravo seven kilo alpha bravo seven"  # the induction model writes kilo next
CORRUPT = "alpha bravo seven lima alpha bravo seven"


@pytest.fixture(scope="module")
def minilm_run():
    return ae.run("minilm", TEXT)


@pytest.fixture(scope="module")
def induction_run():
    return ae.run("induction", CLEAN)


@pytest.fixture(scope="module")
def exported():
    """`python -m explorer export` of the induction model with patching, in its own process, as a person runs it."""
    argv = ["export", "--model", "induction", "--text", CLEAN, "--corrupt", CORRUPT, "--answer", "kilo"]
    command = [sys.executable, "-m", "explorer", *argv, "--wrong", "lima"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_tokens_and_every_head_equal_the_trace_bit_for_bit(minilm_run):
    fresh = trace.run(registry.load("minilm"), TEXT, 512)
    assert minilm_run.tokens == list(fresh.source_tokens)
    assert minilm_run.tokens[:3] == ["[CLS]", "the", "animal"] and minilm_run.target_tokens is None
    assert (minilm_run.n_layers, minilm_run.n_heads, minilm_run.kinds) == (6, 12, ("encoder_self",))
    for layer in range(6):
        weights = fresh.attention("encoder_self").layer(layer).weights
        for head in range(12):
            found = minilm_run.attention(layer, head)
            assert found.dtype == np.float32 and found.shape == (len(minilm_run.tokens),) * 2
            assert np.array_equal(found, weights[head])


def test_an_encoder_has_no_next_tokens_and_no_logit_lens(minilm_run):
    assert minilm_run.next_tokens is None
    with pytest.raises(ValueError, match="no output layer"):
        minilm_run.figure("logit_lens")


def test_out_of_range_heads_and_kinds_say_what_there_is(minilm_run):
    with pytest.raises(IndexError, match="layers 0-5"):
        minilm_run.attention(6, 0)
    with pytest.raises(IndexError, match="heads 0-11"):
        minilm_run.attention(0, 12)
    with pytest.raises(ValueError, match="choose from encoder_self"):
        minilm_run.attention(0, 0, kind="cross")
    with pytest.raises(ValueError, match="choose from heatmap"):
        minilm_run.figure("pie")


def test_an_encoder_decoder_has_its_target_and_cross_attention():
    example = registry.MODELS["translate"].examples[0]
    run = ae.run("translate", example)
    assert run.kinds == ("encoder_self", "decoder_self", "cross")
    target = run.target_tokens
    assert target is not None and len(run.next_tokens) == len(target)
    assert run.attention(0, 0).shape == (len(run.tokens), len(run.tokens))  # the first kind: the encoder's
    cross = run.attention(1, 3, kind="cross")
    assert cross.shape == (len(target), len(run.tokens))
    assert np.array_equal(cross, run.trace.attention("cross").layer(1).weights[3])
    assert run.queries_keys("cross") == (target, run.tokens)


def test_tokens_next_tokens_and_patching_are_the_exports(induction_run, exported):
    assert induction_run.raw_tokens == exported["tokens"]["source"]
    assert induction_run.tokens == exported["readable_tokens"]["source"]
    assert induction_run.raw_next_tokens == exported["next_tokens"]
    assert induction_run.next_tokens == exported["readable_next_tokens"]
    assert induction_run.next_tokens[-1] == "kilo"
    found = induction_run.patch(CORRUPT, "kilo", "lima")
    assert found == exported["patching"]  # the same numbers, through JSON and back
    assert np.array(found["heads"]).shape == (2, 4) and found["changed"] == [4]


def test_the_heatmap_draws_the_heads_weights_titled_as_the_app_counts(minilm_run):
    figure = minilm_run.figure("heatmap", layer=3, head=1)
    assert np.array_equal(np.asarray(figure.data[0].z), minilm_run.attention(3, 1))
    assert figure.layout.title.text == "Layer 4, head 2"
    assert "layer 4 · head 2" in figure.layout.title.subtitle.text
    assert "all-MiniLM-L6-v2" in figure.layout.title.subtitle.text


def test_the_model_view_draws_every_head_scaled_to_its_maximum(minilm_run):
    figure = minilm_run.figure("model_view", layer=2, head=5)
    grid, n = np.asarray(figure.data[0].z), len(minilm_run.tokens)  # 15 tokens: every weight its own cell
    for layer, head in ((0, 0), (2, 5), (5, 11)):
        weights = minilm_run.attention(layer, head)
        cell = grid[layer * (n + 1) : layer * (n + 1) + n, head * (n + 1) : head * (n + 1) + n]
        np.testing.assert_array_equal(cell, weights / weights.max())
    assert figure.layout.title.text == "Every layer and head" and len(figure.layout.shapes) == 1  # the one outlined


def test_the_head_view_draws_one_legend_entry_a_head(minilm_run):
    figure = minilm_run.figure("head_view", layer=1, heads=[0, 4])
    assert figure.layout.title.text == "Head view: layer 2"
    legend = [t.name for t in figure.data if t.showlegend is not False and t.name]
    assert legend == ["head 1", "head 5"]


def test_qkv_draws_the_softmax_row_of_that_query(minilm_run):
    query = minilm_run.tokens.index("it")
    figure = minilm_run.figure("qkv", layer=3, head=1, query=query)
    np.testing.assert_array_equal(np.asarray(figure.data[0].y), minilm_run.attention(3, 1)[query])
    assert "query 10: it" in figure.layout.title.subtitle.text
    steps = minilm_run.qkv(3, 1, query)
    q = minilm_run.figure("qkv", layer=3, head=1, query=query, step="q")
    np.testing.assert_array_equal(np.asarray(q.data[0].z)[0], steps.q)
    with pytest.raises(ValueError, match="choose from q, k, v"):
        minilm_run.figure("qkv", step="everything")


def test_positional_draws_the_models_own_table(minilm_run):
    figure = minilm_run.figure("positional", show="table", positions=32)
    learned = positions.tables(minilm_run.loaded)["learned"][:32]
    np.testing.assert_array_equal(np.asarray(figure.data[0].z), learned)
    assert figure.layout.title.text == "Learned (this model's own)"
    paper = minilm_run.figure("positional", show="similarity", learned=False)
    assert paper.layout.title.text == "Sinusoidal: cosine(PE_i, PE_j)"


def test_the_logit_lens_ends_on_the_next_tokens(induction_run):
    figure = induction_run.figure("logit_lens")
    assert list(figure.data[0].text[-1]) == induction_run.next_tokens  # the last read is the model's own output
    assert figure.layout.title.text == "Logit lens"


def test_the_patching_figures_draw_the_patch(induction_run):
    found = induction_run.patch(CORRUPT, "kilo", "lima")
    heads = induction_run.figure("patching", corrupted=CORRUPT, answer="kilo", wrong="lima")
    np.testing.assert_array_equal(np.asarray(heads.data[0].z, dtype=float), np.array(found["heads"]))
    residual = induction_run.figure("patching", corrupted=CORRUPT, answer="kilo", wrong="lima", show="residual")
    np.testing.assert_array_equal(np.asarray(residual.data[0].z, dtype=float), np.array(found["residual"]))
    assert residual.layout.title.text == "Copy the residual stream"


def test_patching_with_no_arguments_patches_what_the_page_proposes(induction_run, minilm_run):
    from attention_explorer.explorer.experiments import corruptions

    # the patching page's own first proposal for this text, with the two runs' most likely next tokens
    (proposal,) = corruptions.proposals(induction_run.loaded, CLEAN, induction_run.max_tokens, _tops(induction_run))
    assert (proposal.answer, proposal.wrong) != ("", "")
    figure = induction_run.figure("patching")  # no TypeError naming three missing arguments
    found = induction_run.patch(proposal.text, proposal.answer, proposal.wrong)
    np.testing.assert_array_equal(np.asarray(figure.data[0].z, dtype=float), np.array(found["heads"]))
    # a corrupted text alone: the answers are the two runs' most likely next tokens
    alone = induction_run.figure("patching", corrupted=proposal.text, show="residual")
    np.testing.assert_array_equal(np.asarray(alone.data[0].z, dtype=float), np.array(found["residual"]))
    with pytest.raises(ValueError, match="no output layer"):
        minilm_run.figure("patching")
    with pytest.raises(ValueError, match="pass corrupted="):  # nothing repeats, no name is swapped, no word to change
        ae.run("induction", "alpha").figure("patching")


def _tops(run):
    """The two runs' most likely next tokens where they differ (the page's answers), computed here on its own."""
    import torch

    @torch.inference_mode()
    def top(ids):
        return run.loaded.target_vocabulary.id_to_token(
            int(run.loaded.model(torch.tensor([list(ids)])).logits[0, -1].argmax())
        )

    return lambda clean, corrupt: None if top(clean) == top(corrupt) else (top(clean), top(corrupt))


def test_a_second_run_reuses_the_loaded_model(minilm_run):
    again = ae.run("minilm", "A second sentence")
    assert again.loaded is minilm_run.loaded
    by_path = ae.run(minilm_folder(), TEXT)  # a folder: loaded once per resolved path, whichever way it is spelled
    assert by_path.model == "folder:model" and by_path.tokens == minilm_run.tokens
    assert ae.run(str(minilm_folder()) + os.sep, "Again").loaded is by_path.loaded
    assert np.array_equal(by_path.attention(2, 7), minilm_run.attention(2, 7))


@pytest.mark.parametrize(
    ("model", "text", "message"),
    [
        ("gpt-17", TEXT, "unknown model 'gpt-17': give a model key (minilm, smollm2, "),
        ("/no/such/model.gguf", TEXT, "no model file or folder at '/no/such/model.gguf': give a model key (minilm, "),
        ("minilm", "   ", "give a text to run"),
    ],
)
def test_bad_input_is_one_clear_value_error(model, text, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        ae.run(model, text)


def test_a_folder_that_is_no_model_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="could not be loaded"):
        ae.run(tmp_path, TEXT)


@pytest.fixture(scope="module")
def bert_attentions():
    """transformers' own BertModel on the shipped MiniLM files: outputs.attentions and the tokens."""
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder())
    bert = BertModel.from_pretrained(minilm_folder(), attn_implementation="eager").eval()
    inputs = tokenizer([TEXT, "A shorter one"], padding=True, return_tensors="pt")  # a batch: row 0 is drawn
    outputs = bert(**inputs, output_attentions=True)
    return outputs.attentions, tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])


def test_show_draws_transformers_attentions(bert_attentions, minilm_run):
    attentions, tokens = bert_attentions
    assert len(attentions) == 6 and attentions[0].shape[:2] == (2, 12)
    heatmap = ae.show(attentions, tokens, view="heatmap", layer=3, head=1)
    z = np.asarray(heatmap.data[0].z)
    np.testing.assert_array_equal(z, attentions[3][0, 1].detach().numpy())
    np.testing.assert_allclose(z, minilm_run.attention(3, 1), atol=1e-5)  # the same weights as ours
    assert heatmap.layout.title.text == "Layer 4, head 2"
    grid = ae.show(attentions, tokens)
    n = len(tokens)
    first = attentions[0][0, 0].detach().numpy()
    np.testing.assert_allclose(np.asarray(grid.data[0].z)[:n, :n], first / first.max(), rtol=1e-6)
    assert ae.show(attentions, tokens, view="head_view", layer=2).layout.title.text == "Head view: layer 3"


def test_show_takes_numpy_arrays_and_lists_of_layers(minilm_run):
    stacked = np.stack([minilm_run.trace.attention("encoder_self").layer(i).weights for i in range(6)])
    tokens = minilm_run.tokens
    from_array = ae.show(stacked, tokens, view="heatmap", layer=5, head=11)
    from_list = ae.show(list(stacked), tokens, view="heatmap", layer=5, head=11)
    for figure in (from_array, from_list):
        np.testing.assert_array_equal(np.asarray(figure.data[0].z), minilm_run.attention(5, 11))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w, t: (w, t[:-1]), "14 tokens for attention over 15 positions: give one token per position"),
        (lambda w, t: (w * 2, t), "every row of attention weights must sum to 1"),
        (lambda w, t: (w[..., :-1], t), r"attention of shape \(6, 12, 15, 14\): expected \(layers, heads, T, T\)"),
        (lambda w, t: (w[0, 0], t), r"attention of shape \(15, 15\)"),
        (lambda w, t: (np.where(w > 0.5, np.nan, w), t), "must be probabilities"),
        (lambda w, t: ([w[0], w[1, :3]], t), "every layer's attention must have one shape"),
    ],
)
def test_show_refuses_what_is_not_attention(minilm_run, change, message):
    stacked = np.stack([minilm_run.trace.attention("encoder_self").layer(i).weights for i in range(6)])
    weights, tokens = change(stacked, minilm_run.tokens)
    with pytest.raises(ValueError, match=message):
        ae.show(weights, tokens)


def test_show_checks_rows_to_the_precision_the_weights_were_computed_in():
    """A bfloat16 model's softmax rows stray from 1 by up to (2T + 3) eps_bf16 and are taken; float32 rows off by a
    thousandth, far past float32's (2T + 3) eps, are refused."""
    import torch

    scores = torch.randn(2, 3, 40, 40, generator=torch.Generator().manual_seed(0)) * 4
    coarse = scores.to(torch.bfloat16).softmax(-1)  # rows sum to 1 within bfloat16's rounding only
    assert (coarse.float().sum(-1) - 1).abs().max() > 1e-3
    ae.show(tuple(coarse[None, i] for i in range(2)), [f"t{i}" for i in range(40)], view="heatmap")
    off = scores.softmax(-1).numpy() * np.float32(1.001)
    with pytest.raises(ValueError, match="must sum to 1"):
        ae.show(off, [f"t{i}" for i in range(40)])


def test_list_models_is_the_catalogue():
    found = ae.list_models()
    assert [key for key, _, _ in found] == list(registry.MODELS)
    minilm = found[0]
    assert minilm[1] == "all-MiniLM-L6-v2 (pretrained)" and minilm[2] == str(minilm_folder())


def test_save_writes_html_that_opens_offline(minilm_run, tmp_path):
    path = ae.save(minilm_run.figure("heatmap", layer=3, head=1), tmp_path / "heatmap.html")
    page = path.read_text(encoding="utf-8")
    assert "<script src=" not in page.replace('<script src="data:', "")  # plotly.js is inside, nothing fetched
    assert "Layer 4, head 2" in page
    with pytest.raises(ValueError, match=r"name a \.png, \.svg, \.pdf or \.html file"):
        ae.save(minilm_run.figure("model_view"), tmp_path / "figure.jpg")


@pytest.mark.skipif(downloads.chromium() is None, reason="image export needs Chromium")
@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<svg"), (".pdf", b"%PDF")])
def test_save_writes_images(minilm_run, tmp_path, suffix, magic):
    path = ae.save(minilm_run.figure("heatmap", layer=3, head=1), tmp_path / f"heatmap{suffix}")
    assert path.read_bytes().lstrip()[: len(magic)] == magic


def test_a_rotary_model_draws_its_turns_and_says_paris():
    run = ae.run("smollm2", "The capital of France is")
    # as the pages show them; raw_: as the tokenizer writes them
    assert run.tokens[-1] == "\u2423is" and run.next_tokens[-1] == "\u2423Paris"
    assert run.raw_tokens[-1] == "Ġis" and run.raw_next_tokens[-1] == "ĠParis"
    assert run.queries_keys() == (run.tokens, run.tokens)
    curves = run.figure("positional")  # nothing added to the embedding: how far each pair of q and k turns
    assert curves.layout.title.text == "How far each pair has turned: cos(position x theta_i)"
    distance = run.figure("positional", show="distance", layer=2, head=3)
    assert distance.layout.title.text.startswith("Layer 3, head 4: query")
    with pytest.raises(ValueError, match="choose curves or distance"):
        run.figure("positional", show="table")
