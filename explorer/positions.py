"""A model's positional information as arrays: its own table, and the paper's sinusoids at the same size."""

from __future__ import annotations

import numpy as np

from models.positional import sinusoidal_table
from models.registry import LoadedModel


def tables(loaded: LoadedModel) -> dict[str, np.ndarray]:
    """{"sinusoidal": (max_len, d_model)} plus {"learned": ...} when the model was trained with its own positions."""
    config = loaded.model.config
    found = {"sinusoidal": sinusoidal_table(config.max_len, config.d_model).numpy()}
    if config.positional == "learned":
        found["learned"] = loaded.model.encoder.embeddings.position.table.detach().numpy().copy()
    return found
