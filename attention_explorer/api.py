"""The notebook API: a model run on a text as plain values (lists of str, numpy arrays, the app's own Plotly figures),
layers and heads counted from 0 as numpy and TransformerLens count them. A thin door onto `explorer/run`,
`explorer/experiments` and `explorer/figures`: the same functions the pages and `python -m explorer export` call.

    import attention_explorer as ae
    run = ae.run("minilm", "The cat sat on the mat")
    run.tokens                      # ['[CLS]', 'the', 'cat', ..., '[SEP]']: T tokens as the pages show them
    run.raw_tokens                  # the same as the tokenizer writes them: '␣cat' is 'Ġcat', '↵' is 'Ċ'
    run.attention(0, 3)             # (T, T) float32: layer 0, head 3, rows are queries, columns keys
    run.figure("heatmap", layer=0, head=3)   # titled "Layer 1, head 4", as the app counts
    stats = ae.corpus("minilm", ["The cat sat.", "A dog ran."])   # every head's statistics over many texts
    stats.statistic("previous_token")   # (L, H) pooled over every query position of every text
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch and plotly are imported on first use: `import attention_explorer` stays quick
    import plotly.graph_objects as go

    from attention_explorer.explorer.run.trace import Trace
    from attention_explorer.explorer.run.walkthrough import HeadWalkthrough
    from attention_explorer.models.registry import LoadedModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub, as the app and the command
# torch's OpenMP threads sleep between parallel regions instead of spinning (as app.py sets it): the same numbers, and
# on a machine busy with other work a 16-token SmolLM2 run takes 0.2 s instead of 2.5 s (python -m bench package);
# it takes effect where torch is first imported after this
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__all__ = ["Run", "list_models", "run", "save", "show"]  # corpus and corpus_points: attention_explorer.corpora

VIEWS = ("heatmap", "head_view", "model_view", "positional", "qkv", "logit_lens", "patching")
SHOW_VIEWS = ("model_view", "head_view", "heatmap")
# the Q/K/V page's charts, in its order: figure("qkv", step=...) draws one of them
QKV_STEPS = ("q", "k", "v", "scores", "scaled", "masked", "weights", "weighted", "z", "concat", "output")
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def _keys() -> str:
    from attention_explorer.models import registry

    return ", ".join(registry.MODELS)


@functools.cache
def _loaded(key: str) -> LoadedModel:
    """One model per registry key or resolved path, for the life of the process (read-only: runs never change it)."""
    from attention_explorer.models import registry

    if key in registry.MODELS:
        return registry.load(key)
    try:
        return registry.from_path(key)
    except registry.ModelLoadError as e:
        raise ValueError(str(e)) from e


def _resolve(model: str | os.PathLike) -> str:
    """A registry key as it is, a path resolved (so two spellings share one load); ValueError naming the keys."""
    from attention_explorer.models import registry

    if isinstance(model, str) and model in registry.MODELS:
        return model
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve())
    looks_like_path = isinstance(model, os.PathLike) or os.sep in str(model) or str(model).lower().endswith(".gguf")
    what = f"no model file or folder at {str(model)!r}" if looks_like_path else f"unknown model {str(model)!r}"
    raise ValueError(f"{what}: give a model key ({_keys()}) or the path of a model folder or a .gguf file")


@functools.cache
def _loaded_on(key: str, device: str) -> LoadedModel:
    """The model on a device other than the CPU: a load of its own, moved there once (the CPU's stays as it is)."""
    from attention_explorer.models import device as devices
    from attention_explorer.models import registry

    try:
        return devices.place(_loaded.__wrapped__(key), device)
    except registry.ModelLoadError as e:  # its weights do not fit on the GPU
        raise ValueError(str(e)) from e


def loaded_model(model: str | os.PathLike, device: str = "cpu") -> LoadedModel:
    """The model a key or path names, loaded once for the process and device (ValueError naming the keys where none
    is; models.device.DeviceError, a ValueError, for a device this machine lacks: "cuda" without a GPU, "mps")."""
    from attention_explorer.models import device as devices

    found = devices.resolve(device)  # checked before a model loads
    key = _resolve(model)
    return _loaded(key) if found.type == "cpu" else _loaded_on(key, str(found))


def run(model: str | os.PathLike, text: str, max_tokens: int = 512, device: str = "cpu") -> Run:
    """Run `model` (a registry key, see list_models(); or the path of a model folder or a .gguf file) on `text`, cut at
    `max_tokens` tokens or the model's maximum, whichever is smaller. The model is loaded once per process and device
    and shared by every later run. `device`: "cpu" (the default), "cuda", "cuda:1", or "auto" (the first GPU torch sees,
    else the CPU): the forward, every layer read again and every experiment run there; what a figure or method returns
    comes back as numpy. ValueError for an unknown key, a missing path, a device this machine lacks or a text the model
    cannot read."""
    from attention_explorer.explorer.run import trace
    from attention_explorer.models.tokenize import TokenizeError

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"give a text to run: got {text!r}")
    loaded = loaded_model(model, device)
    limit = min(max_tokens, loaded.max_tokens)
    try:
        result = trace.run(loaded, text, limit)
    except TokenizeError as e:
        raise ValueError(f"{loaded.key} cannot read this text: {e}") from e
    if result.truncated:
        warnings.warn(f"input truncated to {len(result.source_tokens)} tokens ({result.truncated} cut)", stacklevel=2)
    return Run(loaded, result, limit)


