"""The experiments on the shipped checkpoints do what they claim: turning off the heads that carry a task (the
translate model's aligned cross-attention, the induction model's induction heads) breaks its answer while the head
ranked last barely moves it; the logit lens's last read is the model's own output; the direct logit attribution's
parts add up to the model's logit; and bad requests are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.experiments import ablate, attribution, lens
from attention_explorer.explorer.figures.experiments import layer_bars, part_bars, rank_lines
from attention_explorer.explorer.run import trace
from attention_explorer.models import induction, registry
from attention_explorer.models.ablation import AblationError, Head
from tests import tolerance

TRANSLATE = "the small red cat sees a big dog"
REPEATED = "kilo seven zulu echo two mike kilo seven zulu echo two mike"
GPT2_TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def induction_model():
    return registry.load("induction")


@pytest.fixture(scope="module")
def reverse():
    return registry.load("reverse")


def right_answer_probability(outcome: ablate.Outcome) -> tuple[float, float]:
    """The right answer's mean probability over the counted rows, (clean, with the heads off)."""
    counted = np.array(outcome.answer.counted)
    assert outcome.before is not None and outcome.after is not None
    return tuple(float(np.exp(-s.nll)[counted].mean()) for s in (outcome.before, outcome.after))


@torch.inference_mode()
def log_p_bound(loaded, answer: ablate.Answer, rows: int, ablated=None) -> float:
    """A sum over `rows` rows of the right answer's log-probability from forwards in other products (a batch row of
    many against a forward of one, a logit read in blocks of rows): each logit within a whole forward's chain of sums
    (tolerance.logits_bound: of its terms' magnitudes, through the final norm's 1/sigma); a log-softmax moves by at
    most twice that, plus float32's log-sum-exp over the vocabulary (tests/tolerance.py)."""
    out = lens.run_on(loaded, answer, ablated)
    logits = out.logits[0]
    n_keys = max(len(answer.source_ids), len(answer.decoder_input))
    dz = float(tolerance.logits_bound(loaded.model, out, n_keys).max())
    return rows * float(2 * dz + tolerance.probable(logits.shape[-1], 1.0))


def aligned_cross_heads(loaded, run: trace.Trace) -> list[Head]:
    """The cross-attention heads whose largest weight, at nearly every row, is on the source word the task's
    alignment says that row writes."""
    pair = loaded.task.expected(tuple(run.text.split()))
    alignment = np.array(pair.alignment)  # row i writes target word i, the rendering of source word alignment[i]
    weights = run.cross.weights[:, :, : len(alignment)]  # (L, H, T, S): the rows that write a word
    follows = (weights.argmax(-1) == alignment).mean(-1)  # (L, H)
    return [Head("cross", int(layer), int(head)) for layer, head in zip(*np.nonzero(follows >= 0.9), strict=True)]


def test_turning_off_the_aligned_cross_attention_breaks_the_translation(translate):
    run = trace.run(translate, TRANSLATE)
    heads = aligned_cross_heads(translate, run)
    # the alignment lives in the last decoder layer (the first looks one word off), every head of it
    assert heads == [Head("cross", 1, h) for h in range(4)]
    before, after = right_answer_probability(ablate.outcome(translate, run, heads, "zero"))
    assert before > 0.9 and after < 0.3
    effects = ablate.effects(translate, ablate.answer(translate, run))
    least, change = effects.ranked()[-1]
    assert least not in heads and change == effects.change.max()
    before_least, after_least = right_answer_probability(ablate.outcome(translate, run, [least], "zero"))
    assert before_least == before and abs(after_least - before) < 0.05
    outcome = ablate.outcome(translate, run, heads, "zero")
    assert outcome.written != tuple(run.output_tokens)  # greedy decoding with them off writes something else
    # no attention reads what the last cross-attention writes, so no map moves; turning off layer 1's moves layer 2's
    assert all(np.all(moved == 0) for moved in outcome.moved.values())
    lower = ablate.outcome(translate, run, [Head("cross", 0, h) for h in range(4)], "zero").moved
    assert (
        np.all(lower["encoder_self"] == 0) and np.all(lower["cross"][0] == 0) and np.all(lower["decoder_self"][0] == 0)
    )
    assert lower["cross"][1].max() > 0.01 and lower["decoder_self"][1].max() > 0.01


