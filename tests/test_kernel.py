"""One kernel name (#17): every notebook declares the kernel `make setup` registers, so Jupyter
and papermill run them with no -k; the run falls back to this interpreter where that kernel is
not installed; and the notebooks' default paths name the bundled samples from any working
directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def makefile_kernel() -> str:
    match = re.search(r"^KERNEL\s*:?=\s*(\S+)\s*$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile names no KERNEL"
    return match.group(1)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_declares_the_kernel_make_setup_registers(path):
    from eagle3_nb.report.notebooks import KIT_KERNEL

    spec = json.loads(path.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
    assert spec == {"name": makefile_kernel(), "display_name": makefile_kernel(),
                    "language": "python"}
    assert KIT_KERNEL == makefile_kernel()


def test_make_setup_registers_that_kernel_with_its_display_name():
    text = (REPO / "Makefile").read_text()
    assert "ipykernel install --sys-prefix --name $(KERNEL) --display-name \"eagle3-nb\"" in text


def test_the_installed_kit_kernel_is_taken_when_it_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager
    from eagle3_nb.report.notebooks import KIT_KERNEL, resolve_kernel

    specs = KernelSpecManager().find_kernel_specs()
    expected = KIT_KERNEL if KIT_KERNEL in specs else "python3"
    assert resolve_kernel() == expected


def test_sample_defaults_resolve_from_any_working_directory(tmp_path, monkeypatch):
    from eagle3_nb.io.resources import samples_dir
    from eagle3_nb.report.notebooks import sample_default

    monkeypatch.chdir(tmp_path)
    assert Path(sample_default("../data_samples/drafts/good")) == samples_dir() / "drafts" / "good"
    assert sample_default("my/draft") == "my/draft"  # a user's path is never reinterpreted
    assert sample_default("") == ""
    assert sample_default("/abs/draft") == "/abs/draft"
    (tmp_path / "sub" / "data_samples" / "x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "sub" / "data_samples")
    assert sample_default("../data_samples/x") == "../data_samples/x"  # it exists from here


@pytest.mark.notebook
def test_papermill_runs_a_notebook_with_no_kernel_argument_from_another_directory(tmp_path):
    """What the README tells a user: plain papermill, no -k, no -p for the paths, run from
    anywhere: the notebook's kernel and its default sample paths both resolve."""
    from jupyter_client.kernelspec import KernelSpecManager

    assert makefile_kernel() in KernelSpecManager().find_kernel_specs(), \
        "the eagle3-nb kernel is not installed: run make setup"
    papermill = Path(sys.executable).parent / "papermill"
    notebook = REPO / "notebooks" / "02_d2t_mapping.ipynb"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([str(papermill), str(notebook), "out.ipynb", "--no-progress-bar",
                           "-p", "interactive", "False", "-p", "output_dir", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    executed = json.loads((tmp_path / "out.ipynb").read_text(encoding="utf-8"))
    assert executed["metadata"]["kernelspec"]["name"] == makefile_kernel()
    assert executed["metadata"]["papermill"]["parameters"] == {"interactive": False,
                                                               "output_dir": "out"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["notebook"] == "02_d2t_mapping" and summary["valid"] is True
    assert Path(summary["checkpoint"]).resolve() == (REPO / "data_samples" / "drafts"
                                                     / "good").resolve()
