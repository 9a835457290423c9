"""Lesson steps 1 (tokens and ids) and 9 (why attention) through app.py, for MiniLM and the toy translation model."""

from __future__ import annotations

import html
import math

import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.tokens import SHOWN
from attention_explorer.explorer.run import forward, trace
from attention_explorer.models import registry
from tests.app import new_app, reveal
from tests.figdata import array, plain, spec

# pieces (token ##ization, em ##bed ##ding ##s), an [UNK] and more tokens than the figure draws
LONG = (
    "The agreement on the European Economic Area was signed in August 1992, but tokenization of embeddings 🙂 failed."
)


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


def opened(page: str, model: str = "minilm", text: str | None = None) -> AppTest:
    """A new session on a page, with the model picked in the sidebar (it brings its example and Max tokens)."""
    at = new_app(page).run()
    if model != state.DEFAULT_MODEL:
        at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(model).run()
    if text is not None:
        at.sidebar.text_area[0].set_value(text).run()
    assert not at.exception
    return at


def guess_box(at: AppTest, key: str):
    (box,) = [s for s in at.selectbox if s.key.startswith(f"{key}_guess_")]
    return box


def table(at: AppTest):
    """The page's one table (AppTest gives a dataframe no key)."""
    (frame,) = at.dataframe
    return frame.value


def test_tokens_page_shows_the_ids_the_model_read(minilm):
    at = reveal(opened("tokens", text=LONG), "tokens_predict")
    expected = trace.run(minilm, LONG, 128, encoder_only=True)
    ids = forward.token_ids(minilm, expected, "encoder")
    frame = table(at)
    assert list(frame["token"]) == list(expected.source_tokens) and list(frame["id"]) == ids
    assert list(frame["position"]) == list(range(len(ids)))
    kinds = list(frame["kind"])
    assert kinds[0] == kinds[-1] == "special" and "unknown" in kinds and "piece of a word" in kinds
    assert frame["from the text"][kinds.index("unknown")] == "🙂"
    (fig,) = [spec(c) for c in at.get("plotly_chart")]
    drawn = fig["data"][0]["customdata"]
    assert len(ids) > SHOWN and len(drawn) == SHOWN
    assert [c[3] for c in drawn] == [html.escape(t) for t in expected.source_tokens[:SHOWN]]
    assert [c[1] for c in drawn] == ids[:SHOWN]
    captions = [plain(c.value) for c in at.caption]
    assert f"The first {SHOWN} of {len(ids)} tokens; the other {len(ids) - SHOWN} are in the table below." in captions
    text = " ".join(plain(m.value) for m in at.markdown)
    assert f"became {len(ids)} tokens" in text and "##" in text and "[CLS]" in text and "[UNK]" in text


def test_tokens_reveal_gives_the_true_count_after_a_guess(minilm):
    at = opened("tokens")
    n = len(trace.run(minilm, state.DEFAULT_TEXT, 128, encoder_only=True).source_tokens)
    assert not at.success and at.button(key="tokens_predict_reveal").disabled
    box = guess_box(at, "tokens_predict")
    wrong = next(i for i, o in enumerate(box.options) if o != str(n))
    box.set_value(wrong).run()
    at.button(key="tokens_predict_reveal").click().run()
    assert not at.exception and not at.success  # a wrong guess is no success
    (said,) = at.warning
    assert plain(said.value).startswith(f"The model reads {n} tokens. Your class said {box.options[wrong]}: not so.")
    assert f"= {n} tokens." in plain(said.value)
    assert str(n) in box.options and len(box.options) == 4


def page_text(at: AppTest) -> str:
    """Everything the page shows in words: its text elements and every figure's data and labels."""
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.subheader, *at.text]
    words = plain(" ".join(str(p.value) for p in parts))
    return words + " ".join(c.proto.spec for c in at.get("plotly_chart")) + str([f.value for f in at.dataframe])


