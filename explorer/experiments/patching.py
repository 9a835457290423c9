"""Activation patching (no streamlit): run a clean text and a corrupted one that differs in a detail, copy one
activation of the clean run into the corrupted run, and measure how much of the right answer comes back.

The measure is the logit difference at the last position: logit(right answer) - logit(wrong answer), read from the
model's own final norm and output layer. A patched run's result is the share restored:
(patched - corrupted) / (clean - corrupted): 1 where the copied activation alone brings the clean answer back, 0 where
it changes nothing.

Three families of patches, each one batch row of a batched forward:
- the residual stream: the state entering layer l (l = 0: after the embedding; l = L: the last layer's output,
  before the final norm) at one position;
- one head's output (weights @ v, before W_O) at every position;
- one head's output at one position.

An encoder-decoder's patching is explorer.experiments.patching_encdec: two sources, one target, the encoder's residual
stream and every attention kind's heads.

A decoder-only model is causal, so before the first position where the two texts differ both runs are the same, bit
for bit: a patch there changes nothing (its share is 0 without a run), and a patched run computes only the positions
from there on (DecoderLayer's window), its keys and values before it the corrupted run's own. A patch at layer l starts
from the corrupted run's state entering layer l: the layers below are the corrupted run's, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attention_explorer.explorer.experiments import patching_encdec
from attention_explorer.explorer.run import cost
from attention_explorer.models import ablation
from attention_explorer.models.attention import HeadPatch, raw_scores_dropped
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.tokenize import SPACE_MARK, VOCABULARY_SPACE_MARKS
from attention_explorer.models.transformer import causal_mask

BATCH_BYTES = 384 * 2**20  # about this much memory per chunk of batch rows


class PatchingError(ValueError):
    """Texts or answers patching cannot run on: the message says what to change."""


class NotOneToken(PatchingError):
    """An answer the model reads as several tokens; `typed` is what a person types for its first token (' Sarah',
    its space included), so a page or the command line can suggest it in its own words."""

    def __init__(self, problem: str, what: str, typed: str) -> None:
        super().__init__(f"{problem}: write one token, e.g. {typed!r}")
        self.problem, self.what, self.typed = problem, what, typed


@dataclass(frozen=True)
class Setup:
    """What is patched and measured: both texts' token ids (as many each), the right and the wrong answer's ids, and
    for an encoder-decoder the target its decoder reads in both runs (measured at its last row)."""

    clean_ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    answer: int
    wrong: int
    decoder_input: tuple[int, ...] = ()  # encoder-decoders only

    @property
    def changed(self) -> tuple[int, ...]:
        """The positions whose tokens differ."""
        return tuple(i for i, (a, b) in enumerate(zip(self.clean_ids, self.corrupt_ids, strict=True)) if a != b)

    @property
    def start(self) -> int:
        """The first position that differs: every run of a decoder-only model is the same before it (0 for an
        encoder-decoder, whose encoder reads both ways)."""
        return 0 if self.decoder_input else self.changed[0]


def _single_token(loaded: LoadedModel, read: str, typed: str, what: str) -> int:
    """The id of an answer as one token after the text `read` (what the model read of the clean text): typed as the
    model names a token ("ĠMary"), or as the text would go on, a space before it (" Mary": one token, where "Mary"
    alone is another); PatchingError otherwise, with the pieces it is."""
    if not typed.strip():
        raise PatchingError(f"write the {what}: one token the model could write next")
    if typed.startswith(SPACE_MARK):  # as the pages show a token ('␣Mary'): the space it carries, then its text
        typed = " " + typed.removeprefix(SPACE_MARK)
    if loaded.is_encoder_decoder:  # a word of the output vocabulary
        if (found := loaded.target_vocabulary.token_to_id(typed.strip())) is None:
            raise PatchingError(f"the {what} {typed.strip()!r} is not a word this model writes")
        return found
    named = loaded.target_vocabulary.token_to_id(typed)
    if named is not None and typed.startswith(VOCABULARY_SPACE_MARKS):  # a vocabulary's own spelling ('ĠMary')
        return named
    words = typed if typed.startswith(" ") else f" {typed}"
    before = loaded.tokenizer.encode(read, loaded.max_tokens)
    after = loaded.tokenizer.encode(read + words, len(before) + 64)
    if after.ids[: len(before)] == before.ids and len(after) == len(before) + 1:
        return after.ids[-1]
    if named is not None:  # a word-level vocabulary's word, or a token written without its space
        return named
    pieces = after.tokens[len(before) :] if after.ids[: len(before)] == before.ids else ()
    if not pieces:
        raise PatchingError(f"the {what} {typed!r} is not one token of this model's vocabulary")
    readable = loaded.family.spelling.labels(pieces)  # '␣Sarah + ␣J + ane', not 'ĠSarah + ĠJ + ane'
    decode = getattr(loaded.tokenizer, "decode", None)
    first = decode([after.ids[len(before)]]) if decode is not None else ""
    # what a person types for the first piece: its text (' Sarah'), or the token as pages show it when the piece is
    # only part of a character (its text would be a replacement character)
    first = first if first and "\ufffd" not in first else readable[0]
    problem = f"the {what} {typed!r} is {len(pieces)} tokens ({' + '.join(readable)}) after the text"
    raise NotOneToken(problem, what, first)


def setup(loaded: LoadedModel, clean: str, corrupt: str, answer: str, wrong: str, max_tokens: int) -> Setup:
    """Check the inputs and read them as token ids; PatchingError says what is wrong."""
    if not loaded.family.next_token_head:
        raise PatchingError(
            f"patching measures a logit difference of the model's output; {loaded.title} is an encoder with no "
            "output layer. Choose SmolLM2, the induction model or an encoder-decoder."
        )
    if not corrupt.strip():
        raise PatchingError("write a corrupted text: the clean one with one detail changed")
    encoding = loaded.tokenizer.encode(clean, max_tokens)
    clean_ids = tuple(encoding.ids)
    corrupt_ids = tuple(loaded.tokenizer.encode(corrupt, max_tokens).ids)
    if len(clean_ids) != len(corrupt_ids):
        raise PatchingError(
            f"the clean text has {len(clean_ids)} tokens and the corrupted one {len(corrupt_ids)}: patching copies "
            "an activation position by position, so both need as many tokens. Change a word for one that is as "
            "many tokens long."
        )
    if clean_ids == corrupt_ids:
        raise PatchingError("the corrupted text reads as the same tokens as the clean one: change one detail")
    read = clean[: encoding.offsets[-1][1]] if encoding.truncated else clean  # the text up to the last token kept
    right = _single_token(loaded, read, answer, "right answer")
    other = _single_token(loaded, read, wrong, "wrong answer")
    if right == other:
        raise PatchingError("the right and the wrong answer are the same token: choose two different ones")
    if loaded.is_encoder_decoder:
        target, _, _ = patching_encdec.target_row(loaded, clean_ids, corrupt_ids)
        return Setup(clean_ids, corrupt_ids, right, other, target)
    return Setup(clean_ids, corrupt_ids, right, other)


@dataclass(frozen=True)
class Run:
    """What patching reads of one text's run: the state entering every layer (an encoder-decoder: its encoder's) and
    each head's output, by attention kind."""

    states: Tensor  # (L + 1, T, D): [0] after the embedding, [l] entering layer l, [L] the last layer's output
    heads: dict[str, Tensor]  # kind -> (L, H, T, Dh) each head's output, weights @ v, before W_O
    difference: float  # logit(answer) - logit(wrong) at the last position


