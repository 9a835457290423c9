"""Training: the paper's schedule, batches, reproducibility, batched greedy decoding, and the shipped checkpoints."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import torch

from attention_explorer.models import tasks, train

TINY = train.Recipe(d_model=32, n_heads=2, d_ff=64, n_layers=1, steps=40, batch_size=16, warmup=20, dropout=0.0)


def test_rate_warms_up_linearly_then_decays_as_inverse_square_root():
    d, warmup = 64, 100
    assert train.rate(1, d, warmup) == pytest.approx(d**-0.5 * warmup**-1.5)
    assert train.rate(50, d, warmup) == pytest.approx(50 * train.rate(1, d, warmup))
    peak = train.rate(warmup, d, warmup)
    assert peak == pytest.approx(d**-0.5 * warmup**-0.5)
    assert train.rate(400, d, warmup) == pytest.approx(peak / 2)
    assert max(train.rate(s, d, warmup) for s in range(1, 1000)) == peak


def test_collate_pads_and_places_bos_and_eos():
    task = tasks.get("reverse")
    batch = [tasks.Pair(("one", "two"), ("two", "one"), (1, 0)), tasks.Pair(("six",), ("six",), (0,))]
    src, tgt_in, tgt_out = train.collate(task, batch)
    ids = task.source.token_to_id
    assert src.tolist() == [[ids("one"), ids("two"), tasks.EOS_ID], [ids("six"), tasks.EOS_ID, tasks.PAD_ID]]
    assert tgt_in.tolist() == [[tasks.BOS_ID, ids("two"), ids("one")], [tasks.BOS_ID, ids("six"), tasks.PAD_ID]]
    assert tgt_out.tolist() == [[ids("two"), ids("one"), tasks.EOS_ID], [ids("six"), tasks.EOS_ID, tasks.PAD_ID]]
    # collate's source is exactly what the tokenizer gives the app
    assert list(src[0]) == list(task.source.encode("one two", 32).ids)


def test_collate_text_shifts_the_text_by_one_word_and_pads():
    task = tasks.get("induction")
    batch = [tasks.next_by_induction(("one", "two") * 2), tasks.next_by_induction(("six", "six"))]
    text_in, text_out = train.collate_text(task, batch)
    ids = task.source.token_to_id
    one, two, six = ids("one"), ids("two"), ids("six")
    assert text_in.tolist() == [[tasks.BOS_ID, one, two, one], [tasks.BOS_ID, six, tasks.PAD_ID, tasks.PAD_ID]]
    assert text_out.tolist() == [[one, two, one, two], [six, six, tasks.PAD_ID, tasks.PAD_ID]]
    # the input is what the tokenizer gives the app, less the last word
    assert list(text_in[0]) == list(task.source.encode("one two one two", 32).ids[:-1])
    inputs, target = train.batch_of(task, batch)
    assert len(inputs) == 1 and torch.equal(inputs[0], text_in) and torch.equal(target, text_out)


def test_a_decoder_only_task_trains_a_decoder_only_model_on_every_next_word():
    task = tasks.get("induction")
    trainer = train.Trainer(task, replace(TINY, steps=10), seed=0)
    config = trainer.model.config
    assert config.shape == "decoder-only" and config.n_decoder_layers == TINY.n_layers
    assert config.vocab_size == config.target_vocab_size == task.source.vocab_size
    trainer.run(10)
    assert trainer.history[-1].loss < trainer.history[0].loss
    # the repeat accuracy scores the next words from the repeat's second word on, teacher-forced
    pair = tasks.pairs(task, 1, seed=1)[0]
    text_in, text_out = train.collate_text(task, [pair])
    with torch.inference_mode():
        right = trainer.model(text_in).logits[0].argmax(-1) == text_out[0]  # (T,)
    n = tasks.repeat_start(pair.source)
    assert train.repeat_accuracy(trainer.model, task, [pair]) == pytest.approx(right[n + 1 : 2 * n].double().mean())


def test_training_is_reproducible_from_the_seed_and_lowers_the_loss():
    task = tasks.get("reverse")
    runs = [train.Trainer(task, replace(TINY, dropout=0.1), seed) for seed in (3, 3, 4)]
    for run in runs:
        run.run(TINY.steps)
    losses = [[p.loss for p in run.history] for run in runs]
    assert losses[0] == losses[1]
    assert losses[0] != losses[2]
    assert sum(losses[0][-5:]) / 5 < sum(losses[0][:5]) / 5 - 0.3


def test_generate_batches_rows_exactly_like_single_greedy_decoding():
    task = tasks.get("reverse")
    model = train.Trainer(task, TINY, 1).model.eval()
    pairs = tasks.pairs(task, 6, seed=1)
    src, _, _ = train.collate(task, pairs)
    batched = model.generate(src, tasks.BOS_ID, tasks.EOS_ID, 8)
    for row, pair in zip(batched.tolist(), pairs, strict=True):
        single = model.greedy_decode(torch.tensor([task.source.encode(" ".join(pair.source), 32).ids]), 1, 2, 8)
        assert row[: len(single)] == single
        assert all(t == tasks.PAD_ID for t in row[len(single) :])


@pytest.fixture(scope="module", params=list(tasks.TASKS))
def shipped(request):
    return train.load(request.param)


PASS_MARK = {"exact_match": 0.98, "repeat_accuracy": 0.95}


def test_shipped_checkpoint_passes_on_a_new_heldout_draw(shipped):
    model, task, record = shipped
    name, score = train.metric(task)
    heldout = tasks.pairs(task, 500, seed=31337)  # a seed neither training nor the recorded evaluation used
    assert score(model, task, heldout) >= PASS_MARK[name]
    assert record["seed"] == 0 and record["command"].startswith("python -m models.train --task " + task.name)


def test_shipped_checkpoint_is_small_and_records_how_it_was_made(shipped):
    _, task, record = shipped
    name, _ = train.metric(task)
    weights, meta = train.checkpoint_paths(task.name)
    assert weights.stat().st_size < 4_000_000
    saved = json.loads(meta.read_text())
    assert saved[f"heldout_{name}"] >= PASS_MARK[name] and saved["train_seconds"] <= 300
    # the shipped weights come from today's recipe (a field the record lacks was added later, at its default)
    assert {**asdict(train.Recipe()), **saved["recipe"]} == asdict(train.RECIPES[task.name])


def test_reversal_cross_attention_is_the_anti_diagonal():
    model, task, _ = train.load("reverse")
    hits = total = 0
    for pair in tasks.pairs(task, 200, seed=8):
        src, tgt_in, _ = train.collate(task, [pair])
        with torch.inference_mode():
            out = model(src, tgt_in)
        # last decoder layer, mean over heads; the row that writes target token i should look at source n-1-i
        chosen = out.decoder.layers[-1].cross_attn.weights[0].mean(0).argmax(-1)[: len(pair.target)]
        hits += sum(int(c) == a for c, a in zip(chosen, pair.alignment, strict=True))
        total += len(pair.target)
    assert hits / total >= 0.9


def test_cli_lists_tasks_and_evaluates(capsys):
    assert train.main(["--list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == list(tasks.TASKS)
    assert train.main(["--task", "reverse", "--evaluate", "--seed", "5", "--n", "200"]) == 0
    score = float(capsys.readouterr().out.strip().removeprefix("exact_match: "))
    assert 0.98 <= score <= 1
    assert train.main(["--task", "induction", "--evaluate", "--seed", "5", "--n", "100"]) == 0
    score = float(capsys.readouterr().out.strip().removeprefix("repeat_accuracy: "))
    assert 0.95 <= score <= 1


def test_cli_trains_and_saves_a_checkpoint_that_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(train.RECIPES, "reverse", TINY)
    assert (
        train.main(
            ["--task", "reverse", "--seed", "2", "--steps", "12", "--n", "20", "--out", str(tmp_path), "--quiet"]
        )
        == 0
    )
    model, task, record = train.load("reverse", tmp_path)
    assert record["seed"] == 2 and record["recipe"]["steps"] == 12 and "--seed 2" in record["command"]
    assert "exact_match:" in capsys.readouterr().out


def test_cli_reports_a_missing_checkpoint(tmp_path, capsys):
    assert train.main(["--task", "reverse", "--evaluate", "--out", str(tmp_path)]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_cli_trains_a_decoder_only_checkpoint_and_watches_its_heads(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(train.RECIPES, "induction", replace(TINY, label_smoothing=0.0))
    threads = torch.get_num_threads()
    argv = ["--task", "induction", "--steps", "4", "--n", "20", "--out", str(tmp_path), "--quiet", "--log-every", "2"]
    assert train.main(argv) == 0
    assert torch.get_num_threads() == threads  # the training threads are given back
    model, task, record = train.load("induction", tmp_path)
    assert model.config.shape == "decoder-only" and record["threads"] == 2
    assert 0 <= record["heldout_repeat_accuracy"] <= 1 and "heldout_exact_match" not in record
    assert [w["step"] for w in record["watched"]] == [2, 4]
    assert {"repeat_accuracy", "induction_score", "previous_token_score"} <= set(record["watched"][0])
    assert "repeat_accuracy:" in capsys.readouterr().out
