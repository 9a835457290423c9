"""Following one word on the toy translation model in real headless Chromium: the forward pass step by step, then
the output distribution, the loss, and a seeded sampler that writes a different output when asked."""

from __future__ import annotations

import re

import pytest

from attention_explorer.explorer.run import forward, output, trace
from attention_explorer.models import registry
from bench.harness import TIMEOUT_MS, open_app, open_page, rerun, sentence_box, set_max_tokens, type_sentence
from bench.inputs import text_of
from tests.e2e.conftest import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SENTENCE = "the small red cat sees a big dog"
ADDRESS = "model=translate&text=the+small+red+cat+sees+a+big+dog"
GREEDY = "le chat rouge petit voit un chien grand"
TEMPERATURE = 3.0


def sampled(loaded, ids: list[int], seed: int) -> str:
    """What the page's sampler (method "sample", its default k and p) writes for this seed, computed here."""
    written = output.sample(loaded, ids, "sample", TEMPERATURE, 10, 0.9, seed, min(len(ids) + 2, trace.MAX_TARGET))
    return " ".join(written.tokens)


def shows_sampled(page, written: str) -> None:
    page.get_by_text(re.compile(rf"Sampled \(sample\):\s+{re.escape(written)}\s+Greedy:")).wait_for(timeout=TIMEOUT_MS)


def enter(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    with rerun(page):
        box.press("Enter")


def test_one_word_from_the_sidebar_to_the_loss_and_a_sampled_output(server, page):
    open_app(page, f"{server}/forward?{ADDRESS}")
    page.get_by_role("heading", name="Forward pass step by step").wait_for(timeout=TIMEOUT_MS)
    assert sentence_box(page).input_value() == SENTENCE
    # the layer is the lesson's focus: the sentence's starting head's layer until someone picks another
    for step in (
        r"1\. Token, id, embedding and position",
        r"2\. Encoder layer \d",
        r"3\. How far each sub-layer moves",
    ):
        page.get_by_role("heading", name=re.compile(step)).wait_for(timeout=TIMEOUT_MS)
    assert page.get_by_text("equals the model's own state").count() >= 1
    assert page.get_by_test_id("stException").count() == 0
    screenshot(page, "forward_translate")

    open_app(page, f"{server}/output?{ADDRESS}")
    page.get_by_role("heading", name="Output and loss").wait_for(timeout=TIMEOUT_MS)
    page.get_by_text(re.compile(rf"Model wrote:\s+{GREEDY}")).wait_for(timeout=TIMEOUT_MS)
    loss = page.get_by_test_id("stMetric").filter(has_text="Mean label-smoothed loss")
    assert float(loss.get_by_test_id("stMetricValue").text_content()) > 0
    assert page.get_by_test_id("stException").count() == 0
    screenshot(page, "output_translate")

    # two seeds the sampler writes differently with: the page must write each one's output, and the first again
    loaded = registry.load("translate")
    ids = forward.token_ids(loaded, trace.run(loaded, SENTENCE, loaded.max_tokens), "encoder")
    first = sampled(loaded, ids, 0)
    seed = next(s for s in range(1, 100) if sampled(loaded, ids, s) != first)
    page.get_by_test_id("stMain").get_by_test_id("stSelectbox").filter(has_text="Method").get_by_role(
        "combobox"
    ).click()
    page.keyboard.type("sample")  # the list filtered to the one method, then chosen as a person would
    with rerun(page):
        page.keyboard.press("Enter")
    enter(page, "Temperature", str(TEMPERATURE))
    shows_sampled(page, first)
    enter(page, "Seed", str(seed))
    shows_sampled(page, sampled(loaded, ids, seed))
    enter(page, "Seed", "0")
    shows_sampled(page, first)  # the same seed writes the same output again
    assert page.get_by_test_id("stException").count() == 0
    screenshot(page, "output_translate_sampled")


# (model, tokens): the smallest input, and the longest each model takes (the toy models' sentences are short)
EVERY_MODEL = [("minilm", 3), ("minilm", 512), ("paper-random", 16), ("reverse", 3), ("translate", 16)]
# (page, its menu entry, its heading)
NEW_PAGES = [
    ("overview", "Overview: the lesson's map", "Overview: the lesson's map"),
    ("forward", "Forward pass on one page", "Forward pass step by step"),
    ("output", "Output and loss on one page", "Output and loss"),
]


@pytest.mark.parametrize(("model", "tokens"), EVERY_MODEL, ids=[f"{m}-{t}" for m, t in EVERY_MODEL])
def test_the_forward_pages_draw_for_every_model_short_and_long(server, page, model, tokens):
    loaded = registry.load(model)
    open_app(page, f"{server}/attention?model={model}")  # then each new page by its menu entry
    set_max_tokens(page, tokens)
    if tokens == 512:
        type_sentence(page, text_of(loaded, tokens))
    for name, title, heading in NEW_PAGES:
        open_page(page, title)
        page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=TIMEOUT_MS)
        assert page.get_by_test_id("stException").count() == 0, (model, tokens, name)
        screenshot(page, f"new_pages_{model}_{tokens}_{name}")
