"""Sentences whose truth depends on the model or the recipe, written from the model's family descriptor
(models.families.descriptor) and models.train's data, never from its key."""

from __future__ import annotations

import math

from attention_explorer.models import tasks, train
from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.descriptor import Family

PAPER_WARMUP = 4000  # section 5.3
PAPER_STEPS = 100_000  # base model, section 5.2
PAPER_LABEL_SMOOTHING = 0.1  # section 5.4
PAPER_DROPOUT = 0.1  # base model, section 5.4


NOT_EXPLANATION = (
    "A weight shows where a head looks, not what the model's output depends on: attention is not explanation "
    "(Jain & Wallace 2019)."
)


FOLDER_HEADS = "These weights come from a folder that does not say whether they were trained: if they were, "


def weights_origin(family: Family) -> str:
    """Where the sidebar's model's weights come from, as a sentence's clause: a table or matrix of them is "learned"
    only when it was."""
    if family.pretrained:
        return "learned in pre-training"
    if family.trained_here:
        return "learned by training on its toy task"
    if family.from_folder:
        return "read from a folder that does not say whether they were trained"
    return "random: this model is untrained, so nothing in them is learned yet"


def opens_on_alignment(family: Family, kind: str) -> bool:
    """Whether a page opens this model's `kind` on its alignment head (starting.aligned_link): the cross-attention of
    learned weights; random weights align nothing."""
    return kind == "cross" and family.learned


def starting_note(family: Family, kind: str) -> str:
    """How the page chose the head it opened on, as cached.get_start chooses it."""
    if opens_on_alignment(family, kind):
        return (
            "The page opens on the last layer's most peaked cross-attention head (the highest mean of each row's "
            "largest weight), where the alignment is clearest. Pick any other."
        )
    return (
        "The page opens on a head chosen from the model's own weights for this sentence: the one in which a word puts "
        "the most weight on another word (in self-attention, one more than two positions away). Pick any other."
    )


SHORT_NAMES = {
    "token": "the token's embedding",
    "position": "the position's vector",
    "token type": "the token-type row",
}


def head_patterns(
    family: Family, parts: dict[str, float], cosine: float, smooth: bool, scaled: bool, formula: str = ""
) -> str:
    """What the heads of this model can be expected to show: learned patterns only where weights were learned; for
    random weights, which term dominates layer 1's input (`parts`: each summed term's RMS norm, positions.input_parts;
    `cosine`: the layer-1 inputs' mean pairwise cosine, positions.input_cosine; `smooth`: neighbouring positions'
    vectors are alike; `formula`: what enters layer 1, embedding_sum)."""
    heads = FOLDER_HEADS + "its heads" if family.from_folder else "Pretrained heads"
    random = " Random weights would show none of this." if family.from_folder else ""
    if (family.pretrained or family.from_folder) and family.causal:
        return (
            f"{heads} learn different patterns: some look at the previous token, many put most of their weight on "
            "the first token (a sink for attention a head does not need), and some copy from earlier in the text "
            f"(induction heads: see Head statistics).{random}"
        )
    if family.pretrained or family.from_folder:
        return (
            f"{heads} learn different patterns: some look at the previous token, some at punctuation or [SEP], some "
            f"spread broadly.{random}"
        )
    if family.trained_here and not family.has_encoder:
        return (
            "A toy model trained here on repeated sequences: look for a previous-token head in layer 1 and, in layer "
            "2, an induction head: from each word of the repeat to the word after that word's first occurrence."
        )
    if family.trained_here:
        return (
            "A toy model trained here: look for the task's alignment in the cross-attention (the anti-diagonal for "
            "reverse, adjectives crossing behind their noun for translate); the patterns pretrained language models "
            "learn need not appear."
        )
    text = "Random, untrained weights: no head has learned anything, so no pattern here says anything about words."
    total = sum(norm**2 for norm in parts.values())
    largest = max(parts, key=parts.get)
    share = parts[largest] ** 2 / total
    if share < 0.5 and cosine < 0.5:
        return f"{text} What structure there is comes from random projections of the tokens: chance."
    names = {
        "token": "a token's embedding x sqrt(d_model)" if scaled else "a token's embedding",
        "position": f"a position's vector ({'the sinusoids' if smooth else 'one random vector per position'})",
        "token type": "the token-type row (the same row for every token)",
    }
    norms = "; ".join(f"{names[name]} {norm:.3g}" for name, norm in parts.items())
    if largest == "token type":
        effect = (
            "a row every token shares, so the inputs of different tokens at different positions point almost the same "
            f"way (mean cosine {cosine:.2f}): the maps start from nearly identical rows, whatever the sentence"
        )
    elif largest == "position":
        effect = (
            "where tokens sit, so a map's pattern comes mostly from position: two different sentences of the same "
            f"length get much the same maps (mean cosine between inputs of different tokens: {cosine:.2f})"
        )
    else:
        effect = f"the token itself (mean cosine between inputs of different tokens: {cosine:.2f})"
    return (
        f"{text} Not all of it is chance, though. What enters layer 1 is {formula}; the norms of what is summed: "
        f"{norms}. The largest, {SHORT_NAMES[largest]}, is {share:.0%} of the sum's squared norm: {effect}. These "
        "proportions come from how the random weights were drawn (their initialisation), not from the trained model "
        "of this shape."
    )


