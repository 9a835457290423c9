"""The Hugging Face `transformers` reference for a BERT-family folder, run eagerly so it returns attentions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor


@dataclass(frozen=True)
class ReferenceOutput:
    """Per-layer attention weights (B, H, T, T) and hidden states (embeddings, then each layer's output)."""

    attentions: tuple[Tensor, ...]
    hidden_states: tuple[Tensor, ...]


def import_code() -> None:
    """Import transformers' BERT code (about 3 s on a 2-core machine; no weights): done ahead of the first use."""
    from transformers import BertModel  # noqa: F401

    return None


def load_reference(folder: str | Path):
    """transformers' BertModel from a local folder; eager attention, or output_attentions comes back empty."""
    from transformers import BertModel  # imported here: only the reference path needs transformers

    model = BertModel.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True)
    return model.eval().requires_grad_(False)


@torch.inference_mode()
def run_reference(
    model, input_ids: Tensor, attention_mask: Tensor | None = None, hidden_states: bool = True
) -> ReferenceOutput:
    """One forward with every attention and, unless `hidden_states` is False, every hidden state returned."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    out = model(
        input_ids=input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=hidden_states
    )
    return ReferenceOutput(tuple(out.attentions), tuple(out.hidden_states or ()))