class Run:
    """A model's run on one text: its tokens, every head's attention and the app's figures of them (made by run())."""

    def __init__(self, loaded: LoadedModel, trace: Trace, max_tokens: int) -> None:
        self.loaded = loaded  # the shared model (models.registry.LoadedModel): read it, never change it
        self.trace = trace  # explorer.run.trace.Trace: every internal, for power users
        self.max_tokens = max_tokens  # the limit the text was cut at
        self._patched: dict[tuple[str, str, str], dict] = {}

    def __repr__(self) -> str:
        return f"<Run {self.loaded.key!r}: {len(self.tokens)} tokens, attention {', '.join(self.kinds)}>"

    @property
    def model(self) -> str:
        """The model's key ("folder:<name>" for a path)."""
        return self.loaded.key

    @property
    def text(self) -> str:
        return self.trace.text

    @property
    def tokens(self) -> list[str]:
        """(T,) the text's tokens as the pages show them (models.tokenize.Spelling.readable): 'Ġcat' is '␣cat' (a
        leading space), 'Ċ' is '↵', bytes decoded ('âĢĵ' is '–'); WordPiece ('##s') and markers ('[CLS]') as
        written. `raw_tokens`: as the tokenizer writes them."""
        return list(self.trace.readable(self.trace.source_tokens))

    @property
    def raw_tokens(self) -> list[str]:
        """(T,) the text's tokens as the tokenizer writes them ('Ġcat', '##s', '[CLS]'): its vocabulary's keys."""
        return list(self.trace.source_tokens)

    @property
    def readable_tokens(self) -> list[str]:
        """(T,) the same as `tokens` (the name of earlier versions)."""
        return self.tokens

    @property
    def target_tokens(self) -> list[str] | None:
        """An encoder-decoder's decoder input (T_out,), as the pages show it: [BOS] and what greedy decoding wrote;
        None otherwise."""
        if self.trace.decoder_only or self.trace.target_tokens is None:
            return None
        return list(self.trace.readable(self.trace.target_tokens))

    @property
    def kinds(self) -> tuple[str, ...]:
        """The attention kinds this model has, in order: "encoder_self", "decoder_self", "cross"."""
        return self.trace.kinds

    @property
    def n_layers(self) -> int:
        """Layers of the first attention kind."""
        return self.trace.attention(self.kinds[0]).n_layers

    @property
    def n_heads(self) -> int:
        """Query heads a layer of the first attention kind."""
        return self.trace.attention(self.kinds[0]).n_heads

    @property
    def next_tokens(self) -> list[str] | None:
        """(T,) the most likely next token at every decoder row as the pages show it ('␣Paris'), the export's
        "readable_next_tokens" (an encoder-decoder: (T_out,)); None for a model with no output layer (MiniLM)."""
        raw = self.raw_next_tokens
        return None if raw is None else list(self.trace.readable(raw))

    @property
    def raw_next_tokens(self) -> list[str] | None:
        """`next_tokens` as the tokenizer writes them ('ĠParis'), the export's "next_tokens"."""
        if self.trace.top_tokens is None:
            return None
        return [row[0] for row in self.trace.top_tokens]

    def _kind(self, kind: str | None) -> str:
        if kind is None:
            return self.kinds[0]
        if kind not in self.kinds:
            raise ValueError(f"{self.model} has no {kind!r} attention; choose from {', '.join(self.kinds)}")
        return kind

    def _check(self, kind: str, layer: int, head: int | None = None) -> None:
        found = self.trace.attention(kind)
        if not (isinstance(layer, int | np.integer) and 0 <= layer < found.n_layers):
            raise IndexError(f"layer {layer}: {self.model}'s {kind} has layers 0-{found.n_layers - 1} (from 0)")
        if head is not None and not (isinstance(head, int | np.integer) and 0 <= head < found.n_heads):
            raise IndexError(f"head {head}: {self.model}'s {kind} has heads 0-{found.n_heads - 1} (from 0)")

    def queries_keys(self, kind: str | None = None) -> tuple[list[str], list[str]]:
        """(query tokens (Tq,), key tokens (Tk,)) of an attention kind, as the pages show them: cross-attention's
        queries are the target's."""
        queries, keys = self.trace.labels_for(self._kind(kind))
        return list(queries), list(keys)

    def attention(self, layer: int, head: int, kind: str | None = None) -> np.ndarray:
        """(Tq, Tk) float32: one head's softmax(Q K^T / sqrt(d_k)) (eq. 1), rows are queries (they sum to 1), columns
        keys; exactly what the app's heatmap draws. Self-attention: Tq = Tk = T; cross: (T_out, T). Layer and head
        from 0; `kind` defaults to the model's first ("encoder_self", "decoder_self" for a decoder-only model)."""
        kind = self._kind(kind)
        self._check(kind, layer, head)
        return np.array(self.trace.attention(kind).layer(int(layer)).weights[int(head)], dtype=np.float32)

    def qkv(self, layer: int, head: int, query: int, kind: str | None = None) -> HeadWalkthrough:
        """One head's computation for one query, the Q/K/V page's numbers (explorer.run.walkthrough): q (Dh,), k and
        v (Tk, Dh), raw_scores, scaled_scores and weights (Tk,), z (Dh,), output (D,); all from the model's own run."""
        from attention_explorer.explorer.lesson import wording
        from attention_explorer.explorer.run import walkthrough

        kind = self._kind(kind)
        steps = walkthrough.steps(self.trace, kind, int(layer), int(head), int(query))
        return replace(steps, x_query_source=wording.attention_input(self.loaded.model.config, kind, int(layer)))

    def patch(self, corrupted: str, answer: str, wrong: str) -> dict:
        """Activation patching (the export's "patching" entry, same function): "clean" and "corrupted" logit
        differences logit(answer) - logit(wrong), "heads" (L, H) the share of it each head's output restores (an
        encoder-decoder: by kind), "residual" (L + 1, T) each residual state's, "changed" positions, and the
        convention. `corrupted`: this text with one detail changed, as many tokens; answers are one token each."""
        from attention_explorer.explorer.experiments import patching

        asked = (corrupted, answer, wrong)
        if asked not in self._patched:  # two forwards and a patched run per head and residual state: kept
            self._patched[asked] = patching.document(self.loaded, self.text, *asked, self.max_tokens)["patching"]
        return self._patched[asked]

    def figure(self, view: str, **focus: Any) -> go.Figure:
        """The app's own Plotly figure of this run, titled as the app numbers layers and heads (from 1). `view`:
        "heatmap" (layer, head, kind): one head's (Tq, Tk) map; "head_view" (layer, heads=all, token=None, kind);
        "model_view" (kind, layer=None, head=None: a head outlined): every layer x head; "positional" (show: "table"
        (the default), "similarity" or "curves"; positions=64; learned=True: the model's own table where it has one,
        else the paper's sinusoid; rotary models: "curves" (the default) or "distance" with layer, head, query,
        key); "qkv" (layer, head, query, kind, step: one of QKV_STEPS, default "weights"); "logit_lens" (position:
        the row a long text's window centres on); "patching" (corrupted, answer, wrong: by default what the
        patching page proposes for this text and the two runs' most likely next tokens; show="heads" or
        "residual")."""
        if view not in VIEWS:
            raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
        from attention_explorer import views

        figure, title, parts = getattr(views, view)(self, **focus)
        return _drawn(figure, title, parts, self.loaded.title, self.text, self.model)