def learned_positions(family: Family, learned: float, sinusoid: float) -> str:
    """What a learned position table shows: where its weights came from (the family descriptor), and the mean cosine
    between neighbouring positions' vectors in it (`learned`) and in the paper's sinusoids of the same size
    (`sinusoid`)."""
    measured = f"mean cosine between positions i and i + 1: {learned:.2f}; the sinusoids' {sinusoid:.2f}"
    if family.from_folder:
        return f"The learned table is read from the model's weights, {weights_origin(family)} ({measured})."
    if not family.learned:
        return (
            f"The learned table is read from the model's weights, here {weights_origin(family)} ({measured}). "
            "Nothing tells this model that position 5 is next to position 6 until training does."
        )
    if learned > 0.5:
        return (
            f"The learned table is read from the model's weights, {weights_origin(family)}: training made neighbours "
            f"similar ({measured})."
        )
    return (
        f"The learned table is read from the model's weights, {weights_origin(family)}: training left neighbouring "
        f"positions unlike each other ({measured})."
    )


def scaling_note(d_head: int, scaled_std: float) -> str:
    """Why q . k is divided by sqrt(d_k) (section 3.2.1), kept apart from what this model's scores measure."""
    return (
        f"Dividing q . k by sqrt(d_k) = {d_head**0.5:.3g} is itself a temperature. The paper's reason (section "
        "3.2.1): if the components of q and k were independent with mean 0 and variance 1, q . k would have variance "
        "d_k, and the division would bring it back to 1. That is an assumption, not a property of trained weights: "
        f"this query's scaled scores have a standard deviation of {scaled_std:.3g}."
    )


def model_view_hint(family: Family) -> str:
    """What to look for in the grid of every head, for this model."""
    look = FOLDER_HEADS + "look" if family.from_folder else "Look"
    if (family.pretrained or family.from_folder) and family.causal:
        return (
            f"{look} for a line just below the diagonal (previous token), a bright first column (the first token as "
            "a sink for attention a head does not need), and stripes parallel to the diagonal when the text repeats "
            "(induction heads)."
        )
    if family.pretrained or family.from_folder:
        return (
            f"{look} for a bright diagonal (attend to self), a line just below it (previous token), or a bright first "
            "or last column ([CLS] or [SEP] acting as a sink for attention a head does not need)."
        )
    if family.trained_here and not family.has_encoder:
        return (
            "Layer 1 should hold a line just below the diagonal (the previous-token head); layer 2 a line in the "
            "repeat's half, one step to the right of the copy's diagonal (the induction head)."
        )
    if family.trained_here:
        return "Pick the cross-attention above: the task's alignment is there, clearest in the last decoder layer."
    return (
        "No head here has learned a pattern to look for: put this grid beside the pretrained model's "
        "(Compare weights) to see what training adds."
    )


