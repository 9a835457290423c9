"""Ablation as researchers do it: mean ablation over a real sample of texts (the toy task's own inputs, or over a
hundred English texts), resample ablation (each head's output on another text, position by position) equal to a
forward patched by hand, greedy decoding included, and direct logit attribution of a logit difference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.experiments import ablate, attribution, lens, replacements, sample
from attention_explorer.explorer.run import trace
from attention_explorer.models import greedy, registry, tasks
from attention_explorer.models.ablation import Head
from attention_explorer.models.attention import HeadPatch
from tests import tolerance

REPEATED = "kilo seven zulu echo two mike kilo seven zulu echo two mike"
TRANSLATE = "the small red cat sees a big dog"


@pytest.fixture(scope="module")
def induction_model():
    return registry.load("induction")


def forward_bound(loaded, out, n_keys: int):
    """Two whole forwards of the same numbers in other products (values written from another run, a batch row against
    a forward of one): each logit within tolerance.logits_bound of `out`'s forward, of its terms' magnitudes through
    the final norm's 1/sigma (tests/tolerance.py)."""
    return tolerance.logits_bound(loaded.model, out, n_keys)[0]


@torch.inference_mode()
def log_p_bound(loaded, answer: ablate.Answer, rows: int, ablated=None) -> float:
    """A sum over `rows` rows of the right answer's log-probability, a batch row against a forward of one: each logit
    within a whole forward's chain of sums (tolerance.logits_bound: of its terms' magnitudes, through the final norm's
    1/sigma); a log-softmax moves by at most twice that, plus float32's log-sum-exp over the vocabulary."""
    out = lens.run_on(loaded, answer, ablated)
    logits = out.logits[0]
    n_keys = max(len(answer.source_ids), len(answer.decoder_input))
    dz = float(tolerance.logits_bound(loaded.model, out, n_keys).max())
    return rows * float(2 * dz + tolerance.probable(logits.shape[-1], 1.0))


def test_the_sample_is_the_task_s_inputs_or_over_a_hundred_english_texts(induction_model, translate, minilm):
    english = sample.texts(minilm)
    assert english == sample.ENGLISH and len(set(english)) == len(english) >= 100
    assert all(minilm.can_read(text) for text in english)
    assert sum(len(minilm.tokenizer.encode(t, 512).ids) for t in english) > 2000  # varied, not one-liners only
    for loaded in (induction_model, translate):
        texts = sample.texts(loaded)
        expected = [" ".join(p.source) for p in tasks.pairs(loaded.task, sample.TASK_TEXTS, sample.SEED)]
        assert list(texts) == expected and len(set(texts)) == 200 and texts == sample.texts(loaded)
        assert all(loaded.task.expected(tuple(t.split())) is not None for t in texts)
    assert sample.name(translate) == "200 inputs of the toy translate task, drawn with seed 0"


def direct_means(loaded, forced: bool) -> tuple[dict[str, np.ndarray], int]:
    """Each head's mean output over the sample, one trace per text (the decoder teacher-forced on the task's right
    answer where `forced`), and the source positions counted."""
    limit = min(loaded.max_tokens, replacements.SAMPLE_TOKENS)
    found: dict[str, list[np.ndarray]] = {}
    terms: dict[str, list[np.ndarray]] = {}
    for text in sample.texts(loaded):
        decoder_input = None
        if forced:
            target = loaded.task.expected(tuple(text.split())).target
            decoder_input = [loaded.bos_id, *(loaded.target_vocabulary.token_to_id(w) for w in target)]
        run = trace.run(loaded, text, limit, forced=decoder_input)
        for kind in run.kinds:
            attention = run.attention(kind)
            found.setdefault(kind, []).append(np.asarray(attention.heads, dtype=np.float64))  # (L, H, T, Dh)
            # each output's terms, |weights| @ |v| (the weights are not negative): what its rounding is relative to
            terms.setdefault(kind, []).append(np.asarray(attention.weights) @ np.abs(np.asarray(attention.v)))
    means = {kind: np.concatenate(heads, axis=2).mean(axis=2) for kind, heads in found.items()}
    scales = {kind: np.concatenate(each, axis=2).max(axis=(2, 3))[..., None] for kind, each in terms.items()}
    return means, sum(h.shape[2] for h in found[next(iter(found))]), scales