def _difference(loaded: LoadedModel, last: Tensor, setup: Setup) -> Tensor:
    """(B,) logit(answer) - logit(wrong) from the last layer's outputs at the last position (B, D): the model's own
    final norm and output layer, read for the two tokens only."""
    model = loaded.model
    assert model.decoder is not None and model.generator is not None
    x = last[:, None]  # (B, 1, D)
    if model.decoder.final_norm is not None:
        x = model.decoder.final_norm(x)
    pair = [setup.answer, setup.wrong]
    weight = model.generator.weight[pair]  # (2, D)
    logits = x[:, 0] @ weight.T  # (B, 2)
    if model.generator.bias is not None:
        logits = logits + model.generator.bias[pair]
    return (logits[:, 0] - logits[:, 1]).double()


@torch.inference_mode()
def read(loaded: LoadedModel, ids: Sequence[int], setup: Setup) -> Run:
    """One text's forward, kept as patching reads it: the decoder's layers run one at a time by their own forward (the
    same operations as the whole model's), each layer's attention let go before the next runs (a long text's maps are
    150 MB a layer). An encoder-decoder's: patching_encdec.tensors, the decoder reading setup.decoder_input."""
    if loaded.is_encoder_decoder:
        states, heads, last = patching_encdec.tensors(loaded, ids, setup.decoder_input)
        return Run(states, heads, float(_difference(loaded, last, setup)[0]))
    decoder = loaded.model.decoder
    assert decoder is not None
    tokens = torch.tensor([list(ids)], device=loaded.device)  # (1, T)
    x = decoder.embeddings(tokens)  # (1, T, D)
    mask = loaded.model.decoder_mask(tokens)  # (1, 1, T, T)
    states, heads = [x[0]], []
    with raw_scores_dropped():
        for layer in decoder.layers:
            internals = layer(x, None, mask, None)
            heads.append(internals.self_attn.heads[0])  # (H, T, Dh)
            x = internals.after_ffn
            states.append(x[0])
            del internals
    stacked = torch.stack(states)  # (L + 1, T, D)
    difference = float(_difference(loaded, stacked[-1, -1:], setup)[0])
    return Run(stacked, {"decoder_self": torch.stack(heads)}, difference)