def recipe_departures(task: str, steps: int | None = None) -> list[str]:
    """Where the training recipe of a toy task departs from the paper's (section 5), from its Recipe; with `steps`,
    for a run of that many steps (the Train page's) beside the shipped model's."""
    recipe = train.RECIPES[task]
    length = (
        f"({recipe.steps:,} steps in all instead of {PAPER_STEPS:,})"
        if steps is None
        else f"and {steps:,} steps in this run ({recipe.steps:,} for the shipped model) instead of {PAPER_STEPS:,}"
    )
    decoder_only = tasks.get(task).decoder_only
    block = describe(recipe.config(tasks.get(task)))  # the block the recipe builds (models.anatomy)
    clipping = "" if block.norm_first else ": small post-LN models diverge here without it"
    examples = "texts" if decoder_only else "sentence pairs"
    found = [
        f"gradient clipping at norm {recipe.clip_norm:g} (the paper has none{clipping})",
        f"{recipe.warmup} warm-up steps instead of {PAPER_WARMUP:,}{' ' if steps is None else ', '}{length}",
        f"batches of {recipe.batch_size} {examples} instead of about 25,000 source and 25,000 target tokens",
    ]
    if decoder_only:
        found.insert(0, "a decoder-only model (the paper's decoder without the encoder and its cross-attention)")
    if block.norm_first:
        found.append("pre-LN sub-layers (LayerNorm before each sub-layer, and one after the last layer, as in GPT-2)")
    if recipe.label_smoothing != PAPER_LABEL_SMOOTHING:
        smoothing = (
            "no label smoothing" if not recipe.label_smoothing else f"label smoothing {recipe.label_smoothing:g}"
        )
        found.append(f"{smoothing} instead of eps = {PAPER_LABEL_SMOOTHING:g}")
    if recipe.dropout != PAPER_DROPOUT:
        found.append(f"dropout {recipe.dropout:g} instead of {PAPER_DROPOUT:g}")
    if recipe.lr_factor != 1.0:
        found.append(f"the learning rate of eq. 3 times {recipe.lr_factor:g} (at the full rate it keeps oscillating)")
    return found


def embedding_sum(config: TransformerConfig, stack: str = "encoder") -> str:
    """What enters layer 1, in the order the model computes it (section 3.4; BERT adds token type and a LayerNorm)."""
    token = "target token embedding" if stack == "decoder" and config.is_encoder_decoder else "token embedding"
    if config.scale_embeddings:
        token += f" x sqrt(d_model) (= x {math.sqrt(config.d_model):.4g})"
    positions = describe(config).positions
    if positions.rotary:  # nothing is added: each layer turns queries and keys by position instead
        return f"{token} (rotary positions: nothing added)"
    terms = [token, "sinusoid (eq. PE)" if positions.kind == "sinusoidal" else "learned position embedding"]
    if config.type_vocab_size:
        terms.insert(1, "token type embedding (type 0)")
    summed = " + ".join(terms)
    return f"LayerNorm({summed})" if config.embedding_norm else summed


def attention_input(config: TransformerConfig, kind: str, layer: int) -> str:
    """The row x an attention sub-layer projects to q (and, for self-attention, k and v), named as the model
    computes it: post-LN layers hand on LayerNorm(h + sublayer(h)); pre-LN layers hand on h + sublayer(LayerNorm(h))."""
    stack = "encoder" if kind == "encoder_self" else "decoder"
    block = describe(config)
    norm, pre = block.norm_name, block.pre_name
    if kind == "cross":
        where = f"decoder layer {layer + 1} after masked self-attention"
        if block.norm_first:
            return f"{where}: h + SelfAttn({norm}(h)) ({pre}: not yet normalised)"
        return f"{where} and its Add & Norm: LayerNorm(h + SelfAttn(h)) (post-LN)"
    if layer == 0:
        return embedding_sum(config, stack)
    if block.parallel:  # both sub-layers read the layer's input, and both add to it
        return f"output of {stack} layer {layer}: h + SelfAttn({norm}(h)) + FFN({norm}(h)) ({pre}: not yet normalised)"
    if block.norm_first:  # the feed-forward's output as the layer adds it (sandwich norms: normed again first)
        added = getattr(block, stack).sublayer("ffn").adds(norm).replace("(x)", "(h)")
        return f"output of {stack} layer {layer}: h + {added} ({pre}: not yet normalised)"
    return f"output of {stack} layer {layer}, after its last Add & Norm: LayerNorm(h + FFN(h)) (post-LN)"


def activation_latex(name: str) -> str:
    """A config's activation name as the FFN formula writes it (GPT-2's gelu_new is GELU's tanh approximation)."""
    names = {
        "relu": r"\mathrm{ReLU}",
        "gelu": r"\mathrm{GELU}",
        "quick_gelu": r"\mathrm{GELU}_{\sigma}",
        "silu": r"\mathrm{SiLU}",
        "swish": r"\mathrm{SiLU}",
    }
    return names.get(name, r"\mathrm{GELU}_{\tanh}")  # gelu_new, gelu_pytorch_tanh, gelu_fast


