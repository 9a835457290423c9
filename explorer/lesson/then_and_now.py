"""One line per lesson step: what the 2017 paper did there, and what the model on screen does, with its own numbers
(read from its config, family descriptor, training recipe or card, never from its key), so the line is true for the
paper's own model, BERT, GPT-2, Llama and the toy models alike. Every step has one, for every model: "the same"
where the model does what the paper did."""

from __future__ import annotations

from attention_explorer.explorer.lesson.window_words import ranges
from attention_explorer.models import train
from attention_explorer.models.families.descriptor import BYTE_BPE, SENTENCEPIECE, WORDPIECE
from attention_explorer.models.registry import LoadedModel

SAME = "the same"

# The paper's base model (Vaswani et al. 2017), each with the section or table it comes from.
PAPER = {
    # 5.1: "byte-pair encoding ... a shared source-target vocabulary of about 37000 tokens" (WMT 2014 En-De)
    "tokens": "byte-pair encoding, about 37,000 tokens shared by English and German",
    # 3.4: "In the embedding layers, we multiply those weights by sqrt(d_model)"
    "embedding": "the embedding row times sqrt(d_model) = sqrt(512)",
    # 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), added to the embeddings
    "positional": "a sinusoid added to each embedding (10000^(-2i/d_model))",
    # 3.2.2: h = 8, d_k = d_v = d_model / h = 64; head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    "query_key_value": "8 heads, each with its own W^Q, W^K and W^V of 64 columns",
    # 3.2.3: masking in the decoder's self-attention only
    "scores": "only the decoder's self-attention is masked; the encoder sees every word",
    # 3.2.2: MultiHead = Concat(head_1, ..., head_h) W^O, W^O of h d_v x d_model (no bias in the equation)
    "multi_head": "8 x 64 = 512 numbers, concatenated, then W^O (no bias in its equation)",
    # 3.1 and 3.3: LayerNorm(x + Sublayer(x)); FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, d_ff = 2048
    "add_norm": "post-LN, LayerNorm(x + Sublayer(x)); a ReLU feed-forward 512 -> 2048 -> 512",
    # 3.1: N = 6 identical layers in the encoder and in the decoder; 3.2.2: h = 8
    "model_view": "6 encoder and 6 decoder layers of 8 heads",
    # 6.2 and table 3, rows (A): h = 1, 4, 16, 32 against the base 8, each trained anew; "single-head attention is
    # 0.9 BLEU worse than the best setting" (24.9 against 25.8 on newstest2013)
    "turn_off": "1 to 32 heads, each trained anew (table 3, A): one head was 0.9 BLEU worse than the best",
    # the paper patches nothing: activation patching came later, from causal mediation analysis (Vig et al. 2020,
    # "Investigating gender bias in language models using causal mediation analysis", NeurIPS) and causal tracing
    # (Meng et al. 2022, "Locating and editing factual associations in GPT", ROME)
    "patch": "none; patching came later (Vig et al. 2020; Meng et al. 2022)",
    # table 1 (section 4): complexity per layer O(n^2 d) for self-attention, O(n d^2) for a recurrent layer
    "why_attention": "self-attention O(n²·d) per layer, recurrent O(n·d²) (table 1): less work while n < d = 512",
    # 6.1: beam search with a beam size of 4 and length penalty alpha = 0.6
    "decoding": "an encoder-decoder translates by beam search (beam 4, length penalty 0.6)",
    # 3.4: "we share the same weight matrix between the two embedding layers and the pre-softmax linear
    # transformation", the embedding multiplied by sqrt(d_model)
    "final_linear": "the output matrix is the embedding matrix, which the embedding scales by sqrt(d_model)",
    # nothing reads intermediate layers through the output layer in the paper: the logit lens is nostalgebraist's
    # (2020, "interpreting GPT: the logit lens", LessWrong)
    "layer_predictions": "none; reading each layer through the output came later (the logit lens, 2020)",
    # 5.4: label smoothing of value eps_ls = 0.1
    "loss": "cross-entropy with label smoothing eps = 0.1",
    # 5.2: 8 NVIDIA P100 GPUs, base models 100,000 steps or 12 hours; 5.3: Adam beta_1 = 0.9, beta_2 = 0.98,
    # eps = 1e-9, warmup_steps = 4000
    "train": "Adam (0.9, 0.98, 1e-9), warm-up 4,000, 100k steps on 8 P100 GPUs, 12 hours (base model)",
}


