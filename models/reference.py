"""The Hugging Face `transformers` reference for a model folder, run eagerly so it returns attentions: the class is
chosen by config.json's model_type, as the engine's own loader chooses its converter."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attention_explorer.models import gguf
from attention_explorer.models.pretrained import FAMILIES, ModelFolderError, read_hf_config

# config.json's model_type -> the transformers class that reads the same folder (a folder without one is BERT, as in
# models.pretrained), as each family's module names it; decoders with their language-model head, so the reference
# has next-token logits too
CLASSES = {model_type: module.REFERENCE_CLASS for model_type, module in FAMILIES.items()}
# transformers' lazy module is not safe to import from two threads at once: a class looked up while another thread is
# still importing it is missing (AttributeError / ImportError), so the background import and a first use take turns
_IMPORTING = threading.Lock()


@dataclass(frozen=True)
class ReferenceOutput:
    """Per-layer attention weights (B, H, T, T) and hidden states (embeddings, then each layer's output; GPT-2's
    last one is after its final LayerNorm), and the next-token logits (B, T, V) where the model has an output layer."""

    attentions: tuple[Tensor, ...]
    hidden_states: tuple[Tensor, ...]
    logits: Tensor | None = None


def import_code() -> None:
    """Import transformers' BERT and GPT-2 code (about 3 s on a 2-core machine; no weights): done ahead of the first
    use."""
    with _IMPORTING:
        import transformers

        for name in CLASSES.values():
            getattr(transformers, name)

    return None


def _model_type(path: Path) -> str:
    """config.json's model_type for a folder; the architecture a GGUF file names."""
    if path.suffix == ".gguf":  # the family's model_type of the architecture it names (gemma3 -> gemma3_text)
        arch = gguf.architecture(path)
        return gguf.ARCHITECTURES.get(arch, arch)
    return read_hf_config(path).get("model_type", "bert")


def reference_class(folder: str | Path) -> str:
    """The name of the transformers class for the folder's (or GGUF file's) model_type; ModelFolderError for a type
    it has none for."""
    model_type = _model_type(Path(folder))
    if model_type not in CLASSES:
        raise ModelFolderError(
            f"config.json in {folder} names model_type {model_type!r}; the reference reads {', '.join(sorted(CLASSES))}"
        )
    return CLASSES[model_type]


def load_reference(folder: str | Path):
    """transformers' model for a local folder or GGUF file (the class by model_type), never downloading;
    eager attention, or output_attentions comes back empty."""
    name = reference_class(folder)
    with _IMPORTING:
        import transformers  # imported here: only the reference path needs transformers

        model_class = getattr(transformers, name)
    path = Path(folder)
    # float32 whatever the file stores, as the engine computes: transformers' default ("auto") would run a float16 or
    # bfloat16 folder, or a GGUF file of half floats, in half precision and differ from it by about 1e-3
    options = dict(attn_implementation="eager", local_files_only=True, dtype=torch.float32)
    if path.suffix == ".gguf":  # transformers dequantizes the same file itself (it needs gguf and accelerate)
        gguf.header(path)  # with gguf's reader, which trusts every count it reads: read with bounds first
        model = model_class.from_pretrained(str(path.parent), gguf_file=path.name, **options)
    else:
        model = model_class.from_pretrained(str(path), **options)
    return model.eval().requires_grad_(False)


@torch.inference_mode()
def run_reference(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    hidden_states: bool = True,
    logits: bool = True,
    attentions: bool = True,
) -> ReferenceOutput:
    """One forward with every attention and, unless `hidden_states` is False, every hidden state returned; with
    `logits` False a model with a head runs without it (GPT-2's (T, V) logits are 100 MB at 512 tokens); with
    `attentions` False no attention comes back (eager attention still computes its weights, and drops them)."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    body = model if logits else model.base_model  # BertModel's base_model is itself; GPT2LMHeadModel's, GPT2Model
    out = body(
        input_ids=input_ids,
        attention_mask=attention_mask,
        output_attentions=attentions,
        output_hidden_states=hidden_states,
    )
    return ReferenceOutput(tuple(out.attentions or ()), tuple(out.hidden_states or ()), getattr(out, "logits", None))


# Each layer's attention weights, read while the reference runs with output_attentions off (so transformers collects
# none: at 2,048 tokens SmolLM2's would be 4.3 GB at once). transformers' own output capture works the same way: one
# forward hook per attention module, installed once, inactive unless this thread's context has set a reader; the
# eager attention modules return (output, weights) whether or not attentions are asked for.
_READER: ContextVar[Callable[[int, Tensor], bool] | None] = ContextVar("reference_attention_reader", default=None)
_HOOKS = threading.Lock()
_HOOKED = "_explorer_attention_hooks"  # set on a reference model once its hooks are in


class _Enough(Exception):  # noqa: N818 -- not an error: the reader has every layer it asked for
    """Raised by the hook when the reader needs no later layer: the rest of the forward is skipped."""


def _recorded(model):
    """What transformers' output_attentions collects in this class: a module class, or an OutputRecorder (the class,
    the sub-module's name where one is given, which of its outputs holds the weights)."""
    spec = (getattr(type(model.base_model), "_can_record_outputs", None) or {}).get("attentions")
    if spec is None:
        raise TypeError(f"{type(model).__name__} does not say which of its modules return attention weights")
    return spec


def attention_modules(model) -> list[torch.nn.Module]:
    """The reference's self-attention modules in layer order, found as transformers finds what output_attentions
    collects (GPT-2's ".attn", not its ".crossattention")."""
    spec = _recorded(model)
    target, name = getattr(spec, "target_class", spec), getattr(spec, "layer_name", None)
    wanted = f".{name.strip('.')}." if name else None
    modules = model.base_model.named_modules()
    found = [m for n, m in modules if isinstance(m, target) and (wanted is None or wanted in f".{n}.")]
    if len(found) != model.config.num_hidden_layers:
        raise TypeError(f"found {len(found)} attention modules in {type(model).__name__}, not one a layer")
    return found


def _install_hooks(model) -> None:
    with _HOOKS:
        if getattr(model, _HOOKED, False):
            return
        index = getattr(_recorded(model), "index", 1)  # (output, weights): the weights' place
        for layer, module in enumerate(attention_modules(model)):
            module.register_forward_hook(_hook(layer, index))
        setattr(model, _HOOKED, True)


def _hook(layer: int, index: int):
    def read(module, args, output) -> None:
        reader = _READER.get()
        if reader is not None and reader(layer, output[index]):
            raise _Enough

    return read


@torch.inference_mode()
def each_attention(model, input_ids: Tensor, read: Callable[[int, Tensor], bool]) -> None:
    """One forward of the reference's body (no output layer, no hidden states, no attentions collected) that hands
    each layer's attention weights (B, H, T, T) to `read(layer, weights)` as that layer finishes; `read` returns True
    once it needs no later layer, and the forward stops there."""
    _install_hooks(model)
    token = _READER.set(read)
    try:
        model.base_model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_attentions=False)
    except _Enough:
        pass
    finally:
        _READER.reset(token)
