"""Turning heads off (models.ablation) is exactly what it says: a zero-ablated head gives the forward of a copy of the
model whose W_O reads nothing from that head (its columns zeroed); a mean-ablated one, the copy whose W_O bias also
adds what the head's mean output writes. Batched rows, greedy decoding and bad requests."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from attention_explorer.models import ablation, greedy, registry
from attention_explorer.models.ablation import AblationError, Head
from tests import tolerance

TRANSLATE = "the small red cat sees a big dog"


@pytest.fixture(scope="module")
def induction():
    return registry.load("induction")


def _w_o(model, head: Head) -> torch.nn.Linear:
    stack, module = ablation.LOCATION[head.kind]
    return getattr(getattr(model, stack).layers[head.layer], module).w_o


def without(model, heads, means=None):
    """A deep copy of the model whose W_O ignores these heads (their columns zeroed); with `means`, its bias adds
    what each head's mean output writes through those columns instead."""
    edited = copy.deepcopy(model)
    d_head = model.config.d_head
    with torch.no_grad():
        for head in heads:
            w_o = _w_o(edited, head)
            columns = slice(head.head * d_head, (head.head + 1) * d_head)
            if means is not None:
                w_o.bias += w_o.weight[:, columns] @ means[head.kind][head.layer, head.head]
            w_o.weight[:, columns] = 0.0
    return edited


def inputs(loaded, text: str):
    """(src,) for a decoder-only model; (src, tgt) teacher-forced on the model's own greedy output otherwise."""
    src = torch.tensor([loaded.tokenizer.encode(text, loaded.max_tokens).ids])
    if loaded.is_decoder_only:
        return (src,)
    written = greedy.greedy_decode(loaded.model, src, loaded.bos_id, loaded.eos_id, 16)
    return src, torch.tensor([[loaded.bos_id, *written[:-1]]])


def forward_bound(model, out, n_keys: int):
    """Two whole forwards of the same numbers in other products (a batch of rows against one, an edited W^O against a
    patched head): each logit of `out`'s forward within tolerance.logits_bound, of its terms' magnitudes through the
    final norm's 1/sigma (tests/tolerance.py)."""
    return tolerance.logits_bound(model, out, n_keys)


def state_bound(model, out, stack: str, index: int, n_keys: int):
    """The state after layer `index` of `out`'s `stack`, likewise: tolerance.output_bound of its terms, over the
    chain of the layers up to it."""
    terms = (index + 1) * tolerance.layer_terms(model.config, n_keys) * (2 if stack == "decoder" else 1)
    return tolerance.output_bound(getattr(model, stack), getattr(out, stack), terms, index)


def weights_bound(model, attention, n_keys: int):
    """Attention weights of two such forwards: their scores' error (q and k carry the forward's chain), through the
    softmax."""
    terms = tolerance.forward_terms(model.config, n_keys)
    scores = (attention.q.abs() @ attention.k.abs().transpose(-1, -2)).numpy() / np.sqrt(attention.q.shape[-1])
    dz = tolerance.probable(terms, scores).max(-1, keepdims=True)
    return tolerance.probabilities_bound(attention.weights, dz)


@torch.inference_mode()
def assert_same_run(model, ablated_by, edited, args):
    """Logits, and every layer's attention weights and output, of the ablated run equal the edited copy's (each within
    the rounding of a whole forward in other products: a pre-LN residual stream grows to tens)."""
    got, want = model(*args, ablation=ablated_by), edited(*args)
    n_keys = max(a.shape[-1] for a in args)
    tolerance.assert_within(got.logits, want.logits, forward_bound(model, want, n_keys), "logits")
    for stack in ("encoder", "decoder"):
        a, b = getattr(got, stack), getattr(want, stack)
        if a is None:
            continue
        for i, (layer_a, layer_b) in enumerate(zip(a.layers, b.layers, strict=True)):
            bound = state_bound(model, want, stack, i, n_keys)
            tolerance.assert_within(layer_a.after_ffn, layer_b.after_ffn, bound, f"{stack} {i} after_ffn")
            bound = weights_bound(model, layer_b.self_attn, n_keys)
            tolerance.assert_within(layer_a.self_attn.weights, layer_b.self_attn.weights, bound, f"{stack} {i} weights")
    return got


