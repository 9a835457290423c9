"""What a turned-off head writes in place of its output (no streamlit), and the convention in words.

Zero ablation writes 0. Mean ablation writes the head's mean output (weights @ v, before W_O) over every position of
the model's sample of texts (explorer.experiments.sample), each cut at SAMPLE_TOKENS tokens. Resample ablation writes,
position by position, the head's output on another text of that sample: the first sample text whose tokens differ
from the clean text's and that has as many tokens; failing that, the first longer one, cut to the clean text's length;
failing that, the longest, its tokens repeated whole (special tokens included, as texts packed one after another)
until it is as long. An encoder-decoder's decoder reads the other text's right answer (a toy task) or the text itself
(a model with no task, such as the paper's random one), repeated to the model's max_len, so that greedy decoding finds
a value at every step. Each is one real forward of the engine, whose heads' outputs are read back as return values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.explorer.experiments import sample
from attention_explorer.explorer.run.layers import drop_attention
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import padding_mask

METHODS = {
    "zero": "zero: the head writes nothing",
    "mean": "mean: the head writes its average output",
    "resample": "resample: the head writes its output on another text",
}
SAMPLE_TOKENS = 64  # each sample text is cut at this many tokens when averaging the heads' outputs
BATCH_ROWS = 32  # sample texts of one length run together, this many at most in one forward


@dataclass(frozen=True)
class Replacement:
    """What turned-off heads write: `values` per attention kind, (L, H, Dh) for mean ablation, (L, H, T, Dh) for
    resample ablation (one a position), None for zero; `convention` says in a sentence which method it is and over
    which texts; `texts` and `tokens`: how many texts and token positions the values come from; `other`: resample
    ablation's other text."""

    method: str
    values: dict[str, np.ndarray] | None
    convention: str
    texts: int = 0
    tokens: int = 0
    other: str = ""


def zero() -> Replacement:
    """Zero ablation: nothing to compute."""
    return Replacement("zero", None, "zero ablation: each head turned off writes 0 in place of its output")


def explain(loaded: LoadedModel, method: str) -> str:
    """What `method` writes, and over which texts, as the place where it is chosen says it."""
    if method == "zero":
        return (
            "Zero ablation: the head's output (its weights times its values, before W_O) is replaced by 0 at every "
            "position. Simple, but the layers above then read a sum that no head ever wrote."
        )
    if method == "mean":
        return (
            f"Mean ablation: the head's output is replaced, at every position, by its average over every position of "
            f"{sample.name(loaded)} (each cut at {SAMPLE_TOKENS} tokens). What the head says about this text is "
            "removed; what it says about every text stays."
        )
    return (
        "Resample ablation: the head's output at each position is replaced by its output at the same position on "
        f"another text of the sample ({sample.name(loaded)}): the first one with as many tokens as this text, else "
        "a longer one cut to its length, else the longest repeated. The head then writes what it would have "
        "written about a different text, within its usual range."
    )


def _decoder_input(loaded: LoadedModel, text: str, source_ids: Sequence[int]) -> list[int]:
    """What an encoder-decoder's decoder reads for a sample text: [BOS] and the task's right answer, or with no task
    [BOS] and the text's own tokens (a random model has no output language of its own)."""
    assert loaded.bos_id is not None
    if loaded.task is not None:
        pair = loaded.task.expected(tuple(text.split()))
        assert pair is not None, text  # the task's own inputs always have an answer
        vocabulary = loaded.target_vocabulary
        return [loaded.bos_id, *(vocabulary.token_to_id(w) for w in pair.target)]
    return [loaded.bos_id, *(i for i in source_ids if i not in (loaded.bos_id, loaded.eos_id))]


def _heads_kept() -> tuple[dict[str, list[torch.Tensor]], Callable]:
    """(each attention sub-layer's heads' outputs, layer by layer; a Keep that appends them as each layer finishes and
    keeps the layer's states only): no layer's attention maps outlive it."""
    found: dict[str, list[torch.Tensor]] = {"self_attn": [], "cross_attn": []}

    def keep(internals):
        for name, heads in found.items():
            attention = getattr(internals, name, None)
            if attention is not None:
                heads.append(attention.heads)  # (B, H, T, Dh)
        return drop_attention(internals)

    return found, keep


