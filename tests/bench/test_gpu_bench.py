"""`python -m bench gpu` on a machine with no GPU: it says so and exits 0; with `--device cpu` it runs the code a GPU
runs (our first run and transformers', the largest attention difference, every page's compute) on tiny folders, so
that the GPU's path is tried on every machine before the first GPU runs it."""

from __future__ import annotations

import json

import pytest
import torch

from bench.__main__ import main as bench_main

PARITY = 1e-5  # the project's parity bar with transformers (tests/parity.py, issue #40)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_no_gpu_is_one_line_and_exit_0(no_gpu, capsys):
    assert bench_main(["gpu"]) == 0
    assert capsys.readouterr().out == "no GPU\n"


def test_a_device_this_machine_lacks_is_exit_2(no_gpu, capsys):
    assert bench_main(["gpu", "--device", "cuda"]) == 2
    assert capsys.readouterr().out.startswith("error: --device: device 'cuda': torch sees no CUDA GPU")


@pytest.mark.parametrize("gpu_paths", [False, True])
def test_the_dry_run_on_the_cpu_measures_every_part_and_writes_json(
    gpt2_folder, llama_folder, tmp_path, capsys, monkeypatch, gpu_paths
):
    """gpu_paths: the CPU taken for a GPU where the code branches on the device (reductions in torch, one head copied
    back: reducers.HOST, device_layers.HOST), with the rollout reduced from the 9th token (zoom.FULL), as at 8,192
    tokens."""
    if gpu_paths:
        from attention_explorer.explorer.figures import zoom
        from attention_explorer.explorer.run import device_layers, reducers

        monkeypatch.setattr(reducers, "HOST", ())
        monkeypatch.setattr(device_layers, "HOST", ())
        monkeypatch.setattr(zoom, "FULL", 8)
    out = tmp_path / "gpu.json"
    models = [str(gpt2_folder), str(llama_folder)]
    asked = ["gpu", "--device", "cpu", "--lengths", "16", "--models", *models, "--repeats", "1", "--out", str(out)]
    assert bench_main(asked) == 0
    found = json.loads(out.read_text())
    assert found["device"] == "cpu" and [r["model"] for r in found["rows"]] == models
    for row in found["rows"]:
        assert row["tokens"] == 16 and row["first_run_s"] > 0 and row["transformers_s"] > 0
        assert row["transformers_attentions"] and row["first_run_peak_gb"] is None  # no GPU memory to report
        # the two models' attention on the same ids: within the parity bar, and measured (not a default 0)
        assert 0 <= row["max_attention_difference"] <= PARITY
        pages = row["pages"]
        measured = {name for name, page in pages.items() if "median_s" in page}
        assert {
            "one_head",
            "qkv",
            "model_view",
            "turn_off_head",
            "logit_lens",
            "final_linear",
            "attribution",
        } <= measured
        assert all(page["median_s"] >= 0 and page["first_s"] >= 0 for name, page in pages.items() if name in measured)
    assert "rotary_distance" in found["rows"][1]["pages"] and "rotary_distance" not in found["rows"][0]["pages"]
    table = capsys.readouterr().out
    assert "one_head" in table and str(gpt2_folder) in table
