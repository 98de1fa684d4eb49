"""A non-editable install runs the kit: the wheel carries the notebooks and the bundled samples,
and `eagle3-nb demo` works from any working directory with no checkout in sight.

The wheel goes into a fresh venv with --no-deps; the venv reaches torch, papermill and the rest
through a .pth line naming the dev venv's site-packages (as a kit installed beside an engine
reaches the engine's torch), and nbconvert's templates through JUPYTER_PATH. A .pth line adds a plain path, so the dev venv's own editable
finder for eagle3_nb never runs there: only the installed wheel can answer `import eagle3_nb`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.notebook]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the checkout: the build's scratch folders stay out of the tree."""
    src, out = tmp_path_factory.mktemp("src") / "kit", tmp_path_factory.mktemp("wheel")
    src.mkdir()
    for name in ("eagle3_nb", "notebooks", "data_samples"):
        shutil.copytree(REPO / name, src / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)],
                   check=True, capture_output=True, text=True, cwd=out)
    return next(out.glob("eagle3_nb-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel only; returns its bin/ directory."""
    env = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(env)
    py = env / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "dev_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet",
                    "--no-deps", str(wheel)], check=True, capture_output=True, text=True)
    return env / "bin"


def test_the_wheel_carries_notebooks_and_samples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    notebooks = sorted(n for n in names if n.startswith("eagle3_nb/notebooks/"))
    assert [Path(n).name for n in notebooks] == sorted(p.name for p in
                                                       (REPO / "notebooks").glob("*.ipynb"))
    for needed in ("data_samples/prompts.jsonl", "data_samples/target/model.safetensors",
                   "data_samples/target/tokenizer.json",
                   "data_samples/drafts/layers0-flat/model.safetensors",
                   *(f"engines/{e}/data/{t}.json" for e in ("sglang", "vllm")
                     for t in ("capture", "drafting"))):
        assert f"eagle3_nb/{needed}" in names
    # every bundled sample and engine table, whatever its suffix (package-data lists suffixes)
    shipped = [f"eagle3_nb/{p.relative_to(REPO).as_posix()}" for p in
               [*(REPO / "data_samples").rglob("*"), *(REPO / "eagle3_nb" / "engines").glob(
                   "*/data/*")] if p.is_file() and "__pycache__" not in p.parts]
    shipped = [n.replace("eagle3_nb/eagle3_nb/", "eagle3_nb/") for n in shipped]
    assert [n for n in shipped if n not in names] == []
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_the_installed_kit_is_the_wheel_not_the_checkout(installed, tmp_path):
    where = subprocess.run([installed / "python", "-c", "import eagle3_nb; print(eagle3_nb.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path,
                           env={"PATH": "/usr/bin:/bin"}).stdout
    assert str(REPO) not in where and "site-packages" in where


def test_demo_runs_from_a_non_editable_install(installed, tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([installed / "eagle3-nb", "demo", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": f"{installed}:/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                               "HOME": str(tmp_path),
                               # nbconvert's templates, installed with the dependencies
                               "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # its stderr holds its progress lines only (no kernel port race, no warning): the one demo
    # run of the suite checks what tests/test_setup_noise.py checks of `make setup` and `make lab`
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("eagle3-nb report ")
    # per notebook a line as it starts and one as it ends, the simulation's progress between
    starts = [n for n, line in enumerate(lines) if re.fullmatch(r"\[\d/\d\] \d\d_\w+ \.\.\.", line)]
    ends = [n for n, line in enumerate(lines) if re.match(r"\[\d/\d\] \d\d_\w+ \.\.\. ok \(", line)]
    relayed = [n for n, line in enumerate(lines)
               if re.fullmatch(r" {6}.+: \d+/64 prompts \(\d+ s\)", line)]
    assert len(starts) == len(ends) == 5 and len(lines) == 1 + 10 + len(relayed), lines
    assert all(any(a < n < b for a, b in zip(starts, ends)) for n in relayed), lines
    simulated = [lines[n] for n in relayed if starts[-1] < n < ends[-1]]     # notebook 04's
    assert simulated and "simulating" in simulated[-1] and ": 64/64 prompts (" in simulated[-1]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    ran = {s["notebook"]: s["status"] for s in summary["notebooks"]}
    assert ran and all(status == "ok" for status in ran.values()), ran
    assert (out / "index.html").is_file()
    assert str(REPO) not in json.dumps(summary["inputs"])  # the samples came from the install
