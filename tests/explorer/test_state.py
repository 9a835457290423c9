"""The shareable address: what it may carry, and what it falls back on."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import state
from attention_explorer.models import registry

MODELS = {key: registry.MODELS[key] for key in ("minilm", "reverse")}


def test_good_values_are_taken_and_numbered_from_zero():
    values, notices = state.read_url(
        {"model": "reverse", "text": "alpha bravo", "layer": "2", "head": "3", "token": "0"}, MODELS
    )
    assert values == {"model": "reverse", "text": "alpha bravo", "layer": 1, "head": 2, "token": 0}
    assert notices == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"model": "gpt-9"}, "unknown model 'gpt-9'"),
        ({"text": "   "}, "sentence is empty"),
        ({"text": "x" * (state.URL_MAX_TEXT + 1)}, f"at most {state.URL_MAX_TEXT}"),
        ({"layer": "0"}, "layer '0'"),
        ({"head": "-1"}, "head '-1'"),
        ({"head": "two"}, "head 'two'"),
        ({"token": "1e3"}, "token '1e3'"),
        ({"layer": "٣"}, "layer '٣'"),  # a digit, but not an ASCII one
        ({"layer": "99999999999"}, "layer '99999999999'"),
    ],
)
def test_bad_values_fall_back_with_a_notice_naming_them(params, named):
    values, notices = state.read_url(params, MODELS)
    assert values == {}
    assert len(notices) == 1 and named in notices[0]


def test_address_values_go_to_the_pickers_of_the_opened_page_once():
    session: dict = {}
    state.init(session)
    notices = state.apply_url(session, {"model": "reverse", "layer": "2"}, MODELS, page="model_view")
    assert notices == [] and session[state.MODEL] == session[state.widget(state.MODEL)] == "reverse"
    session[state.PAGE] = "attention"
    assert state.url_value(session, "layer", "attention_layer") is None  # another page
    session[state.PAGE] = "model_view"
    assert state.url_value(session, "layer", "model_layer") == 1
    assert state.url_value(session, "layer", "model_layer") is None  # once
    # a model named without a sentence opens on its own example, not MiniLM's
    assert state.address(session) == {"model": "reverse", "text": registry.MODELS["reverse"].examples[0]}


def test_heads_turned_off_are_read_as_written_and_bad_ones_named():
    values, notices = state.read_url({"off": "2.1, cross:1.3,2.1"}, MODELS)
    assert values == {"off": ["2.1", "cross:1.3", "2.1"]} and notices == []
    values, notices = state.read_url({"off": "2.1,<b>,cross:x.1,9999.1"}, MODELS)
    assert values == {"off": ["2.1"]}
    assert len(notices) == 1 and "'2.1,<b>,cross:x.1,9999.1'" in notices[0]


def test_a_sentence_put_aside_comes_back_while_its_example_stands_in():
    session = {state.TEXT: "my own sentence"}
    state.put_aside(session, "first example")
    assert session[state.TEXT] == session[state.widget(state.TEXT)] == "first example"
    assert state.aside(session) == "my own sentence"
    state.put_aside(session, "second example")  # another model's example: the typed sentence is still the one kept
    assert state.aside(session) == "my own sentence"
    state.back_to_sentence(session)
    assert session[state.TEXT] == session[state.widget(state.TEXT)] == "my own sentence"
    assert state.aside(session) is None and state.ASIDE not in session
    state.put_aside(session, "first example")
    session[state.TEXT] = "typed again"  # a new sentence typed: nothing to go back to, and no going back
    assert state.aside(session) is None
    state.back_to_sentence(session)
    assert session[state.TEXT] == "typed again"


@pytest.mark.parametrize("named", ["/etc/passwd", "/tmp/x.gguf", "folder:/tmp/x.gguf", "~/model", "../models/m"])
def test_an_address_cannot_name_a_path_only_a_registry_key(tmp_path, named):
    """A model path comes from the command line, the environment or the API only: the address names registry keys
    (here with a .gguf file the environment named, offered as folder:mine), and anything else falls back to the
    default model with a notice."""
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF")
    models = MODELS | registry.catalogue({registry.FOLDERS_ENV: f"mine={gguf}"})
    session: dict = {}
    state.init(session)
    notices = state.apply_url(session, {"model": named}, models, page="model_view")
    assert session[state.MODEL] == state.DEFAULT_MODEL and widget_unset(session)
    assert len(notices) == 1 and "unknown model" in notices[0]
    values, _ = state.read_url({"model": str(gguf)}, models)
    assert values == {}
    values, _ = state.read_url({"model": "folder:mine"}, models)
    assert values == {"model": "folder:mine"}  # the key the environment's entry has, not its path


def widget_unset(session) -> bool:
    return state.widget(state.MODEL) not in session


def test_a_session_opens_on_the_default_model_where_it_is_offered_else_the_first_offered():
    assert state.default_model(["translate", state.DEFAULT_MODEL]) == state.DEFAULT_MODEL
    assert state.default_model(["translate", "reverse"]) == "translate"


def test_an_address_naming_a_model_the_server_does_not_offer_says_so_and_names_the_one_shown():
    offered = {key: registry.MODELS[key] for key in ("reverse", "translate")}  # serve --models reverse,translate
    values, notices = state.read_url({"model": "minilm", "layer": "2"}, offered, registry.MODELS)
    assert values == {"layer": 1}
    assert notices == [
        f"This server does not offer the address's model {registry.MODELS['minilm'].title}; showing "
        f"{registry.MODELS['reverse'].title}."
    ]
    _, notices = state.read_url({"model": "gpt-9"}, offered, registry.MODELS)
    assert notices == [f"The address names an unknown model 'gpt-9'; showing {registry.MODELS['reverse'].title}."]
