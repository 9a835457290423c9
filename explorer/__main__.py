"""Headless CLI: `python -m explorer export --model M --text T [--max-tokens N] [--format json|csv|npz] [--out FILE]
[--layers 1,3-5] [--heads 2] [--what weights,scores,qkv] [--ablate L.H[,L.H...] [--ablation zero|mean|resample]]
[--device cpu|cuda|cuda:N|auto]`: the
attention of every layer and head (or the chosen ones), from the clean model or with some heads turned off (their
output replaced before W_O, models.ablation).

`python -m explorer corpus --model M (--file F | --sample) [--field NAME] [--max-tokens N] [--format csv|json]
[--out FILE] [--scheduler tcp://HOST:8786 | --workers N] [--device D]`: every head's statistics over many texts
(explorer.run.corpus), one row a layer and head; in this process (on --device), or on a Dask cluster's CPUs
(explorer.run.corpus_cluster)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub, whatever else is imported


class CliError(Exception):
    """A usage or input problem reported as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + traceback
        raise CliError(message)


def build_parser(prog: str = "python -m explorer") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Export a model's attention on a text, or its heads' statistics over many.")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    export = commands.add_parser("export", help="attention weights of every layer and head, as JSON, CSV or .npz")
    export.add_argument("--list-models", action="store_true", help="print the model keys, one per line")
    export.add_argument("--model", help="model key (see --list-models), or a model folder or .gguf file")
    source = export.add_mutually_exclusive_group()
    source.add_argument("--text", help="the sentence to run")
    source.add_argument("--example", action="store_true", help="use the model's own example sentence")
    export.add_argument("--max-tokens", type=int, help="cut the input at this many tokens (default: model maximum)")
    export.add_argument("--format", choices=("json", "csv", "npz"), default="json")
    export.add_argument("--out", metavar="FILE", help="write here instead of to stdout (needed for npz)")
    export.add_argument(
        "--layers", metavar="1,3-5", help="only these layers, counted from 1 as the pages show them (default: all)"
    )
    export.add_argument("--heads", metavar="1,3-5", help="only these heads of each written layer (default: all)")
    export.add_argument(
        "--what",
        metavar="weights,scores,qkv",
        help="npz: what to write per layer, the softmax weights (the default), the scaled scores before the mask, "
        "and/or q, k and v",
    )
    export.add_argument(
        "--target", help="encoder-decoders: the output to compute the loss against (default: the right answer)"
    )
    export.add_argument(
        "--ablate",
        metavar="L.H[,L.H...]",
        help="run with these heads turned off, counted from 1 as the pages show them; a model with several attention "
        "kinds needs the kind first: encoder:1.2, decoder:2.1, cross:2.3",
    )
    export.add_argument(
        "--ablation",
        choices=("zero", "mean", "resample"),
        help="with --ablate: what a turned-off head writes: nothing (zero, the default), its mean output over a sample "
        "of texts the model reads (mean), or its output on another text of that sample, position by position "
        "(resample)",
    )
    export.add_argument(
        "--corrupt",
        metavar="TEXT",
        help="activation patching (decoder-only models): a corrupted copy of --text with as many tokens; adds "
        '"patching" with the share of the logit difference each head and each residual state restores',
    )
    export.add_argument("--answer", help="with --corrupt: the right answer, one token (the clean text's next)")
    export.add_argument("--wrong", help="with --corrupt: the wrong answer, one token (the corrupted text's next)")
    corpus = commands.add_parser("corpus", help="every head's statistics over many texts, as CSV or JSON")
    corpus.add_argument("--model", required=True, help="model key (see export --list-models), or a folder or .gguf")
    texts = corpus.add_mutually_exclusive_group(required=True)
    texts.add_argument(
        "--file",
        metavar="F",
        help="a .txt (one text a line), .csv (a 'text' column), .jsonl (a 'text' field) or .parquet (a 'text' "
        "column) file, or a quoted glob of many ('corpus/*.parquet')",
    )
    texts.add_argument("--sample", action="store_true", help="the app's own sample texts for this model")
    corpus.add_argument("--field", help="with --file: the column or field that holds the texts (default 'text')")
    where = corpus.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler", metavar="tcp://HOST:8786", help="run the batches on this Dask scheduler's workers"
    )
    where.add_argument(
        "--workers", type=int, metavar="N", help="run the batches on N Dask worker processes on this machine"
    )
    corpus.add_argument("--max-tokens", type=int, help="cut each text at this many tokens (default: model maximum)")
    corpus.add_argument("--batch-size", type=int, default=32, help="texts run together (default 32)")
    corpus.add_argument("--format", choices=("csv", "json"), default="csv")
    corpus.add_argument("--out", metavar="FILE", help="write here instead of to stdout")
    for command in (export, corpus):
        command.add_argument(
            "--device",
            default="cpu",
            help="where the model runs: cpu (the default), cuda, cuda:N, or auto (the first GPU, else the CPU)",
        )
    return parser


