"""The output in parts: the Output and loss page draws them all, the lesson one per step (final linear, softmax
and sampling; the loss against the right answer)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state, store, waiting
from attention_explorer.explorer.figures.labels import abbreviated, markdown_literal, position_label, row_reads
from attention_explorer.explorer.figures.output import distribution_bars, loss_bars
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.lesson.model_words import TEXT_END
from attention_explorer.explorer.lesson.wording import BEAM_SEARCH, length_note
from attention_explorer.explorer.lesson.wording import output_matrix as output_matrix_text
from attention_explorer.explorer.run import decoding, output
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace
from attention_explorer.explorer.views.frame import answer_box, predict, stop
from attention_explorer.explorer.views.offers import needs_decoder
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.tokenize import TokenizeError

SHOWN = 10  # most probable tokens drawn per position
SHOWN_WORDS = 40  # the target and the prediction written out in full up to this many tokens

TEXT_SHOWN = 80  # characters of the text shown before a decoded continuation


@dataclass(frozen=True)
class Scored:
    """The sidebar's run and the target scored against it."""

    trace: Trace
    loaded: LoadedModel
    scored: output.Scored
    where: str  # "the task's right answer", "the target you typed" or the model's own greedy output

    @property
    def right(self) -> str:
        """What the scored token is called: the right one, or greedy's pick when no right answer is known (a
        random model's own output is nothing to be right about)."""
        return output.scored_token(self.where)


def recipe_of(loaded: LoadedModel) -> tuple[float, bool]:
    """(the label smoothing the model trains with, whether its weights are random: no loss has trained them)."""
    return output.epsilon_for(loaded), loaded.family.origin == "random"


def target_box() -> str:
    """The Target box: the output to score (empty: the right answer)."""
    return st.text_input(
        "Target (leave empty for the right answer)",
        key=state.OUTPUT_TARGET,
        help="Type the output you want scored: the loss and -log p say how far the model is from writing it.",
    )


def scored(box: str = "top") -> Scored:
    """The trace, the Target box and the model's scores for its target; stops without a decoder. `box`: "top" draws
    the box here; "later" reads its value and leaves the box for the page to draw lower down (target_box);
    "none" always scores the right answer."""
    loaded = cached.model(st.session_state[state.MODEL])
    trace = current_trace()  # first: a sentence the model cannot read says so on every page
    needs_decoder(loaded)
    sidebar = state.sidebar(st.session_state)
    if loaded.task is not None and (note := length_note(len(decoding.source_words(trace)), loaded.task.max_words)):
        st.warning(note)
    if not loaded.family.has_source:  # a decoder-only model's target is its own text
        box = "none"
    target = target_box() if box == "top" else st.session_state.get(state.OUTPUT_TARGET, "") if box == "later" else ""
    try:
        scored, where = cached.get_scored(sidebar, target)
    except TokenizeError as e:
        st.info(markdown_literal(str(e)))
        stop()
    return Scored(trace, loaded, scored, where)


