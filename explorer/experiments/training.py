"""Training a toy model inside the app: a run advanced in chunks, snapshots of its attention, and the model
published to this session's model list (no streamlit here; the Train page drives it)."""

from __future__ import annotations

import copy
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attention_explorer.explorer.run import analysis, memo, trace
from attention_explorer.explorer.run.heads import MEAN, head_or_mean
from attention_explorer.models import induction, registry, tasks, train


@dataclass(frozen=True)
class Snapshot:
    """The model's greedy output and attention on the probe sentence after `step` steps."""

    step: int
    trace: trace.Trace

    @functools.cached_property
    def scores(self) -> tuple[np.ndarray, np.ndarray]:
        """(induction, previous-token) scores of every head (L, H) of the self-attention that reads the probe text
        (models.induction), on the probe's own repeated tokens."""
        kind = self.trace.kinds[0]  # an encoder's self-attention, or a decoder-only model's masked one
        weights, tokens = np.asarray(self.trace.attention(kind).weights), self.trace.tokens_for(kind)[1]  # a toy's
        return analysis.induction_of(weights, tokens), induction.previous_token_scores(weights)

    def strongest(self, which: int) -> tuple[int, int]:
        """(layer, head) of the highest induction (which=0) or previous-token (which=1) score."""
        values = np.nan_to_num(self.scores[which], nan=-1.0)
        layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
        return int(layer), int(head)

    def head_map(self, layer: int, head: int) -> np.ndarray:
        """(T, T) one head's masked self-attention on the probe text (a decoder-only model's)."""
        return self.trace.attention(self.trace.kinds[0]).weights[layer, head]

    @property
    def predicted(self) -> str:
        """A decoder-only model's most likely next word after each word of the probe (teacher-forced)."""
        return " ".join(self.trace.output_tokens or ())

    @property
    def alignment(self) -> np.ndarray:
        """(T, S): the last decoder layer's cross-attention, mean over heads, where the alignment shows."""
        assert self.trace.cross is not None
        return head_or_mean(self.trace.cross.weights, -1, MEAN)

    @property
    def output(self) -> str:
        """The greedy output on the probe sentence, without its end token."""
        return " ".join(t for t in self.trace.output_tokens or () if t != tasks.SPECIALS[tasks.EOS_ID])


MEASURED_STEPS = 3  # steps timed once per task and process, after one untimed (torch's first step warms up)
TRAINING_COPIES = 4  # float32 copies of the weights a step holds: the weights, their gradients, Adam's two moments
STEP_OVERHEAD = 64 * 2**20  # a batch's activations and Python's objects beyond those (toy models: a few MB)


@functools.cache
def step_seconds(task_name: str, device: str = "cpu") -> float:
    """One training step's time on this machine and `device`, measured once per task, device and process on a scratch
    run of the task's recipe: what a run's estimate multiplies by its steps."""
    trainer = train.Trainer(tasks.get(task_name), train.RECIPES[task_name], train.DEFAULT_SEED, device)
    trainer.train_step()
    started = time.perf_counter()
    for _ in range(MEASURED_STEPS):
        trainer.train_step()
    return (time.perf_counter() - started) / MEASURED_STEPS


