"""One table of pages: the lesson's steps in the paper's order, then the Explore pages. The navigation menus, the
Overview's map, every step's Previous / Next and the drill-down targets are all built from it."""

from __future__ import annotations

from dataclasses import dataclass

from attention_explorer.models.families.descriptor import Family


@dataclass(frozen=True)
class Page:
    """A page: its address (the file stem in explorer/pages), title, Material icon, and lesson step (None: Explore)."""

    stem: str
    title: str
    icon: str
    step: int | None = None
    decoder: bool = False  # the step shows a decoder's output: encoder-only models have nothing to show there

    @property
    def script(self) -> str:
        return f"explorer/pages/{self.stem}.py"

    @property
    def label(self) -> str:
        """The menu's and the links' text: a step carries its number."""
        return f"{self.step}. {self.title}" if self.step else self.title


OVERVIEW = Page("overview", "Overview: the lesson's map", "account_tree", 0)
# The paper's order: what happens to a sentence, from its tokens to the loss that trains the weights.
_STEPS = (
    ("tokens", "Tokens and ids", "format_list_numbered", False),
    ("embedding", "Embedding", "table_rows", False),
    ("positional", "Positional encoding", "waves", False),
    ("query_key_value", "Query, key and value", "key", False),
    ("scores", "Scores, scale, mask, softmax", "calculate", False),
    ("multi_head", "Weighted sum, heads and W^O", "call_merge", False),
    ("add_norm", "Add & Norm and feed-forward", "route", False),
    ("model_view", "The stack: every layer and head", "apps", False),
    ("turn_off", "Turn heads off: a layer, then one head", "block", False),
    ("patch", "Patch activations: where the answer travels", "swap_horiz", False),
    ("why_attention", "Why attention", "table_chart", False),
    ("decoding", "Decoder: one output word at a time", "translate", True),
    ("final_linear", "Final linear, softmax and sampling", "functions", True),
    ("layer_predictions", "Each layer's prediction", "layers", True),
    ("loss", "The loss: the score training lowers", "trending_down", True),
    ("train", "Training", "model_training", False),
)
STEPS = tuple(Page(stem, title, icon, i, decoder) for i, (stem, title, icon, decoder) in enumerate(_STEPS, start=1))
EXPLORE = (
    Page("attention", "Attention heatmap", "grid_on"),
    Page("head_view", "Head view", "linear_scale"),
    Page("find_heads", "Find heads", "travel_explore"),
    Page("statistics", "Head statistics", "query_stats"),
    Page("corpus", "Heads over many texts", "dataset"),
    Page("aggregation", "Rollout and flow", "stacked_line_chart"),
    Page("compare", "Compare weights", "difference"),
    Page("compare_sentences", "Compare sentences", "compare_arrows"),
    Page("reference", "Ours vs transformers", "compare"),
    Page("ablation", "Turn heads off", "block"),
    Page("head_effects", "Effect of every head", "grid_view"),
    Page("patching", "Activation patching", "swap_horiz"),
    Page("logit_lens", "Logit lens", "layers"),
    Page("attribution", "Logit attribution", "pie_chart"),
    # the whole walk-throughs on one page each, as they were before the lesson split them into steps
    Page("qkv", "Q/K/V on one page", "calculate"),
    Page("forward", "Forward pass on one page", "route"),
    Page("output", "Output and loss on one page", "functions"),
)
# The encoder-decoder a lesson on an encoder-only model is offered for the decoder's steps, and its sentence
TRANSLATE = "translate"
TRANSLATE_EXAMPLE = "the small red cat sees a big dog"
REAL_MODEL = "smollm2"  # the lesson's real language model: every step, tokens to the loss, on one model
REAL_EXAMPLE = "The capital of France is"
MENUS = {"Lesson": (OVERVIEW, *STEPS), "Explore": EXPLORE}
N_STEPS = len(STEPS)
BY_STEM = {page.stem: page for pages in MENUS.values() for page in pages}
LESSON = (OVERVIEW, *STEPS)


def script(stem: str) -> str:
    """A page's script path, as st.page_link and st.switch_page take it: read from the table, never written out."""
    return BY_STEM[stem].script


def neighbours(stem: str) -> tuple[Page | None, Page | None]:
    """(previous, next) of a lesson page along the path; (None, None) for an Explore page."""
    page = BY_STEM.get(stem)
    if page is None or page.step is None:
        return None, None
    i = page.step
    return (LESSON[i - 1] if i > 0 else None), (LESSON[i + 1] if i + 1 < len(LESSON) else None)


def lacking(family: Family) -> tuple[Page, ...]:
    """The steps a model has nothing to show on: the decoder's (an output distribution, decoding, a loss), for a
    model without a next-token head (encoder-only)."""
    return () if family.next_token_head else tuple(page for page in STEPS if page.decoder)


def before_decoder(stem: str | None) -> bool:
    """Whether a page is a lesson step before the decoder's: an encoder-decoder's decoder tokens are not introduced
    yet there, so such a step opens on the encoder's self-attention."""
    page = BY_STEM.get(stem or "")
    return page is not None and page.step is not None and 0 < page.step < BY_STEM["decoding"].step