def loss(s: Scored, number: int = 1) -> None:
    """The loss of every position against the target (label-smoothed where the model trains so), and its floor."""
    trace, scored, where = s.trace, s.scored, s.where
    floor = output.loss_floor(scored.vocab_size, scored.epsilon)
    q_right = 1 - scored.epsilon + scored.epsilon / scored.vocab_size
    smoothed = scored.epsilon > 0
    st.subheader(f"{number}. The {model_words.loss_name(scored.epsilon)} against " + where)
    readable = trace.readable  # tokens as text a class reads ('␣capital'), the same marks as every page
    if len(scored.targets) <= SHOWN_WORDS:  # a longer text is read off the chart and the table
        written = " ".join(readable(scored.predicted if trace.decoder_only else trace.output_tokens))
        said = "Model predicts:   " if trace.decoder_only else "Model wrote:      "  # next tokens, or its output
        st.text(f"Target:           {' '.join(readable(scored.targets))}\n{said}{written}")
    m1, m2, m3 = st.columns(3)
    name = model_words.loss_name(scored.epsilon)
    m1.metric(f"Mean {name}", f"{scored.mean:.4f}")
    m2.metric("Floor for this vocabulary", f"{floor:.4f}")
    m3.metric(f"Mean -log p({s.right} token)", f"{float(scored.nll.mean()):.4f}")
    figure = loss_bars(readable(scored.targets), scored.per_token, scored.nll, floor, smoothed, s.right)
    chart(figure, "output_loss", present_height=250)
    if smoothed:
        st.caption(
            f"Label smoothing eps = {scored.epsilon}: the target puts {q_right:.4f} on the right token and "
            f"{scored.epsilon / scored.vocab_size:.2e} on each of the other {scored.vocab_size - 1} tokens. "
            "The label-smoothed loss is the cross-entropy against that target: smallest when the model predicts the "
            f"target itself, so it cannot go below the target's entropy, {floor:.4f} nats, however well the model is "
            f"trained. -log p({s.right} token) is the cross-entropy against the {s.right} token alone."
        )
    else:
        trains = (  # only a model trained here (its recipe) or random weights (they would) train on what is shown
            "this model trains with plain cross-entropy"
            if s.loaded.family.trained_here or s.loaded.family.origin == "random"
            else "the loss shown is plain cross-entropy"
        )
        st.caption(
            f"No label smoothing ({trains}): the cross-entropy at a position is -log p({s.right} token) itself, 0 "
            "only when the model gives that token probability 1."
        )
    right_p = scored.right_probabilities()
    st.dataframe(
        {
            "position": list(range(len(scored.targets))),  # the position each row reads, as the heatmaps number it
            "reads": [position_label(i, t) for i, t in enumerate(readable(scored.decoder_input))],
            "should write" if s.right == "right" else "greedy wrote": [
                position_label(i + 1, t) for i, t in enumerate(readable(scored.targets))
            ],
            "most probable": list(readable(scored.predicted)),
            f"p({s.right} token)": right_p,
            **({name: scored.per_token} if smoothed else {}),  # without smoothing it is the -log p column
            f"-log p({s.right} token)": scored.nll,
        },
        hide_index=True,
    )
    if trace.decoder_only:
        text = (
            f"The {name} of the text itself, as in training: position i reads the text's tokens 0 .. i (the causal "
            "mask hides the rest) and should write its token i + 1. Every position is scored in one forward pass."
        )
    else:
        text = (
            f"Teacher forcing, as in training: position i reads {scored.decoder_input[0]!r} and the target's "
            "first i tokens, whatever the model would have written, and should write the target's token i + 1. "
            f"Positions are numbered as on the heatmaps: {scored.decoder_input[0]!r} is 0, so position i "
            "writes token i + 1."
        )
    st.caption(markdown_literal(text))


def one_position(s: Scored, number: int = 2) -> None:
    """One position: the final linear layer's logits, the softmax, and a temperature to try."""
    scored, loaded = s.scored, s.loaded
    heading, equation = st.columns(2, vertical_alignment="center")  # one line: the bars on the first screen
    heading.subheader(f"{number}. One position: logits and softmax")
    wrote = "should write" if s.right == "right" else "greedy wrote"
    position_col, temperature_col = st.columns([3, 2])
    # a decoder-only text's last token is read too, and opened on: what the model answers after the whole text, where
    # nothing in the text says what comes next (the final states hold every row the run read)
    end = len(scored.targets) if s.trace.decoder_only else None
    steps = list(range(len(scored.targets) + (end is not None)))
    reads, writes = s.trace.readable(scored.decoder_input), s.trace.readable(scored.targets)
    labels = [  # a list's own lookup: a function defined here would keep this page's globals with the session
        row_reads(i, read, wrote, right) for i, (read, right) in enumerate(zip(reads, writes, strict=False))
    ]
    if end is not None:
        last = s.trace.readable(s.trace.source_tokens[end : end + 1])[0]
        labels.append(f"position {end}: reads {position_label(end, last)!r}, {TEXT_END}")
    index = position_col.selectbox(
        "Output position",
        steps,
        steps[-1] if end is not None else 0,
        format_func=labels.__getitem__,
        key="output_position",
    )
    temperature = temperature_col.slider("Temperature T", 0.1, 5.0, 1.0, 0.1, key="output_temperature")
    matrix = output.output_matrix(loaded)
    bias = "" if matrix.bias_zero is None else " + b"
    norm = output.final_norm(loaded, scored.final_states[index])  # None: post-LN, W reads h itself
    read = "h" if norm is None else rf"\mathrm{{{norm.name}}}(h)"
    softmax = rf"p = \mathrm{{softmax}}(\text{{logits}} / T),\ T = {temperature}"
    equation.latex(rf"\text{{logits}} = {read}\, W^\top{bias},\qquad {softmax}")
    logits = scored.logits(loaded, index)
    p = output.softmax(logits, temperature)
    own = index == end  # the text ends here: the model's own top token is followed, no target scores it
    right = int(np.argmax(logits)) if own else scored.target_ids[index]
    order = [int(i) for i in np.argsort(-p, kind="stable")[:SHOWN]]
    if right not in order:
        order.append(right)
    q = None if own else output.smoothed_target(right, scored.vocab_size, scored.epsilon)
    vocabulary = loaded.target_vocabulary
    called = "the model's own top prediction" if own else s.right
    readable = s.trace.spelling.readable
    names = [readable(vocabulary.id_to_token(i)) + (f" ({called})" if i == right else "") for i in order]
    chart(
        distribution_bars(
            names,
            p[order],
            None if q is None else q[order],
            f"Position {index}: softmax(logits / {temperature})",  # the row it reads, as the heatmaps number it
            f"model, T = {temperature}",
            scored.epsilon > 0,
        ),
        "output_distribution",
        present_height=380,
    )
    st.caption(
        model_words.final_norm_text(norm, matrix.d_model)
        + output_matrix_text(
            matrix.vocab_size,
            matrix.d_model,
            matrix.target_embedding,
            matrix.source_embedding,
            matrix.bias_zero,
            matrix.decoder_only,
        )
        + (" T = 1 is the model's own distribution (the one training scores)." if temperature == 1.0 else "")
    )
    if own:
        st.caption(
            markdown_literal(
                f"{model_words.read_ends(s.trace.truncated)[0].capitalize()} at this position, so no token is right "
                "or wrong: "
                "the model's most likely next token is "
                f"{readable(vocabulary.id_to_token(right))!r} "
                f"(p = {float(output.softmax(logits, 1.0)[right]):.2f} at T = 1)."
            )
        )
    st.text(
        f"logit of {readable(vocabulary.id_to_token(right))!r}: {logits[right]:.4f}   (highest: {logits.max():.4f}); "
        f"p = {p[right]:.5f}; -log p = {-np.log(max(p[right], 1e-300)):.4f}"
    )
    st.caption(model_words.minus_log_p("greedy" if own else s.right))  # the text's end: its own top token