def _drawn(figure, title: str, view: tuple[str, ...], model_title: str, text: str, model: str) -> go.Figure:
    """The figure as the app's download draws it: its shared style, Streamlit's theme written out, and a title line
    naming the model, the view (layers and heads from 1) and the sentence."""
    from attention_explorer.explorer.app import downloads
    from attention_explorer.explorer.figures.style import styled

    about = downloads.About(model, model_title, text, tuple(view), title)
    return downloads.as_drawn(styled(figure), about)


def _epsilon(attentions: Any) -> float:
    """The machine epsilon of the coarsest float type among the given weights (bfloat16's 2**-7 where a model ran in
    it): how far its softmax rows may stray from summing to 1 (_rows_sum_bound)."""
    import torch

    parts = attentions if isinstance(attentions, list | tuple) else [attentions]
    found = [torch.finfo(a.dtype).eps if isinstance(a, torch.Tensor) and a.is_floating_point() else None for a in parts]
    found += [
        float(np.finfo(np.asarray(a).dtype).eps)
        for a in parts
        if not isinstance(a, torch.Tensor) and np.issubdtype(np.asarray(a).dtype, np.floating)
    ]
    return max([e for e in found if e is not None] or [float(np.finfo(np.float32).eps)])


def _rows_sum_bound(n_keys: int, epsilon: float) -> float:
    """A softmax row over n_keys keys, computed in a type of this epsilon, sums to 1 within (2n + 3) eps: the
    normaliser's sum and the check's own sum over n terms of total 1, and a rounding each for exp, the division and
    the cast (Higham 2002, section 3.1)."""
    return (2 * n_keys + 3) * epsilon