def _device(args: argparse.Namespace):
    """--device checked before any model loads (models.device.DeviceError, one line, for one this machine lacks)."""
    from attention_explorer.models import device

    try:
        return device.resolve(args.device)
    except device.DeviceError as e:
        raise CliError(f"--device: {e}") from None


def _load(name: str, where):
    """The model a --model names (a key or a path), on the device `where`."""
    from attention_explorer.models import device, load_plan, registry

    spec = registry.MODELS.get(name) or registry.path_spec(Path(name).stem or name, Path(name).expanduser())
    plan = load_plan.for_spec(spec)
    if plan is not None and plan.worth_saying:  # a GGUF file's first load: a minute or more, said before it starts
        print(plan.line(spec.title), file=sys.stderr, flush=True)
    loaded = registry.load(name) if name in registry.MODELS else registry.from_path(name)
    return device.place(loaded, where)


def export(args: argparse.Namespace) -> None:
    from attention_explorer.explorer.app import export as to_data
    from attention_explorer.explorer.experiments import ablate, patching
    from attention_explorer.explorer.run import trace
    from attention_explorer.models import ablation, registry

    if args.list_models:
        print("\n".join(registry.MODELS))
        return
    if not args.model:
        raise CliError("--model is required (see --list-models)")
    if args.model not in registry.MODELS and not Path(args.model).expanduser().exists():
        raise CliError(f"unknown model {args.model!r}; choose from {', '.join(registry.MODELS)}, or give a path")
    if args.text is None and not args.example:
        raise CliError("give --text TEXT or --example")
    if args.target is not None and args.format != "json":
        raise CliError("--target applies to the JSON export only")
    if args.ablation is not None and args.ablate is None:
        raise CliError("--ablation needs --ablate: name the heads to turn off")
    patched = (args.corrupt, args.answer, args.wrong)
    if any(p is not None for p in patched) and any(p is None for p in patched):
        raise CliError("patching needs all three of --corrupt, --answer and --wrong")
    if args.corrupt is not None and (args.format != "json" or args.ablate is not None):
        raise CliError("--corrupt applies to the JSON export, without --ablate")
    if args.what is not None and args.format != "npz":
        raise CliError("--what applies to the npz export only")
    what = to_data.npz_what(args.what or "weights")
    out = _out_path(args.out, args.format)
    loaded = _load(args.model, _device(args))
    if args.target is not None and not loaded.is_encoder_decoder:
        why = " (a decoder-only model's target is its own text)" if loaded.is_decoder_only else ""
        raise CliError(f"--target needs an encoder-decoder model; {args.model!r} is {loaded.family.shape}{why}")
    text = loaded.example if args.example else args.text
    if args.corrupt is not None:  # checked before the long runs: PatchingError (a ValueError) says what is wrong
        try:
            patching.setup(loaded, text, args.corrupt, args.answer, args.wrong, args.max_tokens or loaded.max_tokens)
        except patching.NotOneToken as e:  # suggested as a shell takes it: --answer ' Sarah', its space quoted
            flag = "--answer" if e.what == "right answer" else "--wrong"
            raise CliError(f"{e.problem}: write one token, e.g. {flag} {shlex.quote(e.typed)}") from e
    chosen = to_data.selection(args.layers, args.heads, ablate.model_shapes(loaded))  # before a long run, not after
    heads, ablated, replaced = (), None, None
    if args.ablate is not None:  # AblationError (a ValueError) for a head the model lacks, none, or every head
        heads = tuple(ablation.parse(args.ablate, ablate.model_shapes(loaded)))
        replaced = ablate.text_replacement(loaded, args.ablation or "zero", text, args.max_tokens)
        ablated = ablate.make(loaded, heads, replaced.method, replaced)
    result = trace.run(loaded, text, args.max_tokens, ablation=ablated)
    if result.truncated:
        kept = len(result.source_tokens)
        print(f"warning: input truncated to {kept} tokens ({result.truncated} tokens cut)", file=sys.stderr)
    if args.format == "npz":
        assert out is not None
        to_data.write_npz(
            result, out, chosen, what, to_data.ablation_document(heads, args.ablation or "zero", replaced)
        )
    elif args.format == "csv":
        with _opened(out) as stream:
            to_data.write_csv(result, stream, chosen)
    else:
        document = {
            **to_data.to_document(result, chosen),
            **to_data.ablation_document(heads, args.ablation or "zero", replaced),
            **to_data.forward_document(loaded, result, args.target or "", ablated),
            **to_data.lens_document(loaded, result, ablated),
        }
        if args.corrupt is not None:
            limit = args.max_tokens or loaded.max_tokens
            document |= patching.document(loaded, text, args.corrupt, args.answer, args.wrong, limit)
        with _opened(out) as stream:
            json.dump(document, stream, ensure_ascii=False)
            stream.write("\n")