@pytest.mark.parametrize("key", ["induction", "translate"])
def test_head_means_are_the_mean_over_every_position_of_the_sample(request, key):
    loaded = request.getfixturevalue({"induction": "induction_model"}.get(key, key))
    found = replacements.mean(loaded)
    expected, tokens, scales = direct_means(loaded, forced=loaded.is_encoder_decoder)
    assert set(found.values) == set(expected) and found.texts == 200 and found.tokens == tokens
    for kind, means in expected.items():
        # batched forwards of the texts of one length against each text's trace: each head's output within a whole
        # forward's chain (probable, of that head's largest terms |weights| @ |v|), the mean no further; float64 sums,
        # rounded once
        limit = min(loaded.max_tokens, replacements.SAMPLE_TOKENS)
        chain = tolerance.probable(tolerance.forward_terms(loaded.model.config, limit), scales[kind])
        bound = chain + tolerance.EPS32 / 2 * np.abs(means)
        tolerance.assert_within(found.values[kind], means, bound, f"{kind} head means")
    assert found.convention == (
        f"mean ablation: each head turned off writes its mean output over all {tokens:,} token positions of 200 "
        f"inputs of the toy {key} task, drawn with seed 0 (each cut at {loaded.max_tokens} tokens)"
    )


def test_resample_from_the_clean_text_itself_changes_nothing_bit_for_bit(induction_model, translate):
    ids = induction_model.tokenizer.encode(REPEATED, 64).ids
    replaced = replacements.resample(induction_model, ids, other=(REPEATED, ids))
    heads = [Head("decoder_self", layer, h) for layer in (0, 1) for h in (0, 2)]
    off = ablate.make(induction_model, heads, "resample", replaced)
    src = torch.tensor([ids])
    assert torch.equal(induction_model.model(src, ablation=off).logits, induction_model.model(src).logits)
    # an encoder-decoder: every kind's heads from the clean text, its decoder on the right answer
    answer = ablate.answer(translate, trace.run(translate, TRANSLATE))
    replaced = replacements.resample(translate, answer.source_ids, other=(TRANSLATE, answer.source_ids))
    heads = [Head(kind, 1, h) for kind in ("encoder_self", "decoder_self", "cross") for h in range(3)]
    off = ablate.make(translate, heads, "resample", replaced)
    clean_out = lens.run_on(translate, answer)
    clean, patched = clean_out.logits, lens.run_on(translate, answer, off).logits
    # the clean text's own heads, from another run of it (other products), written back: a whole forward's chain
    n_keys = max(len(answer.source_ids), len(answer.decoder_input))
    bound = forward_bound(translate, clean_out, n_keys)
    tolerance.assert_within(patched[0], clean[0], bound, "resampled from the clean text itself")
    assert torch.equal(patched.argmax(-1), clean.argmax(-1))


def test_resample_writes_the_other_text_s_heads_as_a_hand_built_patch_would(induction_model):
    loaded = induction_model
    ids = loaded.tokenizer.encode(REPEATED, 64).ids
    text, other_ids = replacements.other_text(loaded, ids)
    lengths = [len(loaded.tokenizer.encode(t, 64).ids) for t in sample.texts(loaded)]
    assert text == sample.texts(loaded)[lengths.index(len(ids))]  # the first sample text as long as the clean one
    assert len(other_ids) == len(ids) and other_ids != ids
    replaced = ablate.replacement(loaded, "resample", ids)
    assert replaced.other == text and text in replaced.convention and "resample ablation" in replaced.convention
    heads = [Head("decoder_self", 0, 1), Head("decoder_self", 1, 0), Head("decoder_self", 1, 3)]
    with torch.inference_mode():
        ablated = loaded.model(torch.tensor([ids]), ablation=ablate.make(loaded, heads, "resample", replaced))
    found = ablated.logits
    # by hand: the other text's own run, its heads read from its trace, written over these heads by HeadPatch
    theirs = np.asarray(trace.run(loaded, text, len(ids)).decoder_self.heads)  # (L, H, T, Dh)
    patches = []
    for layer in range(2):
        off = torch.tensor([[Head("decoder_self", layer, h) in heads for h in range(4)]])  # (1, H)
        patches.append({"self_attn": HeadPatch(off, torch.from_numpy(theirs[layer]))})
    tgt = torch.tensor([ids])
    with torch.inference_mode():
        internals = loaded.model.decoder(tgt, None, loaded.model.decoder_mask(tgt), None, patches)
        expected = loaded.model.generator(internals.output)
    # the other text's heads from its trace against resample's own run of it: a whole forward's chain each
    tolerance.assert_within(found[0], expected[0], forward_bound(loaded, ablated, len(ids)), "resampled heads")
    assert not torch.allclose(found, loaded.model(tgt).logits, atol=1e-3)  # and it did change the run


