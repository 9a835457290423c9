"""Activation patching (explorer.experiments.patching) is what it says: each batched, windowed patched run equals a
plain forward of the corrupted text with that one activation overwritten by the clean run's; the shares that must be
exact are; bad texts and answers are refused with a message that says what to change."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.experiments import corruptions, patching
from attention_explorer.explorer.experiments.patching import Patch, PatchingError
from attention_explorer.models import ablation
from attention_explorer.models.ablation import Ablation
from attention_explorer.models.transformer import padding_mask
from tests import tolerance

CLEAN = "alpha bravo seven kilo alpha bravo seven"  # the induction model writes kilo next
CORRUPT = "alpha bravo seven lima alpha bravo seven"  # ... and here lima: the word after the earlier copy changed
NAMES = "When Mary and John went to the store, John gave a drink to"
SWAPPED = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def runs(induction):
    found = patching.setup(induction, CLEAN, CORRUPT, "kilo", "lima", 64)
    return found, patching.read(induction, found.clean_ids, found), patching.read(induction, found.corrupt_ids, found)


def _difference(loaded, logits, setup) -> float:
    return float(logits[0, -1, setup.answer] - logits[0, -1, setup.wrong])


@torch.inference_mode()
def _difference_bound(loaded, setup) -> float:
    """A logit difference from a forward in other products (batched patches, a layer at a time, a window) against a
    plain one: two logits, each within a whole forward's chain of sums (probable) of the logits' size."""
    args = [torch.tensor([setup.clean_ids])]
    if loaded.model.encoder is not None:
        args.append(torch.tensor([setup.decoder_input]))
    scale = float(loaded.model(*args).logits[0, -1].abs().max())
    n_keys = len(setup.clean_ids)
    return 2 * float(tolerance.probable(tolerance.forward_terms(loaded.model.config, n_keys), scale))


def _share_bound(loaded, setup, clean, corrupt) -> float:
    """A share restored, (patched - corrupted) / (clean - corrupted): each difference within _difference_bound."""
    return 3 * _difference_bound(loaded, setup) / abs(clean.difference - corrupt.difference)


@torch.inference_mode()
def _by_hand(loaded, setup, clean, patch: Patch) -> float:
    """The corrupted text's plain forward, every layer whole, with one activation overwritten by the clean run's:
    the state entering a layer at one position, or one head's output through a one-row ablation."""
    model = loaded.model
    config = model.config
    if patch.head is not None:
        tokens = len(setup.clean_ids)
        off = torch.zeros(1, config.n_decoder_layers, config.n_heads, tokens, dtype=torch.bool)
        off[0, patch.layer, patch.head, slice(None) if patch.position is None else patch.position] = True
        ablation = Ablation({"decoder_self": off}, {"decoder_self": clean.heads["decoder_self"]}, 1)
        return _difference(loaded, model(torch.tensor([setup.corrupt_ids]), ablation=ablation).logits, setup)
    x = model.decoder.embeddings(torch.tensor([setup.corrupt_ids])).clone()
    mask = model.decoder_mask(torch.tensor([setup.corrupt_ids]))
    for index, layer in enumerate([*model.decoder.layers, None]):
        if index == patch.layer:
            x[0, patch.position] = clean.states[index, patch.position]
        if layer is not None:
            x = layer(x, None, mask, None).after_ffn
    if model.decoder.final_norm is not None:
        x = model.decoder.final_norm(x)
    return _difference(loaded, model.generator(x), setup)


def test_the_runs_read_are_the_models_own(induction, runs):
    setup, clean, corrupt = runs
    with torch.inference_mode():
        out = induction.model(torch.tensor([setup.clean_ids]))
    bound = _difference_bound(induction, setup)
    tolerance.assert_within(clean.difference, _difference(induction, out.logits, setup), bound, "clean difference")
    # layer by layer, each let go: the whole forward's states and heads, bit for bit
    assert torch.equal(
        clean.states, torch.stack([out.decoder.embeddings[0], *(x.after_ffn[0] for x in out.decoder.layers)])
    )
    assert torch.equal(clean.heads["decoder_self"], torch.stack([x.self_attn.heads[0] for x in out.decoder.layers]))
    assert clean.difference > 0 > corrupt.difference  # the model copies the earlier word after "seven" in each
    assert setup.changed == (4,)  # <bos> first: kilo / lima is token 4


def test_the_embedding_at_the_changed_position_restores_all_and_elsewhere_nothing(induction, runs):
    setup, clean, corrupt = runs
    tokens = len(setup.clean_ids)
    shares = patching.measure(induction, setup, clean, corrupt, [Patch(0, p) for p in range(tokens)])
    bound = _share_bound(induction, setup, clean, corrupt)
    tolerance.assert_within(shares[4], 1.0, bound, "the changed embedding restores all")
    assert np.all(np.delete(shares, 4) == 0.0)
    n_layers = induction.model.config.n_decoder_layers
    last = patching.measure(induction, setup, clean, corrupt, [Patch(n_layers, tokens - 1)])
    tolerance.assert_within(last[0], 1.0, bound, "the last state restores all")


