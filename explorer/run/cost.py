"""About how long a computation on a text takes, from the size of its work: what a page says before one that takes
long, and the point past which it asks first instead of starting at once.

An estimate from two rates fitted on a 2-core machine (one forward of SmolLM2-135M over 2,048 tokens: about 10 s;
MiniLM's 72 heads turned off one batch row each at 512 tokens: about 12 s), times this process's pace: how much
longer than that its last runs took (a busy machine takes longer; tests/explorer/test_estimates_hold.py runs the
estimates against what happens). It reads only the model's shape and the token count, never the model's name.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import TransformerConfig

FLOAT = 4  # bytes of a float32
# Memory at a run's peak, beyond what the process held before it, in float32 copies of the arrays that grow with the
# text: fitted by `python -m bench cost` on first runs of MiniLM at 128-512 tokens and SmolLM2 at 512-8,192 (within
# -21%..+13% of the measured peak; SmolLM2 -17%..+13%, MiniLM's few tens of MB the noisiest).
ATTENTION_COPIES = 2.0  # one layer's (H, T, T) at a time: its scores and weights while the softmax runs
STATE_COPIES = 4.0  # the residual stream entering every layer (T, D), kept by the trace, and what reads it
LOGIT_COPIES = 0.22  # the next-token logits (T, V), read a block of positions at a time
OUTPUT_WEIGHT_COPIES = 1.15  # the output layer's weights (V, D) once more while the logits are computed
FIXED_BYTES = 16 * 2**20  # a short text's run: torch's buffers and the trace's small arrays

MACS_PER_SECOND = 5e10  # multiply-adds of the matrix products (x W, q k^T, weights v)
SECONDS_PER_WEIGHT = 3e-9  # each attention weight scored, masked, softmaxed and read again (bound by memory, not MACs)
# Past this a page asks before it starts, so that it is drawn within 4 s: one more run of MiniLM over 512 tokens
# (about 0.2 s estimated) starts at once; the transformers reference of a GPT-2-small-sized model over 1,024 tokens
# beside its 12 layers recomputed (about 5 s; 7.4 s measured, as it started at once at 15 s) asks, and so do MiniLM's
# every-head effects at 512 tokens (about 13 s).
ASK_AFTER_SECONDS = 3.0


# The rates above are an idle 2-core machine's; a busy or another machine runs slower or faster, and a fixed rate
# was off by 2-9x (a corpus "about 6 s" took 13.3 s). So every estimate is multiplied by this process's pace: the
# median, over its last PACE_RUNS admitted runs, of the time each took over its estimate at these rates
# (admission.Gate reports each run that ends); 1 until a run long enough to say (OBSERVED_AFTER) has ended.
PACE_RUNS = 7
OBSERVED_AFTER = 0.1  # shorter runs say more about Python's overhead than about the machine's pace
PACE_LIMITS = (0.1, 200.0)  # one odd run (a machine paused) moves the median, never the estimate beyond these
# each attention weight's share of the corpus statistics (explorer/run/corpus.layer_sums: a float64 copy, entropy,
# distances, induction targets; about 8 passes over the weights), beyond the forward's own
SECONDS_PER_STATISTIC_WEIGHT = 8 * SECONDS_PER_WEIGHT

_paces: deque[float] = deque(maxlen=PACE_RUNS)
_lock = threading.Lock()


def pace() -> float:
    """This process's pace: how much longer than its estimate at the fitted rates a run now takes (1: as fitted)."""
    with _lock:
        found = statistics.median(_paces) if _paces else 1.0
    return min(max(found, PACE_LIMITS[0]), PACE_LIMITS[1])


def observe(seconds: float, took: float, at_pace: float) -> None:
    """A run estimated at `seconds` (at pace `at_pace`) took `took`: the pace it shows joins the last PACE_RUNS."""
    fitted = seconds / at_pace  # the estimate at the fitted rates
    if fitted >= OBSERVED_AFTER and took > 0:
        with _lock:
            _paces.append(took / fitted)


def forget_pace() -> None:
    """Back to the fitted rates (a test's fresh start)."""
    with _lock:
        _paces.clear()


def _fitted_layer_seconds(config: TransformerConfig, queries: int, keys: int | None, cross: bool) -> float:
    """layer_seconds at the fitted rates. A local layer's sliding window saves nothing here: the engine scores every
    (query, key) pair and masks those outside the window, so that the band can be drawn."""
    keys = queries if keys is None else keys
    block = describe(config)
    d, kv = config.d_model, block.kv_heads * config.d_head
    # W_Q and W_O between d_model and the heads' width (H x Dh: d_model in the paper, 1,024 in Gemma 3 270M)
    per_token = 2 * d * config.d_attention + 2 * d * kv + (3 if block.ffn.gated else 2) * d * config.d_ff
    attentions = 2 if cross else 1
    macs = queries * per_token + attentions * 2 * config.n_heads * queries * keys * config.d_head
    weights = attentions * config.n_heads * queries * keys
    return macs / MACS_PER_SECOND + weights * SECONDS_PER_WEIGHT