def sampling(s: Scored, number: int = 3) -> None:
    """Another way to write: sample with a temperature, top-k or top-p, next to greedy's output."""
    trace, scored = s.trace, s.scored
    sidebar = state.sidebar(st.session_state)
    greedy_ids: tuple[int, ...] = ()
    if trace.decoder_only:
        greedy_run = cached.get_sampled(sidebar, "greedy", 1.0, 1, 1.0, 0)
        greedy, greedy_ids = greedy_run.tokens, greedy_run.ids
        st.subheader(f"{number}. Continue the text: greedy or sampling")
        st.caption(
            f"The model writes {output.CONTINUATION} more tokens after the text, one at a time: each step appends its "
            "pick to the text and reads it all again (only the newest position is computed: a key/value cache)."
        )
    else:
        greedy = trace.output_tokens
        st.subheader(f"{number}. Write a different output: sampling")
        st.caption(BEAM_SEARCH)
    c1, c2, c3, c4, c5 = st.columns(5)
    method = c1.selectbox("Method", output.METHODS, key="output_method")
    sample_t = c2.number_input("Temperature", 0.1, 5.0, 1.0, 0.1, key="output_sample_temperature")
    top_k = c3.number_input("k (top-k)", 1, scored.vocab_size, min(10, scored.vocab_size), key="output_top_k")
    top_p = c4.number_input("p (top-p)", 0.05, 1.0, 0.9, 0.05, key="output_top_p")
    seed = c5.number_input("Seed", 0, 2**31 - 1, 0, key="output_seed")
    sampled = cached.get_sampled(sidebar, method, float(sample_t), int(top_k), float(top_p), int(seed))
    written = " ".join(trace.readable(greedy))
    st.text(f"Sampled ({method}):  {' '.join(trace.readable(sampled.tokens))}\nGreedy:            {written}")
    decode = getattr(cached.model(sidebar.model).tokenizer, "decode", None)
    if trace.decoder_only and decode is not None:  # byte-level tokens read back as the text they spell
        text = sidebar.text
        ending = text[-TEXT_SHOWN:] if len(text) <= TEXT_SHOWN else "..." + text[-TEXT_SHOWN:]
        shown = f"As text ({method}):  {ending}[{decode(sampled.ids)}]"
        st.text(f"{shown}\nAs text (greedy):  {ending}[{decode(greedy_ids)}]")
        st.caption("The text's last characters, then in brackets what the model wrote, decoded from its tokens.")
    if sampled.tokens != greedy:
        st.caption("This output differs from greedy decoding. The same seed and settings always write it again.")
    st.dataframe(
        {
            "token written": list(range(1, len(sampled.tokens) + 1)),
            "wrote": list(trace.readable(sampled.tokens)),
            "p under softmax(logits / T)": list(sampled.probabilities),
            "p after the cut": list(sampled.kept_probabilities),
            "tokens left to draw from": list(sampled.kept_counts),
        },
        hide_index=True,
    )