@pytest.mark.parametrize(("model", "text"), [("minilm", LONG), ("translate", None)])
def test_tokens_are_hidden_until_the_count_is_revealed(model, text, minilm, translate):
    loaded = {"minilm": minilm, "translate": translate}[model]
    at = opened("tokens", model, text)
    expected = trace.run(loaded, text or loaded.example, loaded.max_tokens, encoder_only=True).source_tokens
    n = len(expected)
    words = page_text(at)
    assert not at.get("plotly_chart") and not at.dataframe
    assert f"became {n} tokens" not in words and f"reads {n} tokens" not in words
    assert expected[-1] not in words  # the end marker ([SEP], <eos>): no token is drawn or named yet
    assert "appear once the class's answer is revealed" in words
    reveal(at, "tokens_predict")
    words = page_text(at)
    assert f"became {n} tokens" in words and f"The model reads {n} tokens" in words and expected[-1] in words
    assert at.get("plotly_chart") and at.dataframe


def test_tokens_page_outlines_the_focused_token():
    at = new_app("tokens")
    at.session_state[state.FOCUS_TOKEN] = 3
    reveal(at.run(), "tokens_predict")
    shapes = spec(at.get("plotly_chart")[0])["layout"]["shapes"]
    assert [s["line"]["width"] for s in shapes].index(4) == 3
    assert any("focused token, 3: " in plain(c.value) for c in at.caption)
    at.session_state[state.FOCUS_TOKEN] = 999  # another sentence's token: nothing outlined
    at.run()
    assert not at.exception
    assert all(s["line"]["width"] == 1 for s in spec(at.get("plotly_chart")[0])["layout"]["shapes"])


def test_tokens_page_for_the_toy_word_vocabulary(translate):
    at = reveal(opened("tokens", "translate"), "tokens_predict")
    expected = trace.run(translate, translate.example, 32, encoder_only=True)
    frame = table(at)
    assert list(frame["id"]) == forward.token_ids(translate, expected, "encoder")
    assert set(frame["kind"][:-1]) == {"whole word"} and frame["kind"].iloc[-1] == "special"
    text = " ".join(plain(m.value) for m in at.markdown)
    assert "fixed list" in text and "<eos>" in text and "##" not in text and "[CLS]" not in text


@pytest.mark.parametrize("model", ["minilm", "translate"])
def test_why_attention_table_is_table_1_for_this_sentence(model, minilm, translate):
    loaded = {"minilm": minilm, "translate": translate}[model]
    at = opened("why_attention", model)
    text = state.DEFAULT_TEXT if model == "minilm" else loaded.example
    max_tokens = 128 if model == "minilm" else 32
    n = len(trace.run(loaded, text, max_tokens, encoder_only=True).source_tokens)
    d = loaded.model.config.d_model
    assert not at.dataframe and not at.get("plotly_chart")  # table 1 answers the question: only once revealed
    box = guess_box(at, "why_predict")
    box.set_value(0).run()  # self-attention: right while n < d
    at.button(key="why_predict_reveal").click().run()
    frame = table(at)
    assert list(frame["operations"]) == [n * n * d, n * d * d, 3 * n * d * d, 4 * n * d]
    assert list(frame["steps"]) == [1, n, 1, 1]
    assert list(frame["path"][:2]) == [1, n] and frame["path"][3] == n / 4
    assert frame["path"][2] == pytest.approx(math.log(n, 3))
    (fig,) = [spec(c) for c in at.get("plotly_chart")]
    assert list(fig["data"][2]["x"]) == [n, n] and list(fig["data"][2]["y"]) == [n * n * d, n * d * d]
    assert fig["layout"]["shapes"][0]["x0"] == d
    assert list(array(fig["data"][0]["y"])[:3]) == [d, 4 * d, 9 * d]

    (said,) = at.success
    assert n < d and f"= {n * n * d:,} operations" in plain(said.value) and f"= {n * d * d:,}." in plain(said.value)
    assert "Your class said self-attention: right." in plain(said.value)
