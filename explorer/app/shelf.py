"""The models a page reads: the registry's, loaded on one shelf shared read-only by every session (with transformers'
references), and those trained in this session (the Train page), which no other session sees."""

from __future__ import annotations

import threading

import streamlit as st

from attention_explorer.explorer.app import gpu, state
from attention_explorer.explorer.run import caps, memo, reference_view
from attention_explorer.models import device, reference, registry

# The two most recently used models stay loaded (the transformers reference counts as one): every page needs at most
# two at once (Compare weights: MiniLM and its untrained copy; Ours vs transformers: MiniLM and the reference). Another
# is loaded again on its next use, to the same weights and revision, so cached traces stay valid: MiniLM or its
# untrained copy in ~0.3 s, paper-random in ~1.4 s, the reference in ~0.05 s once transformers is imported, with a
# spinner. Keeping three held paper-random (60M parameters, 240 MB) after every page had been opened with every model:
# 807-816 MB instead of ~600 (python -m bench load).
MODELS_KEPT = 2


@st.cache_resource(show_spinner=False)
def shelf() -> memo.Shelf:
    """The loaded models (registry keys and reference_key names), the MODELS_KEPT most recently used."""
    return memo.Shelf(_load, MODELS_KEPT)


# A transformers reference (BertModel over MiniLM's files, or the class a folder's model_type names over that folder)
# is one more model on the same shelf, one entry per folder: a class that has left the reference page does not keep it
# (its weights) loaded. Importing transformers' BERT and GPT-2 code stays (~120 MB).
REFERENCE = "transformers reference"  # MiniLM's; another folder's is "transformers reference: <folder>"


def reference_key(folder: str) -> str:
    """The shelf's name for transformers' model over a folder ("": MiniLM's)."""
    return f"{REFERENCE}: {folder}" if folder else REFERENCE


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
    with st.spinner(message):
        return models.get(key)


def get_model(name: str) -> registry.LoadedModel:
    """A registry model, shared read-only by every session; a spinner while it loads."""
    return _shelved(name, "Loading model...")


def _trained() -> dict[str, registry.LoadedModel]:
    return st.session_state.get(state.TRAINED, {})


def model(key: str) -> registry.LoadedModel:
    """A model trained in this session, else a shared one from the registry."""
    return _trained().get(key) or get_model(key)


def model_keys() -> list[str]:
    """The models a visitor is offered: the registry's that the server lists (caps.current: all without a list), then
    those trained in this session (the visitor's own)."""
    return [*caps.current().offered(registry.MODELS), *_trained()]


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


def get_reference(folder: str = ""):
    """transformers' model over a folder's files ("" = MiniLM's: BertModel), shared read-only; a spinner while it
    loads."""
    return _shelved(reference_key(folder), "Loading the transformers reference...")
