"""Run a model on text and keep every internal the views draw, as a frozen record of numpy arrays."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.explorer.run import device_layers
from attention_explorer.explorer.run import logits as final_linear
from attention_explorer.explorer.run.layers import (
    Admit,
    AttentionLayer,
    Layer,
    LayerArray,
    OnStates,
    Reducer,
    Reductions,
    StackLayers,
    drop_attention,
)
from attention_explorer.models import greedy
from attention_explorer.models.attention import raw_scores_dropped
from attention_explorer.models.device import numpy as host
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.tokenize import Spelling, TokenizeError
from attention_explorer.models.transformer import Ablation, padding_mask

__all__ = ["AttentionLayer", "AttentionTrace", "LayerArray", "Trace", "run"]

ATTENTION_KINDS = ("encoder_self", "decoder_self", "cross")
TOP_K = final_linear.TOP_K  # next-token candidates kept per decoding step
TextLogits = final_linear.TextLogits  # what the loss of a decoder-only model's text needs of its logits
MAX_TARGET = 64  # tokens an encoder-decoder may write unless asked for more (the toy tasks need at most 13)


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """One kind of attention over every layer, each layer recomputed when read (explorer/run/layers.py):
    `layer(i)` for one layer's numpy arrays; or the (L, ...) arrays q/k/v (L, H, T, Dh), raw_scores and weights
    (L, H, Tq, Tk), heads (L, H, Tq, Dh) and output (L, Tq, D), indexed by layer first."""

    source: StackLayers
    module: str  # the sub-layer: "self_attn" or "cross_attn"
    mask: np.ndarray  # (Tq, Tk) bool, True where a key may be seen
    n_heads: int
    d_head: int
    d_model: int
    kv_heads: int = 0  # grouped-query attention: key/value heads, each shared by n_heads / kv_heads query heads
    rotary: bool = False  # rotary positions: q_unrotated and k_unrotated hold q and k before they were turned
    # each layer's sliding window of keys (None: global; Gemma 3's local layers, Mistral): `mask` is the causal mask
    # every layer shares, mask_of(i) a layer's own; () where no layer has one
    windows: tuple[int | None, ...] = ()

    def mask_of(self, layer: int) -> np.ndarray:
        """(Tq, Tk) bool: what layer `layer`'s queries may see: `mask`, and within a local layer's window only (key j
        visible to query i when i - w < j, as models.attention.window_mask)."""
        window = self.windows[layer] if self.windows else None
        if window is None:
            return self.mask
        tq, tk = self.mask.shape
        queries, keys = np.arange(tk - tq, tk)[:, None], np.arange(tk)[None, :]  # queries are the last Tq positions
        return self.mask & (keys > queries - window)

    def layer(self, layer: int) -> AttentionLayer:
        """Layer `layer` (from 0) alone: the way to read a long text's attention one layer at a time."""
        if not 0 <= layer < self.n_layers:
            raise IndexError(f"layer {layer} of {self.n_layers}")
        return self.source.layer(layer).attention[self.module]

    def ready(self, layer: int) -> bool:
        """Whether layer `layer` is at hand (kept by the run, or recomputed and still cached): no wait to read it."""
        return self.source.ready(layer)

    def _array(self, field: str, shape: tuple[int, ...]) -> LayerArray:
        # a[layer, head] of a field by head reads that head alone (device_layers.head: on a GPU, no other comes back)
        head = (lambda i, h: device_layers.head(self.source, i, self.module, field, h)) if field != "output" else None
        return LayerArray(self.n_layers, shape, lambda i: getattr(self.layer(i), field), head)

    def query_row(self, layer: int, query: int) -> AttentionLayer:
        """Layer `layer` with one query row (Tq = 1) of q, scores, weights, heads, output (device_layers.query_row)."""
        return device_layers.query_row(self.source, layer, self.module, query)

    def reduced(self, on_host: Callable, on_device: Callable, layers: Iterable[int] | None = None) -> list[np.ndarray]:
        """Each layer's weights reduced (device_layers.reduced): on a GPU, reduced there and only the results copied;
        `layers`: those layers only (all by default)."""
        chosen = range(self.n_layers) if layers is None else layers
        return [device_layers.reduced(self.source, i, self.module, on_host, on_device) for i in chosen]

    @property
    def n_layers(self) -> int:
        return self.source.n_layers

    @property
    def q(self) -> LayerArray:
        return self._array("q", (self.n_heads, self.mask.shape[0], self.d_head))

    @property
    def k(self) -> LayerArray:
        return self._array("k", (self.n_heads, self.mask.shape[1], self.d_head))

    @property
    def v(self) -> LayerArray:
        return self._array("v", (self.n_heads, self.mask.shape[1], self.d_head))

    @property
    def raw_scores(self) -> LayerArray:  # q k^T
        return self._array("raw_scores", (self.n_heads, *self.mask.shape))

    @property
    def weights(self) -> LayerArray:  # softmax rows; these are what the heatmaps draw
        return self._array("weights", (self.n_heads, *self.mask.shape))

    @property
    def heads(self) -> LayerArray:  # weights @ v per head
        return self._array("heads", (self.n_heads, self.mask.shape[0], self.d_head))

    @property
    def output(self) -> LayerArray:  # (L, Tq, D) after concat and W_O
        return self._array("output", (self.mask.shape[0], self.d_model))

    @property
    def q_unrotated(self) -> LayerArray | None:
        return self._array("q_unrotated", (self.n_heads, self.mask.shape[0], self.d_head)) if self.rotary else None

    @property
    def k_unrotated(self) -> LayerArray | None:
        return self._array("k_unrotated", (self.n_heads, self.mask.shape[1], self.d_head)) if self.rotary else None

    @property
    def scaled_scores(self) -> LayerArray:
        """q k^T / sqrt(d_k), computed exactly as models.attention.scale does, so it equals the model's tensor."""
        return LayerArray(self.n_layers, (self.n_heads, *self.mask.shape), lambda i: self.layer(i).scaled_scores)

    def sharing(self, head: int) -> tuple[int, ...]:
        """The query heads (counted from 0) that read the same keys and values as `head`, itself included."""
        group = self.n_heads // (self.kv_heads or self.n_heads)
        first = head // group * group
        return tuple(range(first, first + group))


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
    # what run(reduce=...) reduced every layer to while it held it: {reducer name: {kind: (L, ...)}}
    reduced: dict[str, dict[str, np.ndarray]] | None = None
    text_logits: TextLogits | None = None  # decoder-only: what the loss of the text itself needs of the logits
    spelling: Spelling = Spelling()  # how the tokenizer spells tokens: the readable labels views draw

    def readable(self, tokens: Sequence[str]) -> tuple[str, ...]:
        """Tokens of this model (the text's, or any it predicts) as text a class can read: models.tokenize.Spelling;
        the raw tokens stay in source_tokens, target_tokens, top_tokens for lookups, hover text and exports."""
        return self.spelling.labels(tokens)

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

    def labels_for(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query labels, key labels) for an attention kind: tokens_for's tokens made readable, what figures draw."""
        queries, keys = self.tokens_for(kind)
        return self.readable(queries), self.readable(keys)


