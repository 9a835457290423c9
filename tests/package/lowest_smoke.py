"""The smoke run of tests/package/test_lower_bounds.py, inside an environment holding each dependency's lowest
allowed version: import the package, export a run through the command line, run the notebook API, let transformers
read a tiny GGUF file (gguf, accelerate), run a corpus on a LocalCluster of one worker (the cluster extra's
distributed) and check it against the in-process run, and draw one page through app.py with AppTest. Run from the
clone's root:
python tests/package/lowest_smoke.py. Prints what it checked; any failure is an exception."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = "=The cat sat on the mat"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import attention_explorer as ae

    print("import", ae.__name__)
    command = [sys.executable, "-m", "attention_explorer", "export", "--model", "minilm", "--text", TEXT]
    done = subprocess.run([*command, "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["tokens"]["source"][0] == "[CLS]" and len(doc["attention"]["encoder_self"]) == 6, doc.keys()
    done = subprocess.run([*command, "--format", "csv"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    key_token = rows[0].index("key_token")
    assert "'=" in {row[key_token] for row in rows[1:]}, rows[:3]
    print("export", len(rows) - 1, "csv rows")
    run = ae.run("minilm", TEXT)
    weights = run.attention(0, 0)
    assert run.n_layers == 6 and abs(float(weights.sum(-1).max()) - 1) < 1e-5, weights
    print("api", run.n_layers, "layers", weights.shape)

    # transformers' own reading of a GGUF file (it needs gguf and accelerate): the Ours vs transformers page's
    import tempfile

    from attention_explorer.models.pretrained import load_path
    from attention_explorer.models.reference import load_reference
    from tests.folders import make_llama_folder
    from tests.gguf_file import write_gguf

    with tempfile.TemporaryDirectory() as folder:
        os.environ["EXPLORER_CACHE"] = str(Path(folder) / "cache")  # the dequantized copy goes nowhere else
        tiny = make_llama_folder(Path(folder) / "llama", hidden_size=32, heads=2, kv_heads=1, intermediate=32, layers=1)
        path = write_gguf(tiny, Path(folder) / "tiny.gguf", kind="Q8_0")
        ours, reference = load_path(path)[0], load_reference(path)
        assert ours.config.n_decoder_layers == reference.config.num_hidden_layers == 1
    print("reference", type(reference).__name__)

    # the cluster extra: `attention-explorer corpus --workers 1`'s LocalCluster, the same statistics as in process
    from attention_explorer.explorer.run import corpus_cluster

    lines = [TEXT, "A dog ran in the park", "Birds sing at dawn", "The rain fell all night"]
    here = ae.corpus("minilm", lines, max_tokens=32, batch_size=2)
    with corpus_cluster.connected(workers=1) as client:
        there = ae.corpus("minilm", lines, max_tokens=32, batch_size=2, client=client)
    pairs = list(zip(there.rows(), here.rows(), strict=True))
    assert all((a["layer"], a["head"]) == (b["layer"], b["head"]) for a, b in pairs)
    near = max(abs(a["entropy"] - b["entropy"]) / abs(b["entropy"]) for a, b in pairs)
    # tests/tolerance.pooled_means_bound: the batches' float64 sums (at most one a text) added in another order, n eps64
    # of the mean, and the division's eps64
    assert near <= (len(lines) + 1) * 2.0**-52, near
    print("cluster", len(there.rows()), "heads on 1 worker")

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    assert charts, "no figure on the first page"
    print("page", len(charts), "figures")


if __name__ == "__main__":
    main()
