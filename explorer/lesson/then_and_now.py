"""One line per lesson step: what the 2017 paper did there, and what the model on screen does instead, with its own
numbers (read from its config and family descriptor, so the line is true for BERT, GPT-2 and Llama alike)."""

from __future__ import annotations

from attention_explorer.models.registry import LoadedModel

# the paper's base model (table 3)
PAPER = {
    "tokens": "byte-pair encoding, about 37,000 tokens shared by English and German",
    "embedding": "the embedding row times sqrt(d_model) = sqrt(512)",
    "positional": "a sinusoid added to each embedding (10000^(-2i/d_model))",
    "query_key_value": "8 heads, each with its own W^Q, W^K and W^V of 64 columns",
    "scores": "the encoder sees every word; only the decoder's self-attention is masked",
    "add_norm": "post-LN, LayerNorm(x + Sublayer(x)); a ReLU feed-forward 512 -> 2048 -> 512",
    "model_view": "6 encoder and 6 decoder layers of 8 heads",
    "decoding": "an encoder-decoder writes a translation of a source sentence",
    "final_linear": "the output matrix is the embedding matrix (shared, section 3.4)",
}


def _tokens(loaded: LoadedModel) -> str:
    family, vocab = loaded.family, loaded.model.config.vocab_size
    if family.word_start == "Ġ":
        return f"byte-level BPE of {vocab:,} tokens (any text can be read; 'Ġ' marks a token that starts with a space)"
    if family.word_start == "▁":
        return f"a SentencePiece BPE of {vocab:,} tokens ('▁' marks a token that starts a word)"
    if family.continuation == "##":
        return f"WordPiece of {vocab:,} tokens ('##' marks a piece that continues a word)"
    return f"a vocabulary of {vocab:,} words"


def now(loaded: LoadedModel, stem: str) -> str:
    """What this model does at the step `stem`; "" where it does what the paper does."""
    config, family = loaded.model.config, loaded.family
    if stem == "tokens":
        return _tokens(loaded)
    if stem == "embedding":
        return "" if config.scale_embeddings else "the embedding row as it is (no sqrt(d_model) scale)"
    if stem == "positional":
        if config.positional == "rotary":
            return (
                f"nothing added: each query and key is turned by position x theta_i (rotary, base "
                f"{config.rope_theta:g})"
            )
        return "one learned vector per position, added" if config.positional == "learned" else ""
    if stem == "query_key_value":
        if config.key_value_heads < config.n_heads:
            return (
                f"{config.n_heads} query heads sharing {config.key_value_heads} key/value heads (grouped-query "
                f"attention), {config.d_head} columns each"
            )
        return "" if config.n_heads == 8 else f"{config.n_heads} heads, each with its own W^Q, W^K and W^V"
    if stem == "scores":
        if family.shape == "decoder-only":
            return "decoder-only: every layer's self-attention is masked, each token sees only those before it"
        return "encoder-only: no mask, every token sees both sides" if family.shape == "encoder-only" else ""
    if stem == "add_norm":
        norm = f"pre-norm, x + Sublayer({family.norm_name}(x))" if config.norm_first else "post-LN, as the paper"
        gated = "a gated SiLU feed-forward (SwiGLU)" if config.gated_ffn else f"a {config.activation} feed-forward"
        return f"{norm}; {gated} {config.d_model} -> {config.d_ff} -> {config.d_model}"
    if stem == "model_view":
        stacks = {
            "decoder-only": f"{config.n_decoder_layers} decoder layers",
            "encoder-only": f"{config.n_encoder_layers} encoder layers",
            "encoder-decoder": f"{config.n_encoder_layers} encoder and {config.n_decoder_layers} decoder layers",
        }[family.shape]
        return f"{stacks} of {config.n_heads} heads"
    if stem == "decoding":
        return "decoder-only: it continues its own text, one token at a time" if family.shape == "decoder-only" else ""
    if stem == "final_linear":  # an encoder has no output matrix at all (the step says so)
        return "" if config.tie_output or not family.next_token_head else "its own output matrix, not the embedding's"
    return ""


def line(loaded: LoadedModel, stem: str) -> str:
    """'2017 paper: ... This model: ...' for a step where the model on screen departs from the paper; "" where it
    does the same or the paper's own model is shown."""
    if family_is_paper(loaded) or stem not in PAPER:
        return ""
    found = now(loaded, stem)
    if not found:
        return ""
    return f"2017 paper: {PAPER[stem]}. {loaded.title}: {found}."


def family_is_paper(loaded: LoadedModel) -> bool:
    """The paper's own architecture (the random base model, the toy encoder-decoders trained here)."""
    return loaded.family.name == "the paper's Transformer"
