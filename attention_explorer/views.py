"""The notebook API's views: each draws a run (attention_explorer.api.Run) with the app's own figure builders, the
same functions the pages call, and says its title and what it shows: (figure, title, parts of the title's line)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from attention_explorer.api import QKV_STEPS

if TYPE_CHECKING:
    from attention_explorer.api import Run

QKV_SHOWN = 16  # past walkthrough.ALL_KEYS keys, the Q/K/V charts draw this many (the strongest), as the page opens


# each view: (the app's figure, its title where the page gives it none, what it shows for the title's line)
def heatmap(run: Run, layer: int = 0, head: int = 0, kind: str | None = None):
    from attention_explorer.explorer.figures import zoom
    from attention_explorer.explorer.figures.heatmap import head_heatmap
    from attention_explorer.explorer.run.heads import head_title

    kind = run._kind(kind)
    weights = run.attention(layer, head, kind)
    queries, keys = run.trace.labels_for(kind)  # readable: as the pages label tokens
    title = head_title(layer, head, run.trace.attention(kind).n_heads).capitalize()
    figure = head_heatmap(weights, queries, keys, title, overview=zoom.beside(len(queries), len(keys)))
    return figure, title, (_kind_name(kind), f"layer {layer + 1}", f"head {head + 1}")


def head_view(run: Run, layer: int = 0, heads=None, token: int | None = None, kind: str | None = None):
    from attention_explorer.explorer.figures.head_view import head_view

    kind = run._kind(kind)
    run._check(kind, layer)
    found = run.trace.attention(kind)
    heads = list(range(found.n_heads)) if heads is None else [int(h) for h in heads]
    for head in heads:
        run._check(kind, layer, head)
    queries, keys = run.trace.labels_for(kind)  # readable: as the pages label tokens
    figure = head_view(found.layer(layer).weights, queries, keys, heads, token)
    return figure, f"Head view: layer {layer + 1}", (_kind_name(kind), f"layer {layer + 1}")


def model_view(run: Run, kind: str | None = None, layer: int | None = None, head: int | None = None):
    from attention_explorer.explorer.figures.model_view import model_view
    from attention_explorer.explorer.run import blocks, device_reducers

    kind = run._kind(kind)
    found = run.trace.attention(kind)
    selected = None
    if layer is not None and head is not None:
        run._check(kind, layer, head)
        selected = (layer, head)
    # a layer at a time; on a GPU each reduced there, only the thumbnails copied back
    thumbnails = np.stack(found.reduced(blocks.thumbnails, device_reducers.thumbnails))
    return model_view(thumbnails, blocks.THUMBNAIL, selected), "Every layer and head", (_kind_name(kind),)


def positional(run: Run, show: str | None = None, positions: int = 64, learned: bool = True, **turns: int):
    from attention_explorer.explorer.figures import positional as figures
    from attention_explorer.explorer.run import positions as run_positions

    if run.loaded.family.block.positions.rotary:  # nothing added to the embedding: how far each pair of q and k turns
        return rotary(run, show or "curves", positions, **turns)
    show = show or "table"
    tables = run_positions.tables(run.loaded)
    own = learned and "learned" in tables
    table = tables["learned" if own else "sinusoidal"][:positions]
    d_model = table.shape[1]
    if show == "curves":
        dims = [d for d in (0, 1, 40, 100, 200) if d < d_model]
        smooth = None if own else run_positions.sinusoid_curves(len(table), d_model, dims)
        return figures.curves(table, dims, smooth), "Positional encoding", ("learned" if own else "sinusoidal",)
    if show == "table":
        title = "Learned (this model's own)" if own else f"Sinusoidal, d_model {d_model}"
        return figures.table_heatmap(table, title), title, ()
    if show == "similarity":
        title = "Learned: cosine(P_i, P_j)" if own else "Sinusoidal: cosine(PE_i, PE_j)"
        return figures.similarity_heatmap(table, title), title, ()
    raise ValueError(f"positional show={show!r}: choose table, similarity or curves")


def rotary(run: Run, show: str, positions: int, layer: int = 0, head: int = 0, query=None, key=None):
    import html

    from attention_explorer.explorer.figures import positional as figures
    from attention_explorer.explorer.run import positions as run_positions

    if show == "curves":
        theta = run_positions.rotary_frequencies(run.loaded)
        pairs = [i for i in (0, 1, 4, 8, 16) if i < len(theta)]
        x = np.linspace(0, positions - 1, (positions - 1) * run_positions.SAMPLES_PER_POSITION + 1)
        whole = np.cos(np.arange(positions)[:, None] * theta[None, :])
        smooth = (x, np.cos(x[:, None] * theta[None, pairs]))
        figure = figures.curves(whole, pairs, smooth, "pair", "cos(angle)")
        return figure, "How far each pair has turned: cos(position x theta_i)", ("rotary",)
    if show != "distance":
        raise ValueError(f"rotary positions: show={show!r}: choose curves or distance")
    kind, tokens = run.kinds[0], run.tokens
    query = len(tokens) - 1 if query is None else query
    key = max(0, query - 1) if key is None else key
    run._check(kind, layer, head)
    distances, scores, own = run_positions.score_by_distance(run.loaded, run.trace, kind, layer, head, query, key, 256)
    title = (
        f"Layer {layer + 1}, head {head + 1}: query {tokens[query]!r} and key {tokens[key]!r} placed 0 to "
        f"{len(distances) - 1} positions apart"
    )
    figure = figures.distance_scores(distances, scores, query - key, own, html.escape(title))
    return figure, title, (f"layer {layer + 1}", f"head {head + 1}")


def qkv(run: Run, layer: int = 0, head: int = 0, query: int = 0, kind: str | None = None, step: str = "weights"):
    from attention_explorer.explorer.figures import walkthrough as figures
    from attention_explorer.explorer.figures.labels import position_label
    from attention_explorer.explorer.run import walkthrough

    kind = run._kind(kind)
    run._check(kind, layer, head)
    s = run.qkv(layer, head, query, kind)
    queries, keys = run.trace.labels_for(kind)  # readable: as the pages label tokens
    shown = None
    if len(keys) > walkthrough.ALL_KEYS:  # as the page opens: the strongest keys (and the query)
        keep = (s.query,) if kind != "cross" else ()
        shown = walkthrough.strongest_keys(s.weights, QKV_SHOWN, keep=keep, visible=s.mask)
    bars = functools.partial(figures.per_key_bars, mask=s.mask, shown=shown)
    made = {
        "q": lambda: figures.vector_strip(s.q, [queries[s.query]], "q"),
        "k": lambda: figures.vector_strip(s.k, keys, "K (one row per key)", shown),
        "v": lambda: figures.vector_strip(s.v, keys, "V (one row per key)", shown),
        "scores": lambda: bars(s.raw_scores, keys, "q . k_j"),
        "scaled": lambda: bars(s.scaled_scores, keys, f"q . k_j / sqrt({s.d_head})"),
        "masked": lambda: figures.masked_scores(
            s.masked_scores, s.mask, keys, "after the mask: what the softmax sees", shown
        ),
        "weights": lambda: bars(s.weights, keys, "softmax weights (the model's)"),
        "weighted": lambda: figures.vector_strip(s.weighted_values, keys, "weight_j x v_j", shown),
        "z": lambda: figures.vector_strip(s.z, [f"z (head {s.head + 1})"], "z = sum_j weight_j v_j"),
        "concat": lambda: figures.vector_strip(s.concat, ["concat"], "Concat of every head's z"),
        "output": lambda: figures.vector_strip(s.output, ["output"], "After W^O"),
    }
    if step not in made:
        raise ValueError(f"qkv step {step!r}: choose from {', '.join(QKV_STEPS)}")
    view = (_kind_name(kind), f"layer {layer + 1}", f"head {head + 1}")
    return made[step](), "", (*view, f"query {position_label(s.query, queries[s.query])}")


def logit_lens(run: Run, position: int | None = None):
    from attention_explorer.explorer.experiments import lens
    from attention_explorer.explorer.figures import experiments as figures
    from attention_explorer.explorer.lesson.model_words import TEXT_END

    if run.next_tokens is None:
        raise ValueError(f"{run.loaded.title} has no output layer: the logit lens needs one")
    rows = len(run.trace.target_tokens or run.trace.source_tokens)
    position = rows - 1 if position is None else position
    found = lens.for_trace(run.loaded, run.trace, rows=lens.window(run.loaded, rows, position))
    spelling = run.trace.spelling
    figure = figures.lens_map(
        found.reads,
        spelling.labels(found.positions[found.rows.start : found.rows.stop]),
        [spelling.labels([r[0] for r in read]) for read in found.top_tokens],
        found.top_probabilities[..., 0],
        found.rows.start,
        rows - 1 if run.loaded.is_decoder_only else None,  # the text's last row: nothing in the text follows it
        TEXT_END,
        spelling.specials,
    )
    return figure, "Logit lens", ()


def _swapped(loaded):
    """What a change swaps, as the patching page reads it: the two runs' most likely next tokens (an encoder-decoder:
    its two outputs where they first differ), or None where they agree."""
    import torch

    from attention_explorer.explorer.experiments import patching_encdec
    from attention_explorer.explorer.run import logits as final_linear

    @torch.inference_mode()
    def top(ids) -> str:
        out = loaded.model(torch.tensor([list(ids)], device=loaded.device), logits=False)
        last = final_linear.output_row(loaded.model, out.decoder.output[0], -1)  # (V,): the last row's logits alone
        return loaded.target_vocabulary.id_to_token(int(last.argmax()))

    def swapped(clean, corrupt):
        if loaded.is_encoder_decoder:
            _, right, wrong = patching_encdec.target_row(loaded, clean, corrupt)
            right, wrong = loaded.target_vocabulary.id_to_token(right), loaded.target_vocabulary.id_to_token(wrong)
        else:
            right, wrong = top(clean), top(corrupt)
        return None if right == wrong else (right, wrong)

    return swapped


def patching_inputs(run: Run, corrupted: str | None, answer: str | None, wrong: str | None) -> tuple[str, str, str]:
    """(corrupted, answer, wrong) for a patching figure: as given, else what the patching page proposes for this text
    (explorer/experiments/corruptions.py: a name swap, a changed word after a repeated one, a changed word) and the
    two runs' most likely next tokens; a ValueError that says what to pass where nothing is proposed."""
    from attention_explorer.explorer.experiments import corruptions

    if not run.loaded.family.next_token_head:
        raise ValueError(f"{run.loaded.title} has no output layer: patching compares next-token logits")
    swapped = _swapped(run.loaded)
    if corrupted is None:
        found = corruptions.proposals(run.loaded, run.text, run.max_tokens, swapped)
        if not found:
            raise ValueError(
                "no corruption is proposed for this text: pass corrupted= (this text with one word changed, as many "
                "tokens), answer= and wrong= (the two answers it should swap, one token each)"
            )
        proposal = found[0]
        return proposal.text, answer or proposal.answer, wrong or proposal.wrong
    if answer is None or wrong is None:
        encode = run.loaded.tokenizer.encode
        tops = swapped(encode(run.text, run.max_tokens).ids, encode(corrupted, run.max_tokens).ids)
        if tops is None:
            raise ValueError("the two texts' most likely next tokens agree: pass answer= and wrong= (one token each)")
        answer, wrong = answer or tops[0], wrong or tops[1]
    return corrupted, answer, wrong


