"""The models a page reads: the registry's, loaded on one shelf shared read-only by every session (with transformers'
references), and those trained in this session (the Train page), which no other session sees."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import streamlit as st

from attention_explorer.explorer.app import gpu, state, waiting
from attention_explorer.explorer.run import admission, caps, memo, reference_view
from attention_explorer.models import device, footprint, load_plan, reference, registry

# The two most recently used models stay loaded (the transformers reference counts as one): every page needs at most
# two at once (Compare weights: MiniLM and its untrained copy; Ours vs transformers: MiniLM and the reference). Another
# is loaded again on its next use, to the same weights and revision, so cached traces stay valid: MiniLM or its
# untrained copy in ~0.3 s, paper-random in ~1.4 s, the reference in ~0.05 s once transformers is imported, with a
# spinner. Keeping three held paper-random (60M parameters, 240 MB) after every page had been opened with every model:
# 807-816 MB instead of ~600 (python -m bench load).
MODELS_KEPT = 2


@st.cache_resource(show_spinner=False)
def shelf() -> memo.Shelf:
    """The loaded models (registry keys and reference_key names), the MODELS_KEPT most recently used; each load
    admitted by the gate (_admitted_load), and those no session holds given back when a run needs the memory."""
    return memo.Shelf(_load, MODELS_KEPT, _admitted_load)


# A transformers reference (BertModel over MiniLM's files, or the class a folder's model_type names over that folder)
# is one more model on the same shelf, one entry per folder: a class that has left the reference page does not keep it
# (its weights) loaded. Importing transformers' BERT and GPT-2 code stays (~120 MB).
REFERENCE = "transformers reference"  # MiniLM's; another folder's is "transformers reference: <folder>"


def reference_key(folder: str) -> str:
    """The shelf's name for transformers' model over a folder ("": MiniLM's)."""
    return f"{REFERENCE}: {folder}" if folder else REFERENCE


def load_footprint(key: str) -> footprint.Footprint:
    """What loading a shelf's key asks of memory, from its files' sizes (models/footprint.py)."""
    if key == REFERENCE or key.startswith(f"{REFERENCE}: "):
        folder = key.removeprefix(REFERENCE).removeprefix(": ")
        return footprint.of_path(folder) if folder else footprint.of_folder(registry.minilm_folder())
    return footprint.of_spec(registry.MODELS[key])


def load_cost(key: str) -> admission.Cost:
    """A load's estimate, in the gate's lane for loads: from its files' sizes, not a run's terms, so its time says
    nothing of the pace of runs (a cached load took a fifth of it, and set the pace of step 9's runs to its floor)."""
    found = load_footprint(key)
    return admission.Cost(found.seconds, found.load_bytes, "load", observed=False)


@contextlib.contextmanager
def _admitted_load(key: str) -> Iterator[None]:
    """A load runs once the gate admits it; refused, the model cannot be opened now (registry.ModelLoadError, said
    where a model whose files are broken is said)."""
    try:
        needs = load_cost(key)
    except (OSError, ValueError, KeyError):  # files missing or unreadable, an unknown key: the load says what is wrong
        needs = admission.Cost(0.0, 0, "load")
    title = registry.MODELS[key].title if key in registry.MODELS else "the transformers reference"
    try:
        with waiting.queued(needs):
            yield
    except admission.Refused as refused:
        raise registry.ModelLoadError(waiting.refusal_line(refused, None, f"Loading {title}")) from None


def _load(key: str) -> object:
    where = gpu.device()  # every model on the server's device (serve --device): the reference beside ours
    if key == REFERENCE or key.startswith(f"{REFERENCE}: "):
        found = reference_view.load(key.removeprefix(REFERENCE).removeprefix(": "))
        return found if where.type == "cpu" else found.to(where)
    return device.place(registry.load(key), where)


def _shelved(key: str, message: str):
    models = shelf()
    if key in models:
        return models.get(key)
    spec = registry.MODELS.get(key)
    plan = None if spec is None else load_plan.for_spec(spec)
    if plan is None or not plan.worth_saying:
        with st.spinner(message):
            return models.get(key)
    return _load_saying(key, plan, spec.title)


def _load_saying(key: str, plan: load_plan.Plan, title: str):
    """A long load (a GGUF file's first: models.load_plan) with its estimate said first and a bar the loaders move."""
    place = st.empty()
    with place.container():
        st.info(plan.line(title), icon=":material/hourglass_top:")
        bar = st.progress(0.0, text=f"{plan.steps[0].what.capitalize()}...")

    def told(step: str, done: float) -> None:
        bar.progress(plan.fraction(step, done), text=f"{load_plan.STEP_WORDS[step].capitalize()}...")

    try:
        with load_plan.telling(told):
            return shelf().get(key)
    finally:
        place.empty()


def get_model(name: str) -> registry.LoadedModel:
    """A registry model, shared read-only by every session; a spinner while it loads."""
    return _shelved(name, "Loading model...")


def _trained() -> dict[str, registry.LoadedModel]:
    return st.session_state.get(state.TRAINED, {})


def model(key: str) -> registry.LoadedModel:
    """A model trained in this session, else a shared one from the registry."""
    return _trained().get(key) or get_model(key)


@st.cache_resource(show_spinner=False)
def left_out() -> dict[str, footprint.Footprint]:
    """The models whose load could not fit this server's memory budget (footprint.too_big), found once per process
    and told to whoever started the server, in its log (the page says only how many)."""
    listed = caps.current().offered(registry.MODELS)
    found = footprint.too_big({key: registry.MODELS[key] for key in listed}, waiting.budget())
    if found:
        logging.getLogger(__name__).warning(footprint.left_out_line(found, waiting.budget()))
    return found


def left_out_note(count: int) -> str:
    """The sidebar's line on the models left out: how many, and why (never which files)."""
    models = f"{count} model{'s' if count > 1 else ''} of this server {'are' if count > 1 else 'is'}"
    return (
        f"{models} not offered: loading {'them' if count > 1 else 'it'} would need more memory than the server's "
        "budget allows (whoever runs it sees which in its log and in `attention-explorer models`)."
    )


def model_keys() -> list[str]:
    """The models a visitor is offered: the registry's that the server lists (caps.current: all without a list) and
    whose load can fit its memory budget, then those trained in this session (the visitor's own)."""
    gone = left_out()
    return [*(key for key in caps.current().offered(registry.MODELS) if key not in gone), *_trained()]


def catalogued(key: str) -> bool:
    """Whether `key` names a model of the catalogue or of this session, offered by this server or not."""
    return key in _trained() or key in registry.MODELS


def described(key: str) -> registry.LoadedModel | registry.ModelSpec:
    """Something with the model's title and description, without loading a registry model."""
    return _trained().get(key) or registry.MODELS[key]


@st.cache_resource(show_spinner=False)
def prepare_reference() -> threading.Thread:
    """Once per process, after the first page is drawn: import transformers' BERT and GPT-2 code in the background, so
    the first opening of Ours vs transformers loads only its weights (0.05 s) instead of also importing (3 s)."""
    thread = threading.Thread(target=reference.import_code, name="import-transformers", daemon=True)
    thread.start()
    return thread


def has_reference(folder: str = "") -> bool:
    """Whether transformers' model over this folder is loaded already (nothing is loaded)."""
    return reference_key(folder) in shelf()


def get_reference(folder: str = ""):
    """transformers' model over a folder's files ("" = MiniLM's: BertModel), shared read-only; a spinner while it
    loads."""
    return _shelved(reference_key(folder), "Loading the transformers reference...")
