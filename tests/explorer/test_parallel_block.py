"""A parallel block (GPT-NeoX's x + Attn(Norm1(x)) + FFN(Norm2(x))) as the lesson says it, read from the description
alone (models.anatomy): the engine runs such blocks once the GPT-NeoX family lands."""

from __future__ import annotations

from types import SimpleNamespace

from attention_explorer.explorer.lesson import model_words, then_and_now, wording
from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.descriptor import for_config

NEOX = TransformerConfig(
    vocab_size=50,
    d_model=32,
    n_heads=4,
    d_ff=128,
    n_encoder_layers=0,
    n_decoder_layers=2,
    positional="rotary",
    rotary_fraction=0.25,
    activation="gelu",
    norm_first=True,
    parallel_residual=True,
    pad_id=None,
)


def shown(config: TransformerConfig) -> SimpleNamespace:
    """What then_and_now reads of a loaded model: its config and its family (no weights needed)."""
    return SimpleNamespace(model=SimpleNamespace(config=config), family=for_config(config, "GPT-NeoX family", "random"))


OWN_NORMS = "each reads x through its own LayerNorm, with its own gain and bias"


def test_step_7_says_each_sub_layer_reads_x_through_its_own_norm():
    said = then_and_now.now(shown(NEOX), "add_norm")
    assert said == (
        f"parallel pre-LN, x + Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x)): {OWN_NORMS}; "
        "a gelu feed-forward 32 -> 128 -> 32"
    )
    intro = model_words.add_norm_intro(describe(NEOX))
    assert OWN_NORMS in intro and "x + Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x))" in intro
    # one shared norm is GPT-J's design, not this engine's GPT-NeoX (two norms, norm1 and norm3, each with parameters)
    assert "same normed input" not in said + intro
    layer = describe(NEOX).decoder
    assert len({sub.norm for sub in layer.sublayers}) == 2


def test_rotary_on_a_share_of_each_head_says_the_share():
    said = then_and_now.now(shown(NEOX), "positional")
    assert (
        said
        == "nothing added: queries and keys turned by position (rotary on 25% of each head's dimensions, base 10000)"
    )


def test_a_later_layers_input_is_the_parallel_sum():
    said = wording.attention_input(NEOX, "decoder_self", 1)
    assert (
        said == "output of decoder layer 1: h + SelfAttn(LayerNorm(h)) + FFN(LayerNorm(h)) (pre-LN: not yet normalised)"
    )
