"""GPT-NeoX-family conversion (the Pythia suite): parity with transformers on tiny random GPT-NeoX folders (parallel and
sequential residual; rotary on a quarter, half or all of each head; tied and untied output; with and without attention
biases) within 1e-5 on every attention weight, hidden state and logit; greedy continuation token for token; what the
parallel block's states and an ablation in it mean; loading through the public folder path; and clear errors for
configs the engine cannot run."""

from __future__ import annotations

import pytest
import torch

from attention_explorer.models import ablation, registry
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.families.gptneox import config_from_hf, convert, split_qkv
from attention_explorer.models.positional import RotaryPositions
from attention_explorer.models.pretrained import load_folder, read_checkpoint
from attention_explorer.models.reference import each_attention, load_reference, run_reference
from tests.folders import CORPUS, make_gptneox_folder
from tests.parity import assert_greedy_is_generate, differences

PARITY = 1e-5  # the project's parity bar with transformers (issue #40), here on the logits too

SHAPES = [
    dict(parallel=True, rotary_pct=0.25),  # Pythia's own choices: d_head 16, its first 4 dimensions turned
    dict(parallel=False, rotary_pct=0.25, heads=8, layers=3, seed=1),  # d_head 8: one pair turned, 6 passed through
    dict(parallel=True, rotary_pct=1.0, hidden_size=48, tie=True, rope_theta=500.0, seed=2),
    dict(parallel=False, rotary_pct=1.0, hidden_size=32, heads=2, layers=1, attention_bias=False, seed=3),
    dict(parallel=True, rotary_pct=0.5, heads=2, intermediate=40, positions=40, activation="gelu_new", seed=4),
]


def _ids(text: str, tokenizer, length: int) -> torch.Tensor:
    return torch.tensor([tokenizer.encode(text, length).ids])


