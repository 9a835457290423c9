"""About how long a computation on a text takes, from the size of its work: what a page says before one that takes
long, and the point past which it asks first instead of starting at once.

An estimate is the work's terms (Terms: weights read, layers dispatched, multiply-adds, attention weights) at rates
fitted on a 2-core machine (one forward of SmolLM2-135M over 2,048 tokens: about 10 s; a 3-token run: its weights
read and its layers' fixed part), its fixed terms times this process's latency pace and the rest times its
throughput pace (explorer/run/pace.py: this machine's calibrations until its runs say how much longer than that
they take). `python -m bench estimates` runs the estimates against what happens; tests/explorer/test_estimates_hold.py
holds their plumbing. It reads only the model's shape and the token count, never the model's name.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

from attention_explorer.explorer.run import pace
from attention_explorer.explorer.run.pace import Seconds
from attention_explorer.models.anatomy import describe
from attention_explorer.models.attention import BAND_WINDOWS
from attention_explorer.models.config import TransformerConfig

FLOAT = 4  # bytes of a float32
# Memory at a run's peak, beyond what the process held before it, in float32 copies of the arrays that grow with the
# text: fitted by `python -m bench cost` on first runs of MiniLM at 128-512 tokens and SmolLM2 at 512-8,192 (within
# -21%..+13% of the measured peak; SmolLM2 -17%..+13%, MiniLM's few tens of MB the noisiest).
ATTENTION_COPIES = 2.0  # one layer's (H, T, T) at a time: its scores and weights while the softmax runs
# (a sliding-window layer computed on its band, models.attention.banded_attention: its (H, T, T) weights once, and
# these copies of one query block's scores only: attention_floats)
STATE_COPIES = 4.0  # the residual stream entering every layer (T, D), kept by the trace, and what reads it
LOGIT_COPIES = 0.22  # the next-token logits (T, V), read a block of positions at a time
OUTPUT_WEIGHT_COPIES = 1.15  # the output layer's weights (V, D) once more while the logits are computed
FIXED_BYTES = 16 * 2**20  # a short text's run: torch's buffers and the trace's small arrays

# The time of a run, in seconds at pace 1 (an idle 2-core machine; explorer/run/pace.py's calibrations there):
#   every layer: its weight matrices read once (what a short text's run spends: SECONDS_PER_PARAMETER), a fixed
#   overhead (SECONDS_PER_LAYER: Python and torch's dispatch of its operations, the trace's work on its arrays), its
#   matrix products' multiply-adds (MACS_PER_SECOND) and its attention weights (SECONDS_PER_WEIGHT);
#   plus the run's own fixed part (SECONDS_PER_RUN).
# The products' and weights' rates are the earlier fit's on an idle machine (one forward of SmolLM2 over 2,048
# tokens: about 10 s). The fixed terms' sizes beside them are `python -m bench estimates fit`'s on first runs of
# MiniLM and SmolLM2 at 3, 16, 128 and 512 tokens (40 rows, 5 a length, each beside a calibration), refitted with the
# two rates above held, on a quiet 2-core machine (load 0.4-1.1, nothing else running; 2026-11-29 15:17 UTC): every
# length's median took / estimated within 0.90-1.32x (at the rates before, 53 and 95 million: 0.64-1.00x). A weight
# read costs about 44.5 multiply-adds and a layer's fixed part about 33 million. A rate per multiply-add alone, before,
# made a 3-token run's estimate a thousandth of its time.
MACS_PER_SECOND = 5e10  # multiply-adds of the matrix products (x W, q k^T, weights v)
SECONDS_PER_WEIGHT = 3e-9  # each attention weight scored, masked, softmaxed and read again (bound by memory, not MACs)
SECONDS_PER_PARAMETER = 44.5 / MACS_PER_SECOND  # each weight of a layer's matrices read from memory, once per forward
SECONDS_PER_LAYER = 3.34e7 / MACS_PER_SECOND  # a layer's fixed part, whatever its size (about 0.7 ms)
SECONDS_PER_RUN = 0.0  # a run's own fixed part: too small beside its layers' for the fit to find
# Past this a page asks before it starts, so that it is drawn within 4 s: one more run of MiniLM over 512 tokens
# (about 0.2 s estimated) starts at once; the transformers reference of a GPT-2-small-sized model over 1,024 tokens
# beside its 12 layers recomputed (about 5 s; 7.4 s measured, as it started at once at 15 s) asks, and so do MiniLM's
# every-head effects at 512 tokens (about 14 s).
ASK_AFTER_SECONDS = 3.0


@dataclass(frozen=True)
class Terms:
    """The counts a run's time is made of, each with its rate above."""

    parameters: float = 0.0  # weights of the layers' matrices read
    layers: float = 0.0  # layers' operations dispatched
    macs: float = 0.0  # multiply-adds of the matrix products
    weights: float = 0.0  # attention weights computed
    runs: float = 0.0  # runs begun

    def __add__(self, other: Terms) -> Terms:
        return Terms(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __mul__(self, times: float) -> Terms:
        return Terms(*(a * times for a in astuple(self)))

    def fixed_seconds(self) -> float:
        """The fixed terms' time at the fitted rates: what the latency pace multiplies."""
        return self.layers * SECONDS_PER_LAYER + self.runs * SECONDS_PER_RUN

    def work_seconds(self) -> float:
        """The work's time at the fitted rates: what the throughput pace multiplies."""
        return self.parameters * SECONDS_PER_PARAMETER + self.macs / MACS_PER_SECOND + self.weights * SECONDS_PER_WEIGHT

    def seconds(self) -> float:
        """These terms' time at the fitted rates (pace 1, 1)."""
        return self.fixed_seconds() + self.work_seconds()

    def estimate(self) -> Seconds:
        """These terms' time at this process's pace."""
        return Seconds(self.fixed_seconds(), self.work_seconds())


# The rates above are one machine's; a busy or another machine runs slower or faster, and a fixed rate was off by
# 2-9x (a corpus "about 6 s" took 13.3 s). So every estimate is a pace.Seconds: the fixed terms (layers, runs) times
# this process's latency pace, the rest (weights read, multiply-adds, attention weights) times its throughput pace,
# each calibrated on this machine when the first estimate is made, then fitted to its admitted runs (explorer/run/
# pace.py).
# each attention weight's share of the corpus statistics (explorer/run/corpus.layer_sums: a float64 copy, entropy,
# distances, induction targets; about 8 passes over the weights), beyond the forward's own
SECONDS_PER_STATISTIC_WEIGHT = 8 * SECONDS_PER_WEIGHT


def band_blocks(tokens: int, window: int) -> list[int]:
    """The (query, key) pairs each query block of a sliding-window layer's band scores over its own `tokens` tokens
    (models.attention.banded_attention under a causal mask: blocks of `window` rows, each against the keys from its
    first row's window start to its last row); one block of every pair where the text is no longer than
    BAND_WINDOWS windows (models.attention.banded: the dense path)."""
    if tokens <= BAND_WINDOWS * window:
        return [tokens * tokens]
    return [
        (min(start + window, tokens) - start) * (min(start + window, tokens) - max(0, start - window + 1))
        for start in range(0, tokens, window)
    ]


def windows(config: TransformerConfig) -> list[int | None]:
    """Each decoder layer's sliding window (None: global), as the engine builds it (models.anatomy's spans)."""
    spans = describe(config).spans
    return [span.window for span in spans] if spans else [None] * config.n_decoder_layers


def _layer_terms(
    config: TransformerConfig, queries: int, keys: float | None, cross: bool, window: int | None = None
) -> tuple[Terms, Terms]:
    """One layer's work: (once per forward, whatever its batch: its weights read and its operations dispatched; per
    batch row: its multiply-adds and attention weights). `window`: a sliding-window layer's self-attention over its
    own `queries` tokens computed on its band (in a run that keeps no raw scores, models.attention.banded): its
    q k^T, softmax and weights @ v count the band's pairs (band_blocks), under n (2w - 1), not n^2. Without it
    (a global layer, or a run that keeps its raw scores, as a layer recomputed for a view) every pair: the engine
    scores them all and masks those outside the window."""
    keys = queries if keys is None else keys
    own = sum(band_blocks(queries, window)) if window is not None and keys == queries else queries * keys
    pairs = own + (queries * keys if cross else 0)  # a cross-attention: every (target, source) pair
    block = describe(config)
    d, kv = config.d_model, block.kv_heads * config.d_head
    # W_Q and W_O between d_model and the heads' width (H x Dh: d_model in the paper, 1,024 in Gemma 3 270M)
    attention = 2 * d * config.d_attention + 2 * d * kv
    attentions = 2 if cross else 1
    parameters = attentions * attention + (3 if block.ffn.gated else 2) * d * config.d_ff  # one MAC a token each
    macs = queries * parameters + 2 * config.n_heads * pairs * config.d_head  # q k^T and weights @ v: Dh each
    weights = config.n_heads * pairs
    return Terms(parameters=parameters, layers=1), Terms(macs=macs, weights=weights)


def layer_seconds(
    config: TransformerConfig,
    queries: int,
    keys: float | None = None,
    cross: bool = False,
    rows: int = 1,
    window: int | None = None,
) -> float:
    """One layer over `queries` tokens attending to `keys` (default: themselves), `rows` batch rows at once: its
    projections, attention and feed-forward (a cross-attention adds a second attention), at this process's pace.
    `window`: the layer's sliding window where a run that keeps no raw scores computes it on its band (the corpus);
    a layer recomputed for a view keeps its raw scores, and every pair is counted."""
    once, each = _layer_terms(config, queries, keys, cross, window)
    return (once + each * rows).estimate()


def statistics_seconds(config: TransformerConfig, rows: int, tokens: int, layers: int) -> float:
    """The corpus statistics of `layers` layers over `rows` texts padded to `tokens` (explorer/run/corpus.py's
    layer_sums over every head's weights), at this process's pace."""
    return Seconds(0.0, rows * layers * config.n_heads * tokens * tokens * SECONDS_PER_STATISTIC_WEIGHT)


def forward_terms(
    config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False, band: bool = False
) -> Terms:
    """What forward_seconds counts: every layer's terms (its per-row work `rows` times), the output layer's and the
    run's own. `band`: the forward keeps no raw scores (models.attention.raw_scores_dropped: a long text's first run,
    patching's two reads, the corpus), so its sliding-window layers over more tokens than their window are computed
    on their band; without it every layer scores every pair (the raw scores kept: an experiment's batches)."""
    total = Terms(runs=1)
    once, each = _layer_terms(config, tokens, None, False)
    total = total + (once + each * rows) * config.n_encoder_layers
    for window in windows(config):
        once, each = _layer_terms(config, tokens, None, config.is_encoder_decoder, window if band else None)
        total = total + once + each * rows
    if logits:  # the output layer: its (V, D) weights read once, a multiply-add each per position
        output = config.d_model * config.target_vocab_size
        total = total + Terms(parameters=output, macs=rows * tokens * output)
    return total


def forward_seconds(
    config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False, band: bool = False
) -> float:
    """One forward over `tokens` tokens (every layer of every stack; a decoder reads as many as the encoder) of
    `rows` batch rows at once; `logits`: with the output layer over every position; `band`: keeping no raw scores,
    its sliding-window layers computed on their band (forward_terms). At this process's pace."""
    return forward_terms(config, tokens, rows, logits, band).estimate()


def greedy_terms(config: TransformerConfig, source: int, steps: int) -> Terms:
    """What greedy decoding counts (models/greedy.py): the encoder over `source` tokens, then `steps` steps, each
    every decoder layer over its newest position only (its self-attention reads the steps so far, its
    cross-attention the source: on average (step + source) / 2 keys each) and the output layer over it."""
    total = Terms(runs=1)
    once, each = _layer_terms(config, source, None, False)
    total = total + (once + each) * config.n_encoder_layers
    output = config.d_model * config.target_vocab_size
    for step in range(1, steps + 1):
        once, each = _layer_terms(config, 1, (step + source) / 2, True)
        total = total + (once + each) * config.n_decoder_layers + Terms(parameters=output, macs=output)
    return total


def greedy_seconds(config: TransformerConfig, source: int, steps: int) -> float:
    """An encoder-decoder's greedy decoding of at most `steps` tokens from `source` tokens, at this pace (a first
    run decodes before its forward over the output: the two add up)."""
    return greedy_terms(config, source, steps).estimate() if config.is_encoder_decoder else Seconds(0.0, 0.0)


def forward_bytes(
    config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False, band: bool = False
) -> int:
    """About how much memory a first run over `tokens` tokens adds at its peak (`rows` batch rows at once; `logits`:
    with the output layer over every position; `band`: keeping no raw scores, attention_floats): one layer's attention
    at a time, every layer's input kept."""
    layers = config.n_encoder_layers + config.n_decoder_layers
    attention = attention_floats(config, tokens, band)
    states = STATE_COPIES * (layers + 1) * tokens * config.d_model
    output = LOGIT_COPIES * tokens * config.target_vocab_size if logits else 0.0
    weights = OUTPUT_WEIGHT_COPIES * config.target_vocab_size * config.d_model if logits else 0.0
    return int(FIXED_BYTES + FLOAT * (rows * (attention + states + output) + weights))


def attention_floats(config: TransformerConfig, tokens: int, band: bool = False) -> float:
    """One layer's attention at its peak, in floats, the largest over the layers: a layer's scores and weights
    (ATTENTION_COPIES x (H, T, T)); with `band` (a run that keeps no raw scores), a sliding-window layer over more
    tokens than BAND_WINDOWS windows holds its (H, T, T) weights and its largest query block's scores only
    (banded_attention), so a model whose every layer is local peaks lower, one with a global layer (Gemma 3) at that
    layer's."""
    whole = config.n_heads * tokens * tokens
    spans = windows(config) if band and not config.n_encoder_layers else [None]
    return max(
        ATTENTION_COPIES * whole
        if window is None or tokens <= BAND_WINDOWS * window
        else whole + ATTENTION_COPIES * config.n_heads * max(band_blocks(tokens, window))
        for window in spans
    )


def batch_bytes(config: TransformerConfig, tokens: int, rows: int, logits: bool = False, band: bool = False) -> int:
    """About how much memory an experiment's chunk of `rows` batch rows adds: a forward that keeps no attention, one
    layer's (H, T, T) at a time per row (attention_floats; `band`: a forward that keeps no raw scores either), and with
    `logits` the log-probabilities read in float64 (T, V) per row."""
    attention = FLOAT * attention_floats(config, tokens, band)
    states = FLOAT * STATE_COPIES * tokens * max(config.d_model, config.d_ff)
    output = (FLOAT + 2 * 8) * tokens * config.target_vocab_size if logits else 0
    return int(FIXED_BYTES + rows * (attention + states + output))


def layer_bytes(config: TransformerConfig, tokens: int) -> int:
    """About how much memory one layer recomputed over `tokens` tokens adds (its attention kept, as a view reads it,
    beside its scores while the softmax runs; its sub-layers' states)."""
    attention = ATTENTION_COPIES * config.n_heads * tokens * tokens
    return int(FLOAT * (attention + 8 * tokens * max(config.d_model, config.d_ff)))


def most_tokens(config: TransformerConfig, room: int, rows: int = 1, logits: bool = False, band: bool = False) -> int:
    """The most tokens whose forward_bytes fit in `room` bytes (0 when not even one does)."""
    low, high = 0, config.max_len
    while low < high:  # forward_bytes grows with the tokens: the last count that fits
        middle = (low + high + 1) // 2
        low, high = (middle, high) if forward_bytes(config, middle, rows, logits, band) <= room else (low, middle - 1)
    return low


# transformers' own copy of a model, loaded the first time Ours vs transformers opens on it: from a GGUF file it
# imports transformers and reads the file's every field and tensor name in Python, then converts every weight
# (SmolLM2-135M-Instruct on a quiet 2-core machine, load 0.7-0.8, 2026-11-29 15:23 UTC: `python -m bench estimates
# reference` 17.6 s at a throughput pace of 1.23, 1.06e-7 s a weight at pace 1; again 3.6 s to import transformers and
# 14.8 s to load at pace 1.04, 1.32e-7; under cProfile, 26.8 s in all: 10 s in gguf's reader building the fields, 7 s
# in its tensor name map, 2 s converting the weights). Python's work on one core slows less on a busy machine than
# the calibration's threaded products: under a load of 4-6 it took 22.4 s where the calibration said 125 s, and 75 s
# under a load of 10 when it read about 28, so it goes at Python's own pace (pace.python_pace): at that pace, on a
# quiet machine (load 0.5-1.3, `python -m bench estimates checks`), 14.6 s where 16.1 s was estimated; memory
# 1.25 -> 1.76 GB. From a safetensors folder it only reads them (GPT-2-sized: a second or two on a busy machine)
GGUF_SECONDS_PER_PARAMETER = 1.2e-7
FOLDER_SECONDS_PER_PARAMETER = 1e-9
REFERENCE_BYTES_PER_PARAMETER = 3.8  # its float32 weights (4 bytes) less what the conversion shares: 0.51 GB / 135 M


def reference_load_seconds(parameters: int, gguf: bool) -> float:
    """About how long transformers takes to load its copy of a model of `parameters` weights (a plain float: a load's
    time does not say the pace of runs): from a GGUF file, Python's work on one core at its own pace
    (pace.python_pace); from a folder, a read of its weights at the throughput pace."""
    if gguf:
        return parameters * GGUF_SECONDS_PER_PARAMETER * pace.python_pace()
    return parameters * FOLDER_SECONDS_PER_PARAMETER * pace.now().throughput


def reference_load_bytes(parameters: int) -> int:
    """About how much memory transformers' copy of a model of `parameters` weights adds, kept once loaded."""
    return int(parameters * REFERENCE_BYTES_PER_PARAMETER)


def asks_first(seconds: float) -> bool:
    """Whether a computation this long waits for a click instead of starting when the page opens: decided on the
    work's size (the estimate at the fitted rates), so that a page asks the same on any machine, busy or not."""
    return fitted(seconds) > ASK_AFTER_SECONDS


def fitted(seconds: float) -> float:
    """An estimate's work at the fitted rates (a plain float's, at this throughput pace)."""
    return seconds.fitted if isinstance(seconds, Seconds) else seconds / pace.now().throughput


def about(seconds: float) -> str:
    """'under a second', 'about 20 s', 'about 4 minutes', 'about 2.5 hours': the estimate as a page says it (a
    sample corpus of 0.14 s was said as 'about 1 s')."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"about {max(1, round(seconds, -1 if seconds >= 20 else 0)):.0f} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60):.0f} minutes"
    return f"about {seconds / 3600:.1f} hours"
