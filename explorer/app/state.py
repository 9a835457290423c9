"""Session-state keys shared across pages, and their defaults."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, MutableMapping, Sequence

from attention_explorer.explorer.run.trace import ATTENTION_KINDS as KINDS
from attention_explorer.models.registry import ENGLISH_EXAMPLES, ModelSpec

MODEL = "model"
TEXT = "text"
MAX_TOKENS = "max_tokens"

TRAINED = "trained_models"  # key -> LoadedModel trained on the Train page: this session's only
EXAMPLE = "sidebar_example"  # the sidebar's example picker: choosing one sets TEXT
# (a typed sentence the model could not read, the model's example put in its place): "Back to your sentence"
ASIDE = "sentence_aside"
# the box saying the server's device (serve --device) is missing here was shown to this session: once a session
DEVICE_WARNED = "gpu_device_warned"

# The attention heatmap's pickers (keyed by its prefix): other pages open it on a head by setting them.
ATTENTION = "attention"
ATTENTION_KIND, ATTENTION_WORDS = f"{ATTENTION}_kind", f"{ATTENTION}_words"
ATTENTION_LAYER, ATTENTION_HEAD = f"{ATTENTION}_layer", f"{ATTENTION}_head"

# The Q/K/V page's query token picker: other pages open it on a token by setting it.
QKV_QUERY = "qkv_query"
# The lesson's one focus, shared by its steps (the Q/K/V page's pickers): the attention kind, layer, head and token
# chosen on one step are the ones the next step shows. Kept across pages that do not draw them (FOCUS).
FOCUS_KIND, FOCUS_LAYER, FOCUS_HEAD, FOCUS_TOKEN = "qkv_kind", "qkv_layer", "qkv_head", QKV_QUERY
FOCUS = (FOCUS_KIND, FOCUS_LAYER, FOCUS_HEAD, FOCUS_TOKEN)
PRESENT = "present"  # presenter mode: large text, sidebar collapsed (also ?present=1 in the address)
# A page a click asked for: set in the chart's callback (no page switch is possible there), followed by app.py.
DRILL_TO = "drill_to"
# Values the pickers were given as starting points (key -> value): a picker still holding its starting point moves
# to the new sentence's starting point; one the user or an address set stays.
STARTED = "started"
FIRST_RUNS = "first_runs_asked"  # (model, text, max tokens) whose long first run this visitor asked for

# Every key that is read or written through session state is a constant here, so that no two pages pick the same
# one. A key only its own widget reads (key="attention_layer_chart"), and one built from a page's prefix
# (f"{prefix}_layer", f"{key}_against"), is written where it is used: it begins with its page's prefix (the page's
# file stem: attention_, qkv_, compare_, ablation_, patching_, ...) and so cannot meet another page's.
ABLATION_HEADS = "ablation_heads"  # Turn heads off: the heads turned off, as addresses ("2.1", "cross:2.1")
ABLATION_LAYER = "ablation_layer"  # Turn heads off: the whole-layer picker
OUTPUT_TARGET = "output_target"  # the Output page's target, scored against the model's output
PATCHING_CORRUPT, PATCHING_ANSWER, PATCHING_WRONG = "patching_corrupt", "patching_answer", "patching_wrong"
PATCHING_PROPOSED_FOR = "patching_proposed_for"  # the sidebar's choice (Choice) the boxes were last filled for
PATCHING_HEAD = "patching_head"  # (kind, layer, head) whose positions and map are shown
DECODING_POSITION = "decoding_position"  # the Decoding page's step, from 1: step N reads position N - 1 (URL_POSITION)
TRAIN_RUN = "train_run"  # the Train page's run (explorer.experiments.training), this session's only
TRAIN_TASK, TRAIN_PROBE, TRAIN_ERROR = "train_task", "train_probe", "train_error"
TRAIN_STEPS, TRAIN_EVERY, TRAIN_SEED = "train_steps", "train_every", "train_seed"
FORWARD_STACK = "forward_stack"  # the Forward pass page's stack (encoder or decoder), following the focus's kind
COMPARE_PAIR, COMPARE_B = "compare_pair", "compare_b"  # Compare sentences: the minimal pair picked, sentence B
QKV_KEYS_CENTER = "qkv_keys_center"  # the Q/K/V page's window over a long text's keys: its centre
HEAD_HEADS = "head_heads"  # the Head view page's heads shown
CORPUS_SOURCE, CORPUS_PASTE, CORPUS_FILE = "corpus_source", "corpus_paste", "corpus_file"  # the Corpus page's input
CORPUS_RAN = "corpus_ran"  # the Corpus page: digest -> the corpus whose statistics this visitor ran (or opened)
CORPUS_STATISTIC, CORPUS_LAYER, CORPUS_HEAD = "corpus_statistic", "corpus_layer", "corpus_head"
CORPUS_COLOUR = "corpus_colour"  # the queries and keys' colouring: by position or by role

DEFAULT_MODEL = "minilm"
DEFAULT_MAX_TOKENS = 128
DEFAULT_TEXT = ENGLISH_EXAMPLES[0]
DEFAULTS = {MODEL: DEFAULT_MODEL, TEXT: DEFAULT_TEXT, MAX_TOKENS: DEFAULT_MAX_TOKENS, PRESENT: False}


def default_model(offered: Sequence[str]) -> str:
    """The model a session opens on: DEFAULT_MODEL where the server offers it, else the first model it offers."""
    return DEFAULT_MODEL if DEFAULT_MODEL in offered or not offered else offered[0]


def widget(key: str) -> str:
    """The sidebar widget bound to a persistent key (widgets lose their state when the page changes)."""
    return f"sidebar_{key}"


def init(session: MutableMapping) -> None:
    for key, value in DEFAULTS.items():
        session.setdefault(key, value)


@dataclasses.dataclass(frozen=True)
class Choice:
    """The sidebar's choice, what every page's trace is computed from: the model's key, the text and the most tokens
    read of it. Plain values, hashable: the run store names what it keeps by them (explorer/app/store.py, key)."""

    model: str
    text: str
    max_tokens: int

    def with_text(self, text: str) -> Choice:
        """The same model and max tokens on another text (Compare sentences' sentence B)."""
        return dataclasses.replace(self, text=text)

    def with_model(self, model: str) -> Choice:
        """The same text and max tokens read by another model (Compare weights' pair)."""
        return dataclasses.replace(self, model=model)


def sidebar(session: Mapping) -> Choice:
    """The sidebar's choice (model, text, max tokens) as it stands in this session."""
    return Choice(session[MODEL], session[TEXT], int(session[MAX_TOKENS]))


def start(session: MutableMapping, key: str, value: object) -> None:
    """Give a picker a starting point (replaced by the next sentence's while the user leaves it alone)."""
    session[key] = value
    session.setdefault(STARTED, {})[key] = value


def at_start(session: MutableMapping, key: str) -> bool:
    """Whether a picker still holds the starting point it was given (nobody has chosen for it since)."""
    started = session.get(STARTED, {})
    return key in started and key in session and session[key] == started[key]


def chosen(session: MutableMapping, key: str) -> None:
    """A picker's value was chosen (by a click, a link or the address): no longer a starting point."""
    session.get(STARTED, {}).pop(key, None)


def choose(session: MutableMapping, key: str, value: object) -> None:
    """Set a picker's value as a choice, which a new sentence's starting point does not replace."""
    session[key] = value
    chosen(session, key)


def keep_focus(session: MutableMapping, key: str, value: object) -> None:
    """A focus picker's value as drawn, kept under a key of its own (for restore_focus)."""
    if key in FOCUS:
        session[f"{key}_kept"] = value


def restore_focus(session: MutableMapping) -> None:
    """Before a page is drawn: the focus pickers' values as last drawn. A picker changed in the browser holds its
    value as widget state only; after a page switch the browser no longer sends it and Streamlit drops it (the token
    picked on one step was gone on the next), so it comes back from its kept copy, as a value the page's picker
    then takes."""
    for key in FOCUS:
        if key not in session and f"{key}_kept" in session:
            session[key] = session[f"{key}_kept"]
        if key in session:
            session[key] = session[key]  # set, not only drawn: kept while a page without this picker is shown


def keep(session: MutableMapping, key: str, value: object) -> None:
    """Set a persistent key and its sidebar widget together (only before the widget is drawn, or in a callback)."""
    session[key] = session[widget(key)] = value


AN_EXAMPLE, CORPUS_TEXT = "example", "corpus text"  # what stands in for a sentence put aside


def put_aside(session: MutableMapping, example: str, stands_in: str = AN_EXAMPLE) -> None:
    """The sentence becomes `example`; the one it replaces is kept for back_to_sentence (only in a callback). A
    sentence already put aside stays the one kept while an example stands in its place. `stands_in`: what the new
    sentence is (AN_EXAMPLE: one of the model's examples; CORPUS_TEXT: a text opened from the Corpus page)."""
    typed = aside(session)
    session[ASIDE] = (session[TEXT] if typed is None else typed, example, stands_in)
    keep(session, TEXT, example)


def aside_stands_in(session: MutableMapping) -> str:
    """What stands in for the sentence put aside: AN_EXAMPLE or CORPUS_TEXT."""
    kept = session.get(ASIDE)
    return kept[2] if kept is not None and len(kept) > 2 else AN_EXAMPLE


def aside(session: MutableMapping) -> str | None:
    """The sentence put aside, while the example put in its place is still the sentence (else None)."""
    kept = session.get(ASIDE)
    return kept[0] if kept is not None and session[TEXT] == kept[1] else None


def back_to_sentence(session: MutableMapping) -> None:
    """The sentence put aside comes back (only in a callback)."""
    typed = aside(session)
    session.pop(ASIDE, None)
    if typed is not None:
        keep(session, TEXT, typed)


# The shareable address: /<page>?model=...&text=...&layer=...&head=...&token=... (layer and head numbered from 1
# as the app shows them, token by its position as shown). Read once, when a session opens.
URL_MODEL, URL_TEXT, URL_LAYER, URL_HEAD, URL_TOKEN = "model", "text", "layer", "head", "token"
URL_KEY = "key"  # a second token: the key token of the Find heads page
URL_KIND = "kind"  # the attention kind a page shows (one of KINDS), for models with more than one
# this run's folded introduction, where about_heads adds its note: a container lives one script run only, and one
# kept for the next page or rerun would be written to where that page has nothing (the browser then stops drawing)
INTRO_BOX = "intro_box"
# the Decoding page's step, by the position it reads, numbered from 0 as the heatmaps' ticks (labels.row_reads): an
# address written before 30 Nov 2026 counted it from 1 and now opens one position later
URL_POSITION = "position"
OLD_STEP = "step"  # the older name, counted from 1 (output word 3 reads position 2): such addresses keep their step
URL_PRESENT = "present"  # presenter mode: ?present=1
URL_CORPUS = "corpus"  # the Corpus page's corpus, by its digest (never its texts): ?corpus=0123456789abcdef
CORPUS_DIGEST = re.compile(r"[0-9a-f]{16}")
URL_OFF = "off"  # the heads turned off, as the pages write them: ?off=2.1,2.3 or ?off=cross:2.1 (from 1)
URL_VIEW = "url_view"  # what the address asked for that the page's own pickers apply: {"layer": 0, ...}
URL_PAGE = "url_page"  # the page the address opened; its pickers take URL_VIEW, other pages do not
URL_USED = "url_used"  # widget keys already given their address value (once each)
PAGE = "page"  # the page drawn on this run
SHOWN = "sidebar_shown"  # the sidebar's choice (Choice) as it was last drawn
MAX_TEXT = 100_000  # the sidebar's max_chars: longer pastes are cut to the model's tokens with a warning
URL_MAX_TEXT = 2000  # a longer sentence is not put in the address (servers refuse very long request lines)
HEAD_ADDRESS = re.compile(r"(?:(?:encoder|decoder|cross):)?[0-9]{1,3}\.[0-9]{1,3}")  # a head as ?off= names it
URL_MAX_HEADS = 1024  # heads named in an address at most (SmolLM2 has 270)


def _number(params: Mapping[str, str], name: str, lowest: int, notices: list[str]) -> int | None:
    raw = params.get(name)
    if raw is None:
        return None
    if raw.isascii() and raw.isdigit() and int(raw) >= lowest and len(raw) < 7:
        return int(raw) - lowest  # stored from 0
    notices.append(f"The address's {name} {raw[:40]!r} is not a number from {lowest} up; using the default.")
    return None


def read_url(
    params: Mapping[str, str], models: Mapping[str, ModelSpec], catalogue: Mapping[str, ModelSpec] | None = None
) -> tuple[dict, list[str]]:
    """What the address asks for, validated: ({model?, text?, layer?, head?, token?} from 0, off: the heads turned
    off as written, notices); `models`: those offered, `catalogue`: every model there is (a model there but not
    offered is named as such). A notice names a model by its title, as the sidebar does."""
    notices: list[str] = []
    values: dict = {}
    model = params.get(URL_MODEL)
    if model is not None:
        showing = models[default_model(list(models))].title
        if model in models:
            values[URL_MODEL] = model
        elif catalogue is not None and model in catalogue:
            title = catalogue[model].title
            notices.append(f"This server does not offer the address's model {title}; showing {showing}.")
        else:
            notices.append(f"The address names an unknown model {model[:40]!r}; showing {showing}.")
    text = params.get(URL_TEXT)
    if text is not None:
        if not text.strip():
            notices.append("The address's sentence is empty; showing the default sentence.")
        elif len(text) > URL_MAX_TEXT:
            notices.append(
                f"The address's sentence has {len(text)} characters (at most {URL_MAX_TEXT}); showing the default."
            )
        else:
            values[URL_TEXT] = text
    for name, lowest in ((URL_LAYER, 1), (URL_HEAD, 1), (URL_TOKEN, 0), (URL_KEY, 0), (URL_POSITION, 0)):
        number = _number(params, name, lowest, notices)
        if number is not None:
            values[name] = number
    if URL_POSITION not in params and (step := _number(params, OLD_STEP, 1, notices)) is not None:
        values[URL_POSITION] = step  # step N, from 1, read position N - 1
    off = params.get(URL_OFF)
    if off is not None:
        heads = [h.strip() for h in off.split(",") if h.strip()]
        values[URL_OFF] = [h for h in heads if HEAD_ADDRESS.fullmatch(h)]
        if len(values[URL_OFF]) < len(heads) or len(heads) > URL_MAX_HEADS:
            notices.append(
                f"The address's heads to turn off {off[:40]!r} are not all like 2.1 or cross:2.1; using those that are."
            )
            values[URL_OFF] = values[URL_OFF][:URL_MAX_HEADS]
    corpus = params.get(URL_CORPUS)
    if corpus is not None:
        if CORPUS_DIGEST.fullmatch(corpus):
            values[URL_CORPUS] = corpus
        else:
            notices.append(f"The address's corpus {corpus[:40]!r} is not a corpus's name here; showing the samples.")
    kind = params.get(URL_KIND)
    if kind is not None:
        if kind in KINDS:
            values[URL_KIND] = kind
        else:
            notices.append(f"The address's kind {kind[:40]!r} is not one of {', '.join(KINDS)}; using the default.")
    return values, notices


def apply_url(
    session: MutableMapping,
    params: Mapping[str, str],
    models: Mapping[str, ModelSpec],
    page: str,
    catalogue: Mapping[str, ModelSpec] | None = None,
) -> list[str]:
    """On a session's first run: take the address's model (one of `models`, those offered) and sentence (a model named
    without a sentence opens on its own example), keep layer/head/token for the pickers."""
    values, notices = read_url(params, models, catalogue)
    if URL_MODEL in values:
        model = values.pop(URL_MODEL)
        keep(session, MODEL, model)
        keep(session, TEXT, values.pop(URL_TEXT, models[model].examples[0]))
    elif URL_TEXT in values:
        keep(session, TEXT, values.pop(URL_TEXT))
    session[URL_VIEW] = values
    session[URL_PAGE] = page
    session[URL_USED] = set()
    return notices


def url_value(session: MutableMapping, name: str, key: str) -> int | None:
    """The address's value for this picker, once per widget key and only on the page the address opened."""
    used = session.get(URL_USED)
    if used is None or key in used or session.get(PAGE) != session.get(URL_PAGE):
        return None
    used.add(key)
    return session[URL_VIEW].get(name)


def address(session: MutableMapping) -> dict[str, str]:
    """The query parameters every page carries: model and sentence (pickers add layer, head and token); a sentence
    too long for an address is left out."""
    found = {URL_MODEL: session[MODEL]}
    if len(session[TEXT]) <= URL_MAX_TEXT:
        found[URL_TEXT] = session[TEXT]
    if session.get(PRESENT):
        found[URL_PRESENT] = "1"
    return found