UNKNOWN = "[UNK]"  # what a BERT-family tokenizer writes for text outside its vocabulary


def unknown_pieces(result: Trace) -> list[str]:
    """The pieces of the text the tokenizer could read only as [UNK], as they were typed (five emoji make one)."""
    spans = zip(result.source_tokens, result.source_offsets, strict=True)
    return [result.text[a:b] for token, (a, b) in spans if token == UNKNOWN]


def _attention(source: StackLayers, module: str, mask: torch.Tensor | None, tq: int, tk: int) -> AttentionTrace:
    """A stack's `module` attention ("self_attn", "cross_attn") over every layer, each recomputed when read."""
    found = source.module(module)
    full_mask = np.ones((tq, tk), bool) if mask is None else host(mask[0, 0].expand(tq, tk)).copy()
    return AttentionTrace(
        source,
        module,
        full_mask,
        found.n_heads,
        found.d_head,
        found.n_heads * found.d_head,
        found.n_kv_heads,
        found.rotary is not None and module == "self_attn",
        _windows(source, module),
    )


def _windows(source: StackLayers, module: str) -> tuple[int | None, ...]:
    """Each layer's sliding window for `module` (models.attention.MultiHeadAttention.window); () where none has one."""
    found = tuple(source.module(module, i).window for i in range(source.n_layers))
    return found if any(w is not None for w in found) else ()


# a run whose attention weights come to at most this many bytes keeps every layer (a 128-token MiniLM run: 4.7 MB);
# a longer one keeps the residual stream and recomputes a layer when it is read
KEEP_ALL_BYTES = 16 * 2**20


