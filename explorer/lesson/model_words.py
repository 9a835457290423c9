"""Sentences of the layer, output, loss and experiment steps whose truth depends on the model shown: its activation,
its norm placement, its training recipe, whether a right answer is known (models.families.descriptor, models.train)."""

from __future__ import annotations

from attention_explorer.explorer.run.answers import Answer
from attention_explorer.explorer.run.output import FinalNorm, scored_token
from attention_explorer.models import train
from attention_explorer.models.anatomy import Anatomy
from attention_explorer.models.families.descriptor import Family


def ffn_activation(name: str) -> str:
    """What the feed-forward's activation does to the d_ff numbers, as a clause: only ReLU switches some off."""
    if name == "relu":
        return "sets the negative ones to zero (ReLU)"
    if name in ("silu", "swish"):
        return "passes each through SiLU (x times sigmoid(x): negative ones shrink towards zero, none is cut off)"
    return "passes each through GELU (negative ones shrink towards zero, none is cut off)"


def forward_intro(block: Anatomy) -> str:
    """The Forward pass page's opening, true for the model's block: whether a position is added, and its norm."""
    if block.positions.added:
        position = f"the {block.positions.kind} position added"
    else:
        position = "no position added (rotary: each layer turns its queries and keys by the position instead)"
    where = f"{block.norm_name} before each sub-layer" if block.norm_first else f"{block.norm_name} after each"
    return (
        f"Follow one token through the model: its id, its embedding row, {position}, then every layer's sub-layers "
        f"with their residual connection and {where}. Each result is recomputed here from the model's state before "
        "it and the model's own weights, and checked against the state the model itself produced."
    )


def qkv_intro(block: Anatomy, origin: str) -> str:
    """Step 4's opening, true for the model's block: what is multiplied (x, or the norm of x in a pre-norm block) and
    whose matrices (one set per head, or W^K and W^V of the key/value heads under grouped-query attention);
    `origin`: where the weights come from (wording.weights_origin)."""
    vector = (
        f"the token's vector after the layer's {block.norm_name}, {block.norm_name}(x),"
        if block.norm_first
        else ("the token's vector x")
    )
    if block.shared_kv:
        sets = (
            f"each of the {block.n_heads} query heads has its own W^Q, while W^K and W^V belong to the "
            f"{block.kv_heads} key/value heads, each shared by {block.n_heads // block.kv_heads} query heads "
            "(grouped-query attention)"
        )
    else:
        sets = "one W^Q, W^K and W^V per head"
    return (
        "Attention works like a soft look-up. Each token asks a **query** (what am I looking for?), offers a **key** "
        "(what do I contain?) and carries a **value** (what I pass on if chosen). All three are "
        f"{vector} multiplied by a matrix of the model's weights: {sets} ({origin}). The next step scores every key "
        "against the query; this one makes q, k and v."
    )


def attention_formula(block: Anatomy) -> str:
    """The Attention page's opening: eq. 1 as this model computes it (rotary: queries and keys turned by position
    before they meet, as the Head view and step 8 write R_pos)."""
    rows = (
        "Row *i* shows how query token *i* (attending) spreads one unit of attention over the key tokens (attended "
        "to); every row sums to 1."
    )
    if block.positions.rotary:
        weights = r"$\mathrm{softmax}\left(\tilde{Q}\tilde{K}^\top / \sqrt{d_k}\right)$"
        turned = r"first turned by its position, $\tilde{q} = R_{\text{pos}}\,q$"
        if block.qk_norm:  # QK-norm: each head's q and k normed before they are turned
            turned = (
                f"first normed and then turned by its position, "
                rf"$\tilde{{q}} = R_{{\text{{pos}}}}\,\mathrm{{{block.norm_name}}}(q)$ (QK-norm)"
            )
        return (
            rf"Each head computes {weights[:-1]}V$: the paper's eq. 1 (Vaswani et al. 2017) with every query and key "
            f"{turned} (rotary positions, as on the Head view and step 8). The heatmap draws the attention weights "
            f"{weights}, before they multiply V. {rows}"
        )
    weights = r"$\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)$"
    return (
        rf"Each head computes {weights[:-1]}V$ (Vaswani et al. 2017, eq. 1); the heatmap draws the attention weights "
        f"{weights}, before they multiply V. {rows}"
    )


def tied_lens_note(own: int, shown: int, block: Anatomy) -> str:
    """The logit lens's embedding row on a model whose output matrix is its embedding (tied): how often it names the
    position's own token, and why that is likely but not guaranteed."""
    where = f"all {shown}" if own == shown else f"{own} of {shown}"
    why = (
        f"the final {block.norm_name} first scales each dimension by its own learned gain, after which another row "
        "can score higher"
        if block.final_norm
        else "a longer embedding row pointing roughly the same way can score higher"
    )
    return (
        f"The embedding row names the position's own token at {where} positions: this model's output matrix is its "
        "token embedding matrix (tied, section 3.4), so each embedding is scored against every embedding, its own "
        f"among them. Its own usually scores highest, but nothing guarantees it: {why}."
    )


