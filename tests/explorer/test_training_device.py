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


class FakeCudaGenerator:
    """torch.cuda's seed and generator state for device 0, on a machine without one: the state is a counter that a
    dropout on the GPU would advance (here a forward pre-hook advances it, as the model's dropout would)."""

    def __init__(self, monkeypatch) -> None:
        self.state = 1000  # someone else's state before any trainer
        monkeypatch.setattr(train, "cuda_of", lambda device: [0])  # the model stays on the CPU; its generator is faked
        monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: setattr(self, "state", seed))
        monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=0: torch.tensor([self.state]))
        monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device=0: setattr(self, "state", int(state[0])))

    def drawn_by(self, trainer: train.Trainer) -> list[int]:
        """The generator states each forward of `trainer` starts from, each forward then drawing 3 numbers."""
        seen = []

        def draw(module, inputs):
            seen.append(self.state)
            self.state += 3

        trainer.model.register_forward_pre_hook(draw)
        return seen


def test_dropout_on_a_gpu_draws_from_the_trainers_own_seeded_cuda_generator(monkeypatch):
    """Where the trainer's device is CUDA (faked here), its generator is seeded from the seed and its state kept across
    steps as the CPU's is: two trainers of one seed draw the same numbers step by step, whatever is drawn between
    their steps, and training leaves the process's own generator state as it found it."""
    cuda = FakeCudaGenerator(monkeypatch)
    task = tasks.get("reverse")
    first, second = train.Trainer(task, TINY, 7), train.Trainer(task, TINY, 7)
    assert cuda.state == 1000  # seeding a trainer leaves the process's state alone
    seen_first, seen_second = cuda.drawn_by(first), cuda.drawn_by(second)
    for _ in range(3):
        first.train_step()
        cuda.state += 11  # someone else draws between the steps
        second.train_step()
    assert seen_first == seen_second == [7, 10, 13]  # from the seed, on from where its last step stopped
    assert cuda.state == 1000 + 3 * 11  # only the others' draws moved the process's state
    assert [p.loss for p in first.history] == [p.loss for p in second.history]
    other = train.Trainer(task, TINY, 8)
    seen_other = cuda.drawn_by(other)
    other.train_step()
    assert seen_other == [8]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_training_with_dropout_on_a_gpu_is_reproducible_from_its_seed():
    task = tasks.get("reverse")
    first, second = train.Trainer(task, TINY, 5, "cuda"), train.Trainer(task, TINY, 5, "cuda")
    first.run(TINY.steps)
    torch.rand(100, device="cuda")  # another draw on the device between the two runs
    second.run(TINY.steps)
    assert [p.loss for p in first.history] == [p.loss for p in second.history]
