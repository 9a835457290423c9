"""Float bounds that follow from the computation, so that a comparison holds on any CPU, BLAS and thread count.

Two float32 results of the same mathematics computed by different products (a window of rows against the whole
text, batched rows against one at a time, a layer recomputed from its kept input, a sum in blocks) differ only by
rounding, and how far depends on the order the machine's kernels add in. The bounds here follow Higham, *Accuracy
and Stability of Numerical Algorithms* (2nd ed., 2002), section 3.1: a float32 sum of n terms in any order is within
gamma_(n-1) * sum|x_i| of the exact sum, gamma_n = n u / (1 - n u), u = eps / 2. Two orders are each that close to
the exact sum, so they differ by at most about n * eps * sum|x_i| (`reordered`). A matrix product's element is such a
sum with sum|x_i| = (|A| @ |B|)_ij (`product_bound`); a chain of sums adds its bounds (first order).

Where the same operations run in the same order, tests keep `assert_array_equal`: bit for bit stays bit for bit.

`assert_within` records each comparison's margin (bound / largest difference) when EXPLORER_MARGINS names a file;
`python -m tests.margins` runs the numerical tests under several thread counts and kernels and reports them.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import torch

from attention_explorer.models.blocks import RMSNorm

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23: one float32 rounding moves a value by at most EPS32 / 2 of it
EPS64 = float(np.finfo(np.float64).eps)
LAMBDA = 8.0  # `probable`'s confidence: how many standard deviations of independent roundings


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def reordered(n_terms: int, total) -> np.ndarray:
    """How far two float32 sums of the same n_terms terms, added in different orders, can land apart: n * eps * total,
    total = sum of the terms' magnitudes (Higham 2002, eq. 3.4, for each order)."""
    return n_terms * EPS32 * _numpy(total)


def reordered64(n_terms: int, total) -> np.ndarray:
    """`reordered` for float64 sums: n * eps64 * total. The pooled corpus statistics add each batch's float64 sums in
    whatever order a cluster's tasks finish; the batches' own sums are the same numbers either way."""
    return n_terms * EPS64 * _numpy(total)


def pooled_means_bound(n_parts: int, means) -> np.ndarray:
    """How far means = (sum of n_parts float64 partial sums) / count may move when the parts are added in another
    order: reordered64 of the parts' magnitudes over the count (the terms are non-negative, so sum|s_b| / count is
    the mean itself), plus the division's own rounding on each side (eps64 / 2 of the mean, twice)."""
    means = np.abs(_numpy(means))
    return reordered64(n_parts, means) + EPS64 * means


def probable(n_terms: int, total) -> np.ndarray:
    """The probabilistic counterpart of `reordered`, for long chains (a state after a whole layer carried through a
    norm and the output matrix) whose worst case, every rounding of the same sign, no real run comes near: each order is
    within lambda sqrt(n) u sum|x_i| of the exact sum with probability at least 1 - 2n exp(-lambda^2 / 2) (Higham and
    Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019, thm. 2.4);
    lambda = 8 makes that 1 - 2.5e-10 for n = 10,000."""
    return 2 * LAMBDA * np.sqrt(n_terms) * (EPS32 / 2) * _numpy(total)


def product_bound(a, b) -> np.ndarray:
    """Per element of a @ b (float32, any blocking or order): K * eps * (|a| @ |b|), K the length of each sum."""
    a, b = _numpy(a), _numpy(b)
    return reordered(a.shape[-1], np.abs(a) @ np.abs(b))


def row_scale(x, keep: int = 1) -> np.ndarray:
    """Each row's largest magnitude over its last `keep` axes, kept for broadcasting: a per-row scale."""
    x = np.abs(_numpy(x))
    axes = tuple(range(x.ndim - keep, x.ndim))
    return x.max(axis=axes, keepdims=True)


def layer_terms(config, n_keys: int) -> int:
    """How many terms the longest chain of float32 sums in one layer adds for an output row: the attention's weighted
    sum over n_keys keys, W^O's d_model, and the feed-forward's d_model then d_ff (a gated one sums d_model twice
    side by side, not in a chain)."""
    return n_keys + config.d_model + config.d_model + config.d_ff


def forward_terms(config, n_keys: int) -> int:
    """How many terms the chain of sums behind one logit of a whole forward adds: every layer's chain (a decoder
    layer's cross-attention adds its keys and W^O), then the output product over d_model."""
    per_layer = layer_terms(config, n_keys)
    decoder = config.n_decoder_layers * (per_layer + (n_keys + config.d_model if config.n_encoder_layers else 0))
    return config.n_encoder_layers * per_layer + decoder + config.d_model


