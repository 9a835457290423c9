"""A run's layers, recomputed one at a time from the residual stream it kept.

A run on a long text cannot keep every head's internals: SmolLM2's attention weights alone are 4.3 GB at 2,048
tokens. So a trace keeps the state entering each layer (the residual stream, L x T x D) and, when a view reads a
layer, runs that one layer again on its kept input, with the same masks, memory and heads turned off as the run:
the same operations on the same numbers, so the same internals as the full forward's (tests/explorer/test_layers.py).
Recomputed layers are shared by every session in one cache bounded in bytes, most recently used kept.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

import numpy as np
import torch
from numpy.lib.mixins import NDArrayOperatorsMixin

from attention_explorer.explorer.run import cost, memo
from attention_explorer.models import registry
from attention_explorer.models.ablation import Ablation
from attention_explorer.models.attention import AttentionInternals
from attention_explorer.models.device import numpy as host
from attention_explorer.models.device import place
from attention_explorer.models.registry import LoadedModel

# about one SmolLM2 layer at 2,048 tokens (weights and scores 151 MB each), or every layer of a 512-token MiniLM run
LAYERS_BYTES = 384 * 2**20
ATTENTION_FIELDS = (
    *("q", "k", "v", "raw_scores", "weights", "heads", "output"),
    *("q_unrotated", "k_unrotated", "q_before_norm", "k_before_norm"),
)
_tokens = itertools.count()


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
    q_before_norm: np.ndarray | None = None  # QK-norm (Gemma 3, Qwen3): q and k as W_Q, W_K wrote them, before the norm
    k_before_norm: np.ndarray | None = None
    scaling: float | None = None  # the scores' factor where it is not 1/sqrt(d_k) (Gemma's query_pre_attn_scalar)
    window: int | None = None  # a local layer's sliding window of keys (AttentionTrace.mask_of draws it)

    @property
    def scaled_scores(self) -> np.ndarray:
        """q k^T / sqrt(d_k) (or the model's own factor), as models.attention.scale computes it."""
        factor = self.q.shape[-1] ** -0.5 if self.scaling is None else self.scaling
        return self.raw_scores * np.float32(factor)

    @classmethod
    def of(cls, internals: AttentionInternals) -> AttentionLayer:
        """Batch row 0 of a layer's internals, as numpy."""
        return cls(
            *(None if getattr(internals, f) is None else host(getattr(internals, f)[0]) for f in ATTENTION_FIELDS),
            internals.scaling,
            internals.window,
        )


@dataclass(frozen=True)
class Layer:
    """One recomputed layer: its attention kinds by module name ("self_attn", "cross_attn") and its states after each
    sub-layer, by the internals' field name ("after_attn", ...)."""

    attention: dict[str, AttentionLayer]
    states: dict[str, np.ndarray]

    @classmethod
    def of(cls, internals) -> Layer:
        """Batch row 0 of a layer's internals (models.transformer), as numpy."""
        attention = {
            name: AttentionLayer.of(found)
            for name in ("self_attn", "cross_attn")
            if (found := getattr(internals, name, None)) is not None
        }
        states = {
            name: host(found[0])
            for name in ("after_attn", "after_self_attn", "after_cross_attn", "after_ffn")
            if (found := getattr(internals, name, None)) is not None
        }
        return cls(attention, states)


def drop_attention(internals):
    """What a run keeps of a layer (models.transformer.Keep): its states, not its attention."""
    return replace(internals, self_attn=None, **({"cross_attn": None} if hasattr(internals, "cross_attn") else {}))


# what a view reads of every layer, reduced while the run holds that layer (no layer recomputed for it later):
# (kind, one layer's weights (H, Tq, Tk), query tokens, key tokens) -> a small array
Reducer = Callable[[str, np.ndarray, tuple[str, ...], tuple[str, ...]], np.ndarray]


@dataclass(frozen=True)
class OnStates:
    """A reducer of a layer's states instead of its attention: (the state entering the layer (T, D), the states after
    each of its sub-layers (S, T, D)) -> a small array; its results are by stack ("encoder", "decoder")."""

    reduce: Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class OnDevice:
    """A reducer of a layer's attention that takes its weights (H, Tq, Tk) as the torch tensor the run made, on the
    run's device, and returns a small numpy array: only that comes back to the CPU (reducers.Analysis)."""

    reduce: Reducer


STATE_FIELDS = ("after_attn", "after_self_attn", "after_cross_attn", "after_ffn")  # a layer's states, in order


class Reductions:
    """A run's Keep that first applies every reducer to each layer's attention weights (by kind) or states (by stack,
    OnStates), collecting the results in layer order; then keeps the layer whole or drops its attention (`drop`), and
    tells `progress` how many layers it has seen."""

    def __init__(
        self,
        reducers: dict[str, Reducer | OnStates | OnDevice],
        tokens: dict[str, tuple[tuple[str, ...], ...]],
        drop: bool,
        progress: Callable[[int], None] | None = None,
    ):
        self.tokens, self.drop, self.progress, self.done = tokens, drop, progress, 0  # progress(layers done so far)
        self.reducers = {name: r for name, r in reducers.items() if not isinstance(r, OnStates)}
        self.on_device = {name for name, r in reducers.items() if isinstance(r, OnDevice)}
        self.on_states = {name: r.reduce for name, r in reducers.items() if isinstance(r, OnStates)}
        self.found: dict[str, dict[str, list[np.ndarray]]] = {name: {} for name in reducers}
        self.entering: dict[str, np.ndarray] = {}  # by stack: the previous layer's output, the next layer's input
        self.first: dict[str, np.ndarray] = {}  # by stack: the first layer's states, until its input is known

    def __call__(self, internals):
        decoder = hasattr(internals, "cross_attn")
        kinds = {"self_attn": "decoder_self" if decoder else "encoder_self", "cross_attn": "cross"}
        # the states' reducers on a second thread, beside the attention's (numpy lets go of the interpreter's lock
        # inside each operation): the sub-layers' movement, 1.5 ms a layer of SmolLM2 at 512 tokens
        stack = "decoder" if decoder else "encoder"
        states = _side().submit(self._states, stack, internals) if self.on_states else None
        try:
            for module, kind in kinds.items():
                attention = getattr(internals, module, None)
                if attention is None:
                    continue
                on_device = attention.weights[0]  # (H, Tq, Tk), where the run made it
                weights = host(on_device) if set(self.reducers) - self.on_device else None  # to the CPU if read there
                for name, reduce in self.reducers.items():
                    given, reduce = (on_device, reduce.reduce) if name in self.on_device else (weights, reduce)
                    self.found[name].setdefault(kind, []).append(reduce(kind, given, *self.tokens[kind]))
        finally:
            if states is not None:
                states.result()
        self.done += 1
        if self.progress is not None:
            self.progress(self.done)
        return drop_attention(internals) if self.drop else internals

    def _states(self, stack: str, internals) -> None:
        after = np.stack([host(found[0]) for n in STATE_FIELDS if (found := getattr(internals, n, None)) is not None])
        entering = self.entering.get(stack)
        self.entering[stack] = after[-1]
        if entering is None:  # the stack's first layer: its input (the embeddings) is the run's, known at its end
            self.first[stack] = after
            return
        for name, reduce in self.on_states.items():
            self.found[name].setdefault(stack, []).append(reduce(entering, after))

    def results(self, embeddings: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{reducer name: {kind or stack: (L, ...)}}; `embeddings`: each stack's input (T, D), for its first layer."""
        for stack, after in self.first.items():
            for name, reduce in self.on_states.items():
                self.found[name].setdefault(stack, []).insert(0, reduce((embeddings or {})[stack], after))
        self.first = {}
        return {name: {key: np.stack(rows) for key, rows in found.items()} for name, found in self.found.items()}


@functools.cache
def _side() -> ThreadPoolExecutor:
    """Reductions' thread for the states' reducers (one: each layer's wait for the previous is in order)."""
    return ThreadPoolExecutor(1, thread_name_prefix="states")


# the context a layer is recomputed in, given its estimate (seconds, bytes): the app's admission, or nothing
Admit = Callable[[float, int], AbstractContextManager]


def _admit_freely(seconds: float, nbytes: int) -> AbstractContextManager:
    return contextlib.nullcontext()


class StackLayers:
    """Recomputes one layer of one stack (encoder or decoder) of a run. Not a dataclass on purpose: the arrays it
    reads are the trace's own states (counted there once by memo.nbytes)."""

    def __init__(
        self,
        loaded: LoadedModel,
        stack: str,
        inputs: Callable[[int], np.ndarray],
        context: tuple[torch.Tensor | None, ...],
        ablation: Ablation | None,
        reload: Callable[[], LoadedModel] | None = None,
        kept: tuple[Layer, ...] | None = None,
        admit: Admit | None = None,
    ) -> None:
        self.admit = admit or _admit_freely
        self.kept = kept  # every layer from the run itself: for a model whose weights go on changing (training)
        self.stack, self.inputs, self.context, self.ablation = stack, inputs, context, ablation
        # a kept trace must not keep its model loaded (a shelf holds models): a weak reference, and `reload` (the
        # app's shelf; registry.load by default) when the model was let go in the meantime
        # (a model trained in a session is not in the registry: held as long as its traces)
        self._loaded = weakref.ref(loaded) if loaded.key in registry.MODELS else lambda: loaded
        self.key, self.revision, self.device = loaded.key, loaded.revision, loaded.device
        self.reload = reload or (lambda: place(registry.load(self.key), self.device))
        self.token = next(_tokens)  # names this run's layers in the shared cache

    def kept_arrays(self) -> Iterator[np.ndarray]:
        """The arrays of the layers kept from the run (memo.nbytes counts them); none when layers are recomputed."""
        return memo.arrays(self.kept) if self.kept is not None else iter(())

    @property
    def loaded(self) -> LoadedModel:
        found = self._loaded()
        if found is None:
            found = self.reload()
            if found.revision != self.revision:
                raise RuntimeError(f"{self.key} has changed since this text was run: run it again")
            self._loaded = weakref.ref(found)
        return found

    @property
    def _stack(self):
        model = self.loaded.model
        return model.encoder if self.stack == "encoder" else model.decoder

    def module(self, name: str, layer: int = 0):
        """The stack's layer's (the first's: every layer's is alike but for a local layer's window) sub-layer `name`:
        "self_attn", "cross_attn"."""
        return getattr(self._stack.layers[layer], name)

    @property
    def n_layers(self) -> int:
        return len(self._stack.layers)

    def ready(self, i: int) -> bool:
        """Whether layer i is at hand (kept by the run, or recomputed and still cached): reading it costs nothing."""
        return self.kept is not None or cache().peek((self.token, i)) is not None

    def layer(self, i: int) -> Layer:
        if not 0 <= i < self.n_layers:
            raise IndexError(f"layer {i} of {self.n_layers}")
        if self.kept is not None:
            return self.kept[i]
        if (found := cache().peek((self.token, i))) is not None:
            return found  # type: ignore[return-value]
        # admitted before the cache's lock on this layer is taken, never inside it: a run that holds a slot and
        # reads this layer must not wait for a lock held by one that waits for that slot
        config, tokens = self.loaded.model.config, len(self.inputs(0))
        cross = self.stack == "decoder" and config.is_encoder_decoder
        with self.admit(cost.layer_seconds(config, tokens, cross=cross), cost.layer_bytes(config, tokens)):
            return cache().get((self.token, i), lambda: self._compute(i))

    @torch.inference_mode()
    def _compute(self, i: int) -> Layer:
        """Layer i run again on the state that entered it, as Stack.stack ran it."""
        layers = self._stack.layers
        patches = self.ablation.stack_patches(self.stack, len(layers))[i] if self.ablation is not None else None
        x = torch.from_numpy(np.array(self.inputs(i)))[None].to(self.device)  # (1, T, D)
        return Layer.of(layers[i](x, *self.context, patches))

    @torch.inference_mode()
    def recomputed(self, i: int):
        """Layer i run again on the run's device: its internals (models.transformer), a batch of 1, left there (what
        explorer.run.device_layers reduces before any copy back)."""
        layers = self._stack.layers
        patches = self.ablation.stack_patches(self.stack, len(layers))[i] if self.ablation is not None else None
        x = torch.from_numpy(np.array(self.inputs(i)))[None].to(self.device)  # (1, T, D)
        return layers[i](x, *self.context, patches)

    def rows(self, i: int, start: int, stop: int) -> Layer:
        """Decoder layer i for rows start..stop-1 only, each reading the keys and values of every row up to it: what
        a window of a long text needs, at a fraction of the whole layer (its attention is (H, stop - start, stop));
        the whole layer's numbers when the window is every row."""
        return Layer.of(self.internals(i, start, stop))

    @torch.inference_mode()
    def internals(self, i: int, start: int, stop: int):
        """rows' models.transformer.DecoderLayerInternals, as tensors (1, stop - start, ...)."""
        if self.stack != "decoder":
            raise ValueError("only a decoder's rows can be computed apart (an encoder's rows read later rows too)")
        if not 0 <= start < stop <= len(self.inputs(0)):
            raise IndexError(f"rows {start}..{stop - 1} of {len(self.inputs(0))}")
        layers = self._stack.layers
        patches = self.ablation.stack_patches(self.stack, len(layers))[i] if self.ablation is not None else None
        x = torch.from_numpy(np.array(self.inputs(i)[:stop]))[None].to(self.device)  # (1, stop, D)
        memory, mask, memory_mask = self.context
        assert mask is not None
        return layers[i](x, memory, mask[:, :, start:stop, :stop], memory_mask, patches, start)


def cache() -> memo.BoundedCache:
    return _CACHE


_CACHE = memo.BoundedCache(LAYERS_BYTES)


# np.asarray of a LayerArray past this many bytes is refused: a long text's every head (4.3 GB for SmolLM2 at 2,048
# tokens) is read a layer or a head at a time, and a view that asks for all of it at once gets a clear error instead
# of taking the server's memory
WHOLE_BYTES = 1536 * 2**20


class WholeArrayError(MemoryError):
    """A view asked for every layer of a long text's attention at once."""


class LayerArray(NDArrayOperatorsMixin):
    """An (L, ...) array whose layers are computed when read: `a[layer]`, `a[layer, head, ...]`, `a[:, head]`,
    iteration; anything else (np.asarray(a), a.mean(...), a - b) stacks every layer first, which is for short texts:
    past WHOLE_BYTES it raises WholeArrayError."""

    def __init__(
        self,
        n_layers: int,
        shape: tuple[int, ...],
        fetch: Callable[[int], np.ndarray],
        head: Callable[[int, int], np.ndarray] | None = None,
    ) -> None:
        self.shape = (n_layers, *shape)
        self._fetch = fetch
        self._head = head  # (layer, head) -> that head alone: `a[layer, head, ...]` reads no other head
        self.dtype = np.dtype(np.float32)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self._fetch(i) for i in range(len(self)))

    def __getitem__(self, index):
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        if isinstance(first, int | np.integer):
            layer = int(first) + len(self) if first < 0 else int(first)
            if not 0 <= layer < len(self):
                raise IndexError(f"layer {first} of {len(self)}")
            if rest and self._head is not None and isinstance(rest[0], int | np.integer):
                head = int(rest[0]) + self.shape[1] if rest[0] < 0 else int(rest[0])
                if not 0 <= head < self.shape[1]:
                    raise IndexError(f"head {rest[0]} of {self.shape[1]}")
                return self._head(layer, head)[rest[1:]]
            return self._fetch(layer)[rest] if rest else self._fetch(layer)
        if isinstance(first, slice):
            chosen = range(len(self))[first]
            return np.stack([self._fetch(i)[rest] if rest else self._fetch(i) for i in chosen])
        return self.whole()[index]  # an ellipsis, a list or a mask of layers

    def whole(self) -> np.ndarray:
        """Every layer stacked: (L, ...)."""
        if self.nbytes > WHOLE_BYTES:
            raise WholeArrayError(
                f"{self.nbytes / 2**30:.1f} GB of attention at once: this view reads a text this long a layer at a time"
            )
        return np.stack(list(self))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self.whole()
        return whole if dtype is None else whole.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        arrays = [x.whole() if isinstance(x, LayerArray) else x for x in inputs]
        return getattr(ufunc, method)(*arrays, **kwargs)

    def __getattr__(self, name: str):
        # numpy's own methods only (.sum(...), .astype(...), .tolist()): any other name, asked by code that probes
        # an object (memo.arrays asks for kept_arrays), must not stack every layer to find it missing
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(name)
        return getattr(self.whole(), name)