def _stacked(attentions: Any) -> np.ndarray:
    """(L, H, T, T) float32 from transformers' outputs.attentions (a tuple of (B, H, T, T) tensors: batch row 0), a
    numpy (L, H, T, T) array or (H, T, T) for one layer, or a list of (H, T, T) arrays."""

    def plain(a: Any) -> np.ndarray:
        if hasattr(a, "detach"):  # a torch tensor, bfloat16 included (numpy has no bfloat16)
            a = a.detach().float().cpu().numpy()
        return np.asarray(a, dtype=np.float32)

    if isinstance(attentions, list | tuple):
        if not attentions:
            raise ValueError("no attention given: an empty list")
        layers = [plain(a) for a in attentions]
        shapes = {a.shape for a in layers}
        if len(shapes) > 1:
            raise ValueError(f"every layer's attention must have one shape; got {sorted(shapes)}")
        layers = [a[0] if a.ndim == 4 else a for a in layers]  # transformers' (B, H, T, T): batch row 0
        weights = np.stack(layers)
    else:
        weights = plain(attentions)
        weights = weights[None] if weights.ndim == 3 else weights
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"attention of shape {weights.shape}: expected (layers, heads, T, T), a list of (heads, T, T), or "
            "transformers' outputs.attentions (a tuple of (batch, heads, T, T))"
        )
    return weights