def random_means(shapes, d_head, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return {kind: torch.randn(*shape, d_head, generator=generator) for kind, shape in shapes.items()}


@pytest.mark.parametrize(
    "heads",
    [
        [Head("encoder_self", 0, 2)],
        [Head("decoder_self", 1, 3)],
        [Head("cross", 1, 0)],
        [Head("encoder_self", 1, 1), Head("cross", 0, 2), Head("cross", 1, 3), Head("decoder_self", 0, 0)],
    ],
    ids=["encoder", "decoder", "cross", "several"],
)
def test_zero_ablation_is_the_model_with_the_heads_w_o_columns_zeroed(translate, heads):
    model, shapes = translate.model, ablation.shapes(translate.model.config)
    args = inputs(translate, TRANSLATE)
    got = assert_same_run(model, ablation.heads_off(heads, shapes), without(model, heads), args)
    with torch.inference_mode():
        clean = model(*args).logits
    assert (got.logits - clean).abs().max() > 1e-3  # the head did something, so the comparison means something


def test_zero_ablation_of_a_decoder_only_model(induction):
    model, shapes = induction.model, ablation.shapes(induction.model.config)
    assert set(shapes) == {"decoder_self"}
    heads = [Head("decoder_self", 1, 0), Head("decoder_self", 0, 3)]
    assert_same_run(
        model, ablation.heads_off(heads, shapes), without(model, heads), inputs(induction, induction.example)
    )


@pytest.mark.parametrize("key", ["translate", "induction"])
def test_mean_ablation_is_the_model_with_the_mean_written_through_w_o_bias(request, key):
    loaded = request.getfixturevalue(key)
    model, shapes = loaded.model, ablation.shapes(loaded.model.config)
    means = random_means(shapes, model.config.d_head)
    heads = [
        Head(kind, layer, (layer + i) % n_heads)
        for i, (kind, (n_layers, n_heads)) in enumerate(shapes.items())
        for layer in range(n_layers)
    ]
    args = inputs(loaded, TRANSLATE if key == "translate" else loaded.example)
    assert_same_run(model, ablation.heads_off(heads, shapes, means), without(model, heads, means), args)


@pytest.mark.parametrize("key,mean", [("translate", False), ("induction", False), ("induction", True)])
@torch.inference_mode()
def test_each_head_in_one_batch_equals_each_head_run_alone(request, key, mean):
    loaded = request.getfixturevalue(key)
    model, shapes = loaded.model, ablation.shapes(loaded.model.config)
    means = random_means(shapes, model.config.d_head, seed=1) if mean else None
    every, heads = ablation.each_head(shapes, means)
    assert every.rows == len(heads) == sum(n * h for n, h in shapes.values())
    assert len(set(heads)) == len(heads)
    args = inputs(loaded, TRANSLATE if key == "translate" else loaded.example)
    batched_out = model(*(a.expand(len(heads), -1) for a in args), ablation=every)
    batched = batched_out.logits
    n_keys = max(a.shape[-1] for a in args)
    for row, head in enumerate(heads):
        alone_out = model(*args, ablation=ablation.heads_off([head], shapes, means))
        bound = forward_bound(model, alone_out, n_keys)[0]  # a batch row against a forward of one
        tolerance.assert_within(batched[row], alone_out.logits[0], bound, f"head {head} in a batch")
    # and a slice of rows is those rows' ablation
    part = model(*(a.expand(3, -1) for a in args), ablation=ablation.rows(every, 2, 5)).logits
    tolerance.assert_within(part, batched[2:5], forward_bound(model, batched_out, n_keys)[2:5], "rows 2..4")


@pytest.mark.parametrize("key", ["translate", "induction"])
@torch.inference_mode()
def test_each_layer_in_one_batch_equals_that_layers_heads_turned_off_together(request, key):
    loaded = request.getfixturevalue(key)
    model, shapes = loaded.model, ablation.shapes(loaded.model.config)
    every, layers = ablation.each_layer(shapes)
    assert layers == [(kind, layer) for kind, (n, _) in shapes.items() for layer in range(n)] and every.rows == len(
        layers
    )
    args = inputs(loaded, TRANSLATE if key == "translate" else loaded.example)
    batched = model(*(a.expand(len(layers), -1) for a in args), ablation=every).logits
    n_keys = max(a.shape[-1] for a in args)
    for row, (kind, layer) in enumerate(layers):
        heads = [Head(kind, layer, h) for h in range(shapes[kind][1])]
        alone = model(*args, ablation=ablation.heads_off(heads, shapes))
        bound = forward_bound(model, alone, n_keys)[0]  # a batch row against a forward of one
        tolerance.assert_within(batched[row], alone.logits[0], bound, f"layer {kind} {layer} in a batch")


def test_greedy_decoding_with_heads_off_is_the_edited_models(translate):
    model, shapes = translate.model, ablation.shapes(translate.model.config)
    src = inputs(translate, TRANSLATE)[0]
    heads = [Head("cross", 1, h) for h in range(4)]
    ablated = greedy.greedy_decode(
        model, src, translate.bos_id, translate.eos_id, 16, ablation.heads_off(heads, shapes)
    )
    edited = without(model, heads).greedy_decode(src, translate.bos_id, translate.eos_id, 16)
    assert ablated == edited
    assert ablated != greedy.greedy_decode(model, src, translate.bos_id, translate.eos_id, 16)


def test_continuing_a_text_with_heads_off_is_the_edited_models(induction):
    model, shapes = induction.model, ablation.shapes(induction.model.config)
    ids = inputs(induction, "kilo seven zulu echo two mike kilo")[0][0].tolist()
    heads = [Head("decoder_self", 1, h) for h in range(4)]
    for sampling in (greedy.Sampling(), greedy.Sampling(top_k=5, temperature=0.7, seed=3)):
        ablated = greedy.continue_text(model, ids, 5, sampling, ablation.heads_off(heads, shapes))
        assert ablated == greedy.continue_text(without(model, heads), ids, 5, sampling)
    clean = greedy.continue_text(model, ids, 5, greedy.Sampling())
    assert clean == [induction.tokenizer.token_to_id(w) for w in ["seven", "zulu", "echo", "two", "mike"]]
    assert greedy.continue_text(model, ids, 5, greedy.Sampling(), ablation.heads_off(heads, shapes)) != clean


def test_parse_reads_heads_counted_from_one(translate, induction):
    shapes = ablation.shapes(translate.model.config)
    assert ablation.parse("cross:2.1, encoder:1.3,decoder:2.4", shapes) == [
        Head("cross", 1, 0),
        Head("encoder_self", 0, 2),
        Head("decoder_self", 1, 3),
    ]
    assert ablation.parse("enc:1.1,dec:1.1,encoder_self:2.2", shapes)[2] == Head("encoder_self", 1, 1)
    assert ablation.parse("2.3", ablation.shapes(induction.model.config)) == [Head("decoder_self", 1, 2)]
    assert Head("cross", 1, 0).address == "2.1"


@pytest.mark.parametrize(
    "text,message",
    [
        ("2", "'2' is not a head: write layer.head"),
        ("", "'' is not a head"),
        ("2.1,", "'' is not a head"),
        ("0.1", "head 0.1 does not exist"),
        ("9.9", "head 9.9 does not exist: this model's decoder_self attention has layers 1-2 and heads 1-4"),
        ("2.5", "does not exist"),
        ("x:1.1", "unknown attention kind 'x'"),
        ("cross:1.1", "this model has no cross attention (it has decoder_self)"),
    ],
)
def test_bad_heads_of_a_decoder_only_model_are_named(induction, text, message):
    with pytest.raises(AblationError, match="^.+$") as raised:
        ablation.parse(text, ablation.shapes(induction.model.config))
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "text,message",
    [
        ("1.1", "this model has 3 attention kinds: name one before the head, e.g. cross:1.1"),
        ("cross:2.1,2.2", "name one before the head, e.g. cross:2.2"),
        ("cross:3.1", "head 3.1 does not exist: this model's cross attention has layers 1-2"),
        ("cross:2", "'cross:2' is not a head"),
    ],
)
def test_an_encoder_decoder_needs_the_attention_kind(translate, text, message):
    with pytest.raises(AblationError) as raised:
        ablation.parse(text, ablation.shapes(translate.model.config))
    assert message in str(raised.value)


def test_no_head_or_every_head_cannot_be_turned_off(translate, induction):
    shapes = ablation.shapes(induction.model.config)
    with pytest.raises(AblationError, match="pick at least one head"):
        ablation.heads_off([], shapes)
    _, every = ablation.each_head(shapes)
    with pytest.raises(AblationError, match="turns off all 8 heads"):
        ablation.heads_off(every, shapes)
    ablation.heads_off(every[1:], shapes)  # all but one is a fair request
    with pytest.raises(AblationError, match="turns off all 24 heads"):
        ablation.heads_off(
            ablation.each_head(ablation.shapes(translate.model.config))[1], ablation.shapes(translate.model.config)
        )
    with pytest.raises(AblationError, match="no cross attention"):
        ablation.heads_off([Head("cross", 0, 0)], shapes)
    assert issubclass(AblationError, ValueError)  # the command line maps it to exit status 2