def test_every_batched_patch_equals_a_plain_forward_with_that_activation_copied(induction, runs):
    setup, clean, corrupt = runs
    config = induction.model.config
    patches = [
        *patching.residual_patches(induction, setup),
        *patching.head_patches(induction),
        *patching.position_patches(setup, 1, 2),
    ]
    shares = patching.measure(induction, setup, clean, corrupt, patches)
    gap = clean.difference - corrupt.difference
    want = np.array([(_by_hand(induction, setup, clean, p) - corrupt.difference) / gap for p in patches])
    bound = _share_bound(induction, setup, clean, corrupt)
    tolerance.assert_within(shares, want, bound, "batched shares against plain forwards")
    grid = shares[: (config.n_decoder_layers + 1) * len(setup.clean_ids)]
    tolerance.assert_within(grid.reshape(config.n_decoder_layers + 1, -1)[-1, -1], 1.0, bound, "the last state")


def test_chunks_give_the_same_shares_and_are_told(induction, runs, monkeypatch):
    setup, clean, corrupt = runs
    patches = patching.head_patches(induction)
    whole = patching.measure(induction, setup, clean, corrupt, patches)
    monkeypatch.setattr(patching, "BATCH_BYTES", 1)  # one row a chunk
    told = []

    def kept(part, rows, compute):
        told.append((part, rows))
        return compute()

    found = patching.measure(induction, setup, clean, corrupt, patches, kept)  # one row a chunk: other products
    tolerance.assert_within(found, whole, _share_bound(induction, setup, clean, corrupt), "chunks against the whole")
    assert [part for part, _ in told] == [(i, i + 1) for i in range(len(patches))]