def wrong_answer(s: Scored) -> None:
    """Predict, then reveal: will the loss go up or down when the model is scored against a wrong answer (the
    target's words in another order), or, for a decoder-only model, on its text's words in reverse order?"""
    if not s.loaded.family.has_source:  # a decoder-only model's target is its own text
        _reversed_text(s)
        return
    # a word-piece output would not read back as the same words in another order
    if s.loaded.task is None:
        return
    words = list(s.scored.targets[:-1])  # the last is the end token
    wrong = words[::-1] if words[::-1] != words else words[1:] + words[:1]
    if wrong == words:  # one word, or every word the same: no other order
        return
    sidebar = state.sidebar(st.session_state)
    name = model_words.loss_name(s.scored.epsilon)
    # a reordering of the model's own greedy output is no more wrong than that output is right
    known = s.right == "right"
    other_order = "a wrong answer, the same words" if known else "the same words"
    guess = predict(
        f"The mean {name} against {s.where} is {s.scored.mean:.4f}. Score the same model against {other_order} in "
        f"another order: {' '.join(wrong)!r}. Will the {name} go up or down?",
        LOSS_OPTIONS,
        (sidebar, s.where, s.scored.mean),
        "loss_predict",
        waiting.reveal_label(store.scored_seconds(sidebar, " ".join(wrong))),  # the scoring it runs
    )
    if guess is None:
        return
    try:
        other, _ = cached.get_scored(sidebar, " ".join(wrong))
    except TokenizeError as e:
        st.info(markdown_literal(str(e)))
        return
    there = f"Against {'the wrong answer' if known else 'the reordered words'}"
    _loss_answer(s, other.mean, guess, there, f"against {s.where}")


LOSS_OPTIONS = ["It goes up", "It goes down", "It stays about the same (within 1%)"]


def _reversed_text(s: Scored) -> None:
    """A decoder-only model's question: its own text's words in reverse order, scored the same way (next-token loss
    of the text itself): does the loss go up or down?"""
    words = s.trace.text.split()
    reversed_text = " ".join(words[::-1])
    if reversed_text == " ".join(words):  # one word, or a palindrome of words: no other order
        return
    sidebar = state.sidebar(st.session_state)
    name = model_words.loss_name(s.scored.epsilon)
    guess = predict(
        f"The mean {name} of this text is {s.scored.mean:.4f}. Score the same model on the text's words in reverse "
        f"order: {abbreviated(reversed_text, 200)!r}. Will the mean {name} go up or down?",
        LOSS_OPTIONS,
        (sidebar, s.scored.mean),
        "loss_predict",
        waiting.reveal_label(waiting.at_once(store.scored_seconds(sidebar.with_text(reversed_text), ""))),  # its run
    )
    if guess is None:
        return
    try:
        other, _ = cached.get_scored(sidebar.with_text(reversed_text), "")
    except TokenizeError as e:
        st.info(markdown_literal(str(e)))
        return
    _loss_answer(s, other.mean, guess, "On the words in reverse order", "on the text")


def _loss_answer(s: Scored, other: float, guess: int, there: str, here: str) -> None:
    """The revealed answer to a loss question: the other mean loss against this one, and the class's verdict."""
    name = model_words.loss_name(s.scored.epsilon)
    change = other - s.scored.mean
    answer = 2 if abs(change) <= 0.01 * s.scored.mean else (0 if change > 0 else 1)
    said = (
        f" Your class said: {LOSS_OPTIONS[guess].lower()}: {'right' if guess == answer else 'not so'}."
        if guess >= 0
        else ""
    )
    answer_box(
        markdown_literal(
            f"{there} the mean {name} is {other:.4f}, {here} {s.scored.mean:.4f}: "
            f"{LOSS_OPTIONS[answer].lower().removeprefix('it ')} ({change:+.4f}).{said}"
        ),
        guess,
        guess == answer,
    )
