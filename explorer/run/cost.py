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


def _layer_terms(config: TransformerConfig, queries: int, keys: float | None, cross: bool) -> tuple[Terms, Terms]:
    """One layer's work: (once per forward, whatever its batch: its weights read and its operations dispatched; per
    batch row: its multiply-adds and attention weights). A local layer's sliding window saves nothing here: the
    engine scores every (query, key) pair and masks those outside the window, so that the band can be drawn."""
    keys = queries if keys is None else keys
    block = describe(config)
    d, kv = config.d_model, block.kv_heads * config.d_head
    # W_Q and W_O between d_model and the heads' width (H x Dh: d_model in the paper, 1,024 in Gemma 3 270M)
    attention = 2 * d * config.d_attention + 2 * d * kv
    attentions = 2 if cross else 1
    parameters = attentions * attention + (3 if block.ffn.gated else 2) * d * config.d_ff  # one MAC a token each
    macs = queries * parameters + attentions * 2 * config.n_heads * queries * keys * config.d_head
    weights = attentions * config.n_heads * queries * keys
    return Terms(parameters=parameters, layers=1), Terms(macs=macs, weights=weights)


def layer_seconds(
    config: TransformerConfig, queries: int, keys: float | None = None, cross: bool = False, rows: int = 1
) -> float:
    """One layer over `queries` tokens attending to `keys` (default: themselves), `rows` batch rows at once: its
    projections, attention and feed-forward (a cross-attention adds a second attention), at this process's pace."""
    once, each = _layer_terms(config, queries, keys, cross)
    return (once + each * rows).estimate()


def statistics_seconds(config: TransformerConfig, rows: int, tokens: int, layers: int) -> float:
    """The corpus statistics of `layers` layers over `rows` texts padded to `tokens` (explorer/run/corpus.py's
    layer_sums over every head's weights), at this process's pace."""
    return Seconds(0.0, rows * layers * config.n_heads * tokens * tokens * SECONDS_PER_STATISTIC_WEIGHT)


def forward_terms(config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False) -> Terms:
    """What forward_seconds counts: every layer's terms (its per-row work `rows` times), the output layer's and the
    run's own."""
    total = Terms(runs=1)
    for layers, cross in ((config.n_encoder_layers, False), (config.n_decoder_layers, config.is_encoder_decoder)):
        once, each = _layer_terms(config, tokens, None, cross)
        total = total + (once + each * rows) * layers
    if logits:  # the output layer: its (V, D) weights read once, a multiply-add each per position
        output = config.d_model * config.target_vocab_size
        total = total + Terms(parameters=output, macs=rows * tokens * output)
    return total


def forward_seconds(config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False) -> float:
    """One forward over `tokens` tokens (every layer of every stack; a decoder reads as many as the encoder) of
    `rows` batch rows at once; `logits`: with the output layer over every position. At this process's pace."""
    return forward_terms(config, tokens, rows, logits).estimate()


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
# imports transformers and reads the file's every field and tensor name in Python, then converts every weight
# (SmolLM2-135M-Instruct on a quiet 2-core machine, load 0.7-0.8, 2026-11-29 15:23 UTC: `python -m bench estimates
# reference` 17.6 s at a throughput pace of 1.23, 1.06e-7 s a weight at pace 1; again 3.6 s to import transformers and
# 14.8 s to load at pace 1.04, 1.32e-7; under cProfile, 26.8 s in all: 10 s in gguf's reader building the fields, 7 s
# in its tensor name map, 2 s converting the weights). Python's work on one core slows less on a busy machine than
# the calibration's threaded products: under a load of 4-6 it took 22.4 s where the calibration said 125 s, and 75 s
# under a load of 10 when it read about 28; memory 1.25 -> 1.76 GB. From a safetensors folder it only reads them
# (GPT-2-sized: a second or two on a busy machine)
GGUF_SECONDS_PER_PARAMETER = 1.2e-7
FOLDER_SECONDS_PER_PARAMETER = 1e-9
REFERENCE_BYTES_PER_PARAMETER = 3.8  # its float32 weights (4 bytes) less what the conversion shares: 0.51 GB / 135 M


def reference_load_seconds(parameters: int, gguf: bool) -> float:
    """About how long transformers takes to load its copy of a model of `parameters` weights, at this throughput pace
    (a plain float: a load's time does not say the pace of runs)."""
    per = GGUF_SECONDS_PER_PARAMETER if gguf else FOLDER_SECONDS_PER_PARAMETER
    return parameters * per * pace.now().throughput


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
    """'about 20 s', 'about 4 minutes', 'about 2.5 hours': the estimate as a page says it."""
    if seconds < 90:
        return f"about {max(1, round(seconds, -1 if seconds >= 20 else 0)):.0f} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60):.0f} minutes"
    return f"about {seconds / 3600:.1f} hours"
