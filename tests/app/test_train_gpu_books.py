"""A training run on a server with a GPU is admitted by the GPU's books too (explorer/app/gpu.py): what it adds on the
device (training.Run.device_bytes: the training copies of the weights and a step's activations; its snapshots are
numpy on the CPU), refused with one line saying so when that cannot fit. The books are real, the GPU faked: its
memory is a budget and what torch holds there a number (as tests/explorer/test_device_books.py does)."""

from __future__ import annotations

import torch

from attention_explorer.explorer.app import gpu
from attention_explorer.explorer.experiments import training
from attention_explorer.explorer.run import admission
from attention_explorer.explorer.run.device_books import DeviceBooks
from tests.app import new_app
from tests.figdata import plain

MB = 10**6
PROBE = "one two three"
STEPS = 10  # the fewest the page offers


def on_the_train_page(steps: int):
    at = new_app().run()  # the sidebar's model loaded before the GPU is faked: only the training meets its books
    at.switch_page("explorer/pages/train.py").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.number_input(key="train_steps").set_value(steps).run()
    at.number_input(key="train_every").set_value(1).run()
    at.text_input(key="train_probe").set_value(PROBE).run()
    return at


def faked_gpu(monkeypatch, budget: int) -> tuple[DeviceBooks, list[int]]:
    """The server's GPU books with `budget` bytes and nothing held, and the bytes each admission asked for."""
    books = DeviceBooks(torch.device("cuda", 0), budget, allocated=lambda: 0)
    asked, admitted = [], books.admitted

    def counted(nbytes, waiting=None):
        asked.append(nbytes)
        return admitted(nbytes, waiting)

    monkeypatch.setattr(books, "admitted", counted)
    monkeypatch.setattr(gpu, "books", lambda: books)
    return books, asked


def test_a_training_run_the_gpu_cannot_hold_is_refused_in_one_line_and_nothing_trains(monkeypatch):
    on_device = training.Run("reverse", STEPS, 1, PROBE).device_bytes()
    at = on_the_train_page(STEPS)
    books, asked = faked_gpu(monkeypatch, on_device - 1)
    at.button(key="train_start").click().run()
    assert not at.exception and "train_run" not in at.session_state
    assert asked == [on_device]
    (said,) = [plain(e.value) for e in at.error]
    assert said.startswith(
        f"This training run needs about {admission.gigabytes(on_device)} of GPU memory, and this server lets one run "
        f"have {admission.gigabytes(on_device - 1)} of it now"
    )
    assert "\n" not in said and books._reserved == []


def test_a_training_run_that_fits_books_what_it_adds_on_the_device(monkeypatch):
    run = training.Run("reverse", STEPS, 1, PROBE)
    on_device, on_host = run.device_bytes(), run.needs()[1]
    assert on_host > on_device  # the snapshots are the host's alone
    at = on_the_train_page(STEPS)
    books, asked = faked_gpu(monkeypatch, on_device)  # exactly what it adds
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error
    assert asked == [on_device] and books._reserved == []  # booked while it trained, given back after
    assert f"finished at training step {STEPS}" in at.success[0].value


def test_what_training_adds_on_its_device_is_its_weights_four_times_and_a_steps_overhead():
    run = training.Run("reverse", 2, 1, PROBE)
    weights = sum(p.numel() * 4 for p in run.trainer.model.parameters())  # float32
    assert run.device_bytes() == training.TRAINING_COPIES * weights + training.STEP_OVERHEAD