def test_turning_off_the_induction_heads_breaks_the_repeat(induction_model):
    run = trace.run(induction_model, REPEATED)
    ids = induction_model.tokenizer.encode(REPEATED, induction_model.max_tokens).ids
    scores = induction.induction_scores(np.asarray(run.decoder_self.weights), ids)  # (L, H)
    heads = [Head("decoder_self", 1, int(h)) for h in np.nonzero(scores[1] > 0.5)[0]]
    assert len(heads) >= 2
    answer = ablate.answer(induction_model, run)
    assert sum(answer.counted) == 5  # the repeat's words after its first: the earlier copy gives each
    before, after = right_answer_probability(ablate.outcome(induction_model, run, heads, "zero"))
    assert before > 0.9 and after < 0.3
    effects = ablate.effects(induction_model, answer)
    least, _ = effects.ranked()[-1]
    assert least not in heads
    _, after_least = right_answer_probability(ablate.outcome(induction_model, run, [least], "zero"))
    assert abs(after_least - before) < 0.05
    # the induction heads' effects are among the largest the batched run finds
    ranked = [head for head, _ in effects.ranked()]
    assert {ranked.index(h) for h in heads if scores[1, h.head] > 0.9} <= set(range(4))


def test_mean_ablation_of_the_induction_heads_also_breaks_the_repeat(induction_model):
    means = ablate.replacement(induction_model, "mean")
    assert means.values["decoder_self"].shape == (2, 4, induction_model.model.config.d_head)
    run = trace.run(induction_model, REPEATED)
    heads = [Head("decoder_self", 1, h) for h in range(4)]
    before, after = right_answer_probability(ablate.outcome(induction_model, run, heads, "mean", means))
    assert before > 0.9 and after < 0.5


def test_effects_batched_equal_each_head_turned_off_alone(reverse):
    run = trace.run(reverse, reverse.example)
    answer = ablate.answer(reverse, run)
    effects = ablate.effects(reverse, answer)
    assert len(effects.heads) == 24 and effects.measure == "log_probability"
    for head in (effects.heads[0], effects.heads[13], effects.heads[-1]):
        outcome = ablate.outcome(reverse, run, [head], "zero")
        assert outcome.after is not None
        row = effects.heads.index(head)
        bound = log_p_bound(reverse, answer, len(answer.targets), ablate.make(reverse, [head], "zero"))
        tolerance.assert_within(effects.values[row], -outcome.after.nll.sum(), bound, f"{head} in a batch")
    grid = effects.grid("cross", (2, 4))
    assert grid[1, 2] == effects.change[effects.heads.index(Head("cross", 1, 2))]


def test_effects_stopped_half_way_go_on_from_the_kept_chunks(induction_model, monkeypatch):
    """Each chunk of batch rows is handed to the caller to keep: a measurement stopped after some chunks computes only
    the rest, and gives the numbers of one made at once."""
    monkeypatch.setattr(ablate, "BATCH_BYTES", 1)  # one batch row a chunk
    answer = ablate.answer(induction_model, trace.run(induction_model, REPEATED))
    whole = ablate.effects(induction_model, answer)
    kept: dict = {}
    computed = []

    def keeping(part, rows, compute):
        if part not in kept:
            computed.append(part)
            kept[part] = compute()
        if part == (3, 4) and len(computed) == 5:  # the clean run and rows 0-3: then a click stops the page
            raise KeyboardInterrupt
        return kept[part]

    with pytest.raises(KeyboardInterrupt):
        ablate.effects(induction_model, answer, kept=keeping)
    assert computed == [None, (0, 1), (1, 2), (2, 3), (3, 4)]
    computed.clear()
    again = ablate.effects(induction_model, answer, kept=keeping)
    assert computed == [(4, 5), (5, 6), (6, 7), (7, 8)]
    np.testing.assert_array_equal(again.values, whole.values)
    assert again.clean == whole.clean and ablate.parts(induction_model, answer, 8) == [(i, i + 1) for i in range(8)]


