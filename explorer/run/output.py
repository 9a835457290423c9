"""Final linear -> logits -> softmax, sampling, and the loss against a target (no streamlit).

The loss is the one the model trains with: cross-entropy over the target vocabulary with label smoothing (section
5.4), target = (1 - eps) on the right token + eps / V spread over every token (PyTorch's definition); eps is the
paper's 0.1 for an encoder-decoder, the recipe's for a toy model, and 0 for a pretrained decoder-only model (GPT-2
trains with plain cross-entropy). A decoder-only model's target is its own text: each token predicted from the
ones before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.explorer.run import forward
from attention_explorer.explorer.run.layers import drop_attention
from attention_explorer.explorer.run.logits import final_linear as _logits
from attention_explorer.explorer.run.logits import logits_from_state, row_blocks, row_logits
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models import greedy, tasks, train
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import Ablation, padding_mask

EPSILON = 0.1  # label smoothing, section 5.4 (models.train.Recipe.label_smoothing)
METHODS = ("greedy", "top-k", "top-p", "sample")  # "sample": from the whole distribution
CONTINUATION = 20  # new tokens a decoder-only model writes after its text


def _decoder(loaded: LoadedModel):
    if not loaded.family.next_token_head:
        raise ValueError(f"model {loaded.key!r} is encoder-only: it has no output distribution")
    return loaded.model


def epsilon_for(loaded: LoadedModel) -> float:
    """The label smoothing the model trains with: its recipe's (toy models), none for a pretrained decoder-only
    model, else the paper's (section 5.4)."""
    if loaded.task is not None and loaded.task.name in train.RECIPES:
        return train.RECIPES[loaded.task.name].label_smoothing
    return 0.0 if loaded.is_decoder_only else EPSILON


GREEDY_TARGET = "the model's own greedy output (no right answer known)"


def scored_token(where: str) -> str:
    """What a scored token is called, from where the targets come from (target_for): "right", or "greedy" when no
    right answer is known (a random model's own output is nothing to be right about)."""
    return "greedy" if where == GREEDY_TARGET else "right"


def text_target(loaded: LoadedModel) -> str:
    """Where a decoder-only model's target comes from."""
    return "the text itself (each token predicted from the ones before it)"


@dataclass(frozen=True)
class OutputMatrix:
    """W of the final linear layer: its shape, which embedding matrices it is (section 3.4), and its bias."""

    vocab_size: int
    d_model: int
    target_embedding: bool  # W is the decoder's token embedding matrix itself
    source_embedding: bool  # ... and the encoder's too
    bias_zero: bool | None  # None: the layer has no bias (GPT-2)
    decoder_only: bool = False


def output_matrix(loaded: LoadedModel) -> OutputMatrix:
    """What the model's generator holds, read off the model (the same Parameter object, not equal values)."""
    model = _decoder(loaded)
    weight, bias = model.generator.weight, model.generator.bias
    return OutputMatrix(
        *weight.shape,
        weight is model.decoder.embeddings.token.weight,
        model.encoder is not None and weight is model.encoder.embeddings.token.weight,
        None if bias is None else bool((bias == 0).all()),
        model.encoder is None,
    )


@dataclass(frozen=True)
class FinalNorm:
    """What a pre-norm stack's final norm does to the decoder's last vector h before the output matrix reads it."""

    name: str  # "RMSNorm" or "LayerNorm", as formulas name it
    before: float  # |h|
    after: float  # |FinalNorm(h)|: what W multiplies
    gain: float  # the norm's gamma, its mean over d_model: how far it scales h / rms(h)


@torch.inference_mode()
def final_norm(loaded: LoadedModel, state: np.ndarray) -> FinalNorm | None:
    """The final norm of the decoder's last vector `state` (D,), with the model's own module; None for a post-LN stack
    (the paper's, BERT's), whose last Add & Norm output goes to the output matrix as it is."""
    module = _decoder(loaded).decoder.final_norm
    if module is None:
        return None
    row = torch.from_numpy(np.array(state, np.float32)).to(loaded.device)
    after = module(row)
    return FinalNorm(
        loaded.family.block.norm_name, float(row.norm()), float(after.norm()), float(module.weight.double().mean())
    )


