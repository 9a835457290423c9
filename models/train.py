"""Train the from-scratch Transformer on a toy task (section 5 of the paper: Adam, warm-up, label smoothing): the
encoder-decoder on translate and reverse, a decoder-only model on induction.

python -m models.train --list
python -m models.train --task reverse [--seed 0] [--steps N]
python -m models.train --task reverse --evaluate [--seed S]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from attention_explorer.models import device as devices
from attention_explorer.models import induction, tasks
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.transformer import Transformer

CHECKPOINTS = Path(__file__).parent / "checkpoints"
DEFAULT_SEED = 0
EVALUATION_SEED = 2026  # the default held-out draw of --evaluate; training never sees a held-out sentence


@dataclass(frozen=True)
class Recipe:
    """A task's model shape and training schedule."""

    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2
    steps: int = 2000
    batch_size: int = 64
    warmup: int = 400
    lr_factor: float = 1.0
    label_smoothing: float = 0.1  # section 5.4
    dropout: float = 0.1
    clip_norm: float = 1.0  # not in the paper: without it, small post-LN models here diverge after converging
    # added with the decoder-only task: a checkpoint record without them was trained with these defaults
    norm_first: bool = False
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"
    max_len: int = 32

    def config(self, task: tasks.Task) -> TransformerConfig:
        """n_layers encoder and n_layers decoder layers; a decoder-only task's model has n_layers decoder layers
        over one vocabulary."""
        return TransformerConfig(
            vocab_size=task.source.vocab_size,
            tgt_vocab_size=None if task.decoder_only else task.target.vocab_size,
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            n_encoder_layers=0 if task.decoder_only else self.n_layers,
            n_decoder_layers=self.n_layers,
            max_len=self.max_len,
            positional=self.positional,
            norm_first=self.norm_first,
            dropout=self.dropout,
            pad_id=tasks.PAD_ID,
        )


RECIPES: dict[str, Recipe] = {
    # half the paper's rate: at the full rate this small copy model keeps oscillating and ends below 98%
    "reverse": Recipe(steps=4000, lr_factor=0.5),
    "translate": Recipe(d_model=96, d_ff=256, steps=3000),
    # two layers: a previous-token head, then an induction head reading it. Pre-LN with learned positions forms it
    # between steps 300 and 400 (seeds 0-3); sinusoids learn the repeat another way (no induction head), dropout and
    # a higher rate delay it past 800 steps, and there is nothing to smooth: the repeat has one right next word
    "induction": Recipe(
        steps=800, batch_size=128, label_smoothing=0.0, dropout=0.0, norm_first=True, positional="learned"
    ),
}


def rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), eq. (3), with step counted from 1."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def collate(task: tasks.Task, batch: list[tasks.Pair]) -> tuple[Tensor, Tensor, Tensor]:
    """Padded source ids (source <eos>, as Vocabulary.encode gives), decoder input (<bos> target) and output
    (target <eos>)."""
    src_len = max(len(p.source) for p in batch) + 1
    tgt_len = max(len(p.target) for p in batch) + 1
    src = torch.full((len(batch), src_len), tasks.PAD_ID, dtype=torch.long)  # (B, S)
    tgt_in = torch.full((len(batch), tgt_len), tasks.PAD_ID, dtype=torch.long)  # (B, T)
    tgt_out = torch.full((len(batch), tgt_len), tasks.PAD_ID, dtype=torch.long)  # (B, T)
    for i, pair in enumerate(batch):
        source, target = [*task.source.ids(pair.source), tasks.EOS_ID], task.target.ids(pair.target)
        src[i, : len(source)] = torch.tensor(source)
        tgt_in[i, : len(target) + 1] = torch.tensor([tasks.BOS_ID, *target])
        tgt_out[i, : len(target) + 1] = torch.tensor([*target, tasks.EOS_ID])
    return src, tgt_in, tgt_out


def collate_text(task: tasks.Task, batch: list[tasks.Pair]) -> tuple[Tensor, Tensor]:
    """A decoder-only batch, padded: input <bos> text[:-1] (TextVocabulary.encode's ids without the last word) and
    output text, each input position's next word; the loss runs over the whole text and ignores padding."""
    length = max(len(p.source) for p in batch)
    text_in = torch.full((len(batch), length), tasks.PAD_ID, dtype=torch.long)  # (B, T)
    text_out = torch.full((len(batch), length), tasks.PAD_ID, dtype=torch.long)  # (B, T)
    for i, pair in enumerate(batch):
        ids = [tasks.BOS_ID, *task.source.ids(pair.source)]
        text_in[i, : len(ids) - 1] = torch.tensor(ids[:-1])
        text_out[i, : len(ids) - 1] = torch.tensor(ids[1:])
    return text_in, text_out