@pytest.mark.parametrize("key", ["translate", "reverse", "induction", "paper-random", "gpt2", "llama", "smollm2"])
def test_the_lens_last_read_is_the_models_own_output(request, key):
    fixture = {"induction": "induction_model", "paper-random": "paper_random"}.get(key, key)
    loaded = request.getfixturevalue(fixture)
    texts = {"paper-random": "Thinking Machines", "induction": REPEATED, "gpt2": GPT2_TEXT, "llama": GPT2_TEXT}
    text = texts.get(key, loaded.example)
    run = trace.run(loaded, text)
    answer = ablate.answer(loaded, run)
    read = lens.lens(loaded, answer)
    assert_the_output_read_is(read, loaded, lens.run_on(loaded, answer), answer)
    if loaded.is_decoder_only:  # read from the trace's kept states, no forward: the same numbers
        assert_same_reads(lens.lens(loaded, answer, run=run), read, loaded, answer)
    assert len(read.layer_ends) == loaded.model.config.n_decoder_layers
    assert read.final_norm == loaded.model.config.norm_first
    # on the trace's own decoder input, the last layer's tokens are the trace's next tokens
    layers = lens.for_trace(loaded, run).by_layer()
    assert len(layers) == loaded.model.config.n_decoder_layers
    assert layers[-1] == [row[0] for row in run.top_tokens]
    # and with heads off, the last read is still the (ablated) model's own output
    kind = "decoder_self" if loaded.is_decoder_only else "cross"
    off = ablate.make(loaded, [Head(kind, 0, 1)], "zero")
    ablated = lens.lens(loaded, answer, off)
    assert_the_output_read_is(ablated, loaded, lens.run_on(loaded, answer, off), answer)
    assert not np.array_equal(ablated.top_probabilities[-1], read.top_probabilities[-1])


def assert_the_output_read_is(read: lens.Lens, loaded, out, answer: ablate.Answer) -> None:
    """The lens's last read of every row is the model's own output (T, V): its top tokens and probabilities, and the
    right answer's probability and rank, computed from those logits. The lens reads the same final state through the
    output matrix in blocks of rows, a product of another shape than the forward's: each logit within that product's
    own rounding, K = d_model terms of |state| |W| (bit for bit where the BLAS adds both shapes in one order)."""
    assert read.rows == range(len(answer.decoder_input))
    logits = out.logits[0]
    final = out.decoder.output[0]  # after the final norm: what the output matrix reads
    dz = tolerance.product_bound(final, loaded.model.generator.weight.T).max(-1, keepdims=True)  # (T, 1)
    p = logits.softmax(-1)
    top = p.topk(read.top_probabilities.shape[-1])
    bound = tolerance.probabilities_bound(p, dz)
    expected = top.values.numpy()
    top_bound = np.take_along_axis(bound, top.indices.numpy(), -1)
    tolerance.assert_within(read.top_probabilities[-1], expected, top_bound, "the last read's top probabilities")
    targets = torch.tensor(answer.targets)[:, None]
    expected = p.gather(-1, targets)[:, 0].numpy()
    answer_bound = np.take_along_axis(bound, targets.numpy(), -1)[:, 0]
    tolerance.assert_within(read.target_probability[-1], expected, answer_bound, "the answer's probability")
    target = logits.gather(-1, targets)
    rank = (logits > target).sum(-1).numpy() + 1
    ties = (torch.from_numpy(2 * dz) >= (logits - target).abs()).sum(-1).numpy() - 1  # logits within rounding of it
    assert (np.abs(read.target_rank[-1] - rank) <= ties).all()


