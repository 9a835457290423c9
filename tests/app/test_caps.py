"""A teacher's caps in the app: Max tokens stops at the server's cap and says why, the sidebar offers only the listed
models, and neither a session's state nor an address gets past them."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import caps
from attention_explorer.models import registry
from tests.app import new_app
from tests.figdata import plain

pytestmark = pytest.mark.slow

CAP = 50
LISTED = ("minilm-random", "translate")  # MiniLM, the default, left out: a session opens on the first listed


@pytest.fixture
def serving(monkeypatch):
    """serving(VARIABLE=value, ...): the server started with these caps in its environment, as serve passes them on
    (read again: caps.current is once per process); afterwards none."""

    def start(**environ: str) -> None:
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        caps.current.cache_clear()

    yield start
    monkeypatch.undo()
    caps.current.cache_clear()


@pytest.fixture
def capped(serving):
    """The server started with --max-tokens 50 --models minilm-random,translate."""
    serving(EXPLORER_MAX_TOKENS=str(CAP), EXPLORER_MODELS=",".join(LISTED))


def warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


def test_max_tokens_stops_at_the_cap_says_why_and_only_listed_models_are_offered(capped):
    at = new_app().run()
    assert not at.exception
    box, model = at.sidebar.number_input[0], at.sidebar.selectbox[0]
    assert (box.proto.max, box.value) == (CAP, CAP)  # the default 128 brought down to the cap
    model_max = registry.load("minilm-random").max_tokens
    assert [c.value for c in at.sidebar.caption if c.value.startswith("At most")] == [
        f"At most {CAP} tokens here: this server's cap for each visitor (serve --max-tokens); the model itself reads "
        f"up to {model_max}."
    ]
    assert model.options == [registry.MODELS[key].title for key in LISTED]
    assert model.value == "minilm-random"  # on its own example (MiniLM's: the same English sentences)
    assert at.sidebar.text_area[0].value == registry.MODELS["minilm-random"].examples[0]
    assert "overview_real" not in [b.key for b in at.button]  # SmolLM2 is not offered: no button opens it


def test_a_session_asking_for_more_tokens_than_the_cap_is_brought_down_to_it(capped):
    at = new_app("tokens")
    at.session_state[state.MAX_TOKENS] = 8192
    at.run()
    assert not at.exception
    assert at.session_state[state.MAX_TOKENS] == CAP and at.sidebar.number_input[0].value == CAP


@pytest.mark.parametrize(
    ("asked", "notice"),
    [
        ("smollm2", "This server does not offer the address's model SmolLM2-135M-Instruct (pretrained); showing "),
        ("gpt-9", "The address names an unknown model 'gpt-9'; showing "),
    ],
)
def test_an_address_naming_a_model_not_offered_opens_the_first_offered_with_a_notice(capped, asked, notice):
    at = new_app("tokens")
    at.query_params["model"] = asked
    at.run()
    assert not at.exception
    assert plain(warnings(at)) == notice + registry.MODELS["minilm-random"].title + "."
    assert at.sidebar.selectbox[0].value == "minilm-random" and at.query_params["model"] == "minilm-random"


def test_an_address_naming_a_listed_model_opens_it_within_the_cap(capped):
    at = new_app("tokens")
    at.query_params["model"] = "translate"
    at.run()
    assert not at.exception and not at.warning
    assert at.sidebar.selectbox[0].value == "translate"
    assert at.sidebar.number_input[0].proto.max == min(CAP, registry.load("translate").max_tokens)


def test_a_cap_above_the_models_own_limit_changes_nothing_and_says_nothing(serving):
    serving(EXPLORER_MAX_TOKENS="100000")
    at = new_app("tokens").run()
    assert not at.exception
    assert at.sidebar.number_input[0].proto.max == registry.load(state.DEFAULT_MODEL).max_tokens
    assert not [c for c in at.sidebar.caption if c.value.startswith("At most")]
    assert at.sidebar.selectbox[0].options == [spec.title for spec in registry.MODELS.values()]


def test_compare_weights_needs_both_of_its_models_offered(serving):
    serving(EXPLORER_MODELS="minilm,translate")
    at = new_app("compare").run()
    assert not at.exception and not at.get("plotly_chart")
    assert at.info[0].value == (
        "This comparison needs both; this server does not offer all-MiniLM-L6-v2 shape, random weights."
    )


def test_a_bad_cap_is_said_on_the_page_not_as_a_traceback(serving):
    serving(EXPLORER_MAX_TOKENS="2")
    at = new_app().run()
    assert not at.exception
    assert "EXPLORER_MAX_TOKENS: '2' is not a whole number of tokens from 3 up" in plain(at.error[0].value)


@pytest.mark.parametrize(
    ("listed", "opened", "text"),
    [
        ("reverse,translate", "reverse", registry.MODELS["reverse"].examples[0]),  # a sentence the toy can read
        ("translate,minilm", "minilm", state.DEFAULT_TEXT),  # the default model wherever the list puts it
    ],
)
def test_a_new_session_opens_the_default_model_if_offered_else_the_first_on_its_example(serving, listed, opened, text):
    serving(EXPLORER_MODELS=listed)
    at = new_app("tokens").run()
    assert not at.exception
    assert (at.sidebar.selectbox[0].value, at.sidebar.text_area[0].value) == (opened, text)


def test_a_step_offers_no_click_to_a_model_the_server_does_not_offer(serving):
    serving(EXPLORER_MODELS="minilm,minilm-random")
    at = new_app("decoding").run()
    assert not at.exception
    assert plain(at.info[0].value).endswith("the toy translation model have both. This server offers neither.")
    assert not [b.key for b in at.button if b.key.startswith("needs_decoder")]  # no click to SmolLM2 or the toy
