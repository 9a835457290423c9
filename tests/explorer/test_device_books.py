"""The GPU's books beside the Gate (explorer/run/device_books.py), on the CPU: torch.cuda.mem_get_info and the memory
torch holds on the device are faked, so the budget, the refusals, the line that says what fits and the recovery from
CUDA's out-of-memory are checked on every machine."""

from __future__ import annotations

import threading

import pytest
import torch

from attention_explorer.explorer.app import gpu
from attention_explorer.explorer.run import cost, device_books
from attention_explorer.explorer.run.device_books import DeviceBooks, DeviceRefused

CUDA = torch.device("cuda", 0)
GB = 10**9


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch.cuda.mem_get_info says 60 GB of 80 GB are free."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda where=None: (60 * GB, 80 * GB))


def test_the_default_budget_is_90_percent_of_the_free_memory_at_start(fake_gpu):
    assert device_books.default_budget(CUDA) == 54 * GB
    assert device_books.budget_from(None, CUDA) == device_books.budget_from("  ", CUDA) == 54 * GB
    assert device_books.budget_from("40GB", CUDA) == 40 * GB
    assert device_books.budget_from("50%", CUDA) == 40 * GB  # a share of the device's total
    with pytest.raises(ValueError, match="is not a memory size"):
        device_books.budget_from("lots", CUDA)


def test_a_run_that_cannot_fit_even_alone_is_refused_with_the_room_there_is():
    books = DeviceBooks(CUDA, budget=10 * GB, allocated=lambda: 2 * GB)  # the weights hold 2 GB
    assert books.room() == 8 * GB
    with pytest.raises(DeviceRefused) as refused, books.admitted(9 * GB):
        pytest.fail("admitted past the budget")
    assert (refused.value.needed, refused.value.room, refused.value.budget) == (9 * GB, 8 * GB, 10 * GB)
    assert not refused.value.out_of_memory
    assert str(refused.value) == "needs about 9.0 GB of GPU memory; a run may have 8.0 GB now"
    with books.admitted(8 * GB):  # exactly the room: admitted
        assert books._reserved == [8 * GB]
    assert books._reserved == []


def test_a_layer_inside_an_admitted_run_is_admitted_at_once():
    books = DeviceBooks(CUDA, budget=10 * GB, allocated=lambda: 0)
    with books.admitted(6 * GB), books.admitted(6 * GB):  # the outer run's estimate covers what it calls
        assert books._reserved == [6 * GB]


def test_a_run_that_fits_alone_waits_for_the_one_on_the_gpu_then_runs():
    books = DeviceBooks(CUDA, budget=10 * GB, allocated=lambda: 0)
    entered, release, order = threading.Event(), threading.Event(), []
    told = threading.Event()

    def first():
        with books.admitted(6 * GB):
            order.append("first")
            entered.set()
            release.wait(60)

    def second():
        with books.admitted(6 * GB, told.set):  # told while it waits: it may not start beside the first
            order.append("second")

    a = threading.Thread(target=first)
    a.start()
    assert entered.wait(60)
    b = threading.Thread(target=second)
    b.start()
    assert told.wait(60)  # it waited (and was told so) while the first held the GPU
    assert order == ["first"] and books._reserved == [6 * GB]
    release.set()
    a.join(60)
    b.join(60)
    assert order == ["first", "second"] and books._reserved == []


def test_cuda_out_of_memory_refuses_the_run_empties_the_cache_and_the_books_go_on(monkeypatch):
    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    books = DeviceBooks(CUDA, budget=10 * GB, allocated=lambda: 1 * GB)
    with pytest.raises(DeviceRefused) as refused, books.admitted(2 * GB):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    assert refused.value.out_of_memory and refused.value.room == 9 * GB
    assert emptied == [True] and books._reserved == []
    with books.admitted(2 * GB):  # the next run is admitted as before
        pass
    with pytest.raises(ValueError, match="not memory"), books.admitted(2 * GB):  # any other error passes through
        raise ValueError("not memory")


def test_the_refusal_line_says_what_fits_on_the_gpu(minilm):
    config = minilm.model.config
    room = cost.forward_bytes(config, 300)  # the room a 300-token run needs, from the same cost model
    refused = DeviceRefused(cost.forward_bytes(config, 512), room, 10 * GB)
    line = gpu.refusal_line(refused, lambda room: cost.most_tokens(config, room), "This run")
    most = cost.most_tokens(config, room)
    assert most == 300
    assert line.startswith("This run needs about ") and "of GPU memory" in line
    assert line.endswith(f"At most {most:,} tokens fit on it now: lower Max tokens in the sidebar.")
    assert "serve --gpu-memory-budget" in line and "\n" not in line
    oom = gpu.refusal_line(DeviceRefused(GB, 3 * GB, 10 * GB, out_of_memory=True), None, "This run")
    assert oom.startswith("This run ran out of GPU memory and was stopped")