def assert_same_reads(found: lens.Lens, expected: lens.Lens, loaded, answer: ablate.Answer) -> None:
    """Two lenses of the same rows, one read from the trace's kept states and one from a forward, hold the same
    numbers and tokens: to a whole forward's rounding (the two runs' products may add in other orders), each row's
    logits within tolerance.logits_bound (of their terms' magnitudes, through the final norm's 1/sigma) of the model's
    own forward, its largest over the vocabulary standing for the row; bit for bit where the BLAS adds them in one
    order."""
    assert (found.reads, found.rows) == (expected.reads, expected.rows)
    out = lens.run_on(loaded, answer)
    logits = out.logits[0]
    n_keys = max(len(answer.source_ids), len(answer.decoder_input))
    if loaded.model.config.norm_first and loaded.model.decoder.final_norm is not None:
        dz = tolerance.lens_bounds(loaded.model, out, n_keys)[:, 0, expected.rows, None]  # (reads, rows, 1)
    else:  # each read straight through W: a post-LN stack's states, each of its own size
        dz = tolerance.logits_bound(loaded.model, out, n_keys)[0].max(-1)[expected.rows, None]
    for field, row_dz in (("top_probabilities", dz), ("target_probability", dz[..., 0])):
        want = getattr(expected, field)
        bound = 2 * want * row_dz + tolerance.probable(logits.shape[-1], want)
        tolerance.assert_within(getattr(found, field), want, bound, field)
    top = expected.top_probabilities  # (reads, rows, k)
    # the top pair swaps only when their logits are within 2 dz: log(p0 / p1) is that gap (the softmax's own rounding
    # moves each p by a few eps, far under dz)
    clear = np.log(top[..., 0] / top[..., 1]) > 2 * dz[..., 0] + tolerance.reordered(logits.shape[-1] + 3, 1.0)
    for r, row in zip(*np.nonzero(clear), strict=True):
        assert found.top_tokens[r][row][0] == expected.top_tokens[r][row][0]
    assert clear.mean() > 0.5
    assert np.abs(found.target_rank - expected.target_rank).max() <= 1  # a tie within rounding at most


