"""Run a model on text and keep every internal the views draw, as a frozen record of numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models import greedy
from models.attention import AttentionInternals
from models.registry import LoadedModel
from models.tokenize import TokenizeError
from models.transformer import Ablation

ATTENTION_KINDS = ("encoder_self", "decoder_self", "cross")
TOP_K = 10  # next-token candidates kept per decoding step
MAX_TARGET = 64  # tokens an encoder-decoder may write unless asked for more (the toy tasks need at most 13)


@dataclass(frozen=True)
class AttentionLayer:
    """One layer of one attention kind, as numpy: what every view of a single layer or head reads."""

    q: np.ndarray  # (H, Tq, Dh), after rotation where the model has rotary positions
    k: np.ndarray  # (H, Tk, Dh), a shared key/value head repeated for each query head that reads it
    v: np.ndarray  # (H, Tk, Dh)
    raw_scores: np.ndarray  # (H, Tq, Tk) q k^T
    weights: np.ndarray  # (H, Tq, Tk) softmax rows
    heads: np.ndarray  # (H, Tq, Dh) weights @ v (after any ablation: what W_O read)
    output: np.ndarray  # (Tq, D) after concat and W_O
    q_unrotated: np.ndarray | None = None
    k_unrotated: np.ndarray | None = None


@dataclass(frozen=True)
class AttentionTrace:
    """One kind of attention over every layer: (L, H, Tq, Tk) for scores and weights, (L, H, T, Dh) for q/k/v."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    raw_scores: np.ndarray  # q k^T
    mask: np.ndarray  # (Tq, Tk) bool, True where a key may be seen
    weights: np.ndarray  # softmax rows; these are what the heatmaps draw
    heads: np.ndarray  # weights @ v per head
    output: np.ndarray  # (L, Tq, D) after concat and W_O
    kv_heads: int = 0  # grouped-query attention: key/value heads, each shared by n_heads / kv_heads query heads
    q_unrotated: np.ndarray | None = None  # rotary positions: q and k as projected, before they were turned
    k_unrotated: np.ndarray | None = None

    def layer(self, layer: int) -> AttentionLayer:
        """Layer `layer` (from 0) alone: the way to read a long text's attention one layer at a time."""
        rotary = self.q_unrotated is not None and self.k_unrotated is not None
        return AttentionLayer(
            self.q[layer],
            self.k[layer],
            self.v[layer],
            self.raw_scores[layer],
            self.weights[layer],
            self.heads[layer],
            self.output[layer],
            self.q_unrotated[layer] if rotary else None,
            self.k_unrotated[layer] if rotary else None,
        )

    def sharing(self, head: int) -> tuple[int, ...]:
        """The query heads (counted from 0) that read the same keys and values as `head`, itself included."""
        group = self.n_heads // (self.kv_heads or self.n_heads)
        first = head // group * group
        return tuple(range(first, first + group))

    @property
    def scaled_scores(self) -> np.ndarray:
        """q k^T / sqrt(d_k), computed exactly as models.attention.scale does, so it equals the model's tensor."""
        return self.raw_scores * np.float32(self.q.shape[-1] ** -0.5)

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        return self.weights.shape[1]