def pre_ln_note(config: TransformerConfig) -> str:
    """Pre-LN sub-layers normalise their own input first, so q is projected from LayerNorm(x), not x."""
    block = describe(config)
    if not block.norm_first:
        return ""
    if block.norm == "rms":
        return (
            "This model is pre-norm: the sub-layer first takes RMSNorm(x) with its own gamma (no mean taken away, no "
            "beta), and q, k and v are projected from that, not from x itself."
        )
    return (
        "This model is pre-LN: the sub-layer first takes LayerNorm(x) with its own gamma and beta, and q, k and v are "
        "projected from that, not from x itself."
    )


def norm_name(config: TransformerConfig) -> str:
    """The norm the model's sub-layers use, as formulas name it."""
    return describe(config).norm_name


def run_length(task: str, steps: int, default: int) -> str:
    """How long the run on the Train page is, beside how long the shipped checkpoint of its task trained."""
    shipped = train.RECIPES[task].steps
    goal = "form its induction head" if tasks.get(task).decoder_only else "reach its alignment"
    return (
        f"This run: {steps:,} steps (the box starts at {default:,}). The shipped {task} model trained for "
        f"{shipped:,} steps with the same recipe; a shorter run may not {goal}, and nothing here checks whether it "
        "did: look at the snapshots and the loss."
    )


def learning_rate_formula(task: str) -> str:
    """Eq. 3 written out (LaTeX), with this task's d_model, warm-up and factor from its Recipe."""
    recipe = train.RECIPES[task]
    factor = "" if recipe.lr_factor == 1.0 else rf"{recipe.lr_factor:g} \cdot "
    return (
        rf"\mathit{{lrate}} = {factor}d_{{\mathrm{{model}}}}^{{-0.5}} \cdot \min\left(\mathit{{step}}^{{-0.5}},\ "
        rf"\mathit{{step}} \cdot \mathit{{warmup\_steps}}^{{-1.5}}\right),\quad d_{{\mathrm{{model}}}} = "
        rf"{recipe.d_model},\ \mathit{{warmup\_steps}} = {recipe.warmup}"
    )


def short_float(x: float) -> str:
    """1e-09 -> '1e-9'; 0.98 -> '0.98'."""
    return f"{x:g}".replace("e-0", "e-").replace("e+0", "e+")


def optimiser_and_dropout(betas: tuple[float, float], eps: float, dropout: float) -> str:
    """Adam's settings and dropout as the trainer uses them (section 5.3, 5.4), and that dropout is off when drawn."""
    adam = (
        f"Adam with beta_1 = {short_float(betas[0])}, beta_2 = {short_float(betas[1])} and epsilon = "
        f"{short_float(eps)} (section 5.3; read from the optimiser models/train.py builds)."
    )
    if not dropout:
        return f"{adam} No dropout (the paper's base model drops {short_float(PAPER_DROPOUT)}, section 5.4)."
    rate = "the paper's rate for the base model" if dropout == PAPER_DROPOUT else f"the paper's is {PAPER_DROPOUT:g}"
    return (
        f"{adam} Dropout P_drop = {short_float(dropout)} ({rate}, section 5.4) during training steps only: on the "
        "sums of embeddings and positions and on each sub-layer's output before its Add & Norm, as in the paper, and "
        "here also on the attention weights and the FFN's hidden layer. Snapshots and every page run the model in "
        "eval mode, where dropout is off."
    )