PAPER_BASE = 10000  # the sinusoid's base, section 3.5


def rotary_base(base: float) -> str:
    """Rotary's frequencies against the paper's sinusoid: the same base, or this model's instead of 10000."""
    if base == PAPER_BASE:
        return f"the paper's sinusoid ones, with the same base, {PAPER_BASE}"
    return f"the paper's sinusoid ones with this model's base, {base:g} instead of {PAPER_BASE}"


def add_norm_intro(block: Anatomy) -> str:
    """The Add & Norm step's opening, true for the model's block: where its norm sits, its feed-forward, and (a
    parallel block) how both sub-layers read the layer's input."""
    activation = ffn_activation(block.ffn.activation)
    if block.parallel:
        return (
            f"This model's layer is a parallel block ({block.pre_name}): the attention and the feed-forward network "
            f"both read x, the vector that entered the layer, and {block.parallel_reading}; both outputs are added "
            "back to x in one addition (the residual connection): x + "
            f"Attn({block.norm_name}_1(x)) + FFN({block.norm_name}_2(x)). The feed-forward, the same for every "
            f"position, widens each vector to d_ff numbers, {activation} and narrows it back. That is one layer; the "
            f"stack repeats it N times and ends with one more {block.norm_name}."
        )
    gate, gate_act = ("SwiGLU", "SiLU") if block.ffn.name == "SwiGLU" else (block.ffn.name, "GELU")
    if block.sandwich and block.norm == "rms":  # a norm before and after each sub-layer (Sublayer.post_norm)
        gain = "times a learned gain stored as w and used as 1 + w" if block.norm_offset == 1 else "times a gain"
        return (
            f"This model is pre-norm with sandwich norms: each sub-layer reads RMSNorm(x) (x divided by its root mean "
            f"square, {gain}: no mean taken away and no bias, unlike LayerNorm), and its output goes through a second "
            "RMSNorm of its own before it is added back to the vector that entered it (the residual connection): "
            "x + RMSNorm(Sublayer(RMSNorm(x))). The norm after each sub-layer sets the size of what it adds to the "
            f"stream. The feed-forward network ({gate}), the same for every position, sits between two norms too: two "
            f"projections to d_ff numbers, one passed through {gate_act} and used as a gate on the other, then "
            "narrowed back. That is one layer; the stack repeats it N times and ends with one more RMSNorm."
        )
    if block.norm == "rms":
        return (
            "This model is pre-norm with RMSNorm: each sub-layer reads RMSNorm(x) (x divided by its root mean square, "
            "times a learned gain: no mean taken away and no bias, unlike LayerNorm), and its output is added back to "
            "the vector that entered it (the residual connection), with nothing after the addition: x + "
            f"Sublayer(RMSNorm(x)). Then a gated feed-forward network ({gate}), the same for every position: two "
            f"projections to d_ff numbers, one passed through {gate_act} and used as a gate on the other, then "
            "narrowed back. "
            "That is one layer; the stack repeats it N times and ends with one more RMSNorm."
            if block.ffn.gated
            else "This model is pre-norm with RMSNorm: each sub-layer reads RMSNorm(x), and its output is added back "
            "to the vector that entered it: x + Sublayer(RMSNorm(x)). The stack ends with one more RMSNorm."
        )
    if block.norm_first:
        return (
            "This model is pre-LN (as GPT-2): each sub-layer reads LayerNorm(x), and its output is added back to the "
            "vector that entered it (the residual connection), with no LayerNorm after the addition: x + "
            "Sublayer(LayerNorm(x)). Then a feed-forward network, the same for every position, widens each vector to "
            f"d_ff numbers, {activation} and narrows it back, the same way. That is one layer; the stack repeats it N "
            "times and ends with one more LayerNorm."
        )
    return (
        "The attention output is added back to the vector that entered it (the residual connection) and normalised "
        "(LayerNorm): Add & Norm. Then a feed-forward network, the same for every position, widens each vector to "
        f"d_ff numbers, {activation} and narrows it back, again with Add & Norm. That is one layer; the stack "
        "repeats it N times."
    )


ZERO_ABLATION = (
    "Zero ablation writes what no head ever wrote: a head's output is never all zeros, so the layers after it read a "
    "sum off its usual range, and part of the change can come from that rather than from the head's missing work. "
    "Mean ablation (the head's average output) stays within the usual range."
)


def minus_log_p(token: str = "right") -> str:
    """-log p of a scored token, defined where a page first shows it (the loss steps build on it)."""
    return (
        f"-log p({token} token): minus the natural log of the probability the model gives the {token} token, in "
        "nats; 0 when that probability is 1, larger the less likely the model finds it (p = 0.5 gives 0.69)."
    )