def test_the_name_swap_on_smollm2(smollm2):
    setup = patching.setup(smollm2, NAMES, SWAPPED, "Mary", "John", 64)
    assert smollm2.tokenizer.id_to_token(setup.answer) == "ĠMary"
    clean, corrupt = (patching.read(smollm2, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    assert clean.difference > 0 > corrupt.difference
    patches = [Patch(0, setup.start), Patch(30, len(setup.clean_ids) - 1), Patch(23, None, 3)]
    shares = patching.measure(smollm2, setup, clean, corrupt, patches)
    bound = _share_bound(smollm2, setup, clean, corrupt)
    tolerance.assert_within(shares[:2], np.ones(2), bound, "the first change and the last state restore all")
    gap = clean.difference - corrupt.difference
    by_hand = (_by_hand(smollm2, setup, clean, patches[2]) - corrupt.difference) / gap
    tolerance.assert_within(shares[2], by_hand, bound, "a head over every position")


@pytest.mark.parametrize(
    ("corrupt", "answer", "wrong", "message"),
    [
        ("alpha bravo seven kilo alpha bravo", "kilo", "lima", "8 tokens and the corrupted one 7"),
        (CLEAN, "kilo", "lima", "same tokens"),
        (CORRUPT, "kilo", "kilo", "same token"),
        (CORRUPT, "", "lima", "write the right answer"),
        ("   ", "kilo", "lima", "write a corrupted text"),
    ],
)
def test_bad_inputs_are_refused_with_what_to_change(induction, corrupt, answer, wrong, message):
    with pytest.raises(PatchingError, match=message):
        patching.setup(induction, CLEAN, corrupt, answer, wrong, 64)


def test_answers_must_be_one_token(smollm2, minilm):
    with pytest.raises(PatchingError, match=r"is 2 tokens .* write one token"):
        patching.setup(smollm2, NAMES, SWAPPED, "Mary Ann", "John", 64)
    assert patching.setup(smollm2, NAMES, SWAPPED, " Mary", "ĠJohn", 64).wrong == smollm2.tokenizer.token_to_id("ĠJohn")
    # as the pages show a token ('␣Mary', the space it carries marked): the same id as typed with its space
    shown = patching.setup(smollm2, NAMES, SWAPPED, "\u2423Mary", "\u2423John", 64)
    assert (shown.answer, shown.wrong) == tuple(smollm2.tokenizer.token_to_id(t) for t in ("ĠMary", "ĠJohn"))
    with pytest.raises(PatchingError, match="no output layer"):
        patching.setup(minilm, "a cat", "a dog", "cat", "dog", 64)


def _top(loaded):
    """The two runs' most likely next tokens, where they differ."""

    @torch.inference_mode()
    def top(ids):
        logits = loaded.model(torch.tensor([list(ids)])).logits
        return loaded.target_vocabulary.id_to_token(int(logits[0, -1].argmax()))

    return lambda clean, corrupt: None if top(clean) == top(corrupt) else (top(clean), top(corrupt))


def test_the_proposed_corruptions_are_real_texts_one_token_apart(smollm2, induction):
    (swap,) = corruptions.proposals(smollm2, NAMES, 64, _top(smollm2))
    assert (swap.name, swap.text, swap.answer, swap.wrong) == ("name swap", SWAPPED, "ĠMary", "ĠJohn")
    (country,) = corruptions.proposals(smollm2, "The capital of France is", 64, _top(smollm2))
    assert (country.text, country.answer, country.wrong) == ("The capital of Italy is", "ĠParis", "ĠRome")
    (repeat,) = corruptions.proposals(induction, CLEAN, 64, _top(induction))
    assert repeat.name == "changed repeated word" and repeat.position == 4 and repeat.answer == "kilo"
    # a long text's proposals run nothing more: the word an induction head would copy is the answer
    (cheap,) = corruptions.proposals(induction, CLEAN, 64, None)
    assert (cheap.text, cheap.answer, cheap.wrong) == (repeat.text, "kilo", "charlie")
    for loaded, proposal, clean in ((smollm2, swap, NAMES), (induction, repeat, CLEAN)):
        found = patching.setup(loaded, clean, proposal.text, proposal.answer, proposal.wrong, 64)
        assert found.changed == (proposal.position,)


TRANSLATE = "the small red cat sees a big dog"
TRANSLATE_DOG = "the small red dog sees a big dog"


@torch.inference_mode()
def _by_hand_encdec(loaded, setup, clean, patch: Patch) -> float:
    """The corrupted source's plain forward (Transformer.forward, or its encoder layer by layer) with one activation
    overwritten by the clean run's, the decoder reading setup.decoder_input."""
    model = loaded.model
    src, tgt = torch.tensor([setup.corrupt_ids]), torch.tensor([setup.decoder_input])
    if patch.head is not None:
        n_layers, n_heads = ablation.shapes(model.config)[patch.kind]
        off = torch.zeros(1, n_layers, n_heads, clean.heads[patch.kind].size(2), dtype=torch.bool)
        off[0, patch.layer, patch.head, slice(None) if patch.position is None else patch.position] = True
        found = Ablation({patch.kind: off}, {patch.kind: clean.heads[patch.kind]}, 1)
        return _difference(loaded, model(src, tgt, ablation=found).logits, setup)
    mask = padding_mask(src, model.config.pad_id)
    x = model.encoder.embeddings(src).clone()
    for index, layer in enumerate([*model.encoder.layers, None]):
        if index == patch.layer:
            x[0, patch.position] = clean.states[index, patch.position]
        if layer is not None:
            x = layer(x, mask).after_ffn
    memory = model.encoder.final_norm(x) if model.encoder.final_norm is not None else x
    return _difference(loaded, model.decode(tgt, memory, mask)[1], setup)


def test_an_encoder_decoders_patches_equal_plain_forwards(translate):
    setup = patching.setup(translate, TRANSLATE, TRANSLATE_DOG, "chat", "chien", 64)
    vocabulary = translate.target_vocabulary
    assert [vocabulary.id_to_token(i) for i in setup.decoder_input] == ["<bos>", "le"]  # the outputs part at "chat"
    clean, corrupt = (patching.read(translate, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    with torch.inference_mode():
        logits = translate.model(torch.tensor([setup.clean_ids]), torch.tensor([setup.decoder_input])).logits
    bound = _difference_bound(translate, setup)
    tolerance.assert_within(clean.difference, _difference(translate, logits, setup), bound, "clean difference")
    assert clean.difference > 0 > corrupt.difference
    patches = [
        *patching.residual_patches(translate, setup),
        *patching.head_patches(translate),
        *patching.position_patches(setup, 1, 0, "cross"),
        *patching.position_patches(setup, 0, 1, "encoder_self"),
    ]
    shares = patching.measure(translate, setup, clean, corrupt, patches)
    gap = clean.difference - corrupt.difference
    want = np.array([(_by_hand_encdec(translate, setup, clean, p) - corrupt.difference) / gap for p in patches])
    bound = _share_bound(translate, setup, clean, corrupt)
    tolerance.assert_within(shares, want, bound, "patched runs against plain forwards")
    tolerance.assert_within(shares[setup.changed[0]], 1.0, bound, "the embedding at the changed source word")
    assert {p.kind for p in patching.head_patches(translate)} == {"encoder_self", "decoder_self", "cross"}
    with pytest.raises(PatchingError, match="not a word this model writes"):
        patching.setup(translate, TRANSLATE, TRANSLATE_DOG, "cat", "chien", 64)
