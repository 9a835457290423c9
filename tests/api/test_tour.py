"""docs/tour.ipynb runs top to bottom in a real Jupyter kernel (this interpreter's, importing this repository's
package) with no error, and its figures display offline: plotly.js embedded once, no script fetched from anywhere."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "docs" / "tour.ipynb"
PLOTLY_JSON = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def executed(tmp_path_factory, monkeypatch_module):
    """The tour run as Jupyter runs it: its kernel started in docs/, the kernelspec "python3" pointing at this
    interpreter (a temporary Jupyter data folder found first), the repository first on the kernel's path."""
    data = tmp_path_factory.mktemp("jupyter")
    spec = data / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    monkeypatch_module.setenv("JUPYTER_PATH", str(data))
    monkeypatch_module.setenv("PYTHONPATH", str(ROOT))
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch_module.delenv("PLOTLY_RENDERER", raising=False)
    notebook = nbformat.read(TOUR, as_version=4)
    # which interpreter and which package the kernel ran: the last line printed
    where = "import sys\nimport attention_explorer\nprint(sys.executable, attention_explorer.__file__)"
    notebook.cells.append(nbformat.v4.new_code_cell(where))
    client = NotebookClient(
        notebook,
        timeout=600,  # a cell, on a busy 2-core machine: a safety net, not a speed limit
        startup_timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(TOUR.parent)}},
    )
    client.execute()
    return notebook


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def outputs(notebook) -> list:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def printed(notebook) -> str:
    return "".join(o.get("text", "") for o in outputs(notebook) if o.output_type == "stream" and o.name == "stdout")


def test_the_tour_runs_without_error_in_a_real_kernel(executed):
    errors = [f"{o.ename}: {o.evalue}" for o in outputs(executed) if o.output_type == "error"]
    assert not errors
    assert all(cell.execution_count for cell in executed.cells if cell.cell_type == "code")
    stderr = "".join(o.get("text", "") for o in outputs(executed) if o.output_type == "stream" and o.name == "stderr")
    assert "Warning" not in stderr and "Traceback" not in stderr, stderr


def test_the_kernel_is_this_interpreter_importing_this_repository(executed):
    executable, package = printed(executed).strip().splitlines()[-1].split(" ")
    assert Path(executable) == Path(sys.executable)
    assert Path(package).resolve() == ROOT / "attention_explorer" / "__init__.py"


def test_the_tour_prints_the_models_tokens_and_numbers(executed):
    text = printed(executed)
    assert "['[CLS]', 'the', 'animal', 'didn', \"'\", 't', 'cross'" in text
    assert "(15, 15) float32" in text
    assert "'it' attends most to 'animal'" in text
    assert re.search(r"^kilo$", text, re.MULTILINE)  # the induction model's next token
    assert re.search(r"clean \+\d+\.\d\d, corrupted -\d+\.\d\d", text)
    difference = float(re.search(r"largest difference from ours: (\S+)", text)[1])
    assert difference <= 1e-5  # transformers' BERT and ours on the same MiniLM weights


def test_every_figure_displays_offline(executed):
    figures = [o for o in outputs(executed) if o.output_type == "display_data" and PLOTLY_JSON in o.data]
    assert len(figures) == 7  # heatmap, model view, positional, qkv, logit lens, patching, ae.show
    assert all("text/html" in o.data for o in figures)  # classic Notebook, nbconvert and GitHub draw this
    pages = [o.data["text/html"] for o in outputs(executed) if "text/html" in o.get("data", {})]
    scripts = [tag for page in pages for tag in re.findall(r"<script[^>]*>", page)]
    assert not [tag for tag in scripts if "src=" in tag]  # nothing fetched: no CDN, no MathJax
    assert sum("cdn.plot.ly" in page for page in pages) <= 1  # a URL inside the embedded plotly.js only
    embedded = [page for page in pages if len(page) > 1_000_000]
    assert len(embedded) == 1  # plotly.js once, before the first figure


def test_the_first_figure_is_the_heatmap_titled_as_the_app_counts(executed):
    first = next(o for o in outputs(executed) if PLOTLY_JSON in o.get("data", {}))
    layout = first.data[PLOTLY_JSON]["layout"]
    assert layout["title"]["text"] == "Layer 4, head 2"
    assert first.data[PLOTLY_JSON]["data"][0]["type"] == "heatmap"