def patching(
    run: Run, corrupted: str | None = None, answer: str | None = None, wrong: str | None = None, show: str = "heads"
):
    from attention_explorer.explorer.experiments import patching
    from attention_explorer.explorer.figures import experiments as experiment_figures
    from attention_explorer.explorer.figures import patching as figures

    corrupted, answer, wrong = patching_inputs(run, corrupted, answer, wrong)
    found = run.patch(corrupted, answer, wrong)
    encoder = run.loaded.is_encoder_decoder
    if show == "heads":
        heads = found["heads"]
        grids = {k: np.array(v) for k, v in heads.items()} if isinstance(heads, dict) else {"decoder_self": heads}
        grids = {k: np.asarray(v, dtype=float) for k, v in grids.items()}
        title = "Copy one head's output"
        return experiment_figures.head_grids(grids, figures.SHARE, title, number=".2f"), title, ("patching",)
    if show != "residual":
        raise ValueError(f"patching show={show!r}: choose heads or residual")
    setup = patching.setup(run.loaded, run.text, corrupted, answer, wrong, run.max_tokens)
    # as the pages show them ('␣Mary', not 'ĠMary')
    tokens = list(run.loaded.family.spelling.labels([run.loaded.tokenizer.id_to_token(i) for i in setup.clean_ids]))
    title = "Copy the encoder's residual stream" if encoder else "Copy the residual stream"
    figure = figures.residual_grid(np.array(found["residual"]), tokens, found["changed"], title)
    return figure, title, ("patching",)


def _kind_name(kind: str) -> str:
    """'encoder self-attention': an attention kind as the app's figures name it."""
    from attention_explorer.explorer.figures.experiments import KIND_TITLES

    return KIND_TITLES[kind]