@dataclass(frozen=True)
class Trace:
    """A model's run on one text: tokens, every attention kind it has, and the hidden state after each sub-layer."""

    model_key: str
    text: str
    source_tokens: tuple[str, ...]
    source_offsets: tuple[tuple[int, int], ...]
    truncated: int  # source tokens cut to fit max_tokens
    encoder_self: AttentionTrace | None  # None for a decoder-only model (its text goes through the decoder)
    encoder_states: dict[str, np.ndarray] | None  # "embeddings" (T, D), "after_attn" and "after_ffn" (L, T, D)
    # decoder input: [BOS] + greedy output (without a final EOS); decoder-only: the text's own tokens
    target_tokens: tuple[str, ...] | None = None
    # what greedy decoding produced, EOS included; decoder-only: the most likely next token at every position
    output_tokens: tuple[str, ...] | None = None
    decoder_self: AttentionTrace | None = None
    cross: AttentionTrace | None = None
    decoder_states: dict[str, np.ndarray] | None = None
    top_tokens: tuple[tuple[str, ...], ...] | None = None  # per decoder row: the most probable next tokens
    top_probabilities: np.ndarray | None = None  # (T, k) their softmax probabilities, most probable first
    source_word_ids: tuple[int | None, ...] = ()  # which word each source token came from; None for specials

    def attention(self, kind: str) -> AttentionTrace:
        """encoder_self, decoder_self or cross; ValueError when this model has no such attention."""
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; choose from {', '.join(ATTENTION_KINDS)}")
        found = getattr(self, kind)
        if found is None:
            shape = "decoder-only" if self.encoder_self is None else "encoder-only"
            raise ValueError(f"model {self.model_key!r} has no {kind} attention (it is {shape})")
        return found

    @property
    def decoder_only(self) -> bool:
        return self.encoder_self is None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in ATTENTION_KINDS if getattr(self, k) is not None)

    def tokens_for(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query tokens, key tokens) for an attention kind."""
        self.attention(kind)
        if kind == "encoder_self" or self.decoder_only:
            return self.source_tokens, self.source_tokens
        assert self.target_tokens is not None
        return self.target_tokens, self.target_tokens if kind == "decoder_self" else self.source_tokens


UNKNOWN = "[UNK]"  # what a BERT-family tokenizer writes for text outside its vocabulary


def unknown_pieces(result: Trace) -> list[str]:
    """The pieces of the text the tokenizer could read only as [UNK], as they were typed (five emoji make one)."""
    spans = zip(result.source_tokens, result.source_offsets, strict=True)
    return [result.text[a:b] for token, (a, b) in spans if token == UNKNOWN]


def _stack(layers: list[AttentionInternals]) -> AttentionTrace:
    """Batch row 0 of every layer's internals, stacked on a new leading layer axis."""

    def cat(name: str) -> np.ndarray:
        return torch.stack([getattr(a, name)[0] for a in layers]).numpy()  # (L, ...)

    q = cat("q")
    mask = layers[0].mask
    tq, tk = layers[0].weights.shape[-2:]
    full_mask = np.ones((tq, tk), bool) if mask is None else mask[0, 0].expand(tq, tk).numpy().copy()
    rotary = layers[0].q_unrotated is not None
    return AttentionTrace(
        q,
        cat("k"),
        cat("v"),
        cat("raw_scores"),
        full_mask,
        cat("weights"),
        cat("heads"),
        cat("output"),
        layers[0].kv_heads,
        cat("q_unrotated") if rotary else None,
        cat("k_unrotated") if rotary else None,
    )


def check_max_tokens(loaded: LoadedModel, max_tokens: int) -> int:
    """The limit to tokenize with; a limit above what the model can take is a usage error."""
    if not 3 <= max_tokens <= loaded.max_tokens:
        raise TokenizeError(f"max tokens must be between 3 and {loaded.max_tokens} for {loaded.key}, not {max_tokens}")
    return max_tokens