def loss_name(epsilon: float) -> str:
    """What the loss a model trains with is called on screen: "label-smoothed loss" (section 5.4) or, without
    smoothing, "cross-entropy" (then equal to -log p of the right token)."""
    return "label-smoothed loss" if epsilon > 0 else "cross-entropy"


def training_target(epsilon: float, family: Family | None = None) -> str:
    """How training compares the model's distribution with the right next token, for a model trained with label
    smoothing `epsilon` (explorer.run.output.epsilon_for); a pretrained model whose card tells its training
    (family.training) says it was so in pretraining, and what came after."""
    if epsilon > 0:
        return f"label-smoothed (eps = {epsilon:g}, section 5.4), by cross-entropy: the label-smoothed loss"
    plain = "by cross-entropy, without label smoothing (the paper smooths with eps = 0.1): -log p of the right token"
    if family is not None and family.training:  # what its card says: pretraining, then what came after
        return (
            "in pretraining by cross-entropy (shown here without label smoothing, where the paper smooths with eps = "
            f"0.1: -log p of the right token). {family.training.removesuffix('.')}"
        )
    if family is not None and family.from_folder:
        return f"{plain} (a folder does not say how its weights were trained: this is a language model's usual loss)"
    return plain


def loss_intro(epsilon: float, untrained: bool = False, scored: bool = True, family: Family | None = None) -> str:
    """The loss step's opening: the loss this model trains with, named and defined, beside step 9's -log p;
    `untrained`: random weights, which no loss has trained yet (the recipe they would train with); `scored`: False for
    a model with no next-token output (encoder-only), whose own training this step does not show: the paper's loss.
    `family`: a pretrained model says what its card tells of its training (family.training), a folder's that it is
    not known; only a model trained here or random weights 'train' on the loss shown."""
    start = (
        "Training needs one number that says how wrong the model is, at every position (teacher forcing: each "
        "position reads the right words before it). "
    )
    if not scored:
        return start + (
            "The paper's model trains on the label-smoothed loss (section 5.4): the cross-entropy between its "
            "probabilities and a smoothed target that keeps 1 - eps of the weight on the right next word and spreads "
            "eps = 0.1 over the whole vocabulary. The model in the sidebar writes no words, so it has no such loss to "
            "show here."
        )
    model = "This untrained model would train" if untrained else "This model trains"
    if epsilon > 0:
        return start + (
            f"{model} on the label-smoothed loss (section 5.4): the cross-entropy between its probabilities "
            f"and a smoothed target that keeps 1 - eps of the weight on the right next word and spreads eps = "
            f"{epsilon:g} over the whole vocabulary, so even a perfect model keeps a small loss. Beside it, "
            "-log p(right token) of step 9 (Turn heads off): the cross-entropy against the right word alone."
        )
    plain = (
        "the cross-entropy between its probabilities and the right next word, without label smoothing (the paper "
        "smooths with eps = 0.1): at each position it is -log p(right token), as on step 9 (Turn heads off), so a "
        "perfect prediction scores 0."
    )
    if family is not None and family.training:
        return start + family.training + " Shown here is that pretraining loss: " + plain
    if family is not None and (family.from_folder or family.pretrained):
        return start + (
            "A language model is pretrained to predict each next token; how this model's weights were trained, its "
            f"files do not say. Shown here is {plain}"
        )
    return start + f"{model} on {plain}"


def recipe_summary(task: str) -> str:
    """The regularisation a toy task's recipe trains with (models.train.RECIPES), beside the paper's."""
    recipe = train.RECIPES[task]
    smoothing = f"label smoothing eps = {recipe.label_smoothing:g}" if recipe.label_smoothing else "no label smoothing"
    dropout = f"dropout {recipe.dropout:g}" if recipe.dropout else "no dropout"
    loss = loss_name(recipe.label_smoothing)
    return f"This task's recipe: {smoothing}, {dropout}; its loss curve is the {loss}."


def lens_intro(family: Family) -> str:
    """The logit lens's opening: how an intermediate state can be read as the output, true for the model's norm
    placement (pre-LN: a residual stream and a final norm; post-LN: neither)."""
    if family.block.norm_first:
        return (
            "The output layer reads only the last state. What if it read an earlier one? In this pre-norm model each "
            "sub-layer adds its output to the same residual stream, and the stack ends in a final "
            f"{family.block.norm_name}, so every intermediate state can be put through that final norm and the output "
            "matrix: the logit lens shows when the next token comes to the top."
        )
    return (
        "The output layer reads only the last state. What if it read an earlier one? This model is post-LN, as in the "
        "paper: each sub-layer ends in LayerNorm(x + Sublayer(x)), so there is no final norm and no residual stream "
        "that runs untouched to the output, but every state is already normalised. The logit lens puts each one "
        "through the output matrix as it is, and shows when the next token comes to the top."
    )


