"""What every family's converter shares: the one error a checkpoint or config.json that does not fit raises, the
checked reading of a checkpoint's tensors, and the checked reading of config.json's fields."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from torch import Tensor

from attention_explorer.models.config import ACTIVATIONS


class ConversionError(ValueError):
    """A checkpoint that does not fit the model: names every missing, unexpected or mis-shaped key."""


class Checked:
    """A checkpoint's tensors taken by name, each shape checked; every problem is collected and reported at once
    (`finish`), so one message names all that is wrong with a file. Every family's converter reads through it."""

    def __init__(self, theirs: Mapping[str, Tensor]) -> None:
        self.theirs = theirs
        self.used: set[str] = set()
        self.problems: list[str] = []

    def take(self, name: str, shape: tuple[int, ...]) -> Tensor | None:
        """The tensor `name` if it is there with this shape; None (and the problem noted) otherwise."""
        if name not in self.theirs:
            self.problems.append(f"missing {name}")
            return None
        self.used.add(name)
        tensor = self.theirs[name]
        if tuple(tensor.shape) != shape:
            self.problems.append(f"{name} has shape {tuple(tensor.shape)}, expected {shape}")
            return None
        return tensor

    def finish(self, what: str, ignored: Callable[[str], bool] = lambda _name: False) -> None:
        """Raise ConversionError naming every problem, and every key neither taken nor `ignored`, if there is one."""
        unexpected = sorted(k for k in self.theirs if k not in self.used and not ignored(k))
        problems = self.problems + [f"unexpected {k}" for k in unexpected]
        if problems:
            shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
            raise ConversionError(f"checkpoint does not fit the {what}: {shown}")


@contextmanager
def config_fields(family: str) -> Iterator[None]:
    """config.json read field by field inside this block: a missing field, or one of a type or value our config
    refuses, is one ConversionError naming it ("does not describe a GPT-2 model")."""
    try:
        yield
    except ConversionError:
        raise  # already one line naming what config.json asks for (a ValueError too)
    except KeyError as e:
        raise ConversionError(f"config.json lacks {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise ConversionError(f"config.json does not describe a {family} model: {e}") from None


def activation(hf: Mapping[str, object], field: str, default: str) -> str:
    """config.json's activation `field`, one the engine has (models.config.ACTIVATIONS); ConversionError otherwise."""
    found = str(hf.get(field, default))
    if found not in ACTIVATIONS:
        raise ConversionError(f"unsupported {field} {found!r} ({', '.join(ACTIVATIONS)})")
    return found