def read_seconds(loaded: LoadedModel, tokens: int) -> float:
    """About how long reading both texts takes (read keeps no raw scores: a sliding-window layer's band)."""
    return cost.forward_seconds(loaded.model.config, tokens, rows=2, band=True)


@dataclass(frozen=True)
class Patch:
    """One patched run: at layer `layer`, the residual stream at `position` (head None), or head `head`'s output at
    `position` (None: every position), of attention kind `kind` (an encoder-decoder's residual stream: its
    encoder's, "encoder_self")."""

    layer: int
    position: int | None = None
    head: int | None = None
    kind: str = "decoder_self"


# How a caller keeps each part of a long measurement and follows it: (the part's first and last patch, how many
# patches there are, its computation) -> its values (as ablate.Parts)
Parts = Callable[[tuple[int, int], int, Callable[[], np.ndarray]], np.ndarray]


def _whole(part: tuple[int, int], rows: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
    return compute()


def _rows_per_chunk(loaded: LoadedModel, tokens: int, window: int) -> int:
    """Batch rows one chunk holds within about BATCH_BYTES: one layer's attention and states at a time."""
    config = loaded.model.config
    per_row = 4 * (3 * config.n_heads * window * tokens + 10 * tokens * config.d_model + window * config.d_ff)
    return max(1, BATCH_BYTES // max(per_row, 1))


@torch.inference_mode()
def _patched(loaded: LoadedModel, setup: Setup, clean: Run, corrupt: Run, patches: Sequence[Patch]) -> np.ndarray:
    """(N,) the logit difference of each patched run, in one batch whose rows join at their patch's layer: a row
    patched at layer l starts from the corrupted run's state entering l, and only positions start.. are computed
    (the last layer: the last position only)."""
    model = loaded.model
    assert model.decoder is not None
    layers = model.decoder.layers
    n_layers, tokens = len(layers), clean.states.size(1)
    order = sorted(range(len(patches)), key=lambda i: patches[i].layer)
    x: Tensor | None = None  # (B, T, D) the rows so far, in `order`
    joined = 0
    for index in range(n_layers + 1):
        new = [i for i in order if patches[i].layer == index]
        if new:
            base = corrupt.states[index].expand(len(new), -1, -1).clone()  # (N, T, D)
            for row, i in enumerate(new):
                if patches[i].head is None:  # the residual stream at one position
                    position = patches[i].position
                    base[row, position] = clean.states[index, position]
            x = base if x is None else torch.cat([x, base])
        if index == n_layers or x is None:
            joined += len(new)
            continue
        head_patch = None
        if any(patches[i].head is not None for i in new):
            off = torch.zeros(x.size(0), model.config.n_heads, tokens, dtype=torch.bool, device=x.device)  # (B, H, T)
            for row, i in enumerate(new, start=joined):
                patch = patches[i]
                if patch.head is not None:
                    off[row, patch.head, slice(None) if patch.position is None else patch.position] = True
            head_patch = {"self_attn": HeadPatch(off, clean.heads["decoder_self"][index])}
        joined += len(new)
        window = tokens - 1 if index == n_layers - 1 else setup.start  # the last layer: the measured row only
        mask = causal_mask(tokens, x.device)[:, :, window:]  # (1, 1, T - window, T)
        out = layers[index](x, None, mask, None, head_patch, window).after_ffn  # (B, T - window, D)
        if window == 0:
            x = out
        else:  # the rows before the window: the corrupted run's, the same in every batch row
            x = torch.cat([corrupt.states[index + 1, :window].expand(x.size(0), -1, -1), out], dim=1)
    assert x is not None
    values = np.empty(len(patches))
    values[order] = _difference(loaded, x[:, -1], setup).cpu().numpy()
    return values


def _changes(patch: Patch, setup: Setup, clean: Run, corrupt: Run) -> bool:
    """Whether copying this activation changes the corrupted run at all: not before the first changed position, and
    not where the clean value already equals the corrupted one (then its share is 0 without a run)."""
    positions = slice(setup.start, None) if patch.position is None else patch.position
    if patch.position is not None and patch.position < setup.start:
        return False
    if patch.head is None:
        return not torch.equal(clean.states[patch.layer, positions], corrupt.states[patch.layer, positions])
    found = clean.heads[patch.kind][patch.layer, patch.head, positions]
    return not torch.equal(found, corrupt.heads[patch.kind][patch.layer, patch.head, positions])


def _run(loaded: LoadedModel, setup: Setup, clean: Run, corrupt: Run, patches: Sequence[Patch]) -> np.ndarray:
    """(N,) the logit difference of each patched run."""
    if loaded.is_encoder_decoder:
        last = patching_encdec.patched_last(loaded, setup, clean, corrupt, patches)
        return _difference(loaded, last, setup).cpu().numpy()
    return _patched(loaded, setup, clean, corrupt, patches)


def measure(
    loaded: LoadedModel, setup: Setup, clean: Run, corrupt: Run, patches: Sequence[Patch], kept: Parts = _whole
) -> np.ndarray:
    """(N,) the share of the logit difference each patch restores, (patched - corrupted) / (clean - corrupted); the
    patches that change nothing are 0 without a run, the others run in chunks of batch rows (`kept`: how the caller
    keeps and follows each chunk, by its first and last patch's index among those run)."""
    gap = clean.difference - corrupt.difference
    if gap == 0:
        raise PatchingError("both texts give the same logit difference: there is nothing for a patch to restore")
    running = [i for i, patch in enumerate(patches) if _changes(patch, setup, clean, corrupt)]
    step = _rows_per_chunk(loaded, len(setup.clean_ids), len(setup.clean_ids) - setup.start)
    found = np.full(len(patches), corrupt.difference)
    for first in range(0, len(running), step):
        chunk = running[first : first + step]
        values = kept(
            (first, first + len(chunk)),
            len(running),
            lambda chunk=chunk: _run(loaded, setup, clean, corrupt, [patches[i] for i in chunk]),
        )
        found[chunk] = values
    return (found - corrupt.difference) / gap


def residual_patches(loaded: LoadedModel, setup: Setup) -> list[Patch]:
    """The residual stream at every layer (0: after the embedding .. L: the last layer's output) and position, layer
    by layer (an encoder-decoder: its encoder's)."""
    kind = residual_kind(loaded)
    n_layers, tokens = ablation.shapes(loaded.model.config)[kind][0], len(setup.clean_ids)
    return [Patch(layer, position, None, kind) for layer in range(n_layers + 1) for position in range(tokens)]


def residual_kind(loaded: LoadedModel) -> str:
    """Whose residual stream is patched: the decoder's (decoder-only) or the encoder's (an encoder-decoder)."""
    return "encoder_self" if loaded.is_encoder_decoder else "decoder_self"


def head_patches(loaded: LoadedModel) -> list[Patch]:
    """Every head of every attention kind, its output at every position, kind by kind and layer by layer."""
    return [
        Patch(layer, None, head, kind)
        for kind, (n_layers, n_heads) in ablation.shapes(loaded.model.config).items()
        for layer in range(n_layers)
        for head in range(n_heads)
    ]


def positions(setup: Setup, kind: str) -> int:
    """How many positions a head of this kind writes: the source's (the encoder) or the decoder's rows."""
    return len(setup.decoder_input) if setup.decoder_input and kind != "encoder_self" else len(setup.clean_ids)


def position_patches(setup: Setup, layer: int, head: int, kind: str = "decoder_self") -> list[Patch]:
    """One head's output at each position alone."""
    return [Patch(layer, position, head, kind) for position in range(positions(setup, kind))]


def _may_change(patch: Patch, start: int, changed: set[int]) -> bool:
    """Whether a patch may change the corrupted run, read off the texts before they run (_changes reads the runs):
    not before the first change (`start`), and at the embedding (layer 0) only where the token `changed`."""
    if patch.position is not None and patch.position < start:
        return False
    return not (patch.head is None and patch.layer == 0 and patch.position not in changed)


def seconds(loaded: LoadedModel, setup: Setup, patches: Sequence[Patch]) -> float:
    """About how long these patches take, as _patched runs them: a chunk of batch rows at a time, each layer once per
    chunk over the rows joined by then (a row joins at its patch's layer), over the changed window (the last layer:
    the measured row only). A patch that changes nothing (_changes: before the first change; the embedding of a
    position not changed) is 0 without a run."""
    config = loaded.model.config
    if loaded.is_encoder_decoder:  # a whole forward a patch
        return cost.forward_seconds(config, max(len(setup.clean_ids), len(setup.decoder_input)), len(patches), True)
    tokens, window = len(setup.clean_ids), len(setup.clean_ids) - setup.start
    start, changed = setup.start, set(setup.changed)
    joins = [p.layer for p in patches if _may_change(p, start, changed)]  # in measure's order
    step = _rows_per_chunk(loaded, tokens, window)
    found = 0.0
    for first in range(0, len(joins), step):
        chunk = joins[first : first + step]
        for index in range(min(chunk), config.n_decoder_layers):
            rows = sum(1 for layer in chunk if layer <= index)
            queries = 1 if index == config.n_decoder_layers - 1 else window
            found = cost.layer_seconds(config, queries, tokens, rows=rows) + found
    return found


def document(loaded: LoadedModel, clean: str, corrupt: str, answer: str, wrong: str, max_tokens: int) -> dict:
    """The export's "patching" entry: both runs' logit differences, the share each head's output restores
    [layer][head], and the residual stream's [layer 0..L][position] (0: after the embedding; L: the last layer's
    output, before the final norm), with the convention they follow."""
    found = setup(loaded, clean, corrupt, answer, wrong, max_tokens)
    clean_run, corrupt_run = read(loaded, found.clean_ids, found), read(loaded, found.corrupt_ids, found)
    shapes = ablation.shapes(loaded.model.config)
    shares = measure(loaded, found, clean_run, corrupt_run, head_patches(loaded))
    grids, start = {}, 0
    for kind, (n_layers, n_heads) in shapes.items():
        grids[kind] = shares[start : start + n_layers * n_heads].reshape(n_layers, n_heads).tolist()
        start += n_layers * n_heads
    residual = measure(loaded, found, clean_run, corrupt_run, residual_patches(loaded, found))
    n_residual = shapes[residual_kind(loaded)][0] + 1
    vocabulary = loaded.target_vocabulary
    more = {}
    if loaded.is_encoder_decoder:
        more = {"decoder_input": [vocabulary.id_to_token(i) for i in found.decoder_input]}
    return {
        "patching": {
            "clean": clean_run.difference,
            "corrupted": corrupt_run.difference,
            # decoder-only: [layer][head]; an encoder-decoder: by attention kind, each [layer][head]
            "heads": grids["decoder_self"] if len(grids) == 1 else grids,
            "residual": residual.reshape(n_residual, -1).tolist(),
            **more,
            "answer": vocabulary.id_to_token(found.answer),
            "wrong": vocabulary.id_to_token(found.wrong),
            "changed": list(found.changed),
            "corrupted_tokens": [loaded.tokenizer.id_to_token(i) for i in found.corrupt_ids],
            "convention": "logit difference logit(answer) - logit(wrong) "
            + ("at the decoder's last row" if loaded.is_encoder_decoder else "at the last position")
            + "; each patch copies one activation of the clean run into the corrupted run (denoising: it shows what "
            "is enough to restore the difference, not what is necessary); share restored = (patched - corrupted) / "
            "(clean - corrupted); heads: each head's output (before W_O) at every position",
        }
    }