def _local(loaded: LoadedModel) -> tuple[list[int], list[int], int | None]:
    """(local layers, global layers, the window), 1-based, from the anatomy's spans; ([], [], None) without windows."""
    spans = loaded.family.block.spans
    local = [i + 1 for i, span in enumerate(spans) if span.local]
    if not local:
        return [], [], None
    return local, [i + 1 for i, span in enumerate(spans) if not span.local], spans[local[0] - 1].window


def _layers(numbers: list[int]) -> str:
    """'layer 3' or 'layers 1-2, 4'."""
    return f"layer{'s' if len(numbers) > 1 else ''} {ranges(numbers)}"


def _tokens(loaded: LoadedModel) -> str:
    family, config = loaded.family, loaded.model.config
    vocab = config.vocab_size
    if family.tokenizer == BYTE_BPE:
        return f"byte-level BPE of {vocab:,} tokens: any text can be read"
    if family.tokenizer == SENTENCEPIECE:
        return f"a SentencePiece BPE of {vocab:,} tokens ('{family.word_start}' marks a token that starts a word)"
    if family.tokenizer == WORDPIECE:
        return f"WordPiece of {vocab:,} tokens ('{family.continuation}' marks a piece that continues a word)"
    if config.target_vocab_size != vocab:
        return f"whole words: {vocab:,} source words and {config.target_vocab_size:,} target words"
    return f"whole words, a vocabulary of {vocab:,}"


def _positional(loaded: LoadedModel) -> str:
    positions = loaded.family.block.positions
    if positions.rotary:
        share = "" if positions.fraction == 1 else f" on {positions.fraction:.0%} of each head's dimensions"
        if len(positions.bases) == 2:  # the global layers' base, then the local (sliding-window) ones'
            whole, local = (f"{int(b):,}" if b == int(b) else f"{b:g}" for b in (positions.base, positions.local_base))
            bases = f"base {whole} in global layers, {local} in local ones"
            return f"nothing added: queries and keys turned by position (rotary{share}, {bases})"
        return f"nothing added: queries and keys turned by position (rotary{share}, base {positions.base:g})"
    return "one learned vector per position, added" if positions.kind == "learned" else SAME


def _query_key_value(loaded: LoadedModel) -> str:
    config, block = loaded.model.config, loaded.family.block
    norm = f"; QK-norm: an {block.norm_name} on each head's q and k" if block.qk_norm else ""
    if block.shared_kv:
        return (
            f"{block.n_heads} query heads sharing {block.kv_heads} key/value heads, {config.d_head} columns each" + norm
        )
    if norm:
        return f"{config.n_heads} heads, each with its own W^Q, W^K and W^V of {config.d_head} columns{norm}"
    if (config.n_heads, config.d_head) == (8, 64):
        return SAME
    return f"{config.n_heads} heads, each with its own W^Q, W^K and W^V of {config.d_head} columns"


def _scores(loaded: LoadedModel) -> str:
    shape = loaded.family.shape
    block = loaded.family.block
    # q and k normed before their dot product, then the scale
    said = f"; QK-norm ({block.norm_name}) on q and k" if block.qk_norm else ""
    if shape == "decoder-only":  # a causal row keeps the key at its own position (the diagonal)
        local, whole, window = _local(loaded)
        if local:  # short: the line stays within two lines under the title
            seen = f"{_layers(local)} {'sees' if len(local) == 1 else 'see'} only the last {window:,} keys"
            seen += f", {_layers(whole)} all" if whole else ""
            return f"causal; {seen}{said}"
        return f"every layer's self-attention masked: each token sees itself and those before it{said}"
    return "encoder-only: no mask, every token sees both sides" if shape == "encoder-only" else SAME