@torch.inference_mode()
def head_outputs(loaded: LoadedModel, src: torch.Tensor, tgt: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Every head's output on a batch of texts of one length, per attention kind: (B, L, H, T, Dh), T the source's
    length for encoder self-attention and a decoder-only model's, the decoder input's (`tgt`) for the decoder's."""
    model = loaded.model
    found: dict[str, torch.Tensor] = {}
    memory = src_mask = None
    if model.encoder is not None:
        heads, keep = _heads_kept()
        encoded = model.encode(src, keep=keep)
        found["encoder_self"] = torch.stack(heads["self_attn"], 1)  # (B, L, H, S, Dh)
        memory, src_mask = encoded.output, padding_mask(src, model.config.pad_id)
    if model.decoder is not None and (model.encoder is None or tgt is not None):
        ids = src if model.encoder is None else tgt
        assert ids is not None
        heads, keep = _heads_kept()
        # the decoder stack alone: its logits (B, T, V) are never needed here (12 MB a row for SmolLM2)
        model.decoder(ids, memory, model.decoder_mask(ids), src_mask, None, keep)
        found["decoder_self"] = torch.stack(heads["self_attn"], 1)  # (B, L, H, T, Dh)
        if memory is not None:
            found["cross"] = torch.stack(heads["cross_attn"], 1)
    return found


def _inputs(loaded: LoadedModel, text: str, limit: int) -> tuple[list[int], list[int] | None]:
    """(source ids, the decoder's input or None) of one sample text, the source cut at `limit` tokens."""
    ids = list(loaded.tokenizer.encode(text, limit).ids)
    if not loaded.is_encoder_decoder:
        return ids, None
    return ids, _decoder_input(loaded, text, ids)[: loaded.model.config.max_len]


def mean(loaded: LoadedModel) -> Replacement:
    """Mean ablation's values: each head's output averaged over every position of every sample text (cut at
    SAMPLE_TOKENS), per attention kind (L, H, Dh). Texts of the same length run together, BATCH_ROWS at a time; only
    the heads' outputs are kept of each layer."""
    texts = sample.texts(loaded)
    limit = min(loaded.max_tokens, SAMPLE_TOKENS)
    groups: dict[tuple[int, int], list[tuple[list[int], list[int] | None]]] = {}
    for text in texts:
        src, tgt = _inputs(loaded, text, limit)
        groups.setdefault((len(src), len(tgt or ())), []).append((src, tgt))
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    for rows in groups.values():
        for start in range(0, len(rows), BATCH_ROWS):
            chunk = rows[start : start + BATCH_ROWS]
            src = torch.tensor([s for s, _ in chunk], device=loaded.device)  # (B, S)
            tgt = None if chunk[0][1] is None else torch.tensor([t for _, t in chunk], device=loaded.device)  # (B, T)
            for kind, heads in head_outputs(loaded, src, tgt).items():  # (B, L, H, T, Dh)
                total = heads.double().sum(dim=(0, 3))  # (L, H, Dh)
                sums[kind] = sums[kind] + total if kind in sums else total
                counts[kind] = counts.get(kind, 0) + heads.size(0) * heads.size(3)
    values = {kind: (sums[kind] / counts[kind]).float().cpu().numpy() for kind in sums}
    tokens = next(iter(counts.values()))  # the source's positions (the encoder's, or a decoder-only model's text)
    convention = (
        f"mean ablation: each head turned off writes its mean output over all {tokens:,} token positions of "
        f"{sample.name(loaded)} (each cut at {limit} tokens)"
    )
    return Replacement("mean", values, convention, len(texts), tokens)


def other_text(loaded: LoadedModel, source_ids: Sequence[int]) -> tuple[str, list[int]]:
    """(the other text, its ids) that resample ablation runs for a clean text of these ids: the first sample text
    whose ids differ and that has as many tokens, else the first longer one, else the longest."""
    wanted = len(source_ids)
    found = []
    for text in sample.texts(loaded):
        ids, _ = _inputs(loaded, text, loaded.max_tokens)
        if ids[:wanted] != list(source_ids):
            found.append((text, ids))
    if not found:
        raise ValueError("every text of the sample is this text: there is no other text to resample from")
    for fits in (lambda n: n == wanted, lambda n: n > wanted):
        chosen = next(((text, ids) for text, ids in found if fits(len(ids))), None)
        if chosen is not None:
            return chosen
    return max(found, key=lambda pair: len(pair[1]))


def _repeated(ids: Sequence[int], length: int) -> list[int]:
    """`ids` repeated whole as often as needed, then cut at `length`."""
    return [ids[i % len(ids)] for i in range(length)]


def resample(
    loaded: LoadedModel, source_ids: Sequence[int], other: tuple[str, Sequence[int]] | None = None
) -> Replacement:
    """Resample ablation's values for a clean text of these source ids: every head's output on the other text
    (other_text, unless given as (text, ids)) at the same length, per attention kind (L, H, T, Dh); an
    encoder-decoder's decoder side at the model's max_len, for any number of decoding steps."""
    text, ids = other if other is not None else other_text(loaded, source_ids)
    length = len(source_ids)
    src = _repeated(list(ids), length)
    tgt = None
    if loaded.is_encoder_decoder:
        tgt = torch.tensor(
            [_repeated(_decoder_input(loaded, text, ids), loaded.model.config.max_len)], device=loaded.device
        )
    found = head_outputs(loaded, torch.tensor([src], device=loaded.device), tgt)
    values = {kind: heads[0].cpu().numpy() for kind, heads in found.items()}  # (L, H, T, Dh)
    fitted = "" if len(ids) == length else f", cut to {length}" if len(ids) > length else f", repeated to {length}"
    shown = text if len(text) <= 80 else text[:77] + "..."
    convention = (
        "resample ablation: each head turned off writes, position by position, its output on another text of the "
        f"sample ({sample.name(loaded)}): \u201c{shown}\u201d ({len(ids)} tokens{fitted})"
    )
    return Replacement("resample", values, convention, 1, length, text)