@dataclass
class Run:
    """One training run of this session: its trainer, when to snapshot, and what it has shown so far."""

    task_name: str
    steps: int
    every: int  # snapshot the probe sentence every this many steps
    probe: str
    seed: int = train.DEFAULT_SEED
    device: torch.device | str = "cpu"  # where it trains: the server's (explorer.app.gpu.device)
    running: bool = False
    trainer: train.Trainer = field(init=False)
    snapshots: list[Snapshot] = field(init=False, default_factory=list)
    run_id: str = field(init=False, default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        task = tasks.get(self.task_name)
        if not 1 <= self.steps <= 20000:
            raise ValueError(f"steps must be between 1 and 20000, not {self.steps}")
        if self.every < 1:
            raise ValueError(f"snapshot interval must be at least 1 step, not {self.every}")
        recipe = replace(train.RECIPES[task.name], steps=self.steps)
        task.source.encode(self.probe, recipe.config(task).max_len)  # unknown words fail here, at once
        self.trainer = train.Trainer(task, recipe, self.seed, self.device)
        # a new nn.Module is in training mode: snapshots, like every page, draw it with dropout off (each training
        # step turns it on for itself and off again)
        self.trainer.model.eval()
        self.snapshot()  # step 0: random weights

    @property
    def task(self) -> tasks.Task:
        return self.trainer.task

    @property
    def step(self) -> int:
        return self.trainer.step

    @property
    def finished(self) -> bool:
        return self.step >= self.steps

    @property
    def key(self) -> str:
        return f"yours-{self.task_name}"

    def needs(self) -> tuple[float, int]:
        """(seconds, bytes) the rest of the run asks for: its steps left at the measured pace (step_seconds), and the
        training copies of the weights, a step's activations, and the snapshots still to come, each the size of the
        first."""
        left = self.steps - self.step
        weights = sum(p.numel() * p.element_size() for p in self.trainer.model.parameters())
        snapshots = (left // self.every + 1) * memo.nbytes(self.snapshots[0].trace)
        return left * step_seconds(
            self.task_name, str(self.trainer.device)
        ), TRAINING_COPIES * weights + STEP_OVERHEAD + snapshots

    def device_bytes(self) -> int:
        """What the run adds on its device while it trains: the training copies of the weights and a step's
        activations (the GPU's books admit this; the snapshots are numpy on the CPU, in `needs` alone)."""
        weights = sum(p.numel() * p.element_size() for p in self.trainer.model.parameters())
        return TRAINING_COPIES * weights + STEP_OVERHEAD

    def advance(self, chunk: int) -> None:
        """Up to `chunk` more steps, stopping at each snapshot step so none is skipped."""
        for _ in range(min(chunk, self.steps - self.step)):
            self.trainer.train_step()
            if self.step % self.every == 0 or self.finished:
                self.snapshot()

    def advance_for(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        """Train step by step (snapshots included) until `seconds` have passed or the run is finished."""
        started = clock()
        while not self.finished and clock() - started < seconds:
            self.advance(1)

    def curve(self) -> tuple[list[int], list[float], list[float]]:
        """(steps, losses, accuracies) of every step so far: the loss curve's data."""
        history = self.trainer.history
        return [p.step for p in history], [p.loss for p in history], [p.accuracy for p in history]

    def head_scores(self) -> tuple[list[int], np.ndarray, np.ndarray]:
        """(snapshot steps, induction scores (S, L, H), previous-token scores (S, L, H)) over the run so far."""
        steps = [s.step for s in self.snapshots]
        return steps, np.stack([s.scores[0] for s in self.snapshots]), np.stack([s.scores[1] for s in self.snapshots])

    def schedule(self) -> tuple[range, list[float]]:
        """(steps, learning rates) of eq. 3 over the whole planned run, drawn beneath the loss."""
        recipe, planned = self.trainer.recipe, range(1, self.steps + 1)
        return planned, [train.rate(s, recipe.d_model, recipe.warmup, recipe.lr_factor) for s in planned]

    def snapshot(self) -> Snapshot:
        loaded = registry.from_task(self.key, "", "", self.trainer.model, self.task, f"{self.run_id}-live")
        taken = Snapshot(self.step, trace.run(loaded, self.probe, keep_all=True))
        if not self.snapshots or self.snapshots[-1].step != taken.step:
            self.snapshots.append(taken)
        return taken

    def publish(self) -> registry.LoadedModel:
        """A frozen copy of the weights as they are now, to explore like the shipped models."""
        model = copy.deepcopy(self.trainer.model).eval().requires_grad_(False)
        title = f"Your {self.task_name} model (trained here, step {self.step})"
        description = (
            f"Trained in this browser session for {self.step} steps (seed {self.seed}); "
            "it lasts as long as the session."
        )
        return registry.from_task(self.key, title, description, model, self.task, f"{self.run_id}-{self.step}")


@functools.cache
def adam_settings() -> tuple[tuple[float, float], float]:
    """(betas, eps) of the optimiser models.train.Trainer builds, read off one (a one-layer width-4 model: cheap)."""
    task = tasks.get(next(iter(train.RECIPES)))
    tiny = replace(train.RECIPES[task.name], d_model=4, n_heads=1, d_ff=4, n_layers=1)
    defaults = train.Trainer(task, tiny).optimizer.defaults
    return tuple(defaults["betas"]), defaults["eps"]


def dropout(task_name: str) -> float:
    """The dropout rate a task's model trains with (its Recipe, through the config the Trainer builds)."""
    task = tasks.get(task_name)
    return train.RECIPES[task.name].config(task).dropout
