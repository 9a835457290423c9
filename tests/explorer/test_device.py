"""A device for every run (models/device.py): the names a person may give, one line for a device this machine lacks,
the CPU's results untouched (bit for bit), and the doors (ae.run, ae.corpus, python -m explorer, serve) that take it.
Runs on the CPU; tests/explorer/test_device_gpu.py checks the same on a GPU where there is one."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

import attention_explorer as ae
from attention_explorer import cli
from attention_explorer.explorer.__main__ import main as explorer_main
from attention_explorer.explorer.run import trace
from attention_explorer.models import device

TEXT = "The animal didn't cross the street because it was too tired"


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine where torch sees no GPU (whatever this one has)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine where torch sees two GPUs (only the parsing is exercised: nothing runs on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_names_resolve_to_the_device_they_name(two_gpus):
    assert device.resolve(None) == torch.device("cpu")
    assert device.resolve("cpu") == device.resolve(" CPU ") == torch.device("cpu")
    assert device.resolve("cuda") == torch.device("cuda", 0)  # an index always: "cuda" is the first GPU
    assert device.resolve("cuda:1") == torch.device("cuda", 1)
    assert device.resolve("auto") == torch.device("cuda", 0)  # auto: the first GPU torch sees


def test_auto_is_the_cpu_where_there_is_no_gpu(no_gpu):
    assert device.resolve("auto") == torch.device("cpu")


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("cuda", "device 'cuda': torch sees no CUDA GPU on this machine; use --device cpu (or auto)"),
        ("cuda:0", "device 'cuda:0': torch sees no CUDA GPU on this machine; use --device cpu (or auto)"),
        ("mps", "device 'mps' is not supported: this engine runs on cpu or cuda; this machine has cpu"),
        ("gpu-please", "unknown device 'gpu-please'; choose cpu, cuda, cuda:N or auto"),
    ],
)
def test_a_device_this_machine_lacks_is_one_line(no_gpu, asked, said):
    with pytest.raises(device.DeviceError) as found:
        device.resolve(asked)
    assert str(found.value) == said and "\n" not in said


def test_an_index_past_the_gpus_says_which_there_are(two_gpus):
    with pytest.raises(device.DeviceError, match=r"^device 'cuda:2': this machine has cpu, cuda:0, cuda:1$"):
        device.resolve("cuda:2")


def test_on_the_cpu_nothing_moves_and_numpy_is_the_tensors_own_memory(minilm):
    assert device.place(minilm, "cpu") is minilm  # the same object: the same weights, nothing copied
    assert minilm.device == torch.device("cpu")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    found = device.numpy(t)
    assert np.shares_memory(found, t.numpy())  # not a copy: the CPU's numbers are the tensor's, bit for bit


def test_tf32_is_turned_off_for_a_cuda_device_only():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        device.exact(torch.device("cpu"))
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        device.exact(torch.device("cuda", 0))  # sets the flags only: no GPU is touched
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_ae_run_on_the_cpu_is_the_trace_itself(minilm):
    run = ae.run("minilm", TEXT, device="cpu")
    assert run.loaded.device == torch.device("cpu")
    direct = trace.run(minilm, TEXT, 512)
    for layer in range(run.n_layers):  # every layer, every head: the same numbers, bit for bit
        np.testing.assert_array_equal(
            np.asarray(run.trace.encoder_self.layer(layer).weights), direct.encoder_self.layer(layer).weights
        )
    assert run.tokens == list(direct.source_tokens)


def test_ae_run_and_corpus_refuse_a_missing_gpu_before_loading(no_gpu):
    with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
        ae.run("minilm", TEXT, device="cuda")
    with pytest.raises(ValueError, match="'mps' is not supported"):
        ae.corpus("minilm", ["The cat sat.", "A dog ran."], device="mps")


def test_ae_corpus_on_the_cpu_equals_the_default():
    texts = ["The cat sat on the mat.", "A dog ran after the ball in the park."]
    ours, default = ae.corpus("minilm", texts, device="cpu"), ae.corpus("minilm", texts)
    np.testing.assert_array_equal(ours.statistic("previous_token"), default.statistic("previous_token"))


@pytest.mark.parametrize("command", ["export", "corpus"])
def test_the_command_says_one_line_and_exits_2_for_a_missing_gpu(no_gpu, capsys, command):
    given = ["--text", TEXT] if command == "export" else ["--sample"]
    assert explorer_main([command, "--model", "minilm", *given, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --device: device 'cuda': torch sees no CUDA GPU on this machine; use --device cpu (or auto)\n"


def test_the_command_on_the_cpu_writes_what_it_writes_without_the_flag(capsys):
    assert explorer_main(["export", "--model", "minilm", "--text", TEXT, "--device", "cpu"]) == 0
    with_flag = capsys.readouterr().out
    assert explorer_main(["export", "--model", "minilm", "--text", TEXT]) == 0
    assert with_flag == capsys.readouterr().out


def _serve_args(**given) -> argparse.Namespace:
    return cli.serve_parser().parse_args([part for flag, value in given.items() for part in (flag, value)])


def test_serve_checks_the_device_and_passes_it_to_the_app(no_gpu):
    env = cli.serve_environment(_serve_args(**{"--device": "cpu"}), {})
    assert env[device.DEVICE_ENV] == "cpu"
    with pytest.raises(ValueError, match=r"^--device: device 'cuda:1': torch sees no CUDA GPU"):
        cli.serve_environment(_serve_args(**{"--device": "cuda:1"}), {})
    with pytest.raises(ValueError, match=r"^EXPLORER_DEVICE: device 'mps' is not supported"):  # make run's variable
        cli.serve_environment(_serve_args(), {device.DEVICE_ENV: "mps"})
    with pytest.raises(ValueError, match=r"^--gpu-memory-budget: '40XB' is not a memory size"):
        cli.serve_environment(_serve_args(**{"--gpu-memory-budget": "40XB"}), {})
    env = cli.serve_environment(_serve_args(**{"--gpu-memory-budget": "40GB"}), {})
    assert env["EXPLORER_GPU_MEMORY_BUDGET"] == "40GB"


def test_serve_exits_2_with_one_line_for_a_missing_gpu(no_gpu, capsys):
    assert cli.main(["serve", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --device: device 'cuda': torch sees no CUDA GPU")


def test_a_model_too_large_for_the_gpu_is_refused_with_what_it_needs_and_stays_on_the_cpu(monkeypatch, minilm):
    from attention_explorer.models import registry

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda where=None: (10**6, 80 * 10**9))  # 1 MB free
    needed = device.weight_bytes(minilm.model)
    assert needed == sum(p.numel() * 4 for p in minilm.model.parameters()) + sum(
        b.numel() * b.element_size() for b in minilm.model.buffers()
    )
    with pytest.raises(registry.ModelLoadError) as refused:
        device.place(minilm, "cuda")
    assert str(refused.value) == (
        f"{minilm.title} needs {needed / 1e9:.1f} GB for its weights on cuda:0, which has 0.0 GB free: run it on the "
        "CPU (--device cpu), or a smaller model on the GPU"
    )
    assert minilm.device == torch.device("cpu")  # nothing moved
