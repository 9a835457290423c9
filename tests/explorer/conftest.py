"""Fixtures the explorer tests share: the tiny random GPT-2 and Llama folders built into models, and SmolLM2 run on a
text long enough that its trace keeps no layer."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from bench.inputs import text_of

LONG = 300  # tokens: past trace.KEEP_ALL_BYTES for SmolLM2 (its run keeps no attention) and past a lens window


@pytest.fixture(scope="module")
def gpt2(gpt2_folder):
    (spec,) = registry.folder_specs(f"tiny-gpt2={gpt2_folder}")
    return registry.build(spec)


@pytest.fixture(scope="module")
def llama(llama_folder):
    (spec,) = registry.folder_specs(f"tiny-llama={llama_folder}")
    return registry.build(spec)


@pytest.fixture(scope="module")
def long_run(smollm2):
    run = trace.run(smollm2, text_of(smollm2, LONG), LONG)
    assert len(run.source_tokens) == LONG and not trace.short(smollm2, LONG)
    return run
