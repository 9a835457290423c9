"""Training takes a device (models.train.Trainer, explorer.experiments.training.Run; the Train page gives the server's,
tests/app/test_toy_pages.py): here the CPU, where it trains exactly as without one; a GPU this machine lacks is one
line."""

from __future__ import annotations

import pytest
import torch

from attention_explorer.explorer.experiments import training
from attention_explorer.models import tasks, train
from attention_explorer.models.device import DeviceError

TINY = train.Recipe(d_model=16, n_heads=2, d_ff=32, n_layers=1, batch_size=8, steps=4, warmup=4, dropout=0.1)


def test_a_trainer_on_the_cpu_trains_there_and_exactly_as_without_a_device():
    task = tasks.get("reverse")
    on_cpu, default = train.Trainer(task, TINY, 3, "cpu"), train.Trainer(task, TINY, 3)
    assert on_cpu.device == default.device == torch.device("cpu")
    seen = []
    on_cpu.model.register_forward_pre_hook(lambda module, inputs: seen.append({x.device for x in inputs}))
    on_cpu.run(TINY.steps)
    default.run(TINY.steps)
    assert seen and all(devices == {torch.device("cpu")} for devices in seen)  # each batch where the model is
    assert [p.loss for p in on_cpu.history] == [p.loss for p in default.history]  # bit for bit
    assert all(p.device == torch.device("cpu") for p in on_cpu.model.parameters())
    assert train.exact_match(on_cpu.model, task, tasks.pairs(task, 4, seed=1)) >= 0.0


def test_a_run_passes_its_device_to_its_trainer(monkeypatch):
    given = []
    original = train.Trainer.__post_init__

    def spy(self):
        given.append(self.device)
        original(self)

    monkeypatch.setattr(train.Trainer, "__post_init__", spy)
    run = training.Run("reverse", steps=2, every=1, probe=tasks.get("reverse").example, device="cpu")
    assert given == ["cpu"] and run.trainer.device == torch.device("cpu")
    paced = []
    monkeypatch.setattr(training, "step_seconds", lambda task, device: paced.append((task, device)) or 0.5)
    seconds, _ = run.needs()  # the pace measured on the run's device
    assert paced == [("reverse", "cpu")] and seconds == 0.5 * 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_this_machine_lacks_is_one_line():
    with pytest.raises(DeviceError, match="no CUDA GPU") as error:
        train.Trainer(tasks.get("reverse"), TINY, 0, "cuda")
    assert "\n" not in str(error.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_the_training_command_refuses_a_gpu_this_machine_lacks_in_one_line(capsys, tmp_path):
    assert train.main(["--task", "reverse", "--steps", "1", "--device", "cuda", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: device 'cuda'") and "\n" not in err
    assert not list(tmp_path.iterdir())  # nothing trained, nothing saved
