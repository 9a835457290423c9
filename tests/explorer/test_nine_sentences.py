"""Nine sentences a careful reader found false or unclear (issue 50), each read from its wording function for several
kinds of model, described from their configs as the engine builds them (models.anatomy): the paper's base, a BERT-like
encoder (MiniLM's shape), a GPT-2-like decoder, a Llama-like grouped-query decoder (SmolLM2's 9 query heads over 3
key/value heads) and a GPT-NeoX parallel block. tests/app/test_nine_sentences_pages.py opens the pages themselves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson import model_words, then_and_now
from attention_explorer.explorer.views.corpus import meaning, pooled
from attention_explorer.explorer.views.qkv import key_value_head, projection_formula
from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import PAPER_BASE, TransformerConfig
from attention_explorer.models.families.descriptor import for_config

MINILM = TransformerConfig(
    vocab_size=100,
    d_model=384,
    n_heads=12,
    d_ff=1536,
    n_encoder_layers=6,
    n_decoder_layers=0,
    positional="learned",
    activation="gelu",
    scale_embeddings=False,
    embedding_norm=True,
    type_vocab_size=2,
)
GPT2 = TransformerConfig(
    vocab_size=100,
    d_model=768,
    n_heads=12,
    d_ff=3072,
    n_encoder_layers=0,
    n_decoder_layers=12,
    positional="learned",
    activation="gelu",
    norm_first=True,
    scale_embeddings=False,
    pad_id=None,
)
LLAMA = TransformerConfig(  # SmolLM2-135M's attention: 9 query heads of 64, 3 key/value heads
    vocab_size=100,
    d_model=576,
    n_heads=9,
    n_kv_heads=3,
    d_ff=1536,
    n_encoder_layers=0,
    n_decoder_layers=2,
    positional="rotary",
    rope_theta=100000.0,
    activation="silu",
    gated_ffn=True,
    norm="rms",
    norm_first=True,
    qkv_bias=False,
    scale_embeddings=False,
    pad_id=None,
)
NEOX = TransformerConfig(
    vocab_size=100,
    d_model=64,
    n_heads=4,
    d_ff=96,
    n_encoder_layers=0,
    n_decoder_layers=2,
    positional="rotary",
    rotary_fraction=0.25,
    activation="gelu",
    norm_first=True,
    parallel_residual=True,
    scale_embeddings=False,
    pad_id=None,
)
EVERY = {"paper": PAPER_BASE, "minilm": MINILM, "gpt2": GPT2, "llama": LLAMA, "neox": NEOX}


def shown(config: TransformerConfig) -> SimpleNamespace:
    """What the wording reads of a loaded model: its config and its family (no weights needed)."""
    return SimpleNamespace(model=SimpleNamespace(config=config), family=for_config(config, "a model", "random"))


def test_1_a_parallel_block_reads_x_through_two_norms_each_with_its_own_parameters():
    block = describe(NEOX)
    # the engine's GPT-NeoX layer: its attention reads norm1, its feed-forward norm3, two LayerNorms (transformers'
    # modeling_gpt_neox builds input_layernorm and post_attention_layernorm); one shared norm is GPT-J's design
    assert [sub.norm for sub in block.decoder.sublayers] == ["norm1", "norm3"]
    own = "each reads x through its own LayerNorm, with its own gain and bias"
    assert block.parallel_reading == own
    step_7 = then_and_now.now(shown(NEOX), "add_norm")
    intro = model_words.add_norm_intro(block)
    for said in (step_7, intro):
        assert own in said and "same normed input" not in said and "Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x))" in said
    # an RMSNorm parallel block learns a gain only
    rms = describe(TransformerConfig(**{**NEOX.__dict__, "norm": "rms"}))
    assert rms.parallel_reading == "each reads x through its own RMSNorm, with its own gain"
    for name in ("paper", "minilm", "gpt2", "llama"):  # no other block is parallel, nor said to be
        assert "own LayerNorm, with" not in model_words.add_norm_intro(describe(EVERY[name]))


@pytest.mark.parametrize(
    ("name", "position", "norm"),
    [
        ("paper", "the sinusoidal position added", "LayerNorm after each"),
        ("minilm", "the learned position added", "LayerNorm after each"),
        ("gpt2", "the learned position added", "LayerNorm before each sub-layer"),
        ("llama", "no position added (rotary", "RMSNorm before each sub-layer"),
        ("neox", "no position added (rotary", "LayerNorm before each sub-layer"),
    ],
)
def test_2_the_forward_pass_intro_adds_a_position_and_names_the_norm_only_where_the_model_does(name, position, norm):
    said = model_words.forward_intro(describe(EVERY[name]))
    assert position in said and norm in said
    if name == "llama":
        assert "LayerNorm" not in said and "position added," not in said


def test_3_rotary_base_says_instead_of_only_where_the_bases_differ():
    same = model_words.rotary_base(describe(NEOX).positions.base)
    assert "instead of" not in same and "same base, 10000" in same
    other = model_words.rotary_base(describe(LLAMA).positions.base)
    assert "100000 instead of 10000" in other


def test_4_no_label_smoothing_is_not_called_the_papers():
    family = for_config(LLAMA, "a model", "pretrained", training="Trained on 2T tokens.")
    for said in (model_words.training_target(0.0), model_words.training_target(0.0, family)):
        assert "the paper smooths with eps = 0.1" in said
        assert "the paper's eps" not in said and "no label smoothing, the paper" not in said
    assert "eps = 0.1, section 5.4" in model_words.training_target(0.1)


@pytest.mark.parametrize("name", list(EVERY))
def test_5_step_4_says_what_is_multiplied_and_whose_matrices(name):
    block = describe(EVERY[name])
    said = model_words.qkv_intro(block, "random weights")
    if name == "llama":
        assert "RMSNorm(x)" in said
        assert "each of the 9 query heads has its own W^Q, while W^K and W^V belong to the 3 key/value heads" in said
        assert "each shared by 3 query heads" in said and "per head" not in said
    else:
        assert "one W^Q, W^K and W^V per head" in said and "key/value heads" not in said
    assert ("LayerNorm(x)" in said) == (name in ("gpt2", "neox"))
    assert ("vector x" in said) == (name in ("paper", "minilm"))  # post-LN: the projections read x itself


def test_6_the_formula_names_the_key_value_head_a_query_head_reads():
    formula = projection_formula(LLAMA, 8, 576, 64, "RMSNorm", "decoder_self")  # query head 9
    assert key_value_head(LLAMA, 8) == 2
    assert "W^Q_{9}" in formula and "W^K_{3}" in formula and "W^V_{3}" in formula
    assert "W^K_{9}" not in formula and "W^V_{9}" not in formula
    formula = projection_formula(PAPER_BASE, 7, 512, 64)  # one key/value head per query head
    assert "W^Q_{8}" in formula and "W^K_{8}" in formula and "W^V_{8}" in formula


@pytest.mark.parametrize("name", list(EVERY))
def test_7_the_attention_page_writes_the_rotary_turn_on_a_rotary_model(name):
    said = model_words.attention_formula(describe(EVERY[name]))
    rotary = name in ("llama", "neox")
    assert (r"R_{\text{pos}}" in said) == rotary and (r"\tilde{Q}\tilde{K}^\top" in said) == rotary
    assert "eq. 1" in said and "every row sums to 1" in said


def test_8_the_tied_lens_note_does_not_promise_the_own_token_wins():
    for config in (GPT2, LLAMA, PAPER_BASE):
        block = describe(config)
        said = model_words.tied_lens_note(4, 5, block)
        assert "4 of 5 positions" in said and "nothing guarantees it" in said
        assert "scores highest against itself" not in said
        assert ("final" in said) == block.final_norm
    assert "at all 5 positions" in model_words.tied_lens_note(5, 5, describe(LLAMA))


def test_9_each_statistic_says_which_query_rows_it_averages_and_what_the_mask_forces():
    previous = pooled("previous_token", True)
    assert "every query position but the first" in previous and "every query position of every text" not in previous
    for name, value in (("first_token", "1"), ("self", "1"), ("entropy", "0"), ("mean_distance", "0")):
        causal = pooled(name, True)
        assert f"the first included: the causal mask lets it see only itself, so its value there is always {value}" in (
            causal
        ), name
        assert markdown_literal(causal) in meaning(name, True, "")  # the sentence the page shows
        assert "causal mask" not in pooled(name, False), name
    assert "whose token occurred earlier" in pooled("induction", True)
    assert "but the first" not in pooled("induction", True)
