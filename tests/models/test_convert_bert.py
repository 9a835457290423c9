"""BERT-family conversion: parity with transformers on tiny random BertConfig models, and clear failures."""

from __future__ import annotations

import pytest
import torch
from transformers import BertForMaskedLM, BertModel

from attention_explorer.models.families import bert
from attention_explorer.models.pretrained import ModelFolderError, load_bert_folder
from attention_explorer.models.reference import run_reference
from attention_explorer.models.transformer import Transformer
from tests.folders import make_bert_folder, tiny_bert


def ours_from(reference: BertModel) -> Transformer:
    config = bert.config_from_hf(reference.config.to_dict())
    model = Transformer(config)
    model.load_state_dict(bert.convert(reference.state_dict(), config), strict=True)
    return model.eval()


def assert_parity(ours: Transformer, reference: BertModel, ids: torch.Tensor, mask: torch.Tensor) -> float:
    """Attention weights and hidden states equal within 1e-5 everywhere (padded rows included)."""
    with torch.inference_mode():
        out = ours(ids, src_mask=mask.bool()[:, None, None, :])
    ref = run_reference(reference, ids, mask)
    ours_states = [out.encoder.embeddings] + [layer.after_ffn for layer in out.encoder.layers]
    worst = 0.0
    for layer, theirs in zip(out.encoder.layers, ref.attentions, strict=True):
        # the project's parity bar with transformers (issue #40: never loosened): 1e-5 on weights and hidden states
        torch.testing.assert_close(layer.self_attn.weights, theirs, atol=1e-5, rtol=0)
        worst = max(worst, (layer.self_attn.weights - theirs).abs().max().item())
    for mine, theirs in zip(ours_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)  # the parity bar, as the weights'
        worst = max(worst, (mine - theirs).abs().max().item())
    return worst


@pytest.mark.parametrize("seed,act", [(0, "gelu"), (1, "relu"), (2, "gelu")])
def test_tiny_random_bert_matches_transformers_with_padding(seed, act):
    reference = tiny_bert(seed, hidden_act=act)
    ids = torch.tensor([[2, 5, 6, 7, 8, 5, 9, 3], [2, 10, 11, 7, 3, 0, 0, 0], [2, 12, 3, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    assert assert_parity(ours_from(reference), reference, ids, mask) <= 1e-5


def test_masked_lm_checkpoint_with_prefix_and_heads_converts():
    torch.manual_seed(3)
    mlm = BertForMaskedLM(tiny_bert().config).eval()
    state = mlm.state_dict()
    assert any(k.startswith("bert.") for k in state) and any(k.startswith("cls.") for k in state)
    config = bert.config_from_hf(mlm.config.to_dict())
    converted = bert.convert(state, config)
    # a renamed copy of the same tensor: bit for bit
    assert torch.equal(
        converted["encoder.layers.1.self_attn.w_k.weight"], state["bert.encoder.layer.1.attention.self.key.weight"]
    )


def test_tf_era_gamma_beta_names_are_understood():
    reference = tiny_bert()
    state = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in reference.state_dict().items()
    }
    config = bert.config_from_hf(reference.config.to_dict())
    assert len(bert.convert(state, config)) == len(bert.key_map(config.n_encoder_layers))


def test_missing_key_is_named():
    reference = tiny_bert()
    state = dict(reference.state_dict())
    del state["encoder.layer.2.intermediate.dense.bias"]
    config = bert.config_from_hf(reference.config.to_dict())
    with pytest.raises(bert.ConversionError, match=r"missing encoder\.layer\.2\.intermediate\.dense\.bias"):
        bert.convert(state, config)


def test_mismatched_shape_is_named():
    reference = tiny_bert()
    state = dict(reference.state_dict())
    state["encoder.layer.0.attention.self.query.weight"] = torch.zeros(32, 16)
    config = bert.config_from_hf(reference.config.to_dict())
    with pytest.raises(bert.ConversionError, match=r"query\.weight has shape \(32, 16\), expected \(32, 32\)"):
        bert.convert(state, config)


def test_unexpected_key_is_named():
    reference = tiny_bert()
    state = dict(reference.state_dict(), **{"encoder.layer.0.adapter.weight": torch.zeros(2)})
    config = bert.config_from_hf(reference.config.to_dict())
    with pytest.raises(bert.ConversionError, match=r"unexpected encoder\.layer\.0\.adapter\.weight"):
        bert.convert(state, config)


def test_config_with_unsupported_settings_is_refused():
    with pytest.raises(bert.ConversionError, match="position_embedding_type"):
        bert.config_from_hf({**tiny_bert().config.to_dict(), "position_embedding_type": "relative_key"})
    with pytest.raises(bert.ConversionError, match="hidden_size"):
        bert.config_from_hf({"vocab_size": 3})


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_load_folder_then_parity(tmp_path, weights):
    reference = tiny_bert(4)
    make_bert_folder(tmp_path / "m", reference, weights=weights)
    model, tokenizer = load_bert_folder(tmp_path / "m")
    enc = tokenizer.encode("The cats sat on a mat.", 24)
    assert enc.tokens == ("[CLS]", "the", "cat", "##s", "sat", "on", "a", "mat", ".", "[SEP]")
    ids = torch.tensor([enc.ids])
    assert_parity(model, reference, ids, torch.ones_like(ids))


def test_folder_problems_are_named(tmp_path):
    reference = tiny_bert()
    folder = tmp_path / "m"
    with pytest.raises(ModelFolderError, match="no model folder"):
        load_bert_folder(folder)
    make_bert_folder(folder, reference)
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:200])
    with pytest.raises(ModelFolderError, match="cannot read model.safetensors"):
        load_bert_folder(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelFolderError, match="no model.safetensors or pytorch_model.bin"):
        load_bert_folder(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ModelFolderError, match="not valid JSON"):
        load_bert_folder(folder)
    (folder / "config.json").unlink()
    with pytest.raises(ModelFolderError, match="no config.json"):
        load_bert_folder(folder)
