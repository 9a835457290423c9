"""About how long a computation on a text takes, from the size of its work: what a page says before one that takes
long, and the point past which it asks first instead of starting at once.

An estimate from two rates fitted on a 2-core machine (one forward of SmolLM2-135M over 2,048 tokens: about 10 s;
MiniLM's 72 heads turned off one batch row each at 512 tokens: about 12 s), never a promise: a busy machine takes
longer. It reads only the model's shape and the token count, never the model's name.
"""

from __future__ import annotations

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


def layer_seconds(config: TransformerConfig, queries: int, keys: int | None = None, cross: bool = False) -> float:
    """One layer over `queries` tokens attending to `keys` (default: themselves): its projections, attention and
    feed-forward (a cross-attention adds a second attention). A local layer's sliding window saves nothing here: the
    engine scores every (query, key) pair and masks those outside the window, so that the band can be drawn."""
    keys = queries if keys is None else keys
    block = describe(config)
    d, kv = config.d_model, block.kv_heads * config.d_head
    # W_Q and W_O between d_model and the heads' width (H x Dh: d_model in the paper, 1,024 in Gemma 3 270M)
    per_token = 2 * d * config.d_attention + 2 * d * kv + (3 if block.ffn.gated else 2) * d * config.d_ff
    attentions = 2 if cross else 1
    macs = queries * per_token + attentions * 2 * config.n_heads * queries * keys * config.d_head
    weights = attentions * config.n_heads * queries * keys
    return macs / MACS_PER_SECOND + weights * SECONDS_PER_WEIGHT


def forward_seconds(config: TransformerConfig, tokens: int, rows: int = 1, logits: bool = False) -> float:
    """One forward over `tokens` tokens (every layer of every stack; a decoder reads as many as the encoder), times
    `rows` batch rows; `logits`: with the output layer over every position."""
    encoder = config.n_encoder_layers * layer_seconds(config, tokens)
    decoder = config.n_decoder_layers * layer_seconds(config, tokens, cross=config.is_encoder_decoder)
    output = tokens * config.d_model * config.target_vocab_size / MACS_PER_SECOND if logits else 0.0
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


def asks_first(seconds: float) -> bool:
    """Whether a computation this long waits for a click instead of starting when the page opens."""
    return seconds > ASK_AFTER_SECONDS


def about(seconds: float) -> str:
    """'about 20 s', 'about 4 minutes', 'about 2.5 hours': the estimate as a page says it."""
    if seconds < 90:
        return f"about {max(1, round(seconds, -1 if seconds >= 20 else 0)):.0f} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60):.0f} minutes"
    return f"about {seconds / 3600:.1f} hours"
