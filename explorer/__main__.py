"""Headless CLI: `python -m explorer export --model M --text T [--max-tokens N] [--format json|csv]
[--ablate L.H[,L.H...] [--ablation zero|mean]]`: the attention of every layer and head, from the clean model or
with some heads turned off (their output replaced before W_O, models.ablation)."""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub, whatever else is imported


class CliError(Exception):
    """A usage or input problem reported as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + traceback
        raise CliError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m explorer", description="Export a model's attention on a text.")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    export = commands.add_parser("export", help="attention weights of every layer and head, as JSON or CSV")
    export.add_argument("--list-models", action="store_true", help="print the model keys, one per line")
    export.add_argument("--model", help="model key (see --list-models)")
    source = export.add_mutually_exclusive_group()
    source.add_argument("--text", help="the sentence to run")
    source.add_argument("--example", action="store_true", help="use the model's own example sentence")
    export.add_argument("--max-tokens", type=int, help="cut the input at this many tokens (default: model maximum)")
    export.add_argument("--format", choices=("json", "csv"), default="json")
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
        choices=("zero", "mean"),
        help="with --ablate: what a turned-off head writes, nothing (zero, the default) or its mean output over the "
        "model's example sentences (mean)",
    )
    return parser


def export(args: argparse.Namespace) -> None:
    from explorer.app import export as to_data
    from explorer.experiments import ablate
    from explorer.run import trace
    from models import ablation, registry

    if args.list_models:
        print("\n".join(registry.MODELS))
        return
    if not args.model:
        raise CliError("--model is required (see --list-models)")
    if args.model not in registry.MODELS:
        raise CliError(f"unknown model {args.model!r}; choose from {', '.join(registry.MODELS)}")
    if args.text is None and not args.example:
        raise CliError("give --text TEXT or --example")
    if args.target is not None and args.format != "json":
        raise CliError("--target applies to the JSON export only")
    if args.ablation is not None and args.ablate is None:
        raise CliError("--ablation needs --ablate: name the heads to turn off")
    loaded = registry.load(args.model)
    if args.target is not None and not loaded.is_encoder_decoder:
        why = " (a decoder-only model's target is its own text)" if loaded.is_decoder_only else ""
        raise CliError(f"--target needs an encoder-decoder model; {args.model!r} is {loaded.family.shape}{why}")
    text = loaded.example if args.example else args.text
    heads, ablated = (), None
    if args.ablate is not None:  # AblationError (a ValueError) for a head the model lacks, none, or every head
        heads = tuple(ablation.parse(args.ablate, ablate.model_shapes(loaded)))
        ablated = ablate.make(loaded, heads, args.ablation or "zero")
    result = trace.run(loaded, text, args.max_tokens, ablation=ablated)
    if result.truncated:
        kept = len(result.source_tokens)
        print(f"warning: input truncated to {kept} tokens ({result.truncated} tokens cut)", file=sys.stderr)
    if args.format == "csv":
        to_data.write_csv(result, sys.stdout)
    else:
        document = {
            **to_data.to_document(result),
            **to_data.ablation_document(heads, args.ablation or "zero"),
            **to_data.forward_document(loaded, result, args.target or "", ablated),
            **to_data.lens_document(loaded, result, ablated),
        }
        json.dump(document, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")


def main(argv: list[str] | None = None) -> int:
    from models.pretrained import ModelFolderError
    from models.tokenize import TokenizeError

    try:
        args = build_parser().parse_args(argv)
        if args.command != "export":
            raise CliError("choose a command: export")
        export(args)
        return 0
    except (CliError, TokenizeError, ModelFolderError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` closed the pipe: not an error of ours
        return 0
    except Exception as e:  # anything else still gets one line, never a traceback
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
