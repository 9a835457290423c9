"""Experiments on heads (no streamlit): turn some heads off and compare the run with the clean one, or turn each head
off alone, every head in one batched forward (one batch row per head), and measure what it changed.

Every ablated number comes from a real forward of the engine with the heads' outputs replaced before W_O
(models.ablation) by 0, by their mean over a sample of texts, or by their output on another text
(explorer.experiments.replacements); nothing is recomputed on the side, and each result says which it used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from attention_explorer.explorer.experiments import replacements
from attention_explorer.explorer.experiments.replacements import Replacement
from attention_explorer.explorer.run import forward, output, trace
from attention_explorer.explorer.run import logits as final_linear
from attention_explorer.explorer.run.answers import Answer
from attention_explorer.explorer.run.layers import drop_attention
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models import ablation, greedy, tasks
from attention_explorer.models.ablation import Ablation, Head
from attention_explorer.models.registry import LoadedModel

METHODS = replacements.METHODS  # zero, mean, resample: what a turned-off head writes
BATCH_BYTES = 384 * 2**20  # about this much memory per chunk of batch rows in the batched forward


def model_shapes(loaded: LoadedModel) -> dict[str, tuple[int, int]]:
    """(layers, heads) of every attention kind the model has."""
    return ablation.shapes(loaded.model.config)


def replacement(loaded: LoadedModel, method: str, source_ids: Sequence[int] | None = None) -> Replacement:
    """What heads turned off by `method` write: zero, mean (over the model's sample) or resample (another sample
    text's run, at the length of the clean text whose `source_ids` are given); AblationError for a bad request."""
    if method not in METHODS:
        raise ablation.AblationError(f"unknown ablation {method!r}; choose zero, mean or resample")
    if method == "zero":
        return replacements.zero()
    if method == "mean":
        return replacements.mean(loaded)
    if source_ids is None:
        raise ablation.AblationError("resample ablation needs the clean text: its heads are another text's, as long")
    return replacements.resample(loaded, source_ids)


def text_replacement(loaded: LoadedModel, method: str, text: str, max_tokens: int | None = None) -> Replacement:
    """replacement() for a clean text as a run reads it (cut at max_tokens, the model's maximum by default)."""
    limit = trace.check_max_tokens(loaded, loaded.max_tokens if max_tokens is None else max_tokens)
    return replacement(loaded, method, loaded.tokenizer.encode(text, limit).ids if method == "resample" else None)


def _tensors(values: dict[str, np.ndarray] | None) -> dict[str, torch.Tensor] | None:
    return None if values is None else {kind: torch.tensor(np.asarray(v)) for kind, v in values.items()}


def make(
    loaded: LoadedModel,
    heads: Iterable[Head],
    method: str,
    replaced: Replacement | None = None,
    source_ids: Sequence[int] | None = None,
) -> Ablation:
    """These heads turned off by `method` (zero, mean or resample), writing `replaced`'s values (computed when not
    given: resample needs the clean text's `source_ids`); AblationError for a bad request."""
    heads = tuple(heads)
    if replaced is None:
        ablation.heads_off(heads, model_shapes(loaded))  # a bad request is refused before any values are computed
        replaced = replacement(loaded, method, source_ids)
    elif replaced.method != method:
        raise ablation.AblationError(f"the values given are for {replaced.method} ablation, not {method}")
    return ablation.heads_off(heads, model_shapes(loaded), _tensors(replaced.values))


def answer(loaded: LoadedModel, run: Trace, typed: str = "") -> Answer:
    """The answer the experiments measure: a typed target, else the task's right answer, else the model's own greedy
    output (encoder-decoder); the text's own next tokens (decoder-only), counting only the rows whose next word a toy
    task knows; nothing for an encoder-only model (its sentence embedding is compared instead)."""
    if not loaded.family.next_token_head:
        return Answer(tuple(forward.token_ids(loaded, run, "encoder")))
    if loaded.is_decoder_only:
        ids = forward.token_ids(loaded, run, "decoder")
        if len(ids) < 2:
            raise ValueError("a text of one token has no next token to predict")
        counted = _known_rows(loaded, run)
        where = output.text_target(loaded)
        if not all(counted):
            where = "the text's repeated words (the rows whose next word the earlier copy gives)"
        return Answer(tuple(ids), tuple(ids[:-1]), tuple(ids[1:]), counted, where)
    targets, where = output.target_for(loaded, run, typed)
    targets = targets[: loaded.model.config.max_len]
    source = forward.token_ids(loaded, run, "encoder")
    decoder_input = (loaded.bos_id, *targets[:-1])
    return Answer(tuple(source), decoder_input, tuple(targets), (True,) * len(targets), where)


def with_text_end(loaded: LoadedModel, answer: Answer, run: Trace) -> Answer:
    """A decoder-only answer with the text's last row added, the one that predicts what comes after the whole text:
    its target is the model's own top next token there (the run's), since the text says nothing of it. What the
    read-outs (the logit lens, the attribution) show; ablation and patching score the rows with a right token only.
    Other families' answers are returned as they are."""
    if not loaded.is_decoder_only or answer.targets is None or answer.text_end:
        return answer
    assert run.top_tokens is not None and len(run.top_tokens) == len(answer.source_ids)
    own = loaded.target_vocabulary.token_to_id(run.top_tokens[-1][0])
    assert own is not None
    return replace(
        answer,
        decoder_input=answer.source_ids,
        targets=(*answer.targets, own),
        counted=(*answer.counted, False),
        text_end=True,
    )


def _known_rows(loaded: LoadedModel, run: Trace) -> tuple[bool, ...]:
    """Of a decoder-only text's rows (each predicting the next token), those whose next word the model's toy task
    determines (the induction task: the repeat); every row for other models, or when none is known."""
    tokens = run.source_tokens
    rows = len(tokens) - 1
    if loaded.task is None:
        return (True,) * rows
    words = [i for i, t in enumerate(tokens) if t not in tasks.SPECIALS]
    pair = loaded.task.expected(tuple(tokens[i] for i in words))
    if pair is None:
        return (True,) * rows
    known = [False] * rows
    for j, position in enumerate(words):
        # the row at this word predicts the token after it: it counts when the task says what that token is
        if position < rows and pair.target[j] and tokens[position + 1] == pair.target[j]:
            known[position] = True
    return tuple(known) if any(known) else (True,) * rows


def _rows_per_chunk(loaded: LoadedModel, answer: Answer) -> int:
    """Batch rows one chunk of the batched forward holds within about BATCH_BYTES (the internals of every layer are
    kept until the chunk's logits are read; those are read in blocks of rows: explorer/run/logits.py)."""
    config = loaded.model.config
    source = len(answer.source_ids)
    target = len(answer.decoder_input or ())
    per_layer = lambda tq, tk: 4 * (3 * config.n_heads * tq * tk + 10 * tq * config.d_model + tq * config.d_ff)  # noqa: E731
    per_row = config.n_encoder_layers * per_layer(source, source) if config.n_encoder_layers else 0
    if answer.decoder_input is not None:
        keys = source if config.n_encoder_layers else 0
        per_row += config.n_decoder_layers * (per_layer(target, target) + per_layer(target, keys))
    return max(1, BATCH_BYTES // max(per_row, 1))


# How a caller keeps each part of a long measurement, and follows it: (its batch rows (start, stop), or None for the
# clean run; how many rows there are in all; the part's computation) -> the part's values. A part already kept is not
# computed again, so a measurement stopped half way goes on from where it stopped.
Parts = Callable[[tuple[int, int] | None, int, Callable[[], np.ndarray]], np.ndarray]


def _whole(part: tuple[int, int] | None, rows: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
    return compute()


def parts(loaded: LoadedModel, answer: Answer, rows: int) -> list[tuple[int, int]]:
    """The batch rows of each chunk of a measurement over `rows` rows, in order: (start, stop)."""
    step = _rows_per_chunk(loaded, answer)
    return [(start, min(rows, start + step)) for start in range(0, rows, step)]


@torch.inference_mode()
def _forward(loaded: LoadedModel, answer: Answer, part: Ablation | None, n: int) -> np.ndarray:
    """One chunk of `n` batch rows: the right answer's log-probability per row (n, T), or the pooled state (n, D)."""
    model = loaded.model
    src = torch.tensor([answer.source_ids], device=loaded.device).expand(n, -1)  # (B, S)
    if answer.decoder_input is None:
        return model(src, ablation=part, keep=drop_attention).encoder.output.mean(dim=1).cpu().numpy()  # (B, D)
    tgt = torch.tensor([answer.decoder_input], device=loaded.device).expand(n, -1)  # (B, T)
    if model.encoder is None:
        out = model(tgt, ablation=part, keep=drop_attention, logits=False)
    else:
        out = model(src, tgt, ablation=part, keep=drop_attention, logits=False)
    states = out.decoder.output  # (B, T, D): the output layer's input, read a block of rows at a time
    targets = torch.tensor(answer.targets, device=states.device)  # (T,)
    found = torch.empty(states.shape[:2], dtype=torch.float64, device=states.device)  # (B, T)
    size = max(1, final_linear.block_rows(model.config.target_vocab_size) // n)
    for block in final_linear.row_blocks(states.size(1), size):
        log_p = model.generator(states[:, block]).double().log_softmax(-1)  # (B, C, V)
        found[:, block] = log_p.gather(-1, targets[block][None, :, None].expand(n, -1, 1))[..., 0]
    return found.cpu().numpy()  # (B, T)


def _measure(
    loaded: LoadedModel,
    answer: Answer,
    ablated: Ablation | None,
    clean: torch.Tensor | None = None,
    kept: Parts = _whole,
):
    """Per batch row: the right answer's log-probability (summed over the counted rows) and its per-row values, or
    for an encoder-only model the sentence embedding (the tokens' mean final state), cosine to `clean`."""
    if ablated is None:
        values = kept(None, 1, lambda: _forward(loaded, answer, None, 1))
    else:
        n = ablated.rows
        found = [
            kept(
                (start, stop),
                n,
                lambda start=start, stop=stop: _forward(
                    loaded, answer, ablation.rows(ablated, start, stop), stop - start
                ),
            )
            for start, stop in parts(loaded, answer, n)
        ]
        values = np.concatenate(found)
    if answer.decoder_input is None:
        if clean is None:
            return values.astype(np.float64)
        found = torch.from_numpy(values).double()
        return torch.nn.functional.cosine_similarity(found, clean[None].double(), dim=-1).numpy()
    return values  # (B, T) log p(right token) per row


def sentence_embedding(
    loaded: LoadedModel, answer: Answer, ablated: Ablation | None = None, kept: Parts = _whole
) -> np.ndarray:
    """(D,) the tokens' mean final state: the sentence embedding all-MiniLM-L6-v2 is trained to give (before its
    normalisation, which leaves every cosine unchanged)."""
    return _measure(loaded, answer, ablated, kept=kept)[0]


def cosine(loaded: LoadedModel, answer: Answer, ablated: Ablation) -> float:
    """The sentence embedding's cosine to the clean one with these heads off (1: unchanged)."""
    clean = torch.from_numpy(sentence_embedding(loaded, answer))
    return float(_measure(loaded, answer, ablated, clean)[0])


@dataclass(frozen=True)
class Effects:
    """Each head turned off alone: its measure, and the clean run's. `measure` is "log_probability" (the right
    answer's summed log-probability) or "cosine" (the sentence embedding's cosine to the clean one)."""

    heads: tuple[Head, ...]
    values: np.ndarray  # (N,) the measure with each head off
    clean: float
    measure: str
    where: str
    convention: str = ""  # which ablation, over which texts (Replacement.convention)

    @property
    def change(self) -> np.ndarray:
        """(N,) how the measure moved when each head was off: negative where turning it off hurt (log-probability
        fell, or the embedding turned away from the clean one)."""
        return self.values - self.clean

    def grid(self, kind: str, shape: tuple[int, int]) -> np.ndarray:
        """(L, H) change for one attention kind."""
        found = np.full(shape, np.nan)
        for head, value in zip(self.heads, self.change, strict=True):
            if head.kind == kind:
                found[head.layer, head.head] = value
        return found

    def ranked(self) -> list[tuple[Head, float]]:
        """Heads by their effect, the one whose removal hurt most first."""
        order = np.argsort(self.change, kind="stable")
        return [(self.heads[i], float(self.change[i])) for i in order]


def effects(loaded: LoadedModel, answer: Answer, replaced: Replacement | None = None, kept: Parts = _whole) -> Effects:
    """Every head turned off alone (zero ablation, or `replaced`'s: mean or resample), all in batched forwards: one
    batch row per head, in chunks that fit in memory (`kept`: how the caller keeps and follows each chunk)."""
    replaced = replaced or replacements.zero()
    every, heads = ablation.each_head(model_shapes(loaded), _tensors(replaced.values))
    return Effects(tuple(heads), *_each_row(loaded, answer, every, kept), replaced.convention)


def _each_row(
    loaded: LoadedModel, answer: Answer, every: Ablation, kept: Parts = _whole
) -> tuple[np.ndarray, float, str, str]:
    """(the measure with each batch row's heads off, the clean run's, the measure's name, what it reads): the
    right answer's summed log-probability, or for an encoder-only model the cosine to the clean sentence embedding."""
    if answer.measured_by_embedding:
        clean_embedding = torch.from_numpy(sentence_embedding(loaded, answer, kept=kept))
        values = _measure(loaded, answer, every, clean_embedding, kept)
        return values, 1.0, "cosine", "the sentence embedding with every head on"
    counted = np.array(answer.counted)
    clean = float(_measure(loaded, answer, None, kept=kept)[0][counted].sum())
    values = _measure(loaded, answer, every, kept=kept)[:, counted].sum(-1)
    return values, clean, "log_probability", answer.where


@dataclass(frozen=True)
class LayerEffects:
    """Each layer of each attention kind with all its heads turned off together: its measure, and the clean run's
    (`measure` as in Effects)."""

    layers: tuple[tuple[str, int], ...]  # (kind, layer) of each value
    values: np.ndarray  # (N,) the measure with that layer's heads off
    clean: float
    measure: str
    where: str

    @property
    def change(self) -> np.ndarray:
        """(N,) how the measure moved with each layer off: negative where it hurt."""
        return self.values - self.clean

    def ranked(self) -> list[tuple[tuple[str, int], float]]:
        """Layers by their effect, the one whose heads' removal hurt most first."""
        order = np.argsort(self.change, kind="stable")
        return [(self.layers[i], float(self.change[i])) for i in order]


def layer_effects(loaded: LoadedModel, answer: Answer) -> LayerEffects:
    """Every layer's heads turned off together (zero ablation), one batch row per layer, measured as effects()."""
    every, layers = ablation.each_layer(model_shapes(loaded))
    return LayerEffects(tuple(layers), *_each_row(loaded, answer, every))


@dataclass(frozen=True)
class Outcome:
    """One ablation's run beside the clean one: the outputs, the right answer's probability and loss per row
    (before, after), and the attention maps downstream, run on the same input so they can be compared."""

    heads: tuple[Head, ...]
    method: str
    convention: str  # which ablation, over which texts (Replacement.convention)
    weights: dict[str, np.ndarray]  # per kind, the ablated run's attention (L, H, Tq, Tk), on the clean run's input
    moved: dict[str, np.ndarray]  # per kind, (L, H) how much each head's map moved (moved())
    predicted: tuple[str, ...] | None  # with the heads off: the most likely token at each decoder row
    written: tuple[str, ...] | None  # an encoder-decoder's greedy output with the heads off (it may differ)
    before: output.Scored | None
    after: output.Scored | None
    cosine: float | None  # encoder-only: the sentence embedding's cosine to the clean one
    answer: Answer


def moved(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """(L, H) how much of each query's attention moved, on average over queries: half the summed |change| of its
    weights (0: the same map; 1: all of it went elsewhere). A layer at a time: a long text's layers are recomputed
    when read, and never all held at once."""
    return np.stack([0.5 * np.abs(after[i] - before[i]).sum(-1).mean(-1) for i in range(len(before))])


def outcome(
    loaded: LoadedModel,
    clean: Trace,
    heads: Iterable[Head],
    method: str,
    replaced: Replacement | None = None,
    typed: str = "",
) -> Outcome:
    """Run the sidebar's sentence with these heads off by `method` (`replaced`: its values, computed when not given)
    and measure it against the clean run."""
    chosen = tuple(sorted(set(heads)))
    ablation.heads_off(chosen, model_shapes(loaded))  # a bad request is refused before any values are computed
    found = answer(loaded, clean, typed)
    replaced = replaced or replacement(loaded, method, found.source_ids)
    ablated_by = make(loaded, chosen, method, replaced)
    max_tokens = len(clean.source_tokens)
    if loaded.is_encoder_decoder:
        forced = forward.token_ids(loaded, clean, "decoder")
        ablated = trace.run(loaded, clean.text, max_tokens, ablation=ablated_by, forced=forced)
        budget = trace.target_budget(len(found.source_ids))
        src = torch.tensor([found.source_ids], device=loaded.device)
        ids = greedy.greedy_decode(loaded.model, src, loaded.bos_id, loaded.eos_id, budget, ablated_by)
        vocabulary = loaded.target_vocabulary
        written: tuple[str, ...] | None = tuple(vocabulary.id_to_token(i) for i in ids)
    else:
        ablated = trace.run(loaded, clean.text, max_tokens, ablation=ablated_by)
        written = None
    weights = {kind: ablated.attention(kind).weights for kind in clean.kinds}
    common = dict(
        heads=chosen,
        method=method,
        convention=replaced.convention,
        weights=weights,
        moved={kind: moved(clean.attention(kind).weights, weights[kind]) for kind in clean.kinds},
        predicted=ablated.output_tokens,
        written=written,
        answer=found,
    )
    if found.measured_by_embedding:
        return Outcome(before=None, after=None, cosine=cosine(loaded, found, ablated_by), **common)
    targets = list(found.targets or ()) if loaded.is_encoder_decoder else list(found.source_ids)
    source = list(found.source_ids)
    end = None
    if loaded.is_decoder_only:  # its last row too: the model's own answer after the text, before and after
        common["answer"] = with_text_end(loaded, found, clean)
        end = common["answer"].targets[-1]
    before = output.score(loaded, source, targets, end=end)
    after = output.score(loaded, source, targets, ablation=ablated_by, end=end)
    return Outcome(before=before, after=after, cosine=None, **common)