def test_resample_reaches_every_step_of_greedy_decoding(translate):
    answer = ablate.answer(translate, trace.run(translate, TRANSLATE))
    replaced = ablate.replacement(translate, "resample", answer.source_ids)
    assert replaced.values["cross"].shape == (2, 4, translate.model.config.max_len, translate.model.config.d_head)
    off = ablate.make(translate, [Head("cross", 1, h) for h in range(4)], "resample", replaced)
    src = torch.tensor([answer.source_ids])
    model = translate.model
    written = greedy.greedy_decode(model, src, translate.bos_id, translate.eos_id, 12, off)
    # each step wrote the token the teacher-forced forward with the same values, position by position, ranks first
    with torch.inference_mode():
        logits = model(src, torch.tensor([[translate.bos_id, *written[:-1]]]), ablation=off).logits[0]
    assert logits.argmax(-1).tolist() == written
    assert written != greedy.greedy_decode(model, src, translate.bos_id, translate.eos_id, 12)


def test_every_head_resampled_in_one_batch_equals_each_head_alone(induction_model):
    loaded = induction_model
    answer = ablate.answer(loaded, trace.run(loaded, REPEATED))
    replaced = ablate.replacement(loaded, "resample", answer.source_ids)
    effects = ablate.effects(loaded, answer, replaced)
    assert effects.convention == replaced.convention
    counted = np.array(answer.counted)
    targets = torch.tensor(answer.targets)[:, None]
    for i, head in enumerate(effects.heads):
        logits = lens.run_on(loaded, answer, ablate.make(loaded, [head], "resample", replaced)).logits[0]
        alone = logits.double().log_softmax(-1).gather(-1, targets)[:, 0].numpy()[counted].sum()
        off = ablate.make(loaded, [head], "resample", replaced)
        bound = log_p_bound(loaded, answer, int(counted.sum()), off)  # a batch row against a forward of one
        tolerance.assert_within(effects.values[i], alone, bound, f"{head} resampled in a batch")
    outcome = ablate.outcome(loaded, trace.run(loaded, REPEATED), effects.heads[:1], "resample")
    assert outcome.convention == replaced.convention
    mean = ablate.outcome(loaded, trace.run(loaded, REPEATED), effects.heads[:1], "mean")
    assert mean.convention.startswith("mean ablation") and "200 inputs of the toy induction task" in mean.convention


@pytest.mark.parametrize("key,text", [("induction", REPEATED), ("translate", TRANSLATE), ("gpt2", "the cat sat")])
def test_a_logit_difference_splits_into_each_part_s_share_of_both_logits(request, key, text):
    loaded = request.getfixturevalue({"induction": "induction_model"}.get(key, key))
    answer = ablate.answer(loaded, trace.run(loaded, text))
    logits = lens.run_on(loaded, answer).logits[0].double()  # (T, V)
    for position in (0, len(answer.decoder_input) - 1):
        token = answer.targets[position]
        against = int(logits[position].argsort()[-2 if logits[position].argmax() == token else -1])
        found = attribution.attribute(loaded, answer, position, token, against=against)
        one, other = (attribution.attribute(loaded, answer, position, t) for t in (token, against))
        difference = float(logits[position, token] - logits[position, against])
        assert found.logit == difference  # the same forward's float32 logits, subtracted in float64: bit for bit
        assert abs(found.total - difference) <= 1e-4 * max(1.0, abs(difference))
        # float64 both (each part read through the rows' difference, against two reads subtracted): d_model terms in
        # another association, about d_model * 2^-52 of the terms, far inside 1e-9
        np.testing.assert_allclose(found.values, one.values - other.values, rtol=1e-9, atol=1e-9)
        assert found.names == one.names and found.against == loaded.target_vocabulary.id_to_token(against)
        readable = loaded.family.spelling.readable  # the sentence names tokens as the pages show them
        assert found.split(readable) == f"the logit difference {readable(found.token)} \u2212 {readable(found.against)}"
        assert one.split(readable) == f"the logit of {readable(one.token)}" and one.against is None
        if key == "gpt2":  # byte-level BPE: never the tokenizer's 'Ġ'
            assert "\u0120" not in one.split(readable) + found.split(readable)
