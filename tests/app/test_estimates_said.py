"""Work that takes seconds says so before it starts (issue 50): the first visit of Ours vs transformers on SmolLM2
(transformers converts the GGUF file again: about 25 s, 0.5 GB) asks first with its time and memory, and the reveals
of steps 9 and 10 carry what they run at once in their labels."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import waiting
from attention_explorer.explorer.run import cost
from tests.app import new_app
from tests.figdata import plain


@pytest.mark.slow
def test_the_first_visit_of_the_reference_on_a_gguf_model_says_its_load_first(smollm2):
    at = new_app("reference")
    at.query_params["model"] = "smollm2"
    at.query_params["text"] = "The capital of Japan is the city of"
    at.run()
    assert not at.exception
    said = " ".join(plain(i.value) for i in at.info)
    parameters = sum(p.numel() for p in smollm2.model.parameters())
    load = cost.reference_load_seconds(parameters, gguf=True)
    assert "First transformers loads its own copy of SmolLM2" in said
    assert "converts the GGUF file's weights again" in said
    assert cost.about(load) in said and "more of the server's memory" in said
    assert [b.key for b in at.button if b.key == "reference_run"] == ["reference_run"]  # nothing loads before a click
    assert not [c for c in at.get("plotly_chart") if c.key == "reference_grid"]


def test_a_reveal_that_runs_work_says_how_long():
    assert waiting.reveal_label(0.4) == "Reveal the model's answer"  # under a second: nothing to wait for
    assert waiting.reveal_label(6.2) == "Reveal the model's answer (about 6 s)"
    assert waiting.at_once(2.0, 1.0, 60.0) == 3.0  # a part that asks first says its own estimate beside its button


def test_step_9s_reveal_carries_its_estimate(minilm):
    cost.observe(1.0, 40.0, 1.0)  # a busy machine: this process's runs take 40x their fitted estimate
    at = new_app("turn_off")
    at.query_params["model"] = "minilm"
    at.query_params["text"] = "The animal didn't cross the street because it was too tired"
    at.run()
    assert not at.exception
    label = at.button(key="turn_off_predict_reveal").label
    assert label.startswith("Reveal the model's answer (about ") and label.endswith(" s)"), label