def batch_of(task: tasks.Task, batch: list[tasks.Pair]) -> tuple[tuple[Tensor, ...], Tensor]:
    """(the model's inputs, the next-token targets) of a batch, for the task's shape."""
    if task.decoder_only:
        text_in, text_out = collate_text(task, batch)
        return (text_in,), text_out
    src, tgt_in, tgt_out = collate(task, batch)
    return (src, tgt_in), tgt_out


@dataclass
class Progress:
    """What one training step reports."""

    step: int
    loss: float
    accuracy: float  # next-token accuracy under teacher forcing, padding excluded
    lr: float


def cuda_of(device: torch.device) -> list[int]:
    """The CUDA device whose generator a model on `device` draws its dropout from: [index], or [] off CUDA."""
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@dataclass
class Trainer:
    """A model, its optimiser and its data stream, advanced one step at a time (the CLI and the app share it)."""

    task: tasks.Task
    recipe: Recipe
    seed: int = DEFAULT_SEED
    device: torch.device | str = "cpu"  # where the model trains (models.device.resolve's names)
    model: Transformer = field(init=False)
    history: list[Progress] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.device = devices.resolve(self.device)
        self._cuda = cuda_of(self.device)
        with torch.random.fork_rng(devices=self._cuda):
            torch.manual_seed(self.seed)
            # initialised on the CPU from the seed (the same weights on any device), then moved
            self.model = Transformer(self.recipe.config(self.task)).to(self.device)
            self._generator = torch.Generator().manual_seed(self.seed)
            # on a GPU dropout draws from the device's generator: seeded too, its state kept as the CPU's is
            self._cuda_state = None
            if self._cuda:
                torch.cuda.manual_seed_all(self.seed)
                self._cuda_state = torch.cuda.get_rng_state(self._cuda[0])
        self._data: Iterator[tasks.Pair] = tasks.stream(self.task, self.seed, "train")
        # section 5.3: Adam with beta2 = 0.98 and eps = 1e-9, learning rate from eq. (3)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=tasks.PAD_ID, label_smoothing=self.recipe.label_smoothing)

    @property
    def step(self) -> int:
        return len(self.history)

    def train_step(self) -> Progress:
        step = self.step + 1
        lr = rate(step, self.recipe.d_model, self.recipe.warmup, self.recipe.lr_factor)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        inputs, tgt_out = batch_of(self.task, [next(self._data) for _ in range(self.recipe.batch_size)])
        inputs, tgt_out = tuple(x.to(self.device) for x in inputs), tgt_out.to(self.device)
        self.model.train()
        with torch.random.fork_rng(devices=self._cuda):
            # dropout draws from the trainer's own generator state, so a run is reproducible from its seed
            torch.random.set_rng_state(self._generator.get_state())
            if self._cuda:
                torch.cuda.set_rng_state(self._cuda_state, self._cuda[0])
            logits = self.model(*inputs).logits  # (B, T, V)
            self._generator.set_state(torch.random.get_rng_state())
            if self._cuda:
                self._cuda_state = torch.cuda.get_rng_state(self._cuda[0])
        loss = self.loss_fn(logits.flatten(0, 1), tgt_out.flatten())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.clip_norm)
        self.optimizer.step()
        self.model.eval()
        real = tgt_out != tasks.PAD_ID
        accuracy = float((logits.argmax(-1) == tgt_out)[real].float().mean())
        progress = Progress(step, loss.item(), accuracy, lr)
        self.history.append(progress)
        return progress

    def run(self, steps: int, on_step: Callable[[Progress], None] | None = None) -> None:
        for _ in range(steps):
            progress = self.train_step()
            if on_step is not None:
                on_step(progress)


