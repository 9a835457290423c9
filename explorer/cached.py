"""The only Streamlit cache wrappers: models shared read-only by every session, traces keyed by plain values.

Models trained on the Train page live in this session's state only, under keys no other session can have, so a
trace cached under such a key is never served to anyone else.
"""

from __future__ import annotations

import streamlit as st

from explorer import analysis, positions, reference_view, state, trace
from models import registry


@st.cache_resource(max_entries=4, show_spinner="Loading model...")
def get_model(name: str) -> registry.LoadedModel:
    return registry.load(name)


def _trained() -> dict[str, registry.LoadedModel]:
    return st.session_state.get(state.TRAINED, {})


def model(key: str) -> registry.LoadedModel:
    """A model trained in this session, else a shared one from the registry."""
    return _trained().get(key) or get_model(key)


def model_keys() -> list[str]:
    return [*registry.MODELS, *_trained()]


def described(key: str) -> registry.LoadedModel | registry.ModelSpec:
    """Something with the model's title and description, without loading a registry model."""
    return _trained().get(key) or registry.MODELS[key]


@st.cache_data(max_entries=16, show_spinner="Running the model...")
def _trace(model_name: str, revision: str, text: str, max_tokens: int, _loaded: registry.LoadedModel) -> trace.Trace:
    return trace.run(_loaded, text, max_tokens)


def get_trace(model_name: str, text: str, max_tokens: int) -> trace.Trace:
    loaded = model(model_name)
    return _trace(model_name, loaded.revision, text, max_tokens, loaded)


@st.cache_data(max_entries=4, show_spinner=False)
def _positions(model_name: str, revision: str, _loaded: registry.LoadedModel) -> dict:
    return positions.tables(_loaded)


def get_positions(model_name: str) -> dict:
    loaded = model(model_name)
    return _positions(model_name, loaded.revision, loaded)


@st.cache_data(max_entries=16, show_spinner=False)
def _statistics(model_name: str, revision: str, text: str, max_tokens: int, kind: str) -> tuple[dict, object]:
    result = get_trace(model_name, text, max_tokens)
    keys = result.tokens_for(kind)[1]
    stats = analysis.head_statistics(result.attention(kind).weights, keys)
    return stats, analysis.head_labels(stats, len(keys))


def get_statistics(model_name: str, text: str, max_tokens: int, kind: str) -> tuple[dict, object]:
    """Per-head statistics and labels of one attention kind (a pass over every weight: kept across reruns)."""
    return _statistics(model_name, model(model_name).revision, text, max_tokens, kind)


@st.cache_data(max_entries=16, show_spinner="Computing attention flow (a max-flow per token pair)...")
def _flow(model_name: str, revision: str, text: str, max_tokens: int, kind: str, layer: int):
    weights = get_trace(model_name, text, max_tokens).attention(kind).weights
    return analysis.flow(weights[: layer + 1])


def get_flow(model_name: str, text: str, max_tokens: int, kind: str, layer: int):
    """Attention flow through layers 1..layer+1 of the sidebar's trace (slow: seconds for 16 tokens)."""
    return _flow(model_name, model(model_name).revision, text, max_tokens, kind, layer)


@st.cache_resource(max_entries=1, show_spinner="Loading the transformers reference...")
def get_reference():
    return reference_view.load()


@st.cache_data(max_entries=16, show_spinner="Running the transformers reference...")
def get_reference_attention(model_name: str, text: str, max_tokens: int):
    """The reference's attention for the registry model `model_name` on the sidebar's text."""
    return reference_view.attention(get_reference(), get_model(model_name), text, max_tokens)


@st.cache_data(max_entries=16, show_spinner=False)
def get_reference_difference(model_name: str, text: str, max_tokens: int):
    """Per head, max |ours - reference| (a float64 pass over every weight: kept across reruns)."""
    ours = get_trace(model_name, text, max_tokens).encoder_self.weights
    return reference_view.max_abs_difference(ours, get_reference_attention(model_name, text, max_tokens))