def final_linear_intro(family: Family) -> str:
    """The final linear step's opening: what the output matrix multiplies, true for the model's norm placement
    (pre-norm stacks end in a final norm; post-LN stacks, as the paper's, do not)."""
    first = (
        f"The decoder's last vector h at each position goes through the stack's final {family.block.norm_name} and is "
        f"then multiplied by one more matrix: {family.block.norm_name}(h) W^T gives one score (logit) per word of "
        if family.block.norm_first
        else "The decoder's last vector h at each position (its last Add & Norm's output: post-LN, no final norm) is "
        "multiplied by one more matrix: h W^T gives one score (logit) per word of "
    )
    return first + (
        "the output vocabulary. A softmax turns the logits into probabilities. Greedy decoding takes the most probable "
        "word, and dividing the logits by a temperature never changes which word that is; sampling draws a word by its "
        "probability instead, and there the temperature (which flattens or sharpens the probabilities), top-k or top-p "
        "can write other outputs."
    )


def final_norm_text(norm: FinalNorm | None, d_model: int) -> str:
    """What the output matrix multiplies, with this row's own numbers: FinalNorm(h) and its length against h's (a
    pre-norm stack), or h itself (post-LN)."""
    if norm is None:
        return (
            f"h is the decoder's last vector at this step ({d_model} numbers), the output of its last Add & Norm: this "
            "model is post-LN, as in the paper, so no final norm comes after it and W multiplies h as it is. "
        )
    shift = " and its bias beta shifts it" if norm.name == "LayerNorm" else ""
    return (
        f"h is the decoder's last vector at this step ({d_model} numbers); the stack ends in a final {norm.name}, so W "
        f"multiplies {norm.name}(h), not h: |h| = {norm.before:.1f}, |{norm.name}(h)| = {norm.after:.1f} (normalised, "
        f"h has length sqrt({d_model}) = {d_model**0.5:.1f}; the norm's gain gamma, {norm.gain:.2f} on average, "
        f"scales it{shift}). "
    )


def attribution_intro(family: Family) -> str:
    """Logit attribution's opening: which parts one logit splits into, for the model's norm placement."""
    if family.block.norm_first:
        return (
            "Which part of the model wrote the output? In this pre-norm model the last state is a sum of what the "
            "embedding, every head (through its own slice of W^O) and every feed-forward added to the residual "
            f"stream; read through the final {family.block.norm_name} (its scale frozen at this run's value) and the "
            "output matrix, the logit of a token splits into one share per part."
        )
    return (
        "Which part of the model wrote the output? This model is post-LN, as in the paper: each sub-layer ends in "
        "LayerNorm(x + Sublayer(x)), with no final norm, so the last state is a sum only inside the last layer. Read "
        "through the output matrix, with that layer's LayerNorm scales frozen at this run's values, the logit of a "
        "token splits into the last layer's input (everything below, as one part), each of its heads and its "
        "feed-forward."
    )


TEXT_END = "no next token in the text: the model's own top prediction"


def read_ends(truncated: int) -> tuple[str, str]:
    """(where the last row stands, what follows it): the text's end, or, where the sidebar's Max tokens cut the text,
    the end of what the model read (the text itself goes on: its next token was not read)."""
    if truncated:
        return "the model's read ends (the text was cut to the sidebar's Max tokens)", "in what it read"
    return "the text ends", "in the text"


def question_row(answer: Answer, end_id: int | None) -> int:
    """The row a lens question asks about, and a read-out opens on: a decoder-only text's last row, the one that
    predicts what follows the whole text (its answer), where every row of the text counts; else the last counted row
    whose token is not the end token (an encoder-decoder's last row always writes <eos>, which says nothing about the
    sentence; a toy task's rows whose right word is known); the last counted row when every one is; the last row when
    none is counted."""
    assert answer.targets is not None
    if answer.text_end and all(answer.counted[:-1]):
        return len(answer.targets) - 1
    counted = [i for i, c in enumerate(answer.counted) if c]
    words = [i for i in counted if answer.targets[i] != end_id]
    return (words or counted or [len(answer.targets) - 1])[-1]


def target_name(answer: Answer, row: int) -> str:
    """What a row's target is called: the model's own top prediction on a decoder-only text's last row (nothing in
    the text follows it), else answer_name."""
    return "the model's own top prediction" if answer.own_row(row) else answer_name(answer.where)


def answer_name(where: str) -> str:
    """What a page calls the token a run is measured against: the right answer, or the model's own greedy output
    where no right answer is known (explorer.run.output.target_for's `where`)."""
    return "the right answer" if scored_token(where) == "right" else "the model's own greedy output"
