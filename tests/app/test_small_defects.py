"""Issue 12's smaller defects, each seen by a teacher in the browser, through app.py."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.experiments import training
from attention_explorer.models import registry, tasks
from tests.app import new_app, stepping
from tests.figdata import plain, spec


def with_model(key: str) -> AppTest:
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    return at


def test_qkv_query_picker_shows_the_decoder_token_it_computes_in_cross_attention():
    at = with_model("translate")
    at.switch_page("explorer/pages/qkv.py").run()
    at.radio(key="qkv_kind").set_value("encoder_self").run()  # a model trained here opens on cross-attention
    before = at.selectbox(key="qkv_query")
    assert before.options[0] == "0: the"  # source tokens
    assert before.proto.set_value and before.proto.raw_value == before.options[before.value]
    at.radio(key="qkv_kind").set_value("cross").run()
    box = at.selectbox(key="qkv_query")
    assert box.options[0] == "0: <bos>"  # now the decoder's tokens, which cross-attention's queries come from
    # the browser keeps the label it last showed unless the server sends the new one
    assert box.proto.set_value and box.proto.raw_value == box.options[box.value]
    assert f"row {box.value}" in at.markdown[1].value and "decoder layer" in at.markdown[1].value


def opened(page: str, **params: str) -> AppTest:
    """A new session opened at /page?params, as a copied address would open it."""
    at = new_app()
    at.switch_page(f"explorer/pages/{page}.py")
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def test_an_address_naming_a_model_but_no_sentence_opens_on_that_models_example():
    at = stepping(opened("decoding", model="translate"))
    assert not at.exception and not at.info  # no unknown-word message
    assert at.sidebar.text_area[0].value == tasks.get("translate").example
    assert at.query_params["text"] == tasks.get("translate").example
    assert at.success  # the translation is drawn and checked


def test_an_unknown_model_in_the_address_is_answered_with_the_models_title():
    at = opened("attention", model="gpt-9")
    notice = plain(" ".join(w.value for w in at.warning))
    assert f"showing {registry.MODELS[state.DEFAULT_MODEL].title}" in notice
    assert f"showing {state.DEFAULT_MODEL}." not in notice


def test_the_rollout_page_is_titled_as_its_menu_entry():
    at = new_app().run()
    at.switch_page("explorer/pages/aggregation.py").run()
    assert at.header[0].value == "Rollout and flow"  # app.py's menu entry


def test_train_page_names_one_step_for_a_stop_and_explore_opens_another_page():
    at = new_app().run()
    # a run as Stop leaves it: its last chunk of steps ran after the live bar last said where it was
    run = training.Run("reverse", 200, 50, "one two three")
    run.advance(17)
    at.session_state[state.TRAINED] = {run.key: run.publish()}
    at.session_state["train_run"] = run
    at.switch_page("explorer/pages/train.py").run()
    assert not at.exception
    assert "stopped at training step 17 of 200" in at.success[0].value
    bars = [p.proto.text for p in at.get("progress")]
    assert bars and all(text.startswith("training step 17 of 200") for text in bars)  # the bar names the same step
    at.button(key="train_explore").click().run()
    assert not at.exception and at.session_state[state.MODEL] == "yours-reverse"
    assert at.session_state[state.PAGE] == "decoding"  # not left on the Train page
    assert (
        at.header[0].value
        == f"Step {navigation.BY_STEM['decoding'].step} of {navigation.N_STEPS}: Decoder: one output word at a time"
    )


def test_text_the_tokenizer_reads_as_unk_is_named_in_a_notice():
    at = new_app("attention").run()
    at.sidebar.text_area[0].set_value("I love it 😀😀😀😀😀 and ☃ *x*").run()
    assert not at.exception
    notice = " ".join(w.value for w in at.warning)
    assert "2 pieces of the text became [UNK]" in plain(notice)
    assert "'😀😀😀😀😀'" in plain(notice) and "'☃'" in plain(notice)
    assert "\\[UNK\\]" in notice  # written literally, not as markdown
    at.sidebar.text_area[0].set_value("I love it").run()
    assert not at.warning


def test_head_statistics_speak_in_human_labels_and_readable_numbers():
    at = new_app().run()
    at.switch_page("explorer/pages/statistics.py").run()
    box = at.selectbox(key="stats_statistic")
    assert "cls" not in box.options and "[CLS]" in box.options and "previous token" in box.options
    box.set_value("cls").run()
    grid = spec(at.get("plotly_chart")[0])
    assert grid["data"][0]["colorbar"]["title"]["text"] == "[CLS]"  # MiniLM's own start marker, no other
    hover = grid["data"][1]["hovertemplate"]  # the click targets over the cells carry the hover
    assert "%{customdata[2]:.1%}" in hover and ".4f" not in hover  # a share reads as a percentage
    table = at.dataframe[0]
    columns = list(table.value.columns)
    assert "cls" not in columns and "sep" not in columns and "[CLS]" in columns and "[SEP]" in columns
    formats = {
        name: c["type_config"]["format"] for name, c in json.loads(table.proto.columns).items() if name[0] != "_"
    }
    assert formats["[CLS]"] == formats["previous token"] == "%.1f%%"  # 0.000000006 reads 0.0%
    assert formats["entropy"] == formats["mean distance"] == "%.3g"
    assert table.value["previous token"].max() <= 100 and table.value["previous token"].max() > 1


def test_every_chart_has_a_readable_hover_box():
    at = new_app().run()
    for page in ("attention", "statistics", "positional"):
        at.switch_page(f"explorer/pages/{page}.py").run()
        figures = [spec(c) for c in at.get("plotly_chart")]
        assert figures, page
        for figure in figures:
            hover = figure["layout"].get("hoverlabel", {})
            assert hover.get("bgcolor") == "white", page  # not a pale grey box on pale colours
            assert hover["font"]["color"] == "#111111" and hover.get("bordercolor") == "#444444", page
