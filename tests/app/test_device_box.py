"""A server started on a device this machine lacks (EXPLORER_DEVICE, as `serve --device` and `make run` set it): the
first page says so in one box, and the app runs on the CPU (its figures drawn as on any CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.app import gpu
from attention_explorer.explorer.run import trace
from attention_explorer.models import device
from tests.app import new_app
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow


@pytest.fixture
def started_on(monkeypatch):
    """started_on(DEVICE): the server's environment names that device, on a machine where torch sees no GPU."""

    def start(asked: str) -> None:
        monkeypatch.setenv(device.DEVICE_ENV, asked)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        gpu.chosen.clear()
        gpu.books.clear()

    yield start
    monkeypatch.undo()
    gpu.chosen.clear()
    gpu.books.clear()


def test_a_missing_gpu_is_one_box_at_start_then_the_cpu(started_on, minilm):
    started_on("cuda")
    at = new_app("attention").run()
    assert not at.exception
    boxes = [plain(w.value) for w in at.warning if "EXPLORER" in w.value]
    assert boxes == [
        "EXPLORER_DEVICE=cuda: device 'cuda': torch sees no CUDA GPU on this machine; use --device cpu (or auto). "
        "This server runs on the CPU instead."
    ]
    assert gpu.device() == torch.device("cpu") and gpu.books() is None  # no GPU books on the CPU
    # the page drew the model's own attention, run on the CPU
    expected = trace.run(minilm, at.session_state["text"], at.session_state["max_tokens"])
    layer, head = at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value
    (chart,) = [c for c in at.get("plotly_chart") if c.key == "attention_heatmap"]
    np.testing.assert_array_equal(array(spec(chart)["data"][0]["z"]), expected.encoder_self.weights[layer, head])
    at.run()  # said once a session, at its start
    assert not [w for w in at.warning if "EXPLORER" in w.value]
