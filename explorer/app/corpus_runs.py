"""The corpus view's runs (explorer/run/corpus.py): a corpus's head statistics and one head's queries and keys, each
computed once for every session in the run store, admitted batch by batch with a progress bar and an estimate of
what is left. A corpus is named by its digest: the shared address carries the digest, never the texts, and the
server keeps the last CORPORA_KEPT corpora by it, so an address opens its corpus while the server still has it."""

from __future__ import annotations

import hashlib
import json
import time

import streamlit as st

from attention_explorer.explorer.app import shelf, store, waiting
from attention_explorer.explorer.experiments import sample
from attention_explorer.explorer.run import admission, corpus_input, corpus_points, corpus_stats, cost, memo
from attention_explorer.explorer.run import corpus as run_corpus
from attention_explorer.explorer.run.corpus_input import Corpus

CORPORA_KEPT = 32  # corpora the server keeps by digest (each at most corpus_input.MAX_BYTES of text)
DIGEST_CHARS = 16


def samples(model: str) -> Corpus:
    """The app's own sample texts for this model (explorer/experiments/sample.py: everyday English, or a toy task's
    inputs), as the command line's --sample reads them."""
    return sample.corpus(shelf.model(model))


def digest(corpus: Corpus) -> str:
    """A corpus's name in an address: the start of the SHA-256 of its texts (never the texts themselves)."""
    return hashlib.sha256(json.dumps(list(corpus.texts)).encode()).hexdigest()[:DIGEST_CHARS]


@st.cache_resource(show_spinner=False)
def corpora() -> memo.Recent:
    """The corpora this server was given, by digest: the last CORPORA_KEPT, shared by every session."""
    return memo.Recent(CORPORA_KEPT)


def keep(corpus: Corpus) -> str:
    """Keep a corpus under its digest for every session (a shared address opens it); returns the digest."""
    name = digest(corpus)
    corpora().put(name, corpus)
    return name


# A corpus tokenized is Python objects, not arrays: about 170 bytes a token measured (MiniLM; SmolLM2 210), counted as
# TOKEN_BYTES. A token covers at least one byte of text, so a corpus of n bytes and t texts holds at most n + 2t
# tokens (two markers a text), and t x max tokens: the estimate a preparation is admitted by.
TOKEN_BYTES = 256
PREPARE_SECONDS_PER_MIB = 1.2  # tokenizing: about 0.9 s a MiB on MiniLM (two cores), SmolLM2's a little slower
# The corpora prepared, shared by every session: one 10 MiB corpus of prose (about 2.5M tokens, 640 MB) fits; the
# memory gives way to runs like every cache's (explorer/app/waiting.py)
PREPARED_BYTES = 768 * 2**20


def _prepared_bytes(ready: corpus_input.Prepared) -> int:
    return TOKEN_BYTES * sum(len(e) for e in ready.encodings)


@st.cache_resource(show_spinner=False)
def prepared_corpora() -> memo.BoundedCache:
    """Corpora tokenized for a model, by model, revision, digest and max tokens: a page's rerun tokenizes nothing."""
    return memo.BoundedCache(PREPARED_BYTES, size=_prepared_bytes)


def prepare_cost(corpus: Corpus, max_tokens: int) -> admission.Cost:
    """A preparation's estimate: its time from the text's size, its memory from the most tokens it can hold."""
    size = sum(len(text.encode()) for text in corpus.texts)
    tokens = min(size + 2 * len(corpus.texts), len(corpus.texts) * max_tokens)
    return admission.Cost(PREPARE_SECONDS_PER_MIB * size / 2**20, TOKEN_BYTES * tokens)


def prepared(model: str, corpus: Corpus, max_tokens: int) -> corpus_input.Prepared:
    """The corpus tokenized for the model, each text cut at max_tokens (CorpusError: one line that says why), once
    per corpus for every session, admitted by its estimate."""
    loaded = shelf.model(model)
    return prepared_corpora().get(
        store.key("corpus_prepared", model, digest(corpus), max_tokens),
        lambda: store.compute(
            "Reading the texts with the model's tokenizer...",
            lambda: corpus_input.prepare(loaded, corpus, max_tokens),
            prepare_cost(corpus, max_tokens),
        ),
    )


