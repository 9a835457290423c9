"""The server's device (EXPLORER_DEVICE, set by `serve --device`; the CPU by default) and, on a GPU, its memory's books
(explorer.run.device_books): where the shelf puts each model, and what a run on the GPU is admitted by. A device this
machine lacks is said once in a box at the top of the page, and the server runs on the CPU."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import streamlit as st
import torch

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.run import admission, device_books
from attention_explorer.models import device as devices

GPU_BUDGET_NOTE = "serve --gpu-memory-budget"


@st.cache_resource(show_spinner=False)
def chosen() -> tuple[torch.device, str]:
    """(the device every model runs on, "" or why it is not the one asked for)."""
    asked = devices.from_environ(os.environ)
    try:
        return devices.resolve(asked), ""
    except devices.DeviceError as e:
        return torch.device("cpu"), f"{devices.DEVICE_ENV}={asked[:40]}: {e}. This server runs on the CPU instead."


def device() -> torch.device:
    return chosen()[0]


def warn_at_start() -> None:
    """The box that says the device asked for is not there (nothing when it is)."""
    problem = chosen()[1]
    if problem and not st.session_state.get(state.DEVICE_WARNED):  # once a session: at its start, not on every page
        st.session_state[state.DEVICE_WARNED] = True
        st.warning(markdown_literal(problem), icon=":material/memory:")


@st.cache_resource(show_spinner=False)
def books() -> device_books.DeviceBooks | None:
    """The GPU's books, budgeted once at start; None on the CPU (the Gate's books alone hold there)."""
    where = device()
    if where.type != "cuda":
        return None
    try:
        budget = device_books.budget_from(device_books.budget_text(), where)
    except ValueError:  # `serve` checked it; a bad variable set by hand falls back to the default
        budget = device_books.default_budget(where)
    return device_books.DeviceBooks(where, budget)


def refusal_line(refused: device_books.DeviceRefused, fits: Callable[[int], int] | None, what: str) -> str:
    """Why a run cannot have the GPU, in one line, and what would fit."""
    most = fits(refused.room) if fits is not None else 0
    advice = f" At most {most:,} tokens fit on it now: lower Max tokens in the sidebar." if most else ""
    if refused.out_of_memory:
        return (
            f"{what} ran out of GPU memory and was stopped (its cache is emptied; the server goes on); this server "
            f"lets one run have {admission.gigabytes(refused.room)} of the GPU now.{advice}"
        )
    return (
        f"{what} needs about {admission.gigabytes(refused.needed)} of GPU memory, and this server lets one run have "
        f"{admission.gigabytes(refused.room)} of it now (its GPU budget, {admission.gigabytes(refused.budget)}, less "
        f"what the models hold; set with {GPU_BUDGET_NOTE}).{advice}"
    )


@contextlib.contextmanager
def admitted(nbytes: int, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """The GPU's admission around a run (nothing on the CPU)."""
    found = books()
    if found is None:
        yield
        return
    with found.admitted(nbytes, waiting):
        yield
