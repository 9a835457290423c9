"""Each dependency's range in pyproject.toml is one the code runs on: requirements.txt's pins sit inside the ranges
(a fast check), and the lowest version each range allows, installed into a fresh virtual environment (uv's
`--resolution lowest-direct`), imports the package, exports a run through the command line, runs the notebook API and
draws a page through app.py, with the cluster extra's lowest distributed running a corpus on a LocalCluster
(tests/package/lowest_smoke.py; slow: it installs torch and the rest again)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 1800  # torch and ~75 other packages from the package index: generous on a busy machine
RUN_TIMEOUT = 900


def ranges(extras: bool = False) -> dict[str, Requirement]:
    """pyproject's dependencies (with `extras`, its optional ones too: requirements.txt pins those as well)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = list(project["dependencies"])
    if extras:
        dependencies += [d for group in project.get("optional-dependencies", {}).values() for d in group]
    return {canonicalize_name(r.name): r for r in map(Requirement, dependencies)}


def pins() -> dict[str, Requirement]:
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement
    return found


def lower_bound(requirement: Requirement) -> Version:
    (found,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return found


def test_every_range_has_a_pin_inside_it_and_every_pin_a_range():
    ranges_, pins_ = ranges(extras=True), pins()
    assert sorted(ranges_) == sorted(pins_)
    for name, pin in pins_.items():
        (exact,) = list(pin.specifier)
        assert exact.operator == "==", f"{name}: {pin} is not a pin"
        # a series pin (torch==2.13.*) stands for its first release; every other pin for itself
        version = exact.version.removesuffix(".*")
        assert ranges_[name].specifier.contains(version), f"requirements.txt's {pin} is outside {ranges_[name]}"
        assert lower_bound(ranges_[name]) <= Version(version)


def test_every_range_has_a_lower_bound_and_an_upper_one():
    for name, requirement in ranges().items():
        operators = sorted(s.operator for s in requirement.specifier)
        assert operators == ["<", ">="], f"{name}: {requirement}"


def run(command: list, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_lowest_allowed_versions_run(tmp_path):
    env = tmp_path / "lowest"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    # torch first with pip, as the Makefile installs it (the CPU build where pip's configuration points at one)
    torch = f"torch=={lower_bound(ranges()['torch'])}"
    done = run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", torch], INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    lowest = ["-m", "uv", "pip", "install", "-q", "--python", python, "--resolution", "lowest-direct"]
    # with the cluster extra: its distributed's lower bound is proven by the smoke's LocalCluster step
    done = run([sys.executable, *lowest, "-r", ROOT / "pyproject.toml", "--extra", "cluster"], INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    listing = (
        "import json, importlib.metadata as m; print(json.dumps([(d.name, d.version) for d in m.distributions()]))"  # noqa: E501
    )
    found = json.loads(run([python, "-c", listing], RUN_TIMEOUT).stdout)
    installed = {canonicalize_name(name): Version(Version(version).base_version) for name, version in found}
    for name, requirement in ranges(extras=True).items():  # 2.13.0+cpu is torch's lower bound 2.13
        assert installed[name] == lower_bound(requirement), f"{name}: {installed[name]}, not {lower_bound(requirement)}"
    done = run([python, ROOT / "tests" / "package" / "lowest_smoke.py"], RUN_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout.splitlines()
    steps = ["import", "export", "api", "reference", "cluster", "page"]
    assert [line.split()[0] for line in said if line.split()[0] in steps] == steps, done.stdout


# jaxtyping's pytest plugin refuses to start (RuntimeError: "already imported: attention_explorer.models") before
# 0.3.6, whose plugin instruments the packages before any conftest imports them; the runtime needs only the
# annotations, which the lowest allowed jaxtyping (pyproject's bound, proven by the job above) provides
JAXTYPING_FOR_THE_TESTS = Version("0.3.6")


def test_the_pinned_jaxtyping_starts_the_test_plugin_that_checks_shapes():
    """`make test` installs requirements.txt's jaxtyping: one whose plugin starts under pyproject's addopts, and the
    plugin is on: a public signature called with a wrong shape is refused under pytest."""
    import torch
    from jaxtyping import TypeCheckError

    from attention_explorer.models.attention import scaled_dot_product_attention

    (pin,) = list(pins()["jaxtyping"].specifier)
    assert Version(pin.version) >= JAXTYPING_FOR_THE_TESTS
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(TypeCheckError):
        scaled_dot_product_attention(q, torch.zeros(1, 2, 3, 5), torch.zeros(1, 2, 3, 4))