def short(loaded: LoadedModel, length: int) -> bool:
    """Whether a run of `length` tokens keeps every layer: each stack's attention weights within KEEP_ALL_BYTES."""
    config = loaded.model.config
    layers = max(config.n_encoder_layers, config.n_decoder_layers)
    return layers * config.n_heads * length * length * 4 <= KEEP_ALL_BYTES


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
    reload: Callable[[], LoadedModel] | None = None,
    keep_all: bool | None = None,
    reduce: dict[str, Reducer | OnStates] | None = None,
    progress: Callable[[int, int], None] | None = None,
    admit: Admit | None = None,
) -> Trace:
    """Tokenize (cutting at max_tokens), run the model once with capture, and copy its internals out as numpy.
    encoder_only: run the encoder alone, even for an encoder-decoder (no decoding; its decoder fields stay None).
    ablation: with those heads turned off (models.ablation), greedy decoding included. forced: an encoder-decoder's
    decoder input ([BOS] first) to run teacher-forced instead of greedy decoding (to compare two runs' maps row by
    row); its output_tokens are then each row's most probable token. The run keeps no attention: a layer is run
    again when a view reads it (explorer/run/layers.py), with `loaded`, or `reload()` once `loaded` is let go;
    `keep_all`: keep every layer from this run instead (a model still training, whose weights will have changed by
    the time a view reads it); by default, a short text's run keeps every layer (KEEP_ALL_BYTES): nothing to
    recompute. `reduce`: what views read of every layer (thumbnails, a best link), computed while the run holds each
    layer, in `reduced`; `progress(layers done, layers)` is told after each layer of the forward that is kept.
    `admit(seconds, bytes)`: the context a layer is recomputed in (the app's admission, explorer/run/admission.py)."""
    limit = check_max_tokens(loaded, loaded.max_tokens if max_tokens is None else max_tokens)
    enc = loaded.tokenizer.encode(text, limit)
    keep_every = short(loaded, len(enc.ids)) if keep_all is None else keep_all
    # a run that keeps no layer's attention holds no layer's raw scores either (their views recompute the layer)
    with contextlib.nullcontext() if keep_every else raw_scores_dropped():
        return _run(
            loaded, text, enc, max_target, encoder_only, ablation, forced, reload, keep_every, reduce, progress, admit
        )


