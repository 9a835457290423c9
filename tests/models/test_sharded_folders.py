"""The user's own folder as save_pretrained writes a bigger model: weights split into shards named by
model.safetensors.index.json (or pytorch_model.bin.index.json), stored in bfloat16 or float16. Each family reads it
into float32 and equals transformers' own load of the same folder; a missing shard or a broken index is one line naming
the file."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from attention_explorer.models import hf_cache
from attention_explorer.models.pretrained import (
    ModelFolderError,
    load_bert_folder,
    load_folder,
    load_path,
    read_checkpoint,
)
from attention_explorer.models.reference import load_reference
from tests.folders import CORPUS, make_bert_folder, make_gpt2_folder, make_llama_folder
from tests.models.test_convert_bert import assert_parity as assert_bert_parity
from tests.parity import assert_parity

SHARD = 40_000  # bytes: the tiny models' 100-250 KB of half floats become 3 to 7 shards
INDEX = "model.safetensors.index.json"


def shards(folder) -> list[str]:
    return sorted(set(json.loads((folder / INDEX).read_text())["weight_map"].values()))


def dtypes(folder) -> set[str]:
    found = set()
    for shard in shards(folder):
        with safe_open(str(folder / shard), "pt") as f:
            names = list(f.keys())  # safe_open has keys(), no __iter__
            found |= {str(f.get_slice(k).get_dtype()) for k in names}
    return found


def assert_sharded(folder, dtype: str) -> None:
    assert not (folder / "model.safetensors").exists() and len(shards(folder)) >= 3
    assert dtypes(folder) == {dtype}


# Parity bounds: both sides widen the same half-precision numbers to float32 exactly (every bfloat16 and float16 is a
# float32) and compute in float32 (models.reference loads in float32), so the bounds are those of the float32 folders:
# 1e-5 on attention weights and hidden states, a few float32 epsilons (1.2e-7) times the sums of 16-96 products.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_sharded_half_precision_llama_or_qwen2_matches_transformers(tmp_path, family, dtype):
    folder = make_llama_folder(tmp_path / family, family=family, heads=6, kv_heads=2, dtype=dtype, shard_size=SHARD)
    assert_sharded(folder, {torch.bfloat16: "BF16", torch.float16: "F16"}[dtype])
    model, tokenizer, _ = load_path(folder)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    reference = load_reference(folder)
    assert {p.dtype for p in reference.parameters()} == {torch.float32}
    assert_parity(model, reference, torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids]))
    assert_parity(model, reference, torch.randint(model.config.vocab_size, (2, 64)))


def test_a_sharded_bfloat16_gpt2_matches_transformers(tmp_path):
    folder = make_gpt2_folder(tmp_path / "gpt2", tie=False, dtype=torch.bfloat16, shard_size=SHARD)
    assert_sharded(folder, "BF16")
    model, tokenizer, family = load_path(folder)
    assert family.name.startswith("GPT-2")
    reference = load_reference(folder)
    assert_parity(model, reference, torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids]))
    assert_parity(model, reference, torch.randint(model.config.vocab_size, (2, 64)))


def test_a_sharded_bfloat16_bert_matches_transformers(tmp_path):
    folder = make_bert_folder(
        tmp_path / "bert", hidden_size=64, intermediate_size=96, dtype=torch.bfloat16, shard_size=SHARD
    )
    assert_sharded(folder, "BF16")
    model, tokenizer = load_bert_folder(folder)
    ids = torch.tensor([tokenizer.encode("The cats sat on a mat.", 24).ids])
    assert_bert_parity(model, load_reference(folder), ids, torch.ones_like(ids))


def test_sharded_pytorch_files_read_as_the_safetensors_ones(tmp_path):
    folder = make_llama_folder(tmp_path / "llama", dtype=torch.bfloat16, shard_size=SHARD)
    expected = read_checkpoint(folder)
    bins = tmp_path / "bins"
    bins.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (bins / name).write_bytes((folder / name).read_bytes())
    weight_map = {}
    for i, shard in enumerate(shards(folder)):
        name = f"pytorch_model-{i + 1:05d}-of-{len(shards(folder)):05d}.bin"
        with safe_open(str(folder / shard), "pt") as f:
            names = list(f.keys())  # safe_open has keys(), no __iter__
            torch.save({k: f.get_tensor(k) for k in names}, bins / name)
            weight_map |= dict.fromkeys(names, name)
    (bins / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    found = read_checkpoint(bins)
    assert found.keys() == expected.keys() and all(torch.equal(found[k], expected[k]) for k in found)
    assert {v.dtype for v in found.values()} == {torch.bfloat16}  # read as stored; the model makes them float32
    model, _, _ = load_folder(bins)
    assert model.decoder.layers[0].self_attn.w_q.weight.dtype == torch.float32


def _broken(tmp_path, problem: str):
    folder = make_llama_folder(tmp_path / problem, dtype=torch.bfloat16, shard_size=SHARD)
    index = json.loads((folder / INDEX).read_text())
    second = shards(folder)[1]
    if problem == "missing-shard":
        (folder / second).unlink()
    elif problem == "not-json":
        (folder / INDEX).write_text('{"weight_map": {')
    elif problem == "no-weight-map":
        (folder / INDEX).write_text(json.dumps({"metadata": {}}))
    elif problem == "outside":
        index["weight_map"]["model.norm.weight"] = "../../etc/passwd"
        (folder / INDEX).write_text(json.dumps(index))
    elif problem == "wrong-shard":
        moved = next(k for k, v in index["weight_map"].items() if v == second)
        index["weight_map"][moved] = shards(folder)[0]
        (folder / INDEX).write_text(json.dumps(index))
        return folder, moved
    return folder, second


@pytest.mark.parametrize(
    ("problem", "named"),
    [
        ("missing-shard", r"lacks {name}, a shard model.safetensors.index.json names"),
        ("not-json", r"cannot read model.safetensors.index.json in .*: Expecting"),
        ("no-weight-map", r"model.safetensors.index.json in .* has no weight_map"),
        ("outside", r"index.json in .* puts 'model.norm.weight' in '../../etc/passwd', not a file in the folder"),
        ("wrong-shard", r"model-00001-of-\d+.safetensors in .* lacks '{name}', which its index puts there"),
    ],
)
def test_a_missing_shard_or_broken_index_is_one_line_naming_the_file(tmp_path, problem, named):
    folder, name = _broken(tmp_path, problem)
    with pytest.raises(ModelFolderError, match=named.format(name=name.replace(".", r"\."))) as refused:
        load_path(folder)
    assert "\n" not in str(refused.value)
    # nor is a Hugging Face cache snapshot like it offered (the scan reads the index, not the shards' contents)
    assert hf_cache.usable_snapshot(folder) == (problem == "wrong-shard")


def test_a_rotary_scaling_the_engine_does_not_do_is_named_with_the_folder(tmp_path):
    folder = make_llama_folder(tmp_path / "llama", dtype=torch.bfloat16, shard_size=SHARD)
    assert hf_cache.usable_snapshot(folder)  # a whole sharded snapshot is offered from the Hugging Face cache
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFolderError, match=r"llama: config.json asks for rope_type 'linear': only plain rotary"):
        load_path(folder)
