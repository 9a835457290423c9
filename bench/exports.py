"""Every chart of every page exported as the Download button's PNG, to be opened and looked at: each page is run
through app.py (Streamlit's AppTest) on a sentence of each length, and each chart is rebuilt from exactly what the
page sent the browser and drawn by the same exporter (kaleido in the system Chromium).

`python -m bench.exports [--out DIR] [--models KEY ...] [--lengths N ...] [--only PAGE ...]`"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import plotly.graph_objects as go
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import downloads
from attention_explorer.models import registry
from bench.harness import ROOT
from bench.inputs import text_of

PAGES = tuple(sorted(p.stem for p in (ROOT / "explorer" / "pages").glob("[!_]*.py") if p.stem != "train"))
LENGTHS = (3, 16, 128, 512)
MODELS = ("minilm", "translate")


def run(out: Path, models=MODELS, lengths=LENGTHS, only: tuple[str, ...] = ()) -> list[Path]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for model in models:
        loaded = registry.load(model)
        for tokens in sorted({min(n, loaded.max_tokens) for n in lengths}):
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
            at.sidebar.selectbox[0].set_value(model).run()
            at.sidebar.number_input[0].set_value(tokens).run()
            at.sidebar.text_area[0].set_value(text_of(loaded, tokens)).run()
            for name in only or PAGES:
                at.switch_page(navigation.script(name)).run()
                for i, chart in enumerate(at.get("plotly_chart")):
                    spec = json.loads(chart.proto.spec)
                    spec["layout"].pop("template", None)  # Streamlit's chart theme: the Download draws without it
                    path = out / f"{model}_{tokens}_{name}_{i}.png"
                    path.write_bytes(downloads.to_png(go.Figure(spec)))
                    written.append(path)
                print(f"{model} {tokens} {name}: {len(at.get('plotly_chart'))} charts", flush=True)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "exports")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS)
    parser.add_argument("--only", nargs="+", default=())
    args = parser.parse_args()
    run(args.out, args.models, args.lengths, tuple(args.only))
