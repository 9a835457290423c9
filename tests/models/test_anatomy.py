"""models.anatomy describes the layers the engine builds: walked against the built modules and a forward's internals
for each family's shape, so the description cannot drift from the engine."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from attention_explorer.models import anatomy
from attention_explorer.models.attention import MultiHeadAttention
from attention_explorer.models.blocks import FeedForward, Residual, RMSNorm
from attention_explorer.models.config import PAPER_BASE, TOY, TransformerConfig
from attention_explorer.models.families import descriptor as family
from attention_explorer.models.transformer import DecoderLayerInternals, EncoderLayerInternals, Transformer

SMALL = dict(vocab_size=50, d_model=32, n_heads=4, d_ff=64, max_len=32, dropout=0.0)
# a pre-LN decoder of 2 layers as the published decoder families have it: no embedding scale, no padding id, an output
# layer without a bias
DECODER = dict(
    SMALL,
    n_encoder_layers=0,
    n_decoder_layers=2,
    norm_first=True,
    scale_embeddings=False,
    pad_id=None,
    output_bias=False,
)
CONFIGS = {
    # the paper's base model's choices at a size a test builds quickly
    "paper base": dataclasses.replace(PAPER_BASE, **SMALL, n_encoder_layers=2, n_decoder_layers=2),
    "toy": dataclasses.replace(TOY, dropout=0.0),
    "MiniLM-like": TransformerConfig(
        **SMALL,
        n_encoder_layers=2,
        n_decoder_layers=0,
        positional="learned",
        activation="gelu",
        layer_norm_eps=1e-12,
        scale_embeddings=False,
        type_vocab_size=2,
        embedding_norm=True,
    ),
    "GPT-2-like": TransformerConfig(
        **DECODER,
        positional="learned",
        activation="gelu_new",
    ),
    "Llama-like": TransformerConfig(
        **DECODER,
        positional="rotary",
        activation="silu",
        gated_ffn=True,
        norm="rms",
        n_kv_heads=2,
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
    ),
    # GPT-NeoX (Pythia): the parallel block, rotary on a quarter of each head, LayerNorm with biases, untied output
    "GPT-NeoX-like": TransformerConfig(
        **DECODER,
        positional="rotary",
        rotary_fraction=0.25,
        activation="gelu",
        parallel_residual=True,
        tie_output=False,
    ),
}


def stacks(model: Transformer, described: anatomy.Anatomy):
    """(the stack's module, its described layer) for each stack the model has."""
    pairs = ((model.encoder, described.encoder), (model.decoder, described.decoder))
    return [(stack, layer) for stack, layer in pairs if stack is not None]


@pytest.mark.parametrize("name", CONFIGS)
def test_the_description_names_the_modules_the_engine_built(name):
    config = CONFIGS[name]
    described = anatomy.describe(config)
    model = Transformer(config)
    assert (described.encoder is None, described.decoder is None) == (model.encoder is None, model.decoder is None)
    for stack, layer in stacks(model, described):
        assert (stack.final_norm is not None) == described.final_norm
        assert (stack.embeddings.position is not None) == described.positions.added
        for built in stack.layers:
            assert built.sublayers == layer.sublayers
            for sub in layer.sublayers:
                module, norm = getattr(built, sub.module), getattr(built, sub.norm)
                assert isinstance(module, MultiHeadAttention if sub.is_attention else FeedForward)
                assert isinstance(norm, Residual) and norm.norm_first == layer.norm_first == described.norm_first
                assert isinstance(norm, RMSNorm) == (described.norm == "rms")
                assert isinstance(norm, nn.LayerNorm) == (described.norm == "layer")
                if sub.is_attention:
                    assert module.n_kv_heads == described.kv_heads and module.n_heads == described.n_heads
                    # rotary turns the queries and keys of self-attention only
                    assert (module.rotary is not None) == (described.positions.rotary and sub.module == "self_attn")
                else:
                    assert (module.gate is not None) == described.ffn.gated
                    assert module.activation_name == described.ffn.activation
            # every sub-layer module the layer holds is described, and the norms too
            held = {n for n in ("self_attn", "cross_attn", "ffn") if getattr(built, n, None) is not None}
            assert held == set(layer.modules)
            norms = {n for n in ("norm1", "norm2", "norm3") if getattr(built, n, None) is not None}
            assert norms == {sub.norm for sub in layer.sublayers}


def recomputed(layer: anatomy.Layer, built: nn.Module, x: torch.Tensor, internals) -> dict[str, torch.Tensor]:
    """The stream after each sub-layer, from the description alone: what it reads, what it adds, where the norm is."""
    states, stream = {}, x
    for sub in layer.sublayers:
        norm = getattr(built, sub.norm)
        source = x if sub.reads_layer_input else stream
        read = norm(source) if sub.reads_normed else source
        out = built.ffn(read) if sub.module == "ffn" else getattr(internals, sub.module).output
        stream = stream + out if layer.norm_first else norm(stream + out)
        states[sub.state] = stream
    return states


@pytest.mark.parametrize("name", CONFIGS)
@torch.inference_mode()
def test_the_stream_recomputed_from_the_description_is_the_engines(name):
    config = CONFIGS[name]
    torch.manual_seed(0)
    model = Transformer(config).eval()
    src = torch.randint(1, config.vocab_size, (2, 7))
    out = model(src, src[:, :5] if config.is_encoder_decoder else None)
    described = anatomy.describe(config)
    runs = [(model.encoder, described.encoder, out.encoder), (model.decoder, described.decoder, out.decoder)]
    for stack, layer, internals in runs:
        if stack is None or internals is None:
            continue
        x = internals.embeddings
        for built, record in zip(stack.layers, internals.layers, strict=True):
            assert isinstance(record, EncoderLayerInternals if layer.stack == "encoder" else DecoderLayerInternals)
            for state, value in recomputed(layer, built, x, record).items():
                torch.testing.assert_close(value, getattr(record, state), rtol=1e-5, atol=1e-5)
            x = record.after_ffn


def test_each_family_reads_its_block_from_the_description():
    for name, config in CONFIGS.items():
        described = family.for_config(config, name, "random")
        assert described.block == anatomy.describe(config)
        assert (described.norm_first, described.kinds) == (config.norm_first, described.block.kinds)
    llama = anatomy.describe(CONFIGS["Llama-like"])
    assert (llama.norm_name, llama.pre_name, llama.shared_kv, llama.gated_ffn) == ("RMSNorm", "pre-norm", True, True)
    assert (llama.positions.rotary, llama.positions.added, llama.positions.fraction) == (True, False, 1.0)
    paper = anatomy.describe(CONFIGS["paper base"])
    assert paper.kinds == ("encoder_self", "decoder_self", "cross") and not paper.final_norm
    assert paper.decoder is not None and paper.decoder.modules == ("self_attn", "cross_attn", "ffn")
    assert [sub.kind for sub in paper.decoder.sublayers] == ["masked self-attention", "cross-attention", "feed-forward"]
    assert paper.decoder.formula("LayerNorm") == (
        "x = LayerNorm(x + SelfAttention(x)); x = LayerNorm(x + CrossAttention(x)); x = LayerNorm(x + FFN(x))"
    )
    gpt2 = anatomy.describe(CONFIGS["GPT-2-like"])
    assert gpt2.decoder is not None and gpt2.decoder.formula("LayerNorm") == (
        "x = x + SelfAttention(LayerNorm(x)); x = x + FFN(LayerNorm(x))"
    )


def test_a_parallel_block_reads_one_normed_input_and_adds_both_outputs():
    # GPT-NeoX's shape: x + Attn(Norm1(x)) + FFN(Norm2(x)), a quarter of each head turned (description only: the
    # engine runs parallel blocks with the GPT-NeoX family)
    neox = dict(parallel_residual=True, positional="rotary", rotary_fraction=0.25)
    config = dataclasses.replace(CONFIGS["GPT-2-like"], **neox)
    described = anatomy.describe(config)
    assert described.parallel and described.norm_first and described.decoder is not None
    layer = described.decoder
    assert layer.parallel and layer.modules == ("self_attn", "ffn")
    assert [(sub.norm, sub.reads_normed, sub.reads_layer_input) for sub in layer.sublayers] == [
        ("norm1", True, True),
        ("norm3", True, True),
    ]
    assert layer.formula("LayerNorm") == "x = x + SelfAttention(LayerNorm(x)) + FFN(LayerNorm(x))"
    assert (described.positions.rotary, described.positions.fraction) == (True, 0.25)
    # the stream from the description: both sub-layers read the layer's input through their own norms
    torch.manual_seed(0)
    x = torch.randn(1, 3, config.d_model)
    norms = {"norm1": nn.LayerNorm(config.d_model), "norm3": nn.LayerNorm(config.d_model)}
    outs = {"self_attn": lambda h: 2 * h, "ffn": lambda h: h + 1}
    stream = x
    for sub in layer.sublayers:
        source = x if sub.reads_layer_input else stream
        stream = stream + outs[sub.module](norms[sub.norm](source))
    torch.testing.assert_close(stream, x + 2 * norms["norm1"](x) + norms["norm3"](x) + 1)
    # a sequential block's second sub-layer reads the stream after the first
    assert not anatomy.describe(CONFIGS["GPT-2-like"]).decoder.sublayers[1].reads_layer_input
