"""GPT-2-family conversion: parity with transformers on tiny random GPT-2 folders, greedy continuation token for token,
and clear failures for folders that are broken or describe something the engine does not run."""

from __future__ import annotations

import json

import pytest
import torch

from attention_explorer.models import registry
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.greedy import Sampling, continue_text
from attention_explorer.models.pretrained import ModelFolderError, load_folder
from attention_explorer.models.reference import load_reference
from attention_explorer.models.tokenize import ByteLevelTokenizer
from tests.folders import END, make_gpt2_folder, train_tokenizer
from tests.parity import assert_parity

SENTENCE = "the cat sat on the mat and the dog sat on the rug."


SHAPES = [
    dict(n_embd=48, n_head=4, n_layer=2),
    dict(n_embd=64, n_head=8, n_layer=3, activation="gelu", tokenizer="vocab_merges", tie=False),
    dict(n_embd=32, n_head=2, n_layer=1, activation="relu", n_inner=40),
    dict(n_embd=48, n_head=4, n_layer=2, activation="quick_gelu", n_inner=100, tie=False, seed=3),
    dict(n_embd=48, n_head=6, n_layer=2, n_positions=32, activation="gelu_new", tokenizer="vocab_merges", seed=5),
    dict(n_embd=32, n_head=4, n_layer=1, vocab_size=1000, seed=7),  # a vocabulary padded past the trained BPE's
]


@pytest.mark.parametrize("settings", SHAPES, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_tiny_random_gpt2_matches_transformers(tmp_path, settings):
    folder = make_gpt2_folder(tmp_path / "gpt2", **settings)
    model, tokenizer, family = load_folder(folder)
    assert isinstance(tokenizer, ByteLevelTokenizer)
    assert (family.shape, family.causal, family.norm_first, family.pretrained) == ("decoder-only", True, True, True)
    config = model.config
    assert (config.d_model, config.n_heads, config.n_decoder_layers) == tuple(
        settings[k] for k in ("n_embd", "n_head", "n_layer")
    )
    assert config.d_ff == (settings.get("n_inner") or 4 * settings["n_embd"])
    reference = load_reference(folder)
    assert type(reference).__name__ == "GPT2LMHeadModel"
    head, embedding = reference.lm_head.weight, reference.transformer.wte.weight
    assert torch.equal(head, embedding) == settings.get("tie", True)
    enc = tokenizer.encode(SENTENCE, config.max_len)
    assert enc.tokens[:4] == ("the", "Ġcat", "Ġsat", "Ġon")
    assert_parity(model, reference, torch.tensor([enc.ids]))
    # a batch of random ids filling every position: the learned position table is read to its last row
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    assert_parity(model, reference, torch.randint(config.vocab_size, (2, config.max_len), generator=generator))


def test_both_tokenizer_files_read_the_same_tokens(tmp_path):
    from_json = ByteLevelTokenizer.from_folder(make_gpt2_folder(tmp_path / "json", tokenizer="json"))
    from_vocab = ByteLevelTokenizer.from_folder(make_gpt2_folder(tmp_path / "vm", tokenizer="vocab_merges"))
    for text in (SENTENCE, "Attention, please: 3 words!", " leading space and  two"):
        # ids, tokens and words; not offsets: tokenizer.json keeps a word's space in its span, vocab.json + merges.txt
        # (read with trim_offsets) does not
        one, other = from_json.encode(text, 64), from_vocab.encode(text, 64)
        assert (one.ids, one.tokens, one.word_ids) == (other.ids, other.tokens, other.word_ids)
        assert from_json.decode(from_json.encode(text, 64).ids) == text
    assert from_json.token_to_id(END) == from_vocab.token_to_id(END) is not None
    assert END in from_json.specials


@pytest.mark.parametrize("tokenizer", ["json", "vocab_merges"])
def test_a_padded_vocabulary_reads_text_as_the_trained_one_does(tmp_path, tokenizer):
    trained = ByteLevelTokenizer.from_folder(make_gpt2_folder(tmp_path / "trained", tokenizer=tokenizer))
    folder = make_gpt2_folder(tmp_path / "padded", tokenizer=tokenizer, vocab_size=trained.vocab_size + 100)
    model, padded, _ = load_folder(folder)
    assert padded.vocab_size == model.config.vocab_size == trained.vocab_size + 100
    assert padded.id_to_token(trained.vocab_size + 99) == f"<|unused{trained.vocab_size + 99}|>"
    for text in (SENTENCE, "Attention, please: 3 words!"):
        assert padded.encode(text, 64) == trained.encode(text, 64)
    with pytest.raises(ValueError, match="below the trained tokenizer's"):
        make_gpt2_folder(tmp_path / "small", vocab_size=trained.vocab_size - 1)


@pytest.mark.parametrize("settings", [{}, dict(n_embd=64, n_head=8, n_layer=3, tie=False, activation="gelu")])
def test_greedy_continuation_is_transformers_generate(tmp_path, settings):
    folder = make_gpt2_folder(tmp_path / "gpt2", n_positions=24, **settings)
    model, tokenizer, _ = load_folder(folder)
    reference = load_reference(folder)
    for prompt, steps in (("the cat sat on the", 10), ("a", 6), (SENTENCE, 64)):  # the last stops at max_len
        ids = list(tokenizer.encode(prompt, 24).ids)
        ours = continue_text(model, ids, steps, Sampling())
        with torch.inference_mode():
            generated = reference.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=min(steps, 24 - len(ids)),  # continue_text stops at max_len as well
                do_sample=False,
                eos_token_id=None,  # no early stop on <|endoftext|>: continue_text writes `steps` tokens
                pad_token_id=tokenizer.token_to_id(END),
            )
        assert ours == generated[0, len(ids) :].tolist()
        assert len(ours) == min(steps, 24 - len(ids)) and len(set(ours)) > 1