def _multi_head(loaded: LoadedModel) -> str:
    config = loaded.model.config
    heads, d_head, kv = config.n_heads, config.d_head, loaded.family.block.kv_heads
    bias = "plus a bias" if config.out_bias else "no bias"
    if (heads, d_head, kv) == (8, 64, 8):
        return f"{SAME}, with W^O {bias}"
    said = f"{heads} x {d_head} = {config.d_model}, concatenated, then W^O ({bias})"
    if kv < heads:  # a cache keeps one key and one value per key/value head, per layer and position
        said += f"; {kv} key/value heads make a key/value cache {heads // kv}x smaller"
    return said


def _add_norm(loaded: LoadedModel) -> str:
    config, block = loaded.model.config, loaded.family.block
    norm = f"pre-norm, x + Sublayer({block.norm_name}(x))" if block.norm_first else "post-LN, as the paper"
    if block.sandwich:  # a norm before and after each sub-layer (models.anatomy.Sublayer.post_norm)
        name = block.norm_name
        norm = f"sandwich norms, x + {name}(Sublayer({name}(x)))"
    if block.parallel:  # one addition of both sub-layers' outputs, each read through its own norm (models.anatomy)
        name = block.norm_name
        norm = f"parallel {block.pre_name}, x + Attn({name}_1(x)) + FFN({name}_2(x)): {block.parallel_reading}"
    gated = f"a {block.ffn.activation} feed-forward"
    if block.ffn.gated:  # SwiGLU (gated SiLU) or GeGLU (gated GELU)
        gated = (
            "a gated SiLU feed-forward (SwiGLU)" if block.ffn.name == "SwiGLU" else f"a {block.ffn.name} feed-forward"
        )
    said = f"{norm}; {gated} {config.d_model} -> {config.d_ff} -> {config.d_model}"
    paper = not (block.norm_first or block.ffn.gated) and block.ffn.activation == "relu"
    return SAME if paper and (config.d_model, config.d_ff) == (512, 2048) else said


def _model_view(loaded: LoadedModel) -> str:
    config = loaded.model.config
    stacks = {
        "decoder-only": f"{config.n_decoder_layers} decoder layers",
        "encoder-only": f"{config.n_encoder_layers} encoder layers",
        "encoder-decoder": f"{config.n_encoder_layers} encoder and {config.n_decoder_layers} decoder layers",
    }[loaded.family.shape]
    said = f"{stacks} of {config.n_heads} heads"
    local, whole, window = _local(loaded)
    if local:
        said += f": {len(local)} local (a window of {window:,} keys), {len(whole)} global"
    return SAME if said == PAPER["model_view"] else said


def _embedding(loaded: LoadedModel) -> str:
    config = loaded.model.config
    if not config.scale_embeddings:
        return "the embedding row as it is (no sqrt(d_model) scale)"
    return SAME if config.d_model == 512 else f"{SAME}, times sqrt({config.d_model})"


def _turn_off(loaded: LoadedModel) -> str:
    origin = loaded.family.origin
    weights = {"random": "these random weights", "from a folder": "these weights"}.get(origin, "the finished model")
    return f"a layer's heads, then each head, switched off in {weights}, nothing retrained"


def _patch(loaded: LoadedModel) -> str:
    if not loaded.family.next_token_head:  # the metric is a logit difference of the output
        return "none: an encoder-only model has no output to patch toward"
    return "one activation at a time copied from the clean run into a corrupted one"