def decode_batch(model: Transformer, task: tasks.Task, sources: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Greedy translations of a batch of sources, as target words (eos and padding removed)."""
    batch = [tasks.Pair(s, (), ()) for s in sources]
    src, _, _ = collate(task, batch)
    src = src.to(devices.model_device(model))  # where the model is
    out = model.generate(src, tasks.BOS_ID, tasks.EOS_ID, max_len=src.size(1) + 4)
    words = []
    for row in out.tolist():
        ids = row[: row.index(tasks.EOS_ID)] if tasks.EOS_ID in row else row
        words.append(tuple(task.target.id_to_token(i) for i in ids))
    return words


def exact_match(model: Transformer, task: tasks.Task, pairs: list[tasks.Pair], batch_size: int = 256) -> float:
    """Share of pairs whose greedy output equals the target word for word."""
    model.eval()
    hits = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        outputs = decode_batch(model, task, [p.source for p in chunk])
        hits += sum(out == p.target for out, p in zip(outputs, chunk, strict=True))
    return hits / len(pairs)


def repeat_accuracy(model: Transformer, task: tasks.Task, pairs: list[tasks.Pair], batch_size: int = 256) -> float:
    """Share of the repeat's positions, from its second word on, where the teacher-forced argmax next word is right
    (its first word cannot be known: nothing says where the first half ends)."""
    model.eval()
    hits = total = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        text_in, text_out = collate_text(task, chunk)
        where = devices.model_device(model)
        text_in, text_out = text_in.to(where), text_out.to(where)
        with torch.inference_mode():
            right = model(text_in).logits.argmax(-1) == text_out  # (B, T)
        scored = torch.zeros_like(right)
        for i, pair in enumerate(chunk):
            # text_out[i, t] is word t, so the repeat's second word on is n + 1 .. 2n - 1
            n = tasks.repeat_start(pair.source)
            scored[i, n + 1 : len(pair.source)] = True
        hits += int(right[scored].sum())
        total += int(scored.sum())
    return hits / total


def metric(task: tasks.Task) -> tuple[str, Callable[[Transformer, tasks.Task, list[tasks.Pair]], float]]:
    """The held-out figure of a task's checkpoint: its name and how it is computed."""
    return ("repeat_accuracy", repeat_accuracy) if task.decoder_only else ("exact_match", exact_match)


# --- checkpoints -----------------------------------------------------------------------------------------


class CheckpointError(ValueError):
    """A checkpoint that is missing or does not fit the task's code."""


def checkpoint_paths(task_name: str, folder: Path = CHECKPOINTS) -> tuple[Path, Path]:
    return folder / f"{task_name}.safetensors", folder / f"{task_name}.json"


def save(trainer: Trainer, folder: Path, record: dict) -> Path:
    """Weights as safetensors and, next to them, the config, vocabularies and how they were made."""
    folder.mkdir(parents=True, exist_ok=True)
    weights, meta = checkpoint_paths(trainer.task.name, folder)
    save_model(trainer.model, str(weights))
    document = {
        "task": trainer.task.name,
        "config": asdict(trainer.model.config),
        "recipe": asdict(trainer.recipe),
        "seed": trainer.seed,
        "source_vocabulary": list(trainer.task.source.words),
        "target_vocabulary": list(trainer.task.target.words),
        **record,
    }
    meta.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return weights


def load(task_name: str, folder: Path = CHECKPOINTS) -> tuple[Transformer, tasks.Task, dict]:
    """The checkpoint's model (eval mode, no grad), its task and its record."""
    task = tasks.get(task_name)
    weights, meta = checkpoint_paths(task_name, folder)
    if not weights.is_file() or not meta.is_file():
        command = f"python -m models.train --task {task_name}"
        raise CheckpointError(f"no checkpoint for {task_name!r} in {folder}: run {command}")
    try:
        record = json.loads(meta.read_text())
        vocabularies = record["source_vocabulary"], record["target_vocabulary"]
        config = TransformerConfig(**record["config"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"cannot read {meta.name} in {folder}: {type(e).__name__}: {e}") from None
    if vocabularies != (list(task.source.words), list(task.target.words)):
        raise CheckpointError(f"the {task_name!r} checkpoint was trained on another vocabulary: retrain it")
    model = Transformer(config)
    try:
        load_model(model, str(weights))
    except (OSError, RuntimeError, SafetensorError) as e:  # truncated, corrupt, or weights of another shape
        raise CheckpointError(f"cannot load {weights.name} in {folder}: {str(e).splitlines()[0][:300]}") from None
    return model.eval().requires_grad_(False), task, record


# --- command line ----------------------------------------------------------------------------------------


def _train(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    task = tasks.get(args.task)
    recipe = RECIPES[task.name]
    if args.steps:
        recipe = replace(recipe, steps=args.steps)
    trainer = Trainer(task, recipe, args.seed, args.device)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    print(f"task {task.name}: {n_params:,} parameters, {recipe.steps} steps of {recipe.batch_size}, seed {args.seed}")
    name, score_of = metric(task)
    # a decoder-only run also logs its held-out figure and its heads' scores (untimed: see train_seconds)
    watched: list[dict] = []
    probe = tasks.pairs(task, WATCH_PAIRS, EVALUATION_SEED) if task.decoder_only else []
    spent = 0.0
    with tqdm(total=recipe.steps, unit="step", file=sys.stderr, disable=args.quiet) as bar:

        def report(p: Progress) -> None:
            nonlocal spent
            bar.update(1)
            if p.step % 50 == 0:
                bar.set_postfix(loss=f"{p.loss:.3f}", acc=f"{p.accuracy:.3f}")
            if p.step % args.log_every == 0 or p.step == recipe.steps:
                line = f"step {p.step:5d}  loss {p.loss:.4f}  token_accuracy {p.accuracy:.4f}  lr {p.lr:.2e}"
                if probe:
                    paused = time.perf_counter()
                    watched.append({"step": p.step, "loss": round(p.loss, 4), **watch(trainer.model, task, probe)})
                    line += "".join(f"  {k} {v:.3f}" for k, v in watched[-1].items() if k not in ("step", "loss"))
                    spent += time.perf_counter() - paused
                bar.write(line)

        started = time.perf_counter()
        trainer.run(recipe.steps, report)
        seconds = time.perf_counter() - started - spent
    held_out = tasks.pairs(task, args.n, EVALUATION_SEED)
    score = score_of(trainer.model, task, held_out)
    print(f"trained in {seconds:.1f} s; {name}: {score:.4f} on {len(held_out)} held-out pairs")
    command = "python -m models.train " + " ".join(sys.argv[1:] if args.argv is None else args.argv)
    record = {
        "command": command.strip(),
        "train_seconds": round(seconds, 1),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        f"heldout_{name}": score,
        "heldout": {"seed": EVALUATION_SEED, "pairs": len(held_out)},
        "final": asdict(trainer.history[-1]),
        **({"watched": watched} if watched else {}),
    }
    path = save(trainer, Path(args.out), record)
    print(f"saved {path}")


WATCH_PAIRS = 200  # held-out texts a decoder-only run is scored on at each logged step


def watch(model: Transformer, task: tasks.Task, pairs: list[tasks.Pair]) -> dict[str, float]:
    """A decoder-only model mid-run: its held-out repeat accuracy, and its strongest induction head (last layer)
    and previous-token head (first layer) on the first 20 texts."""
    induction_scores, previous_scores = induction.model_scores(
        model, [[tasks.BOS_ID, *task.source.ids(p.source)] for p in pairs[:20]]
    )
    return {
        "repeat_accuracy": round(repeat_accuracy(model, task, pairs), 4),
        "induction_score": round(float(induction_scores[-1].max()), 4),
        "previous_token_score": round(float(previous_scores[0].max()), 4),
    }


def _evaluate(args: argparse.Namespace) -> None:
    model, task, _ = load(args.task, Path(args.out))
    seed = EVALUATION_SEED if args.seed is None else args.seed
    name, score_of = metric(task)
    score = score_of(model, task, tasks.pairs(task, args.n, seed))
    print(f"{name}: {score:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.train", description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the tasks, one per line")
    parser.add_argument("--task", choices=list(tasks.TASKS))
    parser.add_argument("--evaluate", action="store_true", help="score the shipped checkpoint on held-out pairs")
    parser.add_argument("--seed", type=int, help=f"training seed (default {DEFAULT_SEED}) or held-out draw")
    parser.add_argument("--steps", type=int, help="training steps (default: the task's recipe)")
    parser.add_argument("--n", type=int, default=1000, help="held-out pairs to score (default 1000)")
    parser.add_argument("--out", default=str(CHECKPOINTS), help="checkpoint folder")
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2, help="torch threads while training (default 2)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--device", default="cpu", help="where to train: cpu (the default), cuda, cuda:N or auto")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.list:
        for task in tasks.TASKS.values():
            print(f"{task.name}  {task.description}")
        return 0
    if not args.task:
        parser.error("give --list, or --task NAME")
    if args.n < 1:
        parser.error("--n must be at least 1")
    try:
        if args.evaluate:
            _evaluate(args)
        else:
            args.seed = DEFAULT_SEED if args.seed is None else args.seed
            threads = torch.get_num_threads()
            torch.set_num_threads(args.threads)
            try:
                _train(args)
            finally:
                torch.set_num_threads(threads)
    except (CheckpointError, devices.DeviceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