@torch.inference_mode()
def run(
    loaded: LoadedModel,
    text: str,
    max_tokens: int | None = None,
    max_target: int | None = None,
    encoder_only: bool = False,
    ablation: Ablation | None = None,
    forced: list[int] | None = None,
) -> Trace:
    """Tokenize (cutting at max_tokens), run the model once with capture, and copy its internals out as numpy.
    encoder_only: run the encoder alone, even for an encoder-decoder (no decoding; its decoder fields stay None).
    ablation: with those heads turned off (models.ablation), greedy decoding included. forced: an encoder-decoder's
    decoder input ([BOS] first) to run teacher-forced instead of greedy decoding (to compare two runs' maps row by
    row); its output_tokens are then each row's most probable token."""
    limit = check_max_tokens(loaded, loaded.max_tokens if max_tokens is None else max_tokens)
    enc = loaded.tokenizer.encode(text, limit)
    src = torch.tensor([enc.ids])
    model = loaded.model
    common = dict(
        model_key=loaded.key,
        text=text,
        source_tokens=enc.tokens,
        source_offsets=enc.offsets,
        truncated=enc.truncated,
        source_word_ids=enc.word_ids,
    )
    if loaded.is_decoder_only:
        return _decoder_only(loaded, src, enc.tokens, common, ablation)
    if encoder_only or not loaded.is_encoder_decoder:
        out = model(src, ablation=ablation)
        return Trace(
            encoder_self=_stack([layer.self_attn for layer in out.encoder.layers]),
            encoder_states=_states(out.encoder),
            **common,
        )
    assert loaded.bos_id is not None and loaded.eos_id is not None
    if forced is None:
        budget = target_budget(len(enc.ids)) if max_target is None else max_target
        # the same tokens as model.greedy_decode, each step run on its newest position only (seconds faster at 512)
        generated = greedy.greedy_decode(model, src, loaded.bos_id, loaded.eos_id, budget, ablation)
        # the decoder's input: [BOS] then every generated token but a final EOS, so row i is the step that chose
        # token i
        ending = generated[:-1] if generated and generated[-1] == loaded.eos_id else generated
        decoder_input = [loaded.bos_id, *ending]
    else:
        decoder_input = list(forced)
    out = model(src, torch.tensor([decoder_input]), ablation=ablation)
    if forced is not None:
        generated = out.logits[0].argmax(-1).tolist()
    decoder_layers = out.decoder.layers
    vocabulary = loaded.target_vocabulary
    return Trace(
        encoder_self=_stack([layer.self_attn for layer in out.encoder.layers]),
        encoder_states=_states(out.encoder),
        target_tokens=tuple(vocabulary.id_to_token(i) for i in decoder_input),
        output_tokens=tuple(vocabulary.id_to_token(i) for i in generated),
        decoder_self=_stack([layer.self_attn for layer in decoder_layers]),
        cross=_stack([layer.cross_attn for layer in decoder_layers]),
        decoder_states=_states(out.decoder),
        **_top(out, vocabulary),
        **common,
    )


def target_budget(n_source: int) -> int:
    """Tokens greedy decoding may write for a source of this length: room for a somewhat longer output and its EOS;
    untrained models rarely stop, so at most MAX_TARGET."""
    return min(n_source + 2, MAX_TARGET)


def _top(out, vocabulary) -> dict:
    """Final linear + softmax (figure 1, top): the candidates for each next token, most probable first."""
    probabilities = out.probabilities[0]  # (T, V)
    top = probabilities.topk(min(TOP_K, probabilities.size(-1)), dim=-1)  # (T, k)
    return {
        "top_tokens": tuple(tuple(vocabulary.id_to_token(i) for i in row) for row in top.indices.tolist()),
        "top_probabilities": top.values.numpy(),
    }


def _decoder_only(
    loaded: LoadedModel, src: torch.Tensor, tokens: tuple[str, ...], common: dict, ablation: Ablation | None
) -> Trace:
    """A decoder-only model's run: the text goes through the decoder (masked self-attention), and every position
    predicts the next token."""
    out = loaded.model(src, ablation=ablation)
    found = _top(out, loaded.tokenizer)
    return Trace(
        encoder_self=None,
        encoder_states=None,
        target_tokens=tokens,
        output_tokens=tuple(row[0] for row in found["top_tokens"]),
        decoder_self=_stack([layer.self_attn for layer in out.decoder.layers]),
        decoder_states=_states(out.decoder),
        **found,
        **common,
    )


def _states(stack) -> dict[str, np.ndarray]:
    """The stack's input and, per sub-layer (by its internals' field, in the layer's order), every layer's state
    after it: (L, T, D)."""
    states = {"embeddings": stack.embeddings[0].numpy()}
    for name in state_names(stack.layers[0]):
        states[name] = torch.stack([getattr(layer, name)[0] for layer in stack.layers]).numpy()  # (L, T, D)
    return states


def state_names(internals) -> tuple[str, ...]:
    """The state fields a layer's internals hold, in order (a decoder-only layer has no after_cross_attn)."""
    names = ("after_attn", "after_self_attn", "after_cross_attn", "after_ffn")
    return tuple(n for n in names if getattr(internals, n, None) is not None)