def show(attentions: Any, tokens: list[str], view: str = "model_view", **focus: Any) -> go.Figure:
    """The explorer's views of ANY model's attention weights: `attentions` as transformers returns them
    (outputs.attentions, a tuple of L (batch, H, T, T) tensors; batch row 0 is drawn), a numpy (L, H, T, T) array or
    a list of L (H, T, T) arrays; `tokens` (T,) their labels. `view`: "model_view" (layer, head: one outlined),
    "head_view" (layer=0, heads=all, token=None) or "heatmap" (layer=0, head=0). ValueError when the shapes do not
    fit or a row is not a probability distribution."""
    from attention_explorer.explorer.figures.head_view import head_view
    from attention_explorer.explorer.figures.heatmap import head_heatmap
    from attention_explorer.explorer.figures.model_view import model_view
    from attention_explorer.explorer.run import blocks
    from attention_explorer.explorer.run.heads import head_title

    if view not in SHOW_VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(SHOW_VIEWS)}")
    weights = _stacked(attentions)
    n_layers, n_heads, length = weights.shape[:3]
    tokens = [str(t) for t in tokens]
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} tokens for attention over {length} positions: give one token per position")
    if not np.isfinite(weights).all() or (weights < 0).any():  # a softmax is never negative, in any type
        raise ValueError("attention weights must be probabilities: finite, not negative (give softmax weights)")
    sums = weights.astype(np.float64).sum(-1)
    worst = float(np.abs(sums - 1).max())
    if worst > _rows_sum_bound(length, _epsilon(attentions)):
        raise ValueError(f"every row of attention weights must sum to 1 (softmax over keys); one sums to {1 + worst:g}")
    layer, head = int(focus.pop("layer", 0)), focus.pop("head", None)
    if not 0 <= layer < n_layers or (head is not None and not 0 <= int(head) < n_heads):
        raise IndexError(
            f"layer {layer}, head {head}: the attention has layers 0-{n_layers - 1}, heads 0-{n_heads - 1}"
        )
    if view == "model_view":
        selected = None if head is None else (layer, int(head))
        figure = model_view(blocks.every_layer(weights), blocks.THUMBNAIL, selected)
        title, parts = "Every layer and head", ()
    elif view == "head_view":
        heads = focus.pop("heads", None)
        heads = list(range(n_heads)) if heads is None else [int(h) for h in heads]
        figure = head_view(weights[layer], tokens, tokens, heads, focus.pop("token", None))
        title, parts = f"Head view: layer {layer + 1}", (f"layer {layer + 1}",)
    else:
        head = 0 if head is None else int(head)
        title = head_title(layer, head, n_heads).capitalize()
        figure = head_heatmap(weights[layer, head], tokens, tokens, title)
        parts = (f"layer {layer + 1}", f"head {head + 1}")
    if focus:
        raise TypeError(f"show({view!r}) takes no {', '.join(focus)}")
    return _drawn(figure, title, parts, "", "", "")


def save(figure: go.Figure, path: str | os.PathLike) -> Path:
    """Write a figure by its file's extension: .png, .svg or .pdf as the app's downloads draw them (kaleido in the
    system Chromium; PNG at twice the screen size), or .html that opens offline (plotly.js inside). Returns the path."""
    from attention_explorer.explorer.app import downloads

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        path.write_bytes(downloads.to_image(figure, None, suffix[1:]))
    elif suffix == ".html":
        path.write_text(downloads.to_html(figure), encoding="utf-8")
    else:
        raise ValueError(f"save {str(path)!r}: name a .png, .svg, .pdf or .html file")
    return path


def list_models() -> list[tuple[str, str, str]]:
    """Every model the app offers, as (key, title, where its weights come from, as `attention-explorer models` says
    it); a key is what run() takes. (Not `models`: that name is the engine, `attention_explorer.models`.)"""
    from attention_explorer.cli import where_from
    from attention_explorer.models import registry

    return [(spec.key, spec.title, where_from(spec)) for spec in registry.MODELS.values()]


def _notebook_display() -> None:
    """In a Jupyter kernel, figures display with plotly.js from the installed package, never a CDN: Plotly's own
    choice there ("plotly_mimetype") shows nothing outside JupyterLab, and its "notebook" renderer loads MathJax from
    a CDN; so plotly.js goes into the notebook once and each figure's HTML uses it. A renderer the user chose stays."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell" or os.environ.get("PLOTLY_RENDERER"):
        return
    import plotly.io as pio
    from plotly.io._base_renderers import HtmlRenderer

    class OfflineNotebook(HtmlRenderer):
        """plotly.js embedded once (global_init), then each figure's HTML without plotly.js or MathJax."""

        def __init__(self) -> None:
            super().__init__(connected=False, global_init=True, include_plotlyjs=False)

        def to_mimebundle(self, fig_dict: dict) -> dict:
            html = pio.to_html(
                fig_dict,
                include_plotlyjs=False,
                include_mathjax=False,
                full_html=False,
                default_width="100%",
                default_height=525,
                validate=False,
            )
            return {"text/html": html}

    pio.renderers["attention_explorer"] = OfflineNotebook()
    if pio.renderers.default == "plotly_mimetype":
        pio.renderers.default = "plotly_mimetype+attention_explorer"


_notebook_display()
