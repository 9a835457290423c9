"""Greedy decoding step by step: masked self-attention, cross-attention and the next-token softmax per step."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.app.callbacks import move_position
from attention_explorer.explorer.figures.decoding import mark_row, top_k_bars
from attention_explorer.explorer.figures.heatmap import head_heatmap, outside_window
from attention_explorer.explorer.figures.labels import markdown_literal, position_label
from attention_explorer.explorer.figures.walkthrough import per_key_bars
from attention_explorer.explorer.lesson.model_words import read_ends
from attention_explorer.explorer.lesson.wording import length_note
from attention_explorer.explorer.run import decoding, walkthrough
from attention_explorer.explorer.run.heads import head_or_mean, head_title
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, token_legend
from attention_explorer.explorer.views.frame import answer_box, intro, page_footer, page_header, predict
from attention_explorer.explorer.views.offers import needs_decoder
from attention_explorer.explorer.views.pickers import pick_head, pick_layer
from attention_explorer.explorer.views.zoom import drawn_window, head_map, window_caption

NARROW = 16  # bars per column chart: a third of the page fits about 16 rotated labels

page_header("Decoding step by step")
CONTINUES = navigation.BY_STEM["final_linear"].step  # the step that continues a decoder-only text
trace = current_trace()  # first: a sentence the model cannot read says so on every page
needs_decoder(cached.model(st.session_state[state.MODEL]))
assert trace.output_tokens is not None and trace.target_tokens is not None
only = trace.decoder_only  # a decoder-only model: each step is a position of the text itself
if only:
    intro(
        markdown_literal(
            "A decoder-only model has no source: it reads the text through masked self-attention (each position "
            "sees itself and the positions before it, never later ones) and its final linear layer + softmax gives, "
            "at every position, a probability for every possible next token. Training scores all positions at once; "
            f"writing a continuation takes one step at a time (step {CONTINUES} continues this text). Here each step "
            "is one position of the text and the token greedy decoding would write after it."
        )
    )
else:
    intro(
        markdown_literal(
            "An encoder-decoder writes its output one token at a time. At each step the decoder reads "
            f"{trace.target_tokens[0]!r} (its start token) and the tokens it has already written through masked "
            "self-attention (later positions are hidden), looks at the source through encoder-decoder attention, and "
            "its final linear layer + softmax gives a probability for every token of its vocabulary. This page "
            "decodes greedily, always taking the most probable next token; the paper used beam search instead "
            "(section 6.1: beam size 4, length penalty alpha = 0.6)."
        )
    )

total = decoding.n_positions(trace)
task = cached.model(st.session_state[state.MODEL]).task
if task is not None and not only and (note := length_note(len(decoding.source_words(trace)), task.max_words)):
    st.warning(note)
asked = state.url_value(st.session_state, state.URL_POSITION, state.DECODING_POSITION)  # the position it reads
if asked is not None:
    if asked >= total:
        st.warning(
            f"The address asks for position {asked}, but this output's positions go from 0 to {total - 1}; showing "
            f"position {total - 1}."
        )
    st.session_state[state.DECODING_POSITION] = asked + 1
# a decoder-only text opens on its last position, the one that answers it (nothing in the text follows); an output
# written word by word, on its first word
opening = total if only else 1
st.session_state[state.DECODING_POSITION] = min(
    max(st.session_state.get(state.DECODING_POSITION, opening), 1), total
)  # a new sentence may be shorter
# the address names the step by the position it reads, numbered as the heatmaps' ticks (labels.row_reads)
st.query_params[state.URL_POSITION] = str(st.session_state[state.DECODING_POSITION] - 1)


back, slider, forward = st.columns([1, 8, 1], vertical_alignment="bottom")
back.button(
    "◀ Back",
    on_click=move_position,
    args=(state.DECODING_POSITION, -1, total),
    disabled=st.session_state[state.DECODING_POSITION] <= 1,
    key="decoding_back",
)
forward.button(
    "Next ▶",
    on_click=move_position,
    args=(state.DECODING_POSITION, 1, total),
    disabled=st.session_state[state.DECODING_POSITION] >= total,
    key="decoding_next",
)
if total > 1 and only:  # each step is a position of the text: numbered from 0, as the heatmaps' ticks
    slider.select_slider(
        "Position",
        range(1, total + 1),
        format_func=[str(i) for i in range(-1, total)].__getitem__,  # stored from 1, shown as the position it reads
        key=state.DECODING_POSITION,
    )
elif total > 1:
    slider.slider("Output word", 1, total, key=state.DECODING_POSITION)  # a count of words: "Output word 3 of 9"
else:
    slider.caption("One output position: the model ended at once.")
index = st.session_state[state.DECODING_POSITION] - 1

# the last layer and the mean over heads show the alignment most plainly, so they come first
n_layers, n_heads = trace.decoder_self.n_layers, trace.decoder_self.n_heads
# one row with the class's question: the step's charts on the first screen
layer_col, head_col, ask_col = st.columns(3, vertical_alignment="bottom")
layer = pick_layer(n_layers, "decoding_layer", layer_col, n_layers - 1)
head = pick_head(n_heads, "decoding_head", head_col, mean=True, index=n_heads)
current = decoding.step(trace, index, layer, head)
which = head_title(layer, head, n_heads)

reads = position_label(index, current.target_tokens[index])
ask = ask_col.toggle(
    "Ask the class first",  # short: it shares a row with the pickers
    key="decoding_ask",
    value=True,  # on, as every step asks its question first: a teacher turns it off to step through freely
    help="Hide each word the decoder writes until it is revealed: before every word the class picks among the "
    "model's most probable words, then reveals.",
)
revealed = True
if ask:
    options = sorted(current.top_tokens[:5])  # the greedy word is the most probable: sorted, the order says nothing
    context = (state.sidebar(st.session_state), index)
    guess = predict(
        f"Reading {reads!r} and the words before it, what will the {'model' if only else 'decoder'} write next?",
        options,
        context,
        "decoding_predict",
    )
    revealed = guess is not None
    if revealed:
        right = guess >= 0 and options[guess] == current.chosen
        said = f" Your class said {options[guess]!r}: {'right' if right else 'not so'}." if guess >= 0 else ""
        answer_box(
            markdown_literal(
                f"The {'model' if only else 'decoder'} writes {current.chosen!r}: probability "
                f"{float(current.top_probabilities[0]):.4f}, the highest of its {len(current.top_tokens)} most "
                f"probable words (greedy decoding).{said}"
            ),
            guess,
            right,
        )
writes = position_label(index + 1, current.chosen) if revealed else "?"
if only:
    following = current.target_tokens[index + 1] if index + 1 < total else None
    # the heading on one line: what the text itself writes next goes beside the text so far
    actual = f"   (the text goes on with {following!r})" if following is not None and revealed else ""
    if following is None and revealed:
        ends, inside = read_ends(trace.truncated)
        actual = f"   ({ends} here: no next token {inside}, only the model's own prediction)"
    st.subheader(
        markdown_literal(
            f"Position {index} (0 to {total - 1}): reads {reads!r} (and the tokens before it), predicts {writes!r}"
        )
    )
    shown, so_far = st.columns([1, 2])  # one line
    shown.caption(f"Attention shown for {which}.")
    so_far.text("The text up to here: " + " ".join(current.done_so_far) + actual)
else:
    st.subheader(
        markdown_literal(
            f"Output word {index + 1} of {total}: reads {reads!r} (and the tokens before it), writes {writes!r}"
        )
    )
    shown, so_far = st.columns([1, 2])  # one line
    shown.caption(f"Attention shown for decoder {which}.")
    so_far.text("Written so far: " + (" ".join(current.done_so_far) or "(nothing yet)"))

long_output = len(current.target_tokens) > NARROW
if only:
    self_col, next_col = st.columns(2)
    cross_col = None
else:
    self_col, cross_col, next_col = st.columns(3)
# past NARROW keys: the keys this step sees (the strongest NARROW of them when it sees more) and an overview line;
# the masked ones are left out, so every count is of visible keys
seen = int(current.visible.sum())
# before the class's answer is revealed the later positions are left out too: their labels name the word asked for
cut = long_output or not revealed
self_keys = slice(None) if not cut else slice(0, seen)
self_shown = walkthrough.strongest_keys(current.self_weights[self_keys], NARROW, keep=(index,))
window = drawn_window(trace.decoder_self.windows, "decoder_self", layer)  # a local layer: what its window hides
positions = np.arange(len(current.target_tokens))
outside = outside_window(np.array([index]), positions, window["window"])[0] if window else None
chart(
    per_key_bars(
        current.self_weights[self_keys],
        current.target_tokens[self_keys],
        "Self-attention (masked)",
        mask=current.visible[self_keys],
        shown=self_shown,
        max_labels=NARROW,
        outside=None if outside is None else outside[self_keys],
    ),
    "decoding_self",
    self_col,
)
hidden = len(current.target_tokens) - seen
if outside is not None and outside.any():  # the window hides some of the keys the causal mask shows
    self_col.caption(
        f"Layer {layer + 1} is local: this step sees only the {window['window']:,} keys up to it, itself "
        f"included; the {int(outside.sum()):,} before them are shaded grey, left of the dashed edge (weight 0, "
        "hidden by the window)."
    )
if not (revealed or long_output):
    self_col.caption("This step sees the positions drawn; the later ones appear once the class's answer is revealed.")
elif not long_output:
    later = "text" if only else "output"
    if hidden:
        self_col.caption(f"Grey positions are later in the {later}: the causal mask hides them (weight 0).")
else:
    sees = seen - (0 if outside is None else int(outside.sum()))  # a local layer: the window's keys only
    later = f"; the causal mask hides the {hidden} later ones (weight 0), left out here" if hidden else ""
    self_col.caption(
        f"This step sees {sees} of the {len(current.target_tokens)} positions{later}."
        + (f" Past {NARROW} the strongest are drawn; the line above holds every key up to it." if seen > NARROW else "")
    )
if cross_col is not None and current.cross_weights is not None:
    chart(
        per_key_bars(
            current.cross_weights,
            current.source_tokens,
            "Cross-attention (source)",
            shown=walkthrough.strongest_keys(current.cross_weights, NARROW),
            max_labels=NARROW,
        ),
        "decoding_cross",
        cross_col,
    )
if revealed:
    chart(
        top_k_bars(current.top_tokens, current.top_probabilities, current.chosen, "Next token: linear + softmax"),
        "decoding_next_token",
        next_col,
    )
    next_col.caption(f"The {len(current.top_tokens)} most probable tokens; red is greedy's pick.")
else:
    next_col.info("The next word's probabilities appear once the class's answer is revealed.")

if revealed and only:  # every position's masked self-attention, the current one outlined
    st.subheader(f"Masked self-attention of every position ({which})")
    tokens = current.target_tokens  # a long text: an overview and the region around this step (views.zoom)
    self_attention = head_or_mean(trace.decoder_self.weights, layer, head)
    head_map(
        self_attention, tokens, tokens, "", "decoding_self_all", (index, index), masked=True, marked_row=index, **window
    )
    window_caption(trace.decoder_self.windows, layer, len(tokens))
    st.caption("Each row is one position, reading the positions at and before it; the outlined row is this step.")
elif revealed:  # its rows name every word written: not before the class has answered
    st.subheader(f"Cross-attention of every step ({which})")
    figure = head_heatmap(head_or_mean(trace.cross.weights, layer, head), current.target_tokens, current.source_tokens)
    chart(mark_row(figure, index, len(trace.source_tokens)), "decoding_cross_all")
    st.caption(
        "Each row is one step, labelled with the token it reads: the row 'i: token' is step i + 1, which reads it "
        "(and those before it) and writes position i + 1. The outlined row is the current step."
    )

if task is not None and revealed and not only:
    answer = decoding.check(trace, task)
    if answer.right is None:
        st.caption("This sentence is outside the task's grammar, so there is no right answer to compare with.")
    elif answer.correct:
        st.success("The model's output is right: " + markdown_literal(" ".join(answer.written)))
    else:
        written, wanted = " ".join(answer.written), " ".join(answer.right)
        st.warning(markdown_literal(f"The model wrote {written!r}; the right answer is {wanted!r}."))
token_legend()  # the marks its token labels use
page_footer()