def layer_seconds(config: TransformerConfig, queries: int, keys: int | None = None, cross: bool = False) -> float:
    """One layer over `queries` tokens attending to `keys` (default: themselves): its projections, attention and
    feed-forward (a cross-attention adds a second attention), at this process's pace."""
    return _fitted_layer_seconds(config, queries, keys, cross) * pace()


def statistics_seconds(config: TransformerConfig, rows: int, tokens: int, layers: int) -> float:
    """The corpus statistics of `layers` layers over `rows` texts padded to `tokens` (explorer/run/corpus.py's
    layer_sums over every head's weights), at this process's pace."""
    return rows * layers * config.n_heads * tokens * tokens * SECONDS_PER_STATISTIC_WEIGHT * pace()


def forward_seconds(config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False) -> float:
    """One forward over `tokens` tokens (every layer of every stack; a decoder reads as many as the encoder), times
    `rows` batch rows; `logits`: with the output layer over every position."""
    encoder = config.n_encoder_layers * layer_seconds(config, tokens)
    decoder = config.n_decoder_layers * layer_seconds(config, tokens, cross=config.is_encoder_decoder)
    output = tokens * config.d_model * config.target_vocab_size / MACS_PER_SECOND * pace() if logits else 0.0
    return rows * (encoder + decoder + output)


def forward_bytes(config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False) -> int:
    """About how much memory a first run over `tokens` tokens adds at its peak (`rows` batch rows at once; `logits`:
    with the output layer over every position): one layer's attention at a time, every layer's input kept."""
    layers = config.n_encoder_layers + config.n_decoder_layers
    attention = ATTENTION_COPIES * config.n_heads * tokens * tokens
    states = STATE_COPIES * (layers + 1) * tokens * config.d_model
    output = LOGIT_COPIES * tokens * config.target_vocab_size if logits else 0.0
    weights = OUTPUT_WEIGHT_COPIES * config.target_vocab_size * config.d_model if logits else 0.0
    return int(FIXED_BYTES + FLOAT * (rows * (attention + states + output) + weights))


def batch_bytes(config: TransformerConfig, tokens: int, rows: int, logits: bool = False) -> int:
    """About how much memory an experiment's chunk of `rows` batch rows adds: a forward that keeps no attention, one
    layer's (H, T, T) at a time per row, and with `logits` the log-probabilities read in float64 (T, V) per row."""
    attention = FLOAT * ATTENTION_COPIES * config.n_heads * tokens * tokens
    states = FLOAT * STATE_COPIES * tokens * max(config.d_model, config.d_ff)
    output = (FLOAT + 2 * 8) * tokens * config.target_vocab_size if logits else 0
    return int(FIXED_BYTES + rows * (attention + states + output))


def layer_bytes(config: TransformerConfig, tokens: int) -> int:
    """About how much memory one layer recomputed over `tokens` tokens adds (its attention kept, as a view reads it,
    beside its scores while the softmax runs; its sub-layers' states)."""
    attention = ATTENTION_COPIES * config.n_heads * tokens * tokens
    return int(FLOAT * (attention + 8 * tokens * max(config.d_model, config.d_ff)))


def most_tokens(config: TransformerConfig, room: int, rows: int = 1, logits: bool = False) -> int:
    """The most tokens whose forward_bytes fit in `room` bytes (0 when not even one does)."""
    low, high = 0, config.max_len
    while low < high:  # forward_bytes grows with the tokens: the last count that fits
        middle = (low + high + 1) // 2
        low, high = (middle, high) if forward_bytes(config, middle, rows, logits) <= room else (low, middle - 1)
    return low


# transformers' own copy of a model, loaded the first time Ours vs transformers opens on it: from a GGUF file it
# converts every weight again (SmolLM2-135M-Instruct: about 25 s on a busy 2-core machine, memory 1.25 -> 1.76 GB),
# from a safetensors folder it only reads them (GPT-2-sized: a second or two)
GGUF_SECONDS_PER_PARAMETER = 25 / 135e6
FOLDER_SECONDS_PER_PARAMETER = 1e-8
REFERENCE_BYTES_PER_PARAMETER = 3.8  # its float32 weights (4 bytes) less what the conversion shares: 0.51 GB / 135 M


def reference_load_seconds(parameters: int, gguf: bool) -> float:
    """About how long transformers takes to load its copy of a model of `parameters` weights, at this pace."""
    per = GGUF_SECONDS_PER_PARAMETER if gguf else FOLDER_SECONDS_PER_PARAMETER
    return parameters * per * pace()


def reference_load_bytes(parameters: int) -> int:
    """About how much memory transformers' copy of a model of `parameters` weights adds, kept once loaded."""
    return int(parameters * REFERENCE_BYTES_PER_PARAMETER)


def asks_first(seconds: float) -> bool:
    """Whether a computation this long waits for a click instead of starting when the page opens: decided on the
    work's size (the estimate at the fitted rates), so that a page asks the same on any machine, busy or not."""
    return seconds / pace() > ASK_AFTER_SECONDS


def about(seconds: float) -> str:
    """'about 20 s', 'about 4 minutes', 'about 2.5 hours': the estimate as a page says it."""
    if seconds < 90:
        return f"about {max(1, round(seconds, -1 if seconds >= 20 else 0)):.0f} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60):.0f} minutes"
    return f"about {seconds / 3600:.1f} hours"