def rewrite_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


def test_a_model_type_the_engine_does_not_have_is_named_with_the_supported_ones(tmp_path):
    folder = make_gpt2_folder(tmp_path / "falcon")
    rewrite_config(folder, model_type="falcon")
    supported = "bert, gemma3_text, gpt2, gpt_neox, llama, mistral, qwen2, qwen3"
    with pytest.raises(ModelFolderError, match=rf"model_type 'falcon'; supported: {supported}$"):
        load_folder(folder)
    with pytest.raises(ModelFolderError, match="model_type 'falcon'"):
        load_reference(folder)


@pytest.mark.parametrize(
    ("problem", "named"),
    [
        ("truncated", "cannot read model.safetensors"),
        ("no-weights", "no model.safetensors or pytorch_model.bin"),
        ("no-tokenizer", "cannot read the tokenizer.*neither tokenizer.json nor vocab.json and merges.txt"),
        ("no-merges", "cannot read the tokenizer"),
        ("wrong-vocab", r"wte.weight has shape \(400, 48\), expected \(512, 48\)"),
        ("other-tokenizer", "tokenizer has 300 tokens but config.json says 400"),
        ("wrong-layers", r"missing h\.2\.attn\.c_attn\.weight"),
        ("inverse-layer-scaling", "scale_attn_by_inverse_layer_idx=True: attention scaled by 1/layer index"),
        ("no-scaling", "scale_attn_weights=False"),
        ("activation", "unsupported activation_function 'mish'"),
        ("no-n_embd", "config.json lacks 'n_embd'"),
    ],
)
def test_a_broken_gpt2_folder_is_named(tmp_path, problem, named):
    tokenizer = "vocab_merges" if problem == "no-merges" else "json"
    folder = make_gpt2_folder(tmp_path / problem, tokenizer=tokenizer)
    weights = folder / "model.safetensors"
    if problem == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    elif problem == "no-weights":
        weights.unlink()
    elif problem == "no-tokenizer":
        (folder / "tokenizer.json").unlink()
    elif problem == "no-merges":
        (folder / "merges.txt").unlink()
    elif problem == "wrong-vocab":
        rewrite_config(folder, vocab_size=512)
    elif problem == "other-tokenizer":
        train_tokenizer(300).save(str(folder / "tokenizer.json"))
    elif problem == "wrong-layers":
        rewrite_config(folder, n_layer=3)
    elif problem == "inverse-layer-scaling":
        rewrite_config(folder, scale_attn_by_inverse_layer_idx=True)
    elif problem == "no-scaling":
        rewrite_config(folder, scale_attn_weights=False)
    elif problem == "activation":
        rewrite_config(folder, activation_function="mish")
    elif problem == "no-n_embd":
        config = json.loads((folder / "config.json").read_text())
        del config["n_embd"]
        (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises((ModelFolderError, ConversionError), match=named):
        load_folder(folder)


def test_checkpoint_keys_that_do_not_fit_are_each_named(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = make_gpt2_folder(tmp_path / "keys")
    state = load_file(str(folder / "model.safetensors"))
    del state["transformer.h.1.mlp.c_fc.bias"]
    state["transformer.h.0.attn.c_attn.weight"] = state["transformer.h.0.attn.c_attn.weight"].t().contiguous()
    state["transformer.h.0.adapter.weight"] = torch.zeros(2)
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ConversionError) as caught:
        load_folder(folder)
    message = str(caught.value)
    assert "missing h.1.mlp.c_fc.bias" in message
    assert "h.0.attn.c_attn.weight has shape (144, 48), expected (48, 144)" in message
    assert "unexpected h.0.adapter.weight" in message


def test_a_broken_gpt2_folder_fails_alone_in_the_registry(tmp_path, monkeypatch, minilm):
    bad = make_gpt2_folder(tmp_path / "bad")
    rewrite_config(bad, scale_attn_by_inverse_layer_idx=True)
    good = make_gpt2_folder(tmp_path / "good")
    folders = f"bad={bad}; good={good}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: folders}))
    with pytest.raises(registry.ModelLoadError, match=r"bad \(local folder\) could not be loaded: .*inverse_layer_idx"):
        registry.load("folder:bad")
    loaded = registry.load("folder:good")
    assert loaded.is_decoder_only and loaded.family.kinds == ("decoder_self",)
    assert loaded.title == "good (local folder)" and loaded.family.name == "GPT-2 family"
    assert loaded.can_read("the cat sat on the mat")
    assert (
        registry.load("minilm").tokenizer.encode("still loads", 16).ids
        == minilm.tokenizer.encode("still loads", 16).ids
    )