def estimate(model: str, ready: corpus_input.Prepared) -> admission.Cost:
    """About how long the statistics take, and the most memory one batch adds."""
    return run_corpus.corpus_cost(shelf.model(model), ready)


def progress_text(message: str, done: int, texts: int, left: float) -> str:
    """The progress bar's words: "Running 40 texts through the model: 10 of 40 texts, about 3 s left"."""
    return f"{message} {done:,} of {corpus_input.texts(texts)}, {cost.about(left)} left"  # about() says "about"


def _batches(message: str, total: admission.Cost):
    """(progress, admit) for a run over a corpus's batches: a bar that counts the texts done and says about how long
    is left, from the run's own pace so far; each batch admitted by its memory in the lane of the whole run."""
    bar = st.progress(0.0, text=message)
    started = time.monotonic()

    def progress(done: int, texts: int) -> None:
        waiting.check_visitor()
        left = (time.monotonic() - started) / max(done, 1) * (texts - done)
        bar.progress(done / max(texts, 1), text=progress_text(message, done, texts, left))

    def admit(seconds: float, nbytes: int):
        needs = admission.Cost(total.seconds, nbytes, observed=False)  # the whole run's lane; a batch's share of it
        return waiting.admitted(needs, what="This corpus's next batch")

    return bar, progress, admit


def _stats_key(model: str, corpus: Corpus, max_tokens: int) -> tuple:
    return store.key("corpus_stats", model, digest(corpus), max_tokens)


def _points_key(model: str, corpus: Corpus, max_tokens: int, layer: int, head: int) -> tuple:
    return store.key("corpus_points", model, digest(corpus), max_tokens, layer, head)


def kept_stats(model: str, corpus: Corpus, max_tokens: int) -> corpus_stats.CorpusStats | None:
    """The statistics if some session ran them already (nothing is computed)."""
    return store.shared().peek(_stats_key(model, corpus, max_tokens))


def kept_points(model: str, corpus: Corpus, max_tokens: int, layer: int, head: int):
    """One head's queries and keys if some session drew them already (nothing is computed)."""
    return store.shared().peek(_points_key(model, corpus, max_tokens, layer, head))


def table_csv(stats: corpus_stats.CorpusStats) -> str:
    """The statistics as the command line writes them (python -m explorer corpus --out stats.csv)."""
    return corpus_stats.to_csv(stats)


SHARED = "Another visitor is running this same corpus: its result is shared, and this page waits for it..."


def _kept(name: tuple, message: str, needs: admission.Cost, work):
    """The value kept under `name`, else `work(progress, admit)` run once for every session, with a progress bar;
    a visitor who asks while another runs it waits for that run, saying so."""
    kept = store.shared().peek(name)
    if kept is not None:
        return kept
    if store.shared().computing(name):
        with st.spinner(SHARED):
            return store.shared().get(name, lambda: work(None, None))  # computed meanwhile, or run here after all
    bar, progress, admit = _batches(message, needs)
    try:
        return store.shared().get(name, lambda: work(progress, admit))
    finally:
        bar.empty()


def stats(model: str, corpus: Corpus, max_tokens: int) -> corpus_stats.CorpusStats:
    """Every head's statistics over the corpus (kept for every session under the corpus's digest)."""
    loaded, ready = shelf.model(model), prepared(model, corpus, max_tokens)
    return _kept(
        _stats_key(model, corpus, max_tokens),
        f"Running {corpus_input.texts(len(ready.encodings))} through the model:",
        estimate(model, ready),
        lambda progress, admit: run_corpus.run(loaded, ready, progress=progress, admit=admit),
    )


def points(model: str, corpus: Corpus, max_tokens: int, layer: int, head: int) -> corpus_points.QueryKeyPoints:
    """One head's queries and keys over the corpus, in two dimensions (kept like the statistics)."""
    loaded, ready = shelf.model(model), prepared(model, corpus, max_tokens)
    whole = estimate(model, ready)
    layers = len(run_corpus.reading_stack(loaded).layers)
    return _kept(
        _points_key(model, corpus, max_tokens, layer, head),
        f"Reading layer {layer + 1}'s queries and keys:",
        admission.Cost(whole.seconds * (layer + 1) / layers, whole.bytes),  # the layers up to the chosen one
        lambda progress, admit: corpus_points.query_key_points(
            loaded, ready, layer, head, progress=progress, admit=admit
        ),
    )
