"""Limits held on the server, not only in the browser: Streamlit refuses an upload past the corpus file's limit
(server.maxUploadSize, read from .streamlit/config.toml by `streamlit run` and passed as a flag by
`attention-explorer serve`), and a paste past the paste box's max_chars is refused by the page itself."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from attention_explorer.cli import streamlit_flags
from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import corpus_input
from tests.app import new_app
from tests.figdata import plain

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".streamlit" / "config.toml"
PAGE = "explorer/pages/corpus.py"


def test_the_upload_limit_is_the_corpus_files_limit():
    assert corpus_input.MAX_BYTES % 2**20 == 0
    limit = corpus_input.MAX_BYTES // 2**20
    assert tomllib.loads(CONFIG.read_text())["server"]["maxUploadSize"] == limit
    flags = streamlit_flags(CONFIG)  # what `attention-explorer serve` passes to streamlit run
    assert flags[flags.index("--server.maxUploadSize") + 1] == str(limit)
    # and Streamlit itself reads it from the folder `streamlit run` starts in
    said = subprocess.run(
        [sys.executable, "-c", "from streamlit import config; print(config.get_option('server.maxUploadSize'))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()[-1]
    assert said == str(limit)


def test_a_paste_past_the_limit_is_refused_on_the_server():
    """AppTest's set_value passes by the browser's max_chars, as a changed browser would; Streamlit's server cuts a
    value at max_chars (one past the limit) and the page refuses it in words, running nothing."""
    at = new_app().run()
    at.switch_page(PAGE).run()
    at.radio(key=state.CORPUS_SOURCE).set_value("paste").run()
    box = at.text_area(key=state.CORPUS_PASTE)
    assert box.max_chars == corpus_input.MAX_BYTES + 1  # the browser's own limit: one past, so the page can say so
    at.text_area(key=state.CORPUS_PASTE).set_value("a line\n" * (corpus_input.MAX_BYTES // 7 + 1)).run()
    assert not at.exception
    said = [plain(e.value) for e in at.error]
    assert said == [
        f"Pasted lines are {corpus_input.MAX_BYTES + 1:,} characters long; a corpus may be at most "
        f"{corpus_input.MAX_BYTES:,} characters"
    ]
    assert not at.get("plotly_chart") and not any(b.key == "corpus_run" for b in at.button)


@pytest.mark.parametrize("extra", [0, 1])
def test_the_limit_itself(extra):
    text = "x" * (corpus_input.MAX_BYTES + extra)
    if extra:
        with pytest.raises(corpus_input.CorpusError, match="at most 10,485,760 characters"):
            corpus_input.from_lines(text)
    else:
        assert len(corpus_input.from_lines(text)) == 1
