"""Where a model runs: "cpu" (the default), "cuda" / "cuda:N" (a GPU), or "auto" (the first GPU torch sees, else the
CPU). One parser for the notebook API, the commands and the app (EXPLORER_DEVICE), one way to move a loaded model
there, and one way to bring a result back to the CPU as numpy. Float32 and exact on any device: TF32 matmuls are
turned off whenever a CUDA device is chosen, so a GPU's products round as the CPU's do (to float32, not to TF32's
10-bit mantissa)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from attention_explorer.models.registry import LoadedModel

DEVICE_ENV = "EXPLORER_DEVICE"
DEFAULT = "cpu"


class DeviceError(ValueError):
    """A device this machine does not have, or one this engine does not run on: one line that says which it has."""


def available() -> str:
    """The devices this machine offers, in words: 'cpu', or 'cpu, cuda:0, cuda:1'."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ", ".join(["cpu", *(f"cuda:{i}" for i in range(count))])


def resolve(text: str | torch.device | None) -> torch.device:
    """The torch.device a person named: "cpu", "cuda", "cuda:N", "auto" (the first GPU torch sees, else the CPU);
    None is the CPU. DeviceError, one line, for a GPU this machine lacks, an index past its GPUs, or any other kind
    (mps, xpu...: the engine is tested on CPUs and CUDA GPUs only)."""
    if text is None:
        return torch.device(DEFAULT)
    name = str(text).strip().lower()
    if name == "auto":
        return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    try:
        found = torch.device(name)
    except (RuntimeError, ValueError):
        raise DeviceError(f"unknown device {str(text)[:40]!r}; choose cpu, cuda, cuda:N or auto") from None
    if found.type == "cpu":
        return torch.device("cpu")
    if found.type != "cuda":
        raise DeviceError(
            f"device {found.type!r} is not supported: this engine runs on cpu or cuda; this machine has {available()}"
        )
    if not torch.cuda.is_available():
        raise DeviceError(f"device {name!r}: torch sees no CUDA GPU on this machine; use --device cpu (or auto)")
    index = 0 if found.index is None else found.index
    if index >= torch.cuda.device_count():
        raise DeviceError(f"device {name!r}: this machine has {available()}")
    return torch.device("cuda", index)


def from_environ(environ: Mapping[str, str] = os.environ) -> str:
    """EXPLORER_DEVICE as set (`serve --device`, `EXPLORER_DEVICE=cuda make run`), else "cpu"; not yet checked."""
    return environ.get(DEVICE_ENV, "").strip() or DEFAULT


def exact(device: torch.device) -> None:
    """Float32 products exact on a CUDA device: TF32 (a 10-bit mantissa in matmuls and convolutions on Ampere and
    later) off, process-wide, so results keep the CPU's float32 rounding bounds (tests/tolerance.py)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def place(loaded: LoadedModel, device: str | torch.device | None) -> LoadedModel:
    """`loaded` on `device`: itself on the CPU (nothing moves: the same numbers, bit for bit), else its model moved
    there. The model is moved in place (nn.Module.to): give a freshly loaded model, not one another caller shares."""
    target = device if isinstance(device, torch.device) else resolve(device)
    if model_device(loaded.model) == target:
        return loaded
    exact(target)
    needed = weight_bytes(loaded.model)
    if target.type == "cuda":
        free = int(torch.cuda.mem_get_info(target)[0])
        if needed > free:
            raise too_large(loaded.title, needed, free, target)
    try:
        return replace(loaded, model=loaded.model.to(target))
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        loaded.model.to("cpu")  # the weights that moved come back: nothing is left half on the GPU
        free_memory(target)
        raise too_large(loaded.title, needed, int(torch.cuda.mem_get_info(target)[0]), target) from None


def weight_bytes(model: torch.nn.Module) -> int:
    """The bytes of a model's parameters and buffers (what moving it to a device takes there)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def too_large(title: str, needed: int, free: int, target: torch.device) -> Exception:
    """A model whose weights do not fit on the GPU, as models.registry.ModelLoadError (the app, the commands and the
    API say a load error in one line): what it needs, what the GPU has free."""
    from attention_explorer.models.registry import ModelLoadError

    return ModelLoadError(
        f"{title} needs {needed / 1e9:.1f} GB for its weights on {target}, which has {free / 1e9:.1f} GB free: "
        "run it on the CPU (--device cpu), or a smaller model on the GPU"
    )


def model_device(model: torch.nn.Module) -> torch.device:
    """Where a model's weights are (the CPU for one without any)."""
    found = next(model.parameters(), None)
    return torch.device("cpu") if found is None else found.device


def numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as numpy on the CPU: on the CPU the tensor's own memory (as .numpy(): no copy, the same bits); from a
    GPU, one copy back."""
    return tensor.detach().cpu().numpy()


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is a GPU's out-of-memory (torch.cuda.OutOfMemoryError, or the RuntimeError older paths raise)."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "CUDA out of memory" in str(error)


def free_memory(device: torch.device) -> None:
    """After a GPU's out-of-memory: give back what torch's caching allocator holds, so the next run has it."""
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