def stream_terms(stack, writes_rowwise: bool = False) -> np.ndarray:
    """(B, T, D) the magnitudes of the terms a pre-LN residual stream has summed by its last state: |embeddings| plus
    each sub-layer's |output| (the difference of the states it went between), elementwise; a rounding anywhere in the
    stream is relative to these, not to the last state (whose terms may cancel). `writes_rowwise`: each write's
    row's largest instead of its element's: a write's own rounding is relative to its product's terms (|h| @ |W|),
    which an element whose sum cancels understates; the row's largest write does not (the stream's own state is
    compared there, with no W after it to sum the elements' errors)."""
    return stream_reads(stack, writes_rowwise)[-1][1]


def stream_reads(stack, writes_rowwise: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """(state, terms) at each state of a pre-LN stream in the order it was computed (the embedding, then each
    sub-layer's): the state and stream_terms up to it, (B, T, D) each."""
    before = _numpy(stack.embeddings)
    total = np.abs(before)
    found = [(before, total)]
    for layer in stack.layers:
        for name in ("after_attn", "after_self_attn", "after_cross_attn", "after_ffn"):
            state = getattr(layer, name, None)
            if state is not None:
                state = _numpy(state)
                write = np.abs(state - before)
                total = total + (write.max(-1, keepdims=True) if writes_rowwise else write)
                before = state
                found.append((state, total))
    return found


def norm_gain(x, weight, eps: float, rms: bool) -> np.ndarray:
    """(..., D) how much a norm over the last axis multiplies a small error in its input x, per element, to first
    order: |g_i| / sigma (sigma = sqrt(var + eps) for LayerNorm, sqrt(mean x^2 + eps) for RMSNorm); the Jacobian's
    other terms (through the mean and sigma themselves) are 1 / D of it each."""
    x = _numpy(x)
    sigma = np.sqrt((x**2).mean(-1, keepdims=True) if rms else x.var(-1, keepdims=True) + eps)
    return np.abs(_numpy(weight)) / sigma


def _gain(norm) -> np.ndarray:
    """A norm's per-element gain g: its weight, or Gemma's (offset + weight)."""
    offset = getattr(norm, "offset", 0.0)
    return _numpy(norm.weight) + offset


def output_bound(stack_module, stack, n_terms: int, index: int | None = None) -> np.ndarray:
    """(B, T, D) each element of a stack's output's float32 error bound (probable) against the same forward in other
    products, from the terms it was summed from, carried through the norm that made it (first order):

    - post-LN: the output is the last layer's last norm of x + FFN(x) (x its state after attention): the sum's error,
      of its terms |x| + |FFN(x)| over the chain of n_terms (the row's largest: the FFN mixes every element), times
      the norm's |g_i| / sigma (norm_gain), plus the norm's own sums (2 d_model, relative to |g x_hat| + |b|);
    - pre-LN: each element's error of its terms (stream_terms, its own residual and each write's row's largest),
      through the final norm's |g_i| / sigma where there is one, plus the norm's own sums; without one, the stream.

    `index`: the state after layer `index` instead (a pre-LN stream's, before any final norm; a post-LN layer's norm).
    """
    i = len(stack.layers) - 1 if index is None else index % len(stack.layers)
    layer_module, layer = stack_module.layers[i], stack.layers[i]
    norm = stack_module.final_norm if index is None else None
    output = stack.output if index is None else layer.after_ffn
    d_model = _numpy(output).shape[-1]
    if layer_module.norm1.norm_first:
        upto = SimpleNamespace(embeddings=stack.embeddings, layers=stack.layers[: i + 1])
        h, error = _numpy(layer.after_ffn), probable(n_terms, stream_terms(upto, writes_rowwise=True))
    else:
        assert stack_module.final_norm is None, "a post-LN stack with a final norm too"
        x = [
            s
            for s in (getattr(layer, n, None) for n in ("after_attn", "after_cross_attn", "after_self_attn"))
            if s is not None
        ][0]
        norm = layer_module.norm3 if getattr(layer_module, "norm3", None) is not None else layer_module.norm2
        with torch.inference_mode():
            written = _numpy(layer_module.ffn(torch.as_tensor(x)))
        x = _numpy(x)
        h, error = x + written, probable(n_terms, (np.abs(x) + np.abs(written)).max(-1, keepdims=True))
    if norm is None:
        return error
    gain = norm_gain(h, _gain(norm), norm.eps, rms=isinstance(norm, RMSNorm))
    terms = np.abs(_numpy(output))
    if getattr(norm, "bias", None) is not None:
        terms = terms + np.abs(_numpy(norm.bias))
    return error * gain + reordered(2 * d_model, terms)


def read_bound(model, state, terms, n_upstream: int) -> np.ndarray:
    """(B, T, V) the float32 error bound (probable) of the logits a pre-LN decoder makes of a stream state (B, T, D)
    through its final norm and output matrix W (the logit lens's read), against the same state from other products.

    The stream's element i is a sum of its own terms (the embedding's and each sub-layer's write to it: `terms`,
    stream_terms), each rounded relative to that element's terms; an error in another element reaches i only through
    a norm (its 1/sigma, sigma the whole row's) and a sub-layer, so relative to the terms that sub-layer writes to i,
    which `terms` holds too. Each element's error is therefore probable(n_upstream, terms_i), elementwise, not the
    row's largest: a row with one massive element (SmolLM2's) would otherwise lend that element's size to all the
    others. The final norm multiplies it by |g_i| / sigma (norm_gain) and W sums it per logit: sum_i |W_vi| |g_i| /
    sigma error_i. Plus the output product's own d_model sum, relative to its terms |norm(state)| @ |W|^T."""
    config = model.config
    norm, weight = model.decoder.final_norm, np.abs(_numpy(model.generator.weight))  # (V, D)
    x = torch.as_tensor(_numpy(state), dtype=torch.float32)
    with torch.inference_mode():
        y = np.abs(_numpy(norm(x)))  # (B, T, D)
    gain = norm_gain(x, _gain(norm), norm.eps, rms=isinstance(norm, RMSNorm))  # (B, T, D)
    error = probable(n_upstream, terms)  # (B, T, D): each element's, of its own terms
    return probable(config.d_model, y @ weight.T) + (error * gain) @ weight.T


def logits_bound(model, out, n_keys: int) -> np.ndarray:
    """(B, T, V) each logit's float32 error bound against the same forward in other products (probable): the output
    product's own d_model sum, relative to its terms' magnitudes |y| @ |W|^T, plus the upstream chain's error carried
    in through W. In a pre-LN stack that is read_bound of the last state (each element's error of its own terms,
    stream_terms, through the final norm's 1/sigma); in a post-LN stack each layer's norm has already scaled the error
    to the last state's size, which the row's largest |y| bounds."""
    config, stack = model.config, out.decoder if out.decoder is not None else out.encoder
    upstream = forward_terms(config, n_keys) - config.d_model
    norm = (model.decoder or model.encoder).final_norm
    if config.norm_first and norm is not None and out.decoder is not None:
        return read_bound(model, stack.layers[-1].after_ffn, stream_terms(stack), upstream)
    return state_logits_bound(model, stack.output, upstream)


def state_logits_bound(model, y, n_upstream: int) -> np.ndarray:
    """(..., V) the logits' float32 error bound (probable) from a post-LN stack's last state y (..., D), a norm's
    output whose error each layer's norm has scaled to the state's own size (the row's largest |y|): the output
    product's own d_model sum of |y| @ |W|^T, plus that error carried through W's rows."""
    y, weight = np.abs(_numpy(y)), np.abs(_numpy(model.generator.weight))  # (..., D), (V, D)
    own = probable(model.config.d_model, y @ weight.T)
    return own + probable(n_upstream, y.max(-1, keepdims=True)) * weight.sum(-1)


def logits_row_bound(model, out, n_keys: int, rows: int = 256) -> np.ndarray:
    """(B, T, 1) logits_bound's largest over the vocabulary, for each row: the same bound, computed a block of rows at
    a time (a long text's (T, V) in float64 would not fit)."""
    config, stack = model.config, out.decoder if out.decoder is not None else out.encoder
    upstream = forward_terms(config, n_keys) - config.d_model
    final = (model.decoder or model.encoder).final_norm
    pre_ln = config.norm_first and final is not None and out.decoder is not None
    h, terms = (_numpy(stack.layers[-1].after_ffn), stream_terms(stack)) if pre_ln else (_numpy(stack.output), None)
    found = []
    for start in range(0, h.shape[1], rows):
        block = slice(start, start + rows)
        if pre_ln:
            found.append(read_bound(model, h[:, block], terms[:, block], upstream).max(-1, keepdims=True))
        else:
            found.append(state_logits_bound(model, h[:, block], upstream).max(-1, keepdims=True))
    return np.concatenate(found, axis=1)


def lens_bounds(model, out, n_keys: int) -> np.ndarray:
    """(R, B, T) each read's largest logit error bound over the vocabulary, for the logit lens's reads of a pre-LN
    decoder's stream (the embedding, then each sub-layer's state): read_bound of each state with the terms it has
    summed by then, and the whole forward's chain (an upper count for every read)."""
    upstream = forward_terms(model.config, n_keys) - model.config.d_model
    return np.stack([read_bound(model, s, t, upstream).max(-1) for s, t in stream_reads(out.decoder)])


def scores_bound(q, k, n_upstream: int) -> np.ndarray:
    """Each row's largest error in q k^T / sqrt(d_head) (q (..., Tq, Dh), k (..., Tk, Dh)): the dot product's own
    d_head terms plus n_upstream terms already in q and k (each a d_model sum: first order, relative to |q_i k_i|)."""
    q, k = _numpy(q), _numpy(k)
    terms = np.abs(q) @ np.swapaxes(np.abs(k), -1, -2) / np.sqrt(q.shape[-1])
    return reordered(q.shape[-1] + n_upstream, terms).max(axis=-1, keepdims=True)


def probabilities_bound(p, logit_error) -> np.ndarray:
    """Softmax probabilities p whose logits are off by at most logit_error: dp_i/dz_j = p_i (delta_ij - p_j), so each
    moves by at most 2 p_i * logit_error; plus the softmax's own rounding: the normaliser's sum over the row and a
    rounding each for the shift, exp and the division (reordered over n + 3 terms, relative to p_i)."""
    p = _numpy(p)
    return 2 * p * _numpy(logit_error) + reordered(p.shape[-1] + 3, p)


def assert_within(actual, expected, bound, what: str = "", worst_case: bool = False) -> None:
    """Every |actual - expected| <= bound (a number, or an array that broadcasts: per row, per element).

    `worst_case`: the bound is the worst case of every rounding the computation makes, each an IEEE operation (+, *,
    / within half an ulp on every machine, in any order of the same sums), with nothing estimated: no machine can
    cross it, so the margin report lists it apart from the 10x it asks of the others (a bound of a few roundings
    stands at a few times its difference however it is derived)."""
    actual, expected, bound = _numpy(actual), _numpy(expected), _numpy(bound)
    assert actual.shape == expected.shape, f"{what}: shapes {actual.shape} and {expected.shape}"
    difference = np.abs(actual - expected)
    bound = np.broadcast_to(bound, difference.shape)
    over = difference > bound
    with np.errstate(divide="ignore", invalid="ignore"):
        margins = np.where(difference > 0, bound / difference, np.inf)
    margin = float(margins.min()) if margins.size else float("inf")
    _record(what, float(difference.max(initial=0.0)), margin, float(bound.max(initial=0.0)), expected, worst_case)
    if over.any():
        i = np.unravel_index(int(np.argmax(difference - bound)), difference.shape)
        raise AssertionError(
            f"{what}: {int(over.sum())} of {difference.size} elements past their bound; worst at {tuple(map(int, i))}: "
            f"|{actual[i]!r} - {expected[i]!r}| = {difference[i]:.3g} > {bound[i]:.3g}"
        )


def _record(
    what: str, worst: float, margin: float, bound: float, expected: np.ndarray, worst_case: bool = False
) -> None:
    path = os.environ.get("EXPLORER_MARGINS")
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    scale = float(np.abs(expected).max(initial=0.0))
    found = {"test": test, "what": what, "worst": worst, "margin": margin, "bound": bound, "scale": scale}
    if worst_case:
        found["worst_case"] = True
    with open(path, "a") as f:
        f.write(json.dumps(found) + "\n")


def record_every_comparison() -> None:
    """With EXPLORER_MARGINS set: np.testing.assert_allclose and torch.testing.assert_close record their margins too
    (atol + rtol |expected| over the largest difference), named by the calling test line; the margin report reads
    every float comparison of the suite, not only those written with assert_within."""
    if not os.environ.get("EXPLORER_MARGINS"):
        return
    import inspect

    def where() -> str:
        for frame in inspect.stack()[2:]:
            if "/tests/" in frame.filename and not frame.filename.endswith("tolerance.py"):
                return f"{frame.filename.rsplit('/tests/', 1)[1]}:{frame.lineno}"
        return "?"

    def note(actual, expected, atol, rtol) -> None:
        try:
            actual, expected = _numpy(actual), _numpy(expected)
            difference = np.abs(actual - expected)
            bound = np.broadcast_to(atol + rtol * np.abs(expected), difference.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                margins = np.where(difference > 0, bound / difference, np.inf)
            margins = margins[~np.isnan(margins)]
            margin = float(margins.min()) if margins.size else float("inf")
            _record(f"tests/{where()}", float(np.nanmax(difference, initial=0.0)), margin, float(bound.max()), expected)
        except (TypeError, ValueError):
            pass

    numpy_close = np.testing.assert_allclose

    def assert_allclose(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
        note(actual, desired, atol, rtol)
        return numpy_close(actual, desired, rtol, atol, *args, **kwargs)

    torch_close = torch.testing.assert_close

    def assert_close(actual, expected, *args, rtol=None, atol=None, **kwargs):
        if rtol is not None and atol is not None:
            note(actual, expected, atol, rtol)
        return torch_close(actual, expected, *args, rtol=rtol, atol=atol, **kwargs)

    np.testing.assert_allclose = assert_allclose
    torch.testing.assert_close = assert_close