def trace_logits(loaded: LoadedModel, trace: Trace) -> np.ndarray:
    """(T, V) logits of every row of the trace's decoder (its input: [BOS] + greedy output): a short text's only (the
    pages read a row at a time, row_logits, or a run's reductions: explorer/run/logits.py)."""
    return logits_from_state(loaded, forward.states(trace, "decoder")["after_ffn"][-1])


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """softmax(logits / T) over the last axis, in float64; T = 1 is the model's own distribution."""
    if temperature <= 0:
        raise ValueError("temperature must be above 0")
    z = np.asarray(logits, np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def keep(probabilities: np.ndarray, method: str, top_k: int = 10, top_p: float = 0.9) -> np.ndarray:
    """The distribution a sampler draws from: top-k or top-p (nucleus) cut and renormalised; greedy keeps the
    most probable token only."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    order = np.argsort(-probabilities, kind="stable")
    kept = np.zeros_like(probabilities, dtype=bool)
    if method == "greedy":
        kept[order[0]] = True
    elif method == "top-k":
        kept[order[: max(1, top_k)]] = True
    elif method == "top-p":
        # the fewest most-probable tokens whose probabilities add up to at least p
        cumulative = np.cumsum(probabilities[order])
        kept[order[: int(np.searchsorted(cumulative, top_p)) + 1]] = True
    else:
        kept[:] = True
    cut = np.where(kept, probabilities, 0.0)
    return cut / cut.sum()


@dataclass(frozen=True)
class Sampled:
    """What a sampler wrote: its tokens (EOS included when reached) and, per step, the chosen token's probability
    under softmax(logits / T) and after the cut."""

    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    probabilities: tuple[float, ...]
    kept_probabilities: tuple[float, ...]
    kept_counts: tuple[int, ...]  # tokens left to draw from at each step


@torch.inference_mode()
def sample(
    loaded: LoadedModel,
    source_ids: list[int],
    method: str = "greedy",
    temperature: float = 1.0,
    top_k: int = 10,
    top_p: float = 0.9,
    seed: int = 0,
    max_new: int = 64,
    run: Trace | None = None,
) -> Sampled:
    """Write an output one token at a time with the model, drawing each next token by `method` (seeded: the same
    arguments always write the same output). `run`: a decoder-only model's trace of `source_ids`, whose kept states
    give the key/value caches and the first next-token logits without a forward."""
    model = _decoder(loaded)
    rng = np.random.default_rng(seed)
    src = torch.tensor([source_ids], device=loaded.device)
    written: list[int] = []
    probabilities, kept_p, counts = [], [], []
    if model.encoder is None:  # decoder-only: continue the text, each step on its newest position (a key/value cache)
        # the caches from the states that entered each layer: a trace's kept ones, else a run's that keeps no head
        if run is None:
            run_states = model(src, keep=drop_attention, logits=False).decoder
            inputs = [run_states.embeddings, *(layer.after_ffn for layer in run_states.layers[:-1])]
            final = run_states.layers[-1].after_ffn[0].cpu().numpy()
        else:
            kept = forward.states(run, "decoder")
            assert forward.token_ids(loaded, run, "decoder") == list(source_ids), "the trace was made from another text"
            inputs = [
                torch.from_numpy(np.array(x))[None].to(loaded.device)
                for x in (kept["embeddings"], *kept["after_ffn"][:-1])
            ]
            final = kept["after_ffn"][-1]
        caches = greedy.prefix_caches(model, inputs)
        next_logits = torch.from_numpy(row_logits(loaded, final, len(source_ids) - 1)).to(loaded.device)
        steps = min(max_new, model.config.max_len - len(source_ids))
    else:
        memory = model.encode(src).output
        src_mask = padding_mask(src, model.config.pad_id)
        steps = min(max_new, model.config.max_len - 1)
    for _ in range(steps):
        if model.encoder is None:
            if written:
                next_logits = greedy.next_logits(model, src.new_tensor([[*source_ids, *written]]), caches, None)[0]
            logits_row = next_logits
        else:
            _, logits = model.decode(src.new_tensor([[loaded.bos_id, *written]]), memory, src_mask)
            logits_row = logits[0, -1]
        p = softmax(logits_row.cpu().numpy(), temperature)
        cut = keep(p, method, top_k, top_p)
        chosen = int(np.argmax(cut)) if method == "greedy" else int(rng.choice(cut.size, p=cut))
        written.append(chosen)
        probabilities.append(float(p[chosen]))
        kept_p.append(float(cut[chosen]))
        counts.append(int((cut > 0).sum()))
        if chosen == loaded.eos_id and model.encoder is not None:
            break
    vocabulary = loaded.target_vocabulary
    return Sampled(
        tuple(vocabulary.id_to_token(i) for i in written),
        tuple(written),
        tuple(probabilities),
        tuple(kept_p),
        tuple(counts),
    )


def greedy_from_trace(trace: Trace) -> Sampled:
    """Greedy decoding at T = 1 is what an encoder-decoder's trace already holds: its output and each pick's
    probability."""
    assert not trace.decoder_only, "a decoder-only trace holds next-token predictions, not a continuation"
    assert trace.output_tokens is not None and trace.top_probabilities is not None and trace.top_tokens is not None
    # a trace that stopped at its budget, not at EOS, holds one more position (the pick after the last token)
    picked = tuple(float(p[0]) for p in trace.top_probabilities[: len(trace.output_tokens)])
    return Sampled(trace.output_tokens, (), picked, tuple(1.0 for _ in picked), tuple(1 for _ in picked))


def right_answer(loaded: LoadedModel, trace: Trace) -> tuple[str, ...] | None:
    """The task's right output words for the trace's source (toy tasks only), or None."""
    if loaded.task is None:
        return None
    words = tuple(t for t in trace.source_tokens if t not in tasks.SPECIALS)
    pair = loaded.task.expected(words)
    return None if pair is None else pair.target


def target_ids(loaded: LoadedModel, text: str) -> list[int]:
    """A typed target as the ids the decoder should write, ending with EOS (TokenizeError when unreadable)."""
    vocabulary = loaded.target_vocabulary
    encoding = vocabulary.encode(text, loaded.max_tokens)
    ids = list(encoding.ids)
    if ids and ids[0] == loaded.bos_id:  # WordPiece adds [CLS] (the BOS here) first; its [SEP] is the EOS
        ids = ids[1:]
    return ids


def target_for(loaded: LoadedModel, trace: Trace, text: str = "") -> tuple[list[int], str]:
    """(target ids ending with EOS, where they come from): a typed target, else the task's right answer, else the
    model's own greedy output. A decoder-only model's target is its text itself (whatever is typed)."""
    if loaded.is_decoder_only:
        return forward.token_ids(loaded, trace, "decoder"), text_target(loaded)
    if text.strip():
        return target_ids(loaded, text), "the target you typed"
    right = right_answer(loaded, trace)
    if right is not None:
        return ids_of(loaded, right), "the task's right answer"
    assert trace.output_tokens is not None
    vocabulary = loaded.target_vocabulary
    return [vocabulary.token_to_id(t) for t in trace.output_tokens], GREEDY_TARGET


def ids_of(loaded: LoadedModel, words: tuple[str, ...]) -> list[int]:
    """Target words (of the task's vocabulary) and EOS as ids."""
    vocabulary = loaded.target_vocabulary
    return [*(vocabulary.token_to_id(w) for w in words), loaded.eos_id]


@dataclass(frozen=True)
class Scored:
    """The decoder run with teacher forcing on a target: row i reads the start token + target[:i] and should write
    target[i]. What a page draws of every row, and the decoder's last states to read any one row's logits
    (`logits`): a long text's (T, V) logits (400 MB for SmolLM2 at 2,048 tokens) are never kept."""

    decoder_input: tuple[str, ...]
    targets: tuple[str, ...]
    target_ids: tuple[int, ...]
    final_states: np.ndarray  # (T', D) the decoder's last states (before a final norm), T' >= T: every row it ran
    per_token: np.ndarray  # (T,) label-smoothed cross-entropy, what training minimises
    nll: np.ndarray  # (T,) -log p(right token): plain cross-entropy
    epsilon: float
    predicted: tuple[str, ...]  # the most probable token of each row
    vocab_size: int

    @property
    def mean(self) -> float:
        return float(self.per_token.mean())

    def logits(self, loaded: LoadedModel, row: int) -> np.ndarray:
        """(V,) row `row`'s logits, the numbers of the run that scored it."""
        return row_logits(loaded, self.final_states, row)

    def right_probabilities(self) -> np.ndarray:
        """(T,) the probability (T = 1) each row gives the token it should write."""
        return np.exp(-self.nll)


def smoothed_target(target_id: int, vocab_size: int, epsilon: float = EPSILON) -> np.ndarray:
    """The distribution training pulls towards: (1 - eps) on the right token plus eps / V on every token."""
    q = np.full(vocab_size, epsilon / vocab_size)
    q[target_id] += 1.0 - epsilon
    return q


def loss_floor(vocab_size: int, epsilon: float = EPSILON) -> float:
    """The lowest label-smoothed loss any prediction can reach: the smoothed target's own entropy (at p = q)."""
    q = smoothed_target(0, vocab_size, epsilon)
    q = q[q > 0]  # 0 log 0 = 0
    entropy = float(-(q * np.log(q)).sum())
    return entropy if entropy > 0 else 0.0  # a one-hot target's entropy is 0, not -0


def smoothed_cross_entropy(logits: np.ndarray, target_ids: list[int], epsilon: float = EPSILON) -> np.ndarray:
    """Per row: -sum_v q_v log p_v with q the smoothed target (float64 log-softmax)."""
    z = np.asarray(logits, np.float64)
    log_p = z - z.max(-1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))
    rows = np.arange(len(target_ids))
    nll = -log_p[rows, target_ids]
    uniform = -log_p.mean(-1)
    return (1 - epsilon) * nll + epsilon * uniform


def _losses(normaliser, mean, right, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row (-log p(right token), the label-smoothed cross-entropy) from log sum_v exp(logit_v), the mean logit
    and the right token's logit: float32 sums (their rounding, ~1e-6, is far below the four decimals drawn)
    subtracted in float64."""
    normaliser = np.asarray(normaliser, np.float64)
    nll = normaliser - np.asarray(right, np.float64)
    uniform = normaliser - np.asarray(mean, np.float64)  # -mean_v log p_v: the smoothed target's uniform part
    return nll, (1 - epsilon) * nll + epsilon * uniform


SCORE_ROWS = 256  # rows of logits at a time while scoring: 50 MB for a 49,152-word vocabulary


@torch.inference_mode()
def _score_rows(
    loaded: LoadedModel, final_states: np.ndarray, decoder_input: list[int], targets: list[int], epsilon: float
) -> Scored:
    """Score rows 0..len(targets)-1 of a run from its last states, SCORE_ROWS rows of logits at a time."""
    model = _decoder(loaded)
    n = len(targets)
    nll, per_token, predicted = np.empty(n), np.empty(n), np.empty(n, np.int64)
    for block in row_blocks(n, SCORE_ROWS):
        logits = _logits(model, torch.from_numpy(np.array(final_states[block], np.float32)).to(loaded.device))  # (n, V)
        right = logits.gather(-1, torch.tensor(targets[block], device=logits.device)[:, None])[:, 0]
        sums = (logits.logsumexp(-1).cpu(), logits.mean(-1).cpu(), right.cpu())  # (n,) each, back from the device
        nll[block], per_token[block] = _losses(*sums, epsilon)
        predicted[block] = logits.argmax(-1).cpu().numpy()
    vocabulary = loaded.target_vocabulary
    return Scored(
        tuple(vocabulary.id_to_token(i) for i in decoder_input),
        tuple(vocabulary.id_to_token(i) for i in targets),
        tuple(targets),
        final_states,
        per_token,
        nll,
        epsilon,
        tuple(vocabulary.id_to_token(int(i)) for i in predicted),
        model.generator.out_features,
    )


@torch.inference_mode()
def score(
    loaded: LoadedModel,
    source_ids: list[int],
    targets: list[int],
    epsilon: float | None = None,
    ablation: Ablation | None = None,
    end: int | None = None,
) -> Scored:
    """Teacher forcing on `targets` (ending with EOS), exactly as models.train feeds a batch of one; a decoder-only
    model reads its text (`targets`: the same ids) and each position is scored on the next token, and with `end` its
    last position too, on that token (what comes after the text: the model's own answer). `epsilon`: the label
    smoothing, by default the one the model trains with (epsilon_for); `ablation`: heads turned off."""
    model = _decoder(loaded)
    epsilon = epsilon_for(loaded) if epsilon is None else epsilon
    if model.encoder is None:
        if len(targets) < 2:
            raise ValueError("a text of one token has no next token to score")
        out = model(torch.tensor([targets], device=loaded.device), ablation=ablation, keep=drop_attention, logits=False)
        if end is None:
            decoder_input, targets = list(targets[:-1]), list(targets[1:])
        else:  # the same forward: its last row, which reads the whole text, scored on `end`
            decoder_input, targets = list(targets), [*targets[1:], end]
    else:
        targets = targets[: model.config.max_len]
        decoder_input = [loaded.bos_id, *targets[:-1]]
        src, tgt = (torch.tensor([ids], device=loaded.device) for ids in (source_ids, decoder_input))
        out = model(src, tgt, ablation=ablation, keep=drop_attention, logits=False)  # scored in row blocks below
    assert out.decoder is not None
    return _score_rows(loaded, out.decoder.layers[-1].after_ffn[0].cpu().numpy(), decoder_input, targets, epsilon)


def score_text(loaded: LoadedModel, run: Trace, epsilon: float | None = None) -> Scored:
    """A decoder-only model's score on its own text from its trace, without a forward or the output layer: each row's
    loss on the next token from what the run kept of its logits (TextLogits; the trace's run: the heads it ran
    without, off)."""
    if not run.decoder_only:
        raise ValueError("score_text scores a decoder-only model's text; score teacher-forces a target")
    ids = forward.token_ids(loaded, run, "decoder")
    if len(ids) < 2:
        raise ValueError("a text of one token has no next token to score")
    epsilon = epsilon_for(loaded) if epsilon is None else epsilon
    kept = run.text_logits
    assert kept is not None and run.output_tokens is not None
    nll, per_token = _losses(kept.normaliser[:-1], kept.mean[:-1], kept.next, epsilon)
    return Scored(
        run.source_tokens[:-1],
        run.source_tokens[1:],
        tuple(ids[1:]),
        forward.states(run, "decoder")["after_ffn"][-1],  # (T, D): every row the trace's forward ran
        per_token,
        nll,
        epsilon,
        run.output_tokens[:-1],  # each row's most probable token, the run's own
        _decoder(loaded).generator.out_features,
    )