def attribution_cases(loaded, answer: ablate.Answer) -> list[tuple[int, int]]:
    """(position, token id): the first, a middle and the last row, each for its right token, the model's top token
    and an arbitrary one."""
    logits = lens.run_on(loaded, answer).logits[0]  # (T, V)
    rows = len(answer.decoder_input)
    cases = []
    for position in sorted({0, rows // 2, rows - 1}):
        for token in (answer.targets[position], int(logits[position].argmax()), 7):
            cases.append((position, int(token)))
    return cases


@pytest.mark.parametrize(
    "key,text",
    [("induction", REPEATED), ("gpt2", GPT2_TEXT), ("llama", GPT2_TEXT), ("smollm2", registry.NEXT_WORD_EXAMPLES[1])],
)
def test_attribution_of_a_pre_ln_model_splits_the_logit_exactly(request, key, text):
    loaded = request.getfixturevalue({"induction": "induction_model"}.get(key, key))
    answer = ablate.answer(loaded, trace.run(loaded, text))
    logits = lens.run_on(loaded, answer).logits[0]
    n_layers, n_heads = loaded.model.config.n_decoder_layers, loaded.model.config.n_heads
    for position, token in attribution_cases(loaded, answer):
        found = attribution.attribute(loaded, answer, position, token)
        assert found.logit == float(logits[position, token])
        assert abs(found.total - found.logit) < 1e-4
        assert found.first_layer == 0 and found.exact_all_layers
        assert found.heads["decoder_self"].shape == (n_layers, n_heads)
        assert not np.isnan(found.heads["decoder_self"]).any()
        # embedding, per layer every head (and W_O's bias where the model has one) and the FFN, then the constant
        bias = loaded.model.config.out_bias
        assert len(found.names) == len(found.values) == 1 + n_layers * (n_heads + 1 + bias) + 1


@pytest.mark.parametrize("key,text", [("gpt2", GPT2_TEXT), ("llama", GPT2_TEXT), ("smollm2", REPEATED)])
def test_attribution_from_a_runs_kept_states_runs_one_row_and_equals_the_full_forwards(request, key, text):
    """A decoder-only model's logit split from the state a long run kept entering each layer, each layer run again for
    the one row: the same parts as the whole forward's, within float32 rounding; the logit is that row's."""
    loaded = request.getfixturevalue(key)
    run = trace.run(loaded, text, keep_all=False)
    answer = ablate.answer(loaded, run)
    states = run.decoder_states
    entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    out = lens.run_on(loaded, answer)
    logits = out.logits[0]
    # the kept states run again a layer at a time for one row, against the whole forward: the logit within
    # tolerance.logits_bound (each stream element's terms, through the final norm's 1/sigma, summed through W's row);
    # each part is one write of the same stream read through the same norm and row, its terms a part of the logit's,
    # so within the same bound
    logit_bounds = tolerance.logits_bound(loaded.model, out, len(answer.decoder_input))[0]  # (T, V)
    for position, token in attribution_cases(loaded, answer):
        found = attribution.attribute(loaded, answer, position, token, entering)
        whole = attribution.attribute(loaded, answer, position, token)
        assert found.names == whole.names and found.position == position and found.token == whole.token
        bound = logit_bounds[position, token]
        tolerance.assert_within(found.values, whole.values, bound, "each part from the kept states")
        tolerance.assert_within(found.logit, float(logits[position, token]), bound, "the logit from the kept states")
        assert abs(found.total - found.logit) < 1e-4


def test_attribution_of_the_post_ln_translate_model_splits_the_last_layer(translate):
    answer = ablate.answer(translate, trace.run(translate, TRANSLATE))
    logits = lens.run_on(translate, answer).logits[0]
    for position, token in attribution_cases(translate, answer):
        found = attribution.attribute(translate, answer, position, token)
        assert abs(found.total - found.logit) < 1e-4 and found.logit == float(logits[position, token])
        assert found.first_layer == 1 and not found.exact_all_layers
        assert found.names[0] == "layers below (not separable)"
        for kind in ("decoder_self", "cross"):
            grid = found.heads[kind]
            assert np.isnan(grid[0]).all() and not np.isnan(grid[1]).any()


def test_minilm_effects_are_cosines_of_the_sentence_embedding(minilm):
    run = trace.run(minilm, "Thinking Machines")
    answer = ablate.answer(minilm, run)
    assert answer.measured_by_embedding
    effects = ablate.effects(minilm, answer)
    assert effects.measure == "cosine" and effects.clean == 1.0 and len(effects.heads) == 6 * 12
    assert np.all(effects.values >= -1) and np.all(effects.values <= 1 + 1e-9)
    assert effects.values.min() < 0.999  # some head matters to the embedding
    outcome = ablate.outcome(minilm, run, [effects.ranked()[0][0]], "zero")
    assert outcome.before is None
    # the ablated sentence embedding, a batch row against a forward of one: each element within the encoder's chain
    # of sums of its terms, through the last norm's 1/sigma (tolerance.output_bound), the mean of the rows' no further;
    # a cosine moves by at most |change| / |embedding| (first order)
    head = effects.ranked()[0][0]
    with torch.inference_mode():
        off = ablate.make(minilm, [head], "zero")
        encoder = minilm.model(torch.tensor([answer.source_ids]), ablation=off).encoder
    states = encoder.output[0].numpy()
    config = minilm.model.config
    terms = config.n_encoder_layers * tolerance.layer_terms(config, len(states))
    change = np.linalg.norm(tolerance.output_bound(minilm.model.encoder, encoder, terms)[0].mean(0))
    bound = change / np.linalg.norm(states.mean(0))
    tolerance.assert_within(outcome.cosine, effects.values.min(), bound, "the cosine with the head off")


def test_bad_requests_are_refused(minilm, translate):
    run = trace.run(translate, TRANSLATE)
    with pytest.raises(AblationError, match="pick at least one head"):
        ablate.outcome(translate, run, [], "zero")
    with pytest.raises(AblationError, match="unknown ablation 'half'"):
        ablate.make(translate, [Head("cross", 0, 0)], "half")
    answer = ablate.answer(minilm, trace.run(minilm, "Thinking Machines"))
    with pytest.raises(ValueError, match="no output matrix"):
        lens.lens(minilm, answer)
    with pytest.raises(ValueError, match="no output matrix"):
        attribution.attribute(minilm, answer, 0, 0)
    translated = ablate.answer(translate, run)
    with pytest.raises(ValueError, match="outside the 9 decoder rows"):
        attribution.attribute(translate, translated, 9, 0)


@torch.inference_mode()
def test_the_lens_first_read_is_the_embedding_through_the_output_layer(induction_model):
    answer = ablate.answer(induction_model, trace.run(induction_model, REPEATED))
    read = lens.lens(induction_model, answer)
    assert read.reads[0] == "embedding" and read.reads[read.layer_ends[-1]].startswith("layer 2")
    out = lens.run_on(induction_model, answer)
    model = induction_model.model
    first = model.generator(model.decoder.final_norm(out.decoder.embeddings))[0].softmax(-1)
    np.testing.assert_array_equal(read.top_probabilities[0, :, 0], first.max(-1).values.numpy())


def test_part_bars_leave_room_for_every_number():
    values = np.array([4.2, 1.5, -0.06, 0.01, -2.0])
    figure = part_bars(["a", "b", "c", "d", "e"], values)
    low, high = figure.layout.xaxis.range
    shown = np.array(figure.data[0].x)
    assert sorted(shown) == sorted(values)
    assert low < shown.min() - 0.1 * np.ptp(values) and high > shown.max() + 0.1 * np.ptp(values)
    assert list(figure.data[0].text) == [f"{v:+.2f}" for v in shown]


def test_rank_axis_names_whole_ranks_from_1_to_the_worst():
    rank = np.array([37, 35, 13, 1, 1])
    figure = rank_lines(["a", "b", "c", "d", "e"], rank, rank / 100.0, "x")
    axis = figure.layout.yaxis
    assert list(axis.tickvals) == [1, 2, 5, 10, 20, 37] and list(axis.ticktext) == ["1", "2", "5", "10", "20", "37"]
    low, high = axis.range  # reversed: the worst rank at the bottom, rank 1 at the top
    assert 10**high < 1 and 10**low > 37
    np.testing.assert_array_equal(figure.data[0].y, rank)


def test_a_grouped_heads_projections_are_its_shared_key_value_heads(llama):
    """forward.head_projections under grouped-query attention: W^Q is the head's own, W^K and W^V its group's shared
    key/value head's, so the layer's normalised input times them gives the keys and values the head read."""
    from attention_explorer.explorer.run import forward

    run = trace.run(llama, GPT2_TEXT)
    attention = run.decoder_self
    layer = llama.model.decoder.layers[1]
    x = torch.from_numpy(run.decoder_states["after_ffn"][0].copy())  # layer 2's input, (T, D)
    with torch.inference_mode():
        h = layer.norm1(x).numpy()  # pre-norm: what the attention reads
    for head in range(attention.n_heads):
        w = forward.head_projections(llama, "decoder_self", 1, head)
        # numpy's product against torch's: d_model terms and the bias each, in their own orders
        for name, found, bias, expected in (
            ("q", w.w_q, w.b_q, attention.q_unrotated[1, head]),
            ("k", w.w_k, w.b_k, attention.k_unrotated[1, head]),
            ("v", w.w_v, w.b_v, attention.v[1, head]),
        ):
            terms = np.abs(h) @ np.abs(found) + np.abs(bias)
            bound = tolerance.reordered(h.shape[-1] + 1, terms)
            tolerance.assert_within(h @ found + bias, expected, bound, f"head {head}'s {name}")
        assert attention.sharing(head) == tuple(range(head // 3 * 3, head // 3 * 3 + 3))  # 6 heads, 2 kv heads


def test_layer_bars_keep_the_order_given_most_hurt_on_top_and_escape_names():
    names = ["layer 2 (cross-attention)", "<b>layer</b> 1", "layer 2 (cross-attention)"]
    changes = np.array([-45.2, -10.7, 0.3])
    figure = layer_bars(names, changes, "change in log p", "Each layer off")
    (bars,) = figure.data
    np.testing.assert_array_equal(bars.x, changes)
    assert list(bars.y) == [0, 1, 2]  # numeric rows: the two same names stay two bars
    ticks = figure.layout.yaxis.ticktext
    assert list(ticks) == ["layer 2 (cross-attention)", "&lt;b&gt;layer&lt;/b&gt; 1", names[2]]
    assert figure.layout.yaxis.autorange == "reversed"
    assert list(bars.marker.color) == ["#b2182b", "#b2182b", "#2166ac"]


def test_each_layers_effect_equals_that_layer_turned_off_alone():
    loaded = registry.load("induction")
    run = trace.run(loaded, loaded.example, loaded.max_tokens)
    answer = ablate.answer(loaded, run)
    found = ablate.layer_effects(loaded, answer)
    shapes = ablate.model_shapes(loaded)
    assert found.layers == (("decoder_self", 0), ("decoder_self", 1)) and found.measure == "log_probability"
    for (kind, layer), change in zip(found.layers, found.change, strict=True):
        outcome = ablate.outcome(loaded, run, [Head(kind, layer, h) for h in range(shapes[kind][1])], "zero")
        counted = np.array(outcome.answer.counted)  # its rows: the text end too, not counted
        alone = np.log(outcome.after.right_probabilities()[counted]).sum()
        clean = np.log(outcome.before.right_probabilities()[counted]).sum()
        # batched rows against forwards of one, the clean run's and the ablated run's each (log_p_bound)
        ablated = ablate.make(loaded, [Head(kind, layer, h) for h in range(shapes[kind][1])], "zero")
        rows = int(counted.sum())
        bound = log_p_bound(loaded, answer, rows, ablated) + log_p_bound(loaded, answer, rows)
        tolerance.assert_within(change, alone - clean, bound, f"layer {kind} {layer} in a batch")
    assert found.ranked()[0][0] == ("decoder_self", 0)  # the previous-token layer: the induction heads need it


def test_a_deep_stacks_rank_chart_keeps_its_labels_apart():
    """SmolLM2: 61 reads and a 49,152-token vocabulary. Every read is a point holding its name; the axis names at most
    MOST_READS of them, and past rank 1,000 the rank axis marks only powers of ten."""
    from attention_explorer.explorer.figures.experiments import MOST_READS

    reads = ["embedding", *(f"layer {i // 2 + 1}: after {'feed-forward' if i % 2 else 'attention'}" for i in range(60))]
    rank = np.arange(1, 62) * 700
    figure = rank_lines(reads, rank, 1.0 / rank, "x")
    assert list(figure.data[0].customdata) == reads and list(figure.data[0].y) == list(rank)
    assert 0 < len(figure.layout.xaxis.tickvals) <= MOST_READS
    assert [reads[i] for i in figure.layout.xaxis.tickvals] == list(figure.layout.xaxis.ticktext)
    assert list(figure.layout.yaxis.tickvals) == [1, 10, 100, 1000, 10000, 42700]