def _run(
    loaded, text, enc, max_target, encoder_only, ablation, forced, reload, keep_every, reduce, progress, admit
) -> Trace:
    """run's body, once the text is tokenized and whether every layer is kept is known."""

    def keeper(tokens: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]):
        if reduce or progress:
            config = loaded.model.config
            counted = (config.n_encoder_layers if "encoder_self" in tokens else 0) + (
                config.n_decoder_layers if "decoder_self" in tokens else 0
            )
            told = None if progress is None else functools.partial(progress, layers=counted)
            return Reductions(reduce or {}, tokens, drop=not keep_every, progress=told)
        return None if keep_every else drop_attention

    src = torch.tensor([enc.ids], device=loaded.device)  # the run happens where the model is (models.device)
    model = loaded.model
    common = dict(
        model_key=loaded.key,
        text=text,
        source_tokens=enc.tokens,
        source_offsets=enc.offsets,
        truncated=enc.truncated,
        source_word_ids=enc.word_ids,
        spelling=loaded.family.spelling,
    )
    if loaded.is_decoder_only:
        keep = keeper({"decoder_self": (enc.tokens, enc.tokens)})
        out = model(src, ablation=ablation, keep=keep, logits=False)  # the (T, V) logits are read in row blocks
        found, reduced = _top(model, out.decoder.output[0], loaded.tokenizer, enc.ids)
        decoder_self, decoder_states = _stack(
            loaded, "decoder", out.decoder, (None, model.decoder_mask(src), None), ablation, reload, admit
        )
        return Trace(
            encoder_self=None,
            encoder_states=None,
            target_tokens=enc.tokens,
            output_tokens=tuple(row[0] for row in found["top_tokens"]),
            decoder_self=decoder_self["self_attn"],
            decoder_states=decoder_states,
            reduced=_results(keep, out),
            text_logits=reduced.text,
            **found,
            **common,
        )
    src_mask = padding_mask(src, model.config.pad_id)
    if encoder_only or not loaded.is_encoder_decoder:
        keep = keeper({"encoder_self": (enc.tokens, enc.tokens)})
        out = model(src, ablation=ablation, keep=keep)
        encoder_self, encoder_states = _stack(loaded, "encoder", out.encoder, (src_mask,), ablation, reload, admit)
        return Trace(
            encoder_self=encoder_self["self_attn"], encoder_states=encoder_states, reduced=_results(keep, out), **common
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
    tgt = torch.tensor([decoder_input], device=src.device)
    vocabulary = loaded.target_vocabulary
    target_tokens = tuple(vocabulary.id_to_token(i) for i in decoder_input)
    keep = keeper(
        {
            "encoder_self": (enc.tokens, enc.tokens),
            "decoder_self": (target_tokens, target_tokens),
            "cross": (target_tokens, enc.tokens),
        }
    )
    out = model(src, tgt, src_mask=src_mask, ablation=ablation, keep=keep, logits=False)
    found, reduced = _top(model, out.decoder.output[0], vocabulary)
    if forced is not None:
        generated = reduced.argmax.tolist()
    encoder_self, encoder_states = _stack(loaded, "encoder", out.encoder, (src_mask,), ablation, reload, admit)
    context = (out.encoder.output, model.decoder_mask(tgt), src_mask)
    decoder, decoder_states = _stack(loaded, "decoder", out.decoder, context, ablation, reload, admit)
    return Trace(
        encoder_self=encoder_self["self_attn"],
        encoder_states=encoder_states,
        target_tokens=target_tokens,
        output_tokens=tuple(vocabulary.id_to_token(i) for i in generated),
        decoder_self=decoder["self_attn"],
        cross=decoder["cross_attn"],
        decoder_states=decoder_states,
        reduced=_results(keep, out),
        **found,
        **common,
    )


def _results(keep, out) -> dict[str, dict[str, np.ndarray]] | None:
    """What the run's Reductions found; each stack's embeddings (its first layer's input) come from `out`."""
    if not isinstance(keep, Reductions):
        return None
    stacks = {"encoder": out.encoder, "decoder": out.decoder}
    return keep.results({name: host(found.embeddings[0]) for name, found in stacks.items() if found is not None})


def target_budget(n_source: int) -> int:
    """Tokens greedy decoding may write for a source of this length: room for a somewhat longer output and its EOS;
    untrained models rarely stop, so at most MAX_TARGET."""
    return min(n_source + 2, MAX_TARGET)


def _top(model, output: torch.Tensor, vocabulary, ids: list[int] | None = None) -> tuple[dict, final_linear.Reduced]:
    """Final linear + softmax (figure 1, top) on the decoder's output (T, D), in row blocks (explorer/run/logits.py):
    each row's most probable next tokens and their probabilities (the Trace's fields), and all that was kept (with a
    decoder-only text's `ids`, what its loss needs: TextLogits). No (T, V) array is made."""
    reduced = final_linear.reduce_output(model, output, ids)
    tokens = tuple(tuple(vocabulary.id_to_token(i) for i in row) for row in reduced.top_ids.tolist())
    return {"top_tokens": tokens, "top_probabilities": reduced.top_probabilities}, reduced


def _stack(
    loaded: LoadedModel,
    stack: str,
    internals,
    context: tuple,
    ablation: Ablation | None,
    reload: Callable[[], LoadedModel] | None,
    admit: Admit | None = None,
) -> tuple[dict[str, AttentionTrace], dict[str, np.ndarray | LayerArray]]:
    """A stack's attention kinds (by module name) and states from a run that kept no attention: the stack's input
    and every layer's output are kept as numpy, the states between sub-layers and the attention are recomputed a
    layer at a time. States: "embeddings" (T, D), then per sub-layer field ("after_attn", ...) (L, T, D)."""
    embeddings = host(internals.embeddings[0])  # (T, D)
    after_ffn = host(torch.stack([layer.after_ffn[0] for layer in internals.layers]))  # (L, T, D): one copy back
    kept = None if internals.layers[0].self_attn is None else tuple(Layer.of(layer) for layer in internals.layers)
    inputs = lambda i: embeddings if i == 0 else after_ffn[i - 1]  # noqa: E731
    source = StackLayers(loaded, stack, inputs, context, ablation, reload, kept, admit)
    states: dict[str, np.ndarray | LayerArray] = {"embeddings": embeddings}
    for name in state_names(internals.layers[0]):
        if name == "after_ffn":
            states[name] = after_ffn
        else:
            states[name] = LayerArray(len(after_ffn), embeddings.shape, lambda i, n=name: source.layer(i).states[n])
    length = embeddings.shape[0]
    kinds = {"self_attn": _attention(source, "self_attn", context[1 if stack == "decoder" else 0], length, length)}
    if stack == "decoder" and context[0] is not None:
        kinds["cross_attn"] = _attention(source, "cross_attn", context[2], length, context[0].size(1))
    return kinds, states


def state_names(internals) -> tuple[str, ...]:
    """The state fields a layer's internals hold, in order (a decoder-only layer has no after_cross_attn)."""
    names = ("after_attn", "after_self_attn", "after_cross_attn", "after_ffn")
    return tuple(n for n in names if getattr(internals, n, None) is not None)