def _why_attention(loaded: LoadedModel) -> str:
    config = loaded.model.config
    d, most = config.d_model, config.max_len
    local, _, window = _local(loaded)
    if local:  # a local layer scores at most w keys a query: n·w·d
        return f"d = {d}; local layers O(n·w·d), w = {window:,}; up to {most:,} tokens"
    return f"d = {d}: less work while n < {d}; it reads up to {most:,} tokens"


def _decoding(loaded: LoadedModel) -> str:
    shape = loaded.family.shape
    if shape == "encoder-only":
        return "none: an encoder-only model writes no words"
    if shape == "decoder-only":
        return "it continues its own text greedily, one token at a time"
    return "greedy, one token at a time (no beam search here)"


def _final_linear(loaded: LoadedModel) -> str:
    config, family = loaded.model.config, loaded.family
    if not family.next_token_head:
        return "none: an encoder-only model ends with its last layer's vectors"
    norm = f", after a final {family.block.norm_name}" if family.block.final_norm else ""
    scale = "" if config.scale_embeddings else ", no sqrt(d_model) scale"
    cap = loaded.family.block.logit_softcap
    scale += f", logits soft-capped at {cap:g} (cap·tanh(z / cap))" if cap else ""
    if not config.tie_output:
        return f"its own output matrix, not the embedding's{norm}{scale}"
    if family.has_source and not config.share_embeddings:  # the source reads its own embedding matrix
        return f"the target embedding matrix (the source has its own){norm}{scale}"
    if family.has_source and not (norm or scale):
        return SAME
    return f"tied to the embedding{norm}{scale}"


def _layer_predictions(loaded: LoadedModel) -> str:
    config, family = loaded.model.config, loaded.family
    if not family.next_token_head:
        return "none: no output layer to read the layers through"
    norm = f"its final {family.block.norm_name} and " if family.block.final_norm else ""
    return f"each of its {config.n_decoder_layers} decoder layers read through {norm}the output matrix"


def _loss(loaded: LoadedModel) -> str:
    family = loaded.family
    if loaded.task is not None and loaded.task.name in train.RECIPES:
        smoothing = train.RECIPES[loaded.task.name].label_smoothing
        return f"{SAME}, trained here" if smoothing == 0.1 else "trained here without label smoothing (its recipe)"
    if family.origin == "random":
        return "random weights: no loss has trained them"
    if loaded.card.loss:
        return loaded.card.loss
    return "its files do not say how it was trained"


def _train(loaded: LoadedModel) -> str:
    if loaded.task is not None and loaded.task.name in train.RECIPES:
        recipe = train.RECIPES[loaded.task.name]
        rate = "" if recipe.lr_factor == 1 else f" at {recipe.lr_factor:g}x the rate"
        return (
            f"trained here with the same Adam{rate}: warm-up {recipe.warmup:,}, {recipe.steps:,} steps of "
            f"{recipe.batch_size} sentences"
        )
    if loaded.family.origin == "random":
        return "random weights, never trained"
    return loaded.card.training or "its files do not say how it was trained"


NOW = {
    "tokens": _tokens,
    "embedding": _embedding,
    "positional": _positional,
    "query_key_value": _query_key_value,
    "scores": _scores,
    "multi_head": _multi_head,
    "add_norm": _add_norm,
    "model_view": _model_view,
    "turn_off": _turn_off,
    "patch": _patch,
    "why_attention": _why_attention,
    "decoding": _decoding,
    "final_linear": _final_linear,
    "layer_predictions": _layer_predictions,
    "loss": _loss,
    "train": _train,
}


def now(loaded: LoadedModel, stem: str) -> str:
    """What this model does at the step `stem` ("the same" where it does what the paper does); "" for a page that is
    no lesson step."""
    found = NOW.get(stem)
    return found(loaded) if found else ""


def line(loaded: LoadedModel, stem: str) -> str:
    """'2017 paper: ... This model: ...' for every lesson step; "" for a page that is no lesson step."""
    if stem not in PAPER:
        return ""
    return f"2017 paper: {PAPER[stem]}. This model: {now(loaded, stem)}."
