"""Widget callbacks and format functions: the sidebar's, and the pages' that would otherwise hold a page's globals.

Streamlit keeps a session's widget callbacks and format functions until its next run, and a disconnected session
for `server.disconnectedSessionTTL`. A function defined in a script holds that script's globals (the model, the
trace) for as long, past the shelf and the store that bound them; functions defined here hold this module only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import PurePosixPath

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, drill, state
from attention_explorer.explorer.run.compare import MINIMAL_PAIRS
from attention_explorer.explorer.run.heads import MEAN
from attention_explorer.models import registry


def _keep_widget(key: str, widget_key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def bound(key: str) -> dict:
    """Widget arguments that keep its value under `key` too (widget state is dropped on page switches), with the
    widget's default set to that value: a browser that redraws the widget after a page switch falls back to its
    default and sends it as if the user had chosen it (a default of `min_value` set Max tokens to 3)."""
    widget_key = state.widget(key)
    return {
        "key": widget_key,
        "on_change": functools.partial(_keep_widget, key, widget_key),
        "value": st.session_state[key],
    }


def use_example() -> None:
    if st.session_state[state.EXAMPLE]:
        st.session_state.pop(state.ASIDE, None)  # an example chosen: nothing to go back to
        state.keep(st.session_state, state.TEXT, st.session_state[state.EXAMPLE])


def use_own_example() -> None:
    """The sidebar's model's first example in place of a sentence it cannot read, which "Back to your sentence"
    brings back."""
    loaded, _ = loadable(st.session_state[state.MODEL])
    if loaded is not None:
        st.session_state[state.EXAMPLE] = ""
        state.put_aside(st.session_state, loaded.example)


def back_to_sentence() -> None:
    state.back_to_sentence(st.session_state)


def keep_example() -> None:
    st.session_state.pop(state.ASIDE, None)


def example_label(example: str) -> str:
    return example or "choose..."


# An absolute path of the server's disk inside a load's error ("cannot read model.safetensors in /srv/models/x: ...")
SERVER_PATH = re.compile(r"(?<![\w.~])(?:/[^\s/'\"():;,]+)+/?")


def without_paths(text: str) -> str:
    """A message as a visitor may read it: every absolute path cut to its last part (the folder's or file's name)."""
    return SERVER_PATH.sub(lambda found: PurePosixPath(found.group(0)).name, text)


def loadable(key: str) -> tuple[registry.LoadedModel | None, str]:
    """(the model, "") or (None, what is wrong with its files, naming no path of the server's disk)."""
    try:
        return cached.model(key), ""
    except registry.ModelLoadError as e:
        return None, without_paths(str(e))


def change_model() -> None:
    """A sentence the new model cannot read gives way to its example: the old model's example at once, a typed
    sentence put aside (state.put_aside: the page offers it back), and a sentence put aside comes back to a model
    that can read it. Max tokens shrinks to fit."""
    old, _ = loadable(st.session_state[state.MODEL])
    st.session_state[state.MODEL] = st.session_state[state.widget(state.MODEL)]
    st.session_state[state.EXAMPLE] = ""
    new, _ = loadable(st.session_state[state.MODEL])
    if new is None:
        return
    examples = old.examples if old is not None else ()
    text, typed = st.session_state[state.TEXT], state.aside(st.session_state)
    if typed is not None and new.can_read(typed):
        state.back_to_sentence(st.session_state)
    elif not new.can_read(text):
        if text in examples and typed is None:  # nothing typed to go back to
            state.keep(st.session_state, state.TEXT, new.example)
        elif text.strip():  # a class switching models wants to see this one at work; the page offers the sentence back
            state.put_aside(st.session_state, new.example)
    if st.session_state[state.MAX_TOKENS] > new.max_tokens:
        state.keep(st.session_state, state.MAX_TOKENS, new.max_tokens)


def use_model(key: str, text: str = "") -> None:
    """One click to another model (the lesson offers the translation model) on `text`, or its first example; a typed
    sentence it replaces is put aside (state.put_aside). Nothing for a model this server does not offer."""
    if key not in cached.model_keys():  # the pages offer only what it offers: a click from an older run of a page
        return
    old, _ = loadable(st.session_state[state.MODEL])
    new, _ = loadable(key)
    if new is None:
        return
    state.keep(st.session_state, state.MODEL, key)
    st.session_state[state.EXAMPLE] = ""
    shown, current = text if text and new.can_read(text) else new.example, st.session_state[state.TEXT]
    typed = state.aside(st.session_state) is not None or current not in (old.examples if old is not None else ())
    if typed and current.strip() and current != shown:  # a typed sentence is kept: "Back to your sentence"
        state.put_aside(st.session_state, shown)
    else:
        state.keep(st.session_state, state.TEXT, shown)
    if st.session_state[state.MAX_TOKENS] > new.max_tokens:
        state.keep(st.session_state, state.MAX_TOKENS, new.max_tokens)


def pair_label(pair: int | None) -> str:
    return "choose a pair..." if pair is None else " / ".join(MINIMAL_PAIRS[pair])


def set_pair() -> None:
    """Compare sentences: a minimal pair becomes sentences A (the sidebar's) and B; the picker resets."""
    pair = st.session_state[state.COMPARE_PAIR]
    if pair is not None:
        state.keep(st.session_state, state.TEXT, MINIMAL_PAIRS[pair][0])
        st.session_state[state.COMPARE_B] = MINIMAL_PAIRS[pair][1]
    st.session_state[state.COMPARE_PAIR] = None


def walk_heads(kind: str, first_pieces: tuple[int, ...] | None, layer: int, head: int, point: Mapping) -> None:
    """The heatmap's row click: that query token, this layer and head (the first head for the mean) on the Q/K/V
    page. `first_pieces`: at word level, each word's first piece (the Q/K/V page works on pieces)."""
    row = drill.token_of(point)
    if row is None:
        return
    state.choose(st.session_state, "qkv_kind", kind)
    state.choose(st.session_state, "qkv_layer", layer)
    state.choose(st.session_state, "qkv_head", 0 if head == MEAN else head)
    state.choose(st.session_state, state.QKV_QUERY, row if first_pieces is None else first_pieces[row])
    st.session_state[state.DRILL_TO] = navigation.script("qkv")


def stack_to_kind() -> None:
    """The forward pages' stack radio moves the lesson's focus to that stack's self-attention."""
    stack = st.session_state[state.FORWARD_STACK]
    if (st.session_state.get(state.FOCUS_KIND, "encoder_self") == "encoder_self") != (stack == "encoder"):
        state.choose(st.session_state, state.FOCUS_KIND, "encoder_self" if stack == "encoder" else "decoder_self")


def head_label(head: int) -> str:
    return f"head {head + 1}"


def focus_token(key: str, point: Mapping) -> None:
    """A click on a token of the head view: that token highlighted."""
    drill.select_token(st.session_state, point, key)


def move_position(key: str, by: int, total: int) -> None:
    """Back / Next on the decoding page: the step under `key` moves by `by`, within 1..total."""
    st.session_state[key] = min(max(st.session_state[key] + by, 1), total)