def corpus(args: argparse.Namespace) -> None:
    """Per-head statistics over a corpus (explorer.run.corpus): one row a layer and head, counted from 0."""
    from attention_explorer.explorer.experiments import sample
    from attention_explorer.explorer.run import corpus as run_corpus
    from attention_explorer.explorer.run import corpus_cluster, corpus_files, corpus_input, corpus_stats
    from attention_explorer.models import registry

    if args.model not in registry.MODELS and not Path(args.model).expanduser().exists():
        raise CliError(f"unknown model {args.model!r}; choose from {', '.join(registry.MODELS)}, or give a path")
    if args.batch_size < 1:
        raise CliError(f"--batch-size must be at least 1, not {args.batch_size}")
    if args.field is not None and not args.file:
        raise CliError("--field names a column or field of --file's texts; give --file too")
    out = _out_path(args.out, args.format)
    where = _device(args)
    # a bad file is refused before the model loads, an unreachable scheduler before too
    found = corpus_files.read(args.file, args.field or corpus_input.TEXT_COLUMN) if args.file else None
    with _cluster(args) as client:
        loaded = _load(args.model, where)
        prepared = corpus_input.prepare(loaded, found or sample.corpus(loaded), args.max_tokens)
        with _bar(len(prepared.encodings)) as progress:
            if client is None:
                stats = run_corpus.run(loaded, prepared, args.batch_size, progress)
            else:
                model = args.model if args.model in registry.MODELS else str(Path(args.model).expanduser().resolve())
                stats = corpus_cluster.run(loaded, prepared, client, model, args.batch_size, progress)
    for note in stats.notes:
        print(f"warning: {note}", file=sys.stderr)
    with _opened(out) as stream:
        if args.format == "json":
            json.dump(stats.document(), stream, ensure_ascii=False)
            stream.write("\n")
        else:
            stream.write(corpus_stats.to_csv(stats))


def _cluster(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """--scheduler's or --workers' Dask client (explorer.run.corpus_cluster), or None: the run stays in this process."""
    from attention_explorer.explorer.run import corpus_cluster

    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be at least 1, not {args.workers}")
    if args.scheduler is None and args.workers is None:
        return contextlib.nullcontext(None)
    return corpus_cluster.connected(args.scheduler, args.workers)


@contextlib.contextmanager
def _bar(total: int) -> Iterator:
    """A progress bar on a terminal's stderr, fed progress(texts done, texts); nothing when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="text", file=sys.stderr, leave=False) as bar:
        yield lambda done, _: bar.update(done - bar.n)


def _out_path(out: str | None, file_format: str) -> Path | None:
    """--out checked before the model runs: a file in a folder that exists; npz is never written to a terminal."""
    if out is None:
        if file_format == "npz":
            raise CliError("--format npz needs --out FILE: a binary file is not written to stdout")
        return None
    path = Path(out)
    if path.is_dir():
        raise CliError(f"--out {out}: is a folder; name a file")
    if not path.absolute().parent.is_dir():
        raise CliError(f"--out {out}: the folder {path.absolute().parent} does not exist")
    return path


@contextlib.contextmanager
def _opened(out: Path | None) -> Iterator[TextIO]:
    """stdout, or the --out file (written as UTF-8 whatever the locale)."""
    if out is None:
        yield sys.stdout
        return
    with out.open("w", encoding="utf-8", newline="") as stream:
        yield stream


def _expected() -> tuple[type[Exception], ...]:
    """The errors that are the input's, said in one line with exit status 2."""
    from attention_explorer.explorer.run.corpus_cluster import ClusterError
    from attention_explorer.models.pretrained import ModelFolderError
    from attention_explorer.models.registry import ModelLoadError
    from attention_explorer.models.tokenize import TokenizeError

    return (CliError, TokenizeError, ModelFolderError, ModelLoadError, ClusterError, ValueError)


def main(argv: list[str] | None = None, prog: str = "python -m explorer") -> int:
    from attention_explorer.explorer.run import corpus_cluster

    try:
        args = build_parser(prog).parse_args(argv)
        if args.command not in ("export", "corpus"):
            raise CliError("choose a command: export or corpus")
        if args.command == "corpus" and args.scheduler:  # before torch is imported: said at once when unreachable
            corpus_cluster.probe(args.scheduler)
        (export if args.command == "export" else corpus)(args)
        return 0
    except (CliError, corpus_cluster.ClusterError) as e:  # caught before _expected() imports torch
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` closed the pipe: not an error of ours
        return 0
    except Exception as e:
        if isinstance(e, _expected()):
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)  # anything else still one line, never a traceback
        return 1


if __name__ == "__main__":
    sys.exit(main())