@pytest.mark.parametrize("settings", SHAPES, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_tiny_random_gptneox_matches_transformers(tmp_path, settings):
    folder = make_gptneox_folder(tmp_path / "neox", **settings)
    model, tokenizer, family = load_folder(folder)
    assert (family.name, family.shape, family.causal, family.norm_first, family.norm, family.positional) == (
        "GPT-NeoX family",
        "decoder-only",
        True,
        True,
        "layer",
        "rotary",
    )
    assert (family.block.parallel, family.block.positions.fraction) == (settings["parallel"], settings["rotary_pct"])
    config = model.config
    d_head = settings.get("hidden_size", 64) // settings.get("heads", 4)
    assert config.rotary_dims == int(d_head * settings["rotary_pct"])
    assert model.decoder.layers[0].self_attn.rotary.rotary_dims == config.rotary_dims
    assert config.rope_theta == settings.get("rope_theta", 10000.0) and model.decoder.embeddings.position is None
    assert (model.generator.weight is model.decoder.embeddings.token.weight) == settings.get("tie", False)
    assert (model.decoder.layers[0].self_attn.w_q.bias is not None) == settings.get("attention_bias", True)
    assert model.generator.bias is None and model.decoder.layers[0].ffn.linear1.bias is not None
    reference = load_reference(folder)
    assert type(reference).__name__ == "GPTNeoXForCausalLM"
    text = _ids(" ".join(CORPUS[:3]), tokenizer, config.max_len)
    # random ids filling every position: the rotary tables are read to their last row
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    full = torch.randint(config.vocab_size, (2, config.max_len), generator=generator)
    for ids in (text, full):
        found = differences(model, reference, ids)  # also: the same most likely next token at every position
        assert max(found.values()) <= PARITY, found
    with torch.inference_mode():
        weights = [layer.self_attn.weights for layer in model(full).decoder.layers]
    # far from uniform: a wrong split of query_key_value, a wrong rotary share or a wrong residual could not pass 1e-5
    assert max(w[..., 1:, :].max().item() for w in weights) > 0.5
    # the reference page's path (one hook per attention module) finds GPT-NeoX's attentions too
    read: dict[int, torch.Tensor] = {}
    each_attention(reference, full, lambda layer, w: read.update({layer: w.clone()}) or False)
    assert len(read) == config.n_decoder_layers
    for layer, mine in enumerate(weights):
        torch.testing.assert_close(mine, read[layer], atol=PARITY, rtol=0)


@pytest.mark.parametrize("settings", [dict(parallel=True), dict(parallel=False, heads=8, seed=1)])
def test_greedy_continuation_is_transformers_generate(tmp_path, settings):
    """The cached decoder (models.greedy: one position a step, through run_sublayers) picks transformers' tokens."""
    assert_greedy_is_generate(make_gptneox_folder(tmp_path / "neox", positions=32, **settings), CORPUS[0])


def test_the_parallel_blocks_states_are_running_sums_of_what_each_sub_layer_read_from_x(tmp_path):
    """after_self_attn is x + Attn(Norm1(x)); after_ffn adds FFN(Norm3(x)), the feed-forward reading the layer's
    input x, not after_self_attn: by the same operations, bit for bit."""
    model, tokenizer, _ = load_folder(make_gptneox_folder(tmp_path / "neox", parallel=True))
    ids = _ids(CORPUS[1], tokenizer, 64)
    with torch.inference_mode():
        out = model(ids)
        x = out.decoder.embeddings
        for layer, internals in zip(model.decoder.layers, out.decoder.layers, strict=True):
            assert [s.reads_layer_input for s in layer.sublayers] == [True, True]  # both read x
            written = layer.ffn(layer.norm3(x))  # (B, T, D)
            assert torch.equal(internals.after_self_attn, x + internals.self_attn.output)
            assert torch.equal(internals.after_ffn, internals.after_self_attn + written)
            # the sequential reading (the FFN on after_self_attn) is another number: the test could fail
            assert not torch.allclose(layer.ffn(layer.norm3(internals.after_self_attn)), written, atol=1e-3)
            x = internals.after_ffn


def test_a_sequential_gptneox_layer_reads_the_state_after_attention(tmp_path):
    model, tokenizer, _ = load_folder(make_gptneox_folder(tmp_path / "neox", parallel=False))
    with torch.inference_mode():
        out = model(_ids(CORPUS[1], tokenizer, 64))
        layer, internals = model.decoder.layers[0], out.decoder.layers[0]
        assert [s.reads_layer_input for s in layer.sublayers] == [True, False]  # the FFN reads after_self_attn
        written = layer.ffn(layer.norm3(internals.after_self_attn))
        assert torch.equal(internals.after_ffn, internals.after_self_attn + written)


@pytest.mark.parametrize("parallel", [True, False])
def test_a_head_turned_off_is_transformers_with_that_heads_columns_of_w_o_zeroed(tmp_path, parallel):
    """Zero ablation of head (layer 1, head 2) through models.ablation equals transformers' model with that head's
    slice of attention.dense zeroed (what W_O reads of it), within the parity bar; in a parallel block the layer's own
    feed-forward does not see the change (it read x), a sequential one's does."""
    folder = make_gptneox_folder(tmp_path / "neox", parallel=parallel, layers=3)
    model, tokenizer, _ = load_folder(folder)
    ids = _ids(" ".join(CORPUS[:2]), tokenizer, 64)
    layer, head, d_head = 1, 2, model.config.d_head
    off = ablation.heads_off([ablation.Head("decoder_self", layer, head)], ablation.shapes(model.config))
    with torch.inference_mode():
        plain, ablated = model(ids), model(ids, ablation=off)
    reference = load_reference(folder)
    with torch.no_grad():
        reference.gpt_neox.layers[layer].attention.dense.weight[:, head * d_head : (head + 1) * d_head] = 0
    theirs = run_reference(reference, ids)
    assert (ablated.logits - plain.logits).abs().max() > 1e-2  # the head mattered
    assert (ablated.logits - theirs.logits).abs().max() <= PARITY
    for mine, their_weights in zip(ablated.decoder.layers, theirs.attentions, strict=True):
        assert (mine.self_attn.weights - their_weights).abs().max() <= PARITY
    before, after = plain.decoder.layers[layer], ablated.decoder.layers[layer]
    ffn_before = before.after_ffn - before.after_self_attn
    ffn_after = after.after_ffn - after.after_self_attn
    # the FFN's write, read back from the running sums (a rounding or two of them): unchanged in a parallel block
    assert torch.allclose(ffn_before, ffn_after, atol=1e-5) == parallel


def test_partial_rotary_turns_only_its_share():
    base, d_head, turned = 500.0, 16, 4
    x = torch.randn(2, 3, 10, d_head, generator=torch.Generator().manual_seed(0))
    partial = RotaryPositions(10, d_head, base, turned)
    out = partial(x)
    assert torch.equal(out[..., turned:], x[..., turned:])  # passed through untouched
    # the turned share is a full rotary of that width (frequencies over rotary_dims, as GPT-NeoX computes them)
    assert torch.equal(out[..., :turned], RotaryPositions(10, turned, base)(x[..., :turned]))
    assert not torch.equal(out[..., 1:, :turned], x[..., 1:, :turned])
    assert torch.equal(partial(x[:, :, 6:], offset=6), out[:, :, 6:])  # the cached decoder's newest positions
    # all of a head: the tables and the turn of before (rotary_dims None or d_head)
    full, default = RotaryPositions(10, d_head, base, d_head), RotaryPositions(10, d_head, base)
    assert torch.equal(full(x), default(x)) and torch.equal(full.cos, default.cos)


def test_query_key_value_is_split_per_head():
    heads, d_head, d = 2, 3, 4
    # rows numbered by (head, part, row): part 0 q, 1 k, 2 v, interleaved per head as GPT-NeoX stores them
    fused = torch.tensor([[100 * h + 10 * p + r] * d for h in range(heads) for p in range(3) for r in range(d_head)])
    q, k, v = split_qkv(fused.float(), heads)
    assert q[:, 0].tolist() == [0, 1, 2, 100, 101, 102]
    assert k[:, 0].tolist() == [10, 11, 12, 110, 111, 112] and v[:, 0].tolist() == [20, 21, 22, 120, 121, 122]
    bias_q, _, bias_v = split_qkv(fused[:, 0].float(), heads)
    assert torch.equal(bias_q, q[:, 0]) and torch.equal(bias_v, v[:, 0])


def test_a_users_folder_loads_through_the_public_path(tmp_path):
    folder = make_gptneox_folder(tmp_path / "tiny-pythia", parallel=True, rotary_pct=0.25)
    loaded = registry.from_path(folder)
    assert isinstance(loaded, registry.LoadedModel) and loaded.key == "folder:tiny-pythia"
    family = loaded.family
    assert family.name == "GPT-NeoX family" and family.origin == "from a folder" and family.from_folder
    assert (family.shape, family.causal, family.next_token_head, family.has_encoder) == (
        "decoder-only",
        True,
        True,
        False,
    )
    assert (
        family.norm_first,
        family.block.norm_name,
        family.positional,
        family.block.gated_ffn,
        family.block.shared_kv,
    ) == (
        True,
        "LayerNorm",
        "rotary",
        False,
        False,
    )
    assert (family.block.parallel, family.block.positions.fraction) == (True, 0.25)
    assert family.word_start == "Ġ" and "<|endoftext|>" in family.specials
    assert loaded.is_decoder_only and loaded.max_tokens == 64
    encoding = loaded.tokenizer.encode(CORPUS[0], loaded.max_tokens)
    assert encoding.tokens[:3] == ("the", "Ġcat", "Ġsat")
    with torch.inference_mode():
        logits = loaded.model(torch.tensor([encoding.ids])).logits
    assert logits.shape == (1, len(encoding), loaded.model.config.vocab_size)


def test_the_original_files_names_and_a_broken_checkpoint(tmp_path):
    """Pythia's own files name the output matrix embed_out (transformers 5 calls it lm_head) and may carry rotary's
    frequencies and the causal mask as buffers; a missing or misshapen weight is named."""
    folder = make_gptneox_folder(tmp_path / "neox", layers=1)
    hf = __import__("json").loads((folder / "config.json").read_text())
    config = config_from_hf(hf)
    state = read_checkpoint(folder)
    head = state.pop("embed_out.weight", None)
    head = state.pop("lm_head.weight") if head is None else head
    extras = {
        "gpt_neox.layers.0.attention.rotary_emb.inv_freq": torch.zeros(2),
        "gpt_neox.layers.0.attention.bias": torch.ones(1, 1, 64, 64, dtype=torch.bool),
        "gpt_neox.layers.0.attention.masked_bias": torch.tensor(-1e9),
    }
    for name in ("embed_out.weight", "lm_head.weight"):
        converted = convert(state | {name: head} | extras, config)
        assert torch.equal(converted["generator.weight"], head)
    with pytest.raises(ConversionError, match=r"missing layers\.0\.attention\.query_key_value\.weight"):
        convert(
            {k: v for k, v in state.items() if "query_key_value.weight" not in k} | {"embed_out.weight": head}, config
        )
    with pytest.raises(ConversionError, match=r"unexpected layers\.0\.extra"):
        convert(state | {"embed_out.weight": head, "gpt_neox.layers.0.extra": torch.zeros(1)}, config)


def test_config_errors_are_clear():
    good = dict(
        model_type="gpt_neox",
        vocab_size=10,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=16,
        num_hidden_layers=1,
    )
    # transformers' defaults when config.json says nothing: a quarter of each head turned, base 10000, parallel
    config = config_from_hf(good)
    assert (config.rotary_fraction, config.rotary_dims, config.rope_theta, config.parallel_residual) == (
        0.25,
        4,
        10000.0,
        True,
    )
    # the original files' names and transformers 5's rope_parameters say the same
    old = config_from_hf(good | {"rotary_pct": 0.5, "rotary_emb_base": 500})
    new = config_from_hf(good | {"rope_parameters": {"rope_theta": 500, "partial_rotary_factor": 0.5}})
    assert old == new and (old.rotary_dims, old.rope_theta) == (8, 500.0)
    # d_head 16 x 0.1875 = 3 dimensions: rotary turns pairs
    with pytest.raises(ConversionError, match=r"= 3 dimensions is not a positive even number"):
        config_from_hf(good | {"rotary_pct": 0.1875})
    with pytest.raises(ConversionError, match="rope_type 'linear'"):
        config_from_hf(good | {"rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    with pytest.raises(ConversionError, match="lacks 'hidden_size'"):
        config_from_hf({k: v for k, v in good.items() if k != "hidden_size"})
    with pytest.raises(ConversionError, match="unsupported hidden_act 'mish'"):
        config_from_hf(good | {"hidden_act": "mish"})
    base = dict(vocab_size=10, d_model=48, n_heads=4, n_encoder_layers=0, positional="rotary", norm_first=True)
    with pytest.raises(ValueError, match=r"int\(d_head=12 x rotary_fraction=0.25\) = 3 dimensions"):
        TransformerConfig(**base, rotary_fraction=0.25)
    with pytest.raises(ValueError, match="= 0 dimensions"):
        TransformerConfig(**base, rotary_fraction=0.05)
    for fraction in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="is not a share of a head's dimensions"):
            TransformerConfig(**base, rotary_fraction=fraction)
    with pytest.raises(ValueError, match="needs rotary positions, not 'learned'"):
        TransformerConfig(**(base | {"positional": "learned"}), rotary_fraction=0.5)
    with pytest.raises(ValueError, match="parallel_residual .* needs pre-norm"):
        TransformerConfig(**(base | {"norm_first": False}), parallel_residual=True)
    with pytest.raises(ValueError, match="parallel_residual .* decoder-only"):
        TransformerConfig(**(base | {"n_encoder_layers": 2}), parallel_residual=True)
    assert TransformerConfig(**base, rotary_fraction=0.5, parallel_residual=True).rotary_dims == 6


def test_the_other_families_are_unchanged_by_the_new_fields():
    """The defaults are the sequential block and rotary on all of a head: every existing config reads as before."""
    config = TransformerConfig(vocab_size=20, d_model=16, n_heads=2, d_ff=32, max_len=8)
    assert (config.parallel_residual, config.rotary_fraction) == (False, 1.0)
    rotary = TransformerConfig(vocab_size=20, d_model=16, n_heads=2, n_encoder_layers=0, positional="rotary")
    assert rotary.rotary_dims == rotary.d_head == 8