def output_matrix(
    vocab: int,
    d_model: int,
    target_embedding: bool,
    source_embedding: bool,
    bias_zero: bool | None,
    decoder_only: bool = False,
) -> str:
    """What W and b of the final linear layer are for this model (section 3.4: shared with the embeddings);
    `bias_zero` None: the layer has no bias."""
    if bias_zero is None:
        bias = "The layer has no bias b."
    else:
        bias = "b is the layer's own bias" + (" (all zero in these random weights)." if bias_zero else ".")
    shape = f"({vocab:,} x {d_model})"
    if decoder_only and target_embedding:
        return (
            f"W is the model's token embedding matrix {shape} itself (tied, as in section 3.4): the same matrix turns "
            "each token of the text into a vector and, at the top, the vector it multiplies into one logit per token. "
            f"{bias}"
        )
    if target_embedding and source_embedding:
        return (
            f"W is the model's one embedding matrix {shape}, as in section 3.4: the same matrix turns source and "
            "target tokens into vectors (there multiplied by sqrt(d_model)) and, here, the decoder's last vector into "
            f"one logit per token. {bias}"
        )
    if target_embedding:
        return (
            f"W is the decoder's target embedding matrix {shape}, shared with this layer as in section 3.4; the "
            "source has its own vocabulary and its own embedding matrix, so it cannot be the same matrix too. "
            f"{bias}"
        )
    return f"W is this layer's own matrix {shape}, not shared with the embeddings (the paper shares it). {bias}"


BEAM_SEARCH = (
    "The paper decodes with beam search (section 6.1: beam size 4, length penalty alpha = 0.6), keeping the four "
    "most probable partial outputs at each step; this app decodes greedily, keeping only the single most probable "
    "token at each step."
)


def length_note(n_words: int, max_words: int) -> str:
    """A toy model's input longer than any sentence it was trained on ("" when it is not)."""
    if n_words <= max_words:
        return ""
    return (
        f"This sentence has {n_words} words; the toy model was trained on sentences of at most {max_words} words, so "
        "it has never seen one this long and a wrong output past that length is what to expect."
    )


def attention_formula(kind: str, config: TransformerConfig | None = None, layer: int | None = None) -> str:
    """A_i (LaTeX) for an attention kind: decoder self-attention adds its mask M before the softmax; with the model's
    config, as its layers compute it (models.anatomy): without biases where it has none, queries and keys normed
    (QK-norm) and turned by position (rotary), the scores' own scale; with `layer` (from 0), that layer's mask: a
    local layer's sliding window of w keys (key k visible to query q when q - w < k <= q), a global one's causal."""
    bias = config is None or config.qkv_bias
    q, k = (r"Q W^Q_i + b^Q_i", r"K W^K_i + b^K_i") if bias else (r"Q W^Q_i", r"K W^K_i")
    block = None if config is None else describe(config)
    if block is not None and block.qk_norm:  # an RMSNorm over each head's q and k, before rotary
        q, k = rf"\mathrm{{{block.norm_name}}}({q})", rf"\mathrm{{{block.norm_name}}}({k})"
    if block is not None and block.positions.rotary:
        q, k = rf"R_{{\text{{pos}}}}({q})", rf"R_{{\text{{pos}}}}({k})"
    elif block is None or not block.qk_norm:  # parenthesised, so the transpose applies to the whole term
        q, k = f"({q})", f"({k})"
    # eq. 1's 1/sqrt(d_k), or the model's own factor (Gemma's query_pre_attn_scalar: 1/sqrt(s))
    scale = r"d_k" if block is None or block.scale_is_paper else f"{block.query_scale**-2:g}"
    scores = rf"\frac{{{q}\,{k}^\top}}{{\sqrt{{{scale}}}}}"
    if kind != "decoder_self":
        return rf"A_i = \mathrm{{softmax}}\!\left({scores}\right)"
    # the mask on a line of its own: beside the softmax it ran past a half-width column (the model view's)
    masked = rf"A_i = \mathrm{{softmax}}\!\left({scores} + M\right), \\ "
    span = None if block is None or layer is None else block.span(layer)
    if span is not None and span.local:
        return (
            masked + rf"M_{{qk}} = \begin{{cases}} 0 & q - {span.window} < k \le q \\ -\infty & \text{{otherwise}} "
            rf"\end{{cases}}\qquad \text{{(layer {layer + 1}: local, a window of {span.window} keys)}}"
        )
    said = ""
    if span is not None and block.windowed:  # a global layer among local ones: named, as the local ones are
        said = rf"\qquad \text{{(layer {layer + 1}: global, every earlier key)}}"
    return masked + r"M_{qk} = \begin{cases} 0 & k \le q \\ -\infty & k > q \end{cases}" + said


def head_output(config: TransformerConfig) -> str:
    """A head's output in words' formula: A_i (V W^V_i + b^V_i), without the bias where the model has none."""
    return "A_i (V W^V_i + b^V_i)" if config.qkv_bias else "A_i V W^V_i"
