"""What `make setup`, `make demo` and `make lab` print besides their work: nothing the project
causes. The editable install gives no setuptools warning, the notebooks' kernels take no TCP
port (the port race that printed "ZMQError: Address already in use" mid-demo), and JupyterLab
neither pops up its news nor checks for updates. That the demo's stderr holds its progress lines
only is checked on the suite's one demo run (tests/test_packaging.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import REPO

from eagle3_nb.report.notebooks import KIT_KERNEL, run_notebook


def test_install_build_prints_no_setuptools_warning(tmp_path):
    """What `make setup`'s `pip install --no-deps -e .` (and a plain `pip install .`) build, on a
    copy of the checkout: pip shows whatever the build backend warns. The backend is called
    directly, so that nothing is installed anywhere (pip would replace the dev install)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("eagle3_nb", "data_samples", "notebooks"):
        shutil.copytree(REPO / name, src / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*-converted"))
    for hook in ("build_editable", "build_wheel"):
        dist = tmp_path / hook
        dist.mkdir()
        proc = subprocess.run([sys.executable, "-c", "import sys; from setuptools import "
                               f"build_meta; build_meta.{hook}(sys.argv[1])", str(dist)],
                              cwd=src, capture_output=True, text=True, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output
        assert len(list(dist.glob("eagle3_nb-*.whl"))) == 1, (hook, output)
        assert "would be ignored" not in output, hook
        assert not re.search(r"Warning\b", output), (hook, output)


def test_notebook_kernels_take_no_tcp_port(tmp_path):
    """Headless runs talk to their kernel over Unix sockets in a private folder, removed after:
    no port to race for."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KIT_KERNEL, "display_name": KIT_KERNEL,
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import json\nfrom ipykernel import get_connection_info\n"
        "info = json.loads(get_connection_info())\nprint(info['transport'], info['ip'])")]
    source = tmp_path / "where.ipynb"
    source.write_text(nbformat.writes(nb))
    executed = nbformat.read(str(run_notebook(source, tmp_path / "out")), as_version=4)
    transport, ip = executed.cells[0].outputs[0]["text"].split()
    assert transport == ("ipc" if os.name == "posix" else "tcp")
    if os.name == "posix":
        assert not Path(ip).parent.exists()  # the sockets' folder is gone


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page_config(url: str, deadline: float) -> dict:
    while time.monotonic() < deadline:
        try:
            page = urllib.request.urlopen(url, timeout=5).read().decode()
            found = re.search(r'<script id="jupyter-config-data" type="application/json">'
                              r"(.*?)</script>", page, re.S)
            return json.loads(found.group(1))
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer at {url}")


@pytest.mark.slow
def test_make_lab_turns_news_and_update_checks_off(tmp_path):
    port = _free_port()
    dry = subprocess.run(["make", "-n", "lab", f"LAB_PORT={port}"], cwd=REPO,
                         capture_output=True, text=True, timeout=60).stdout
    command = next(line for line in dry.splitlines() if " lab " in line and "jupyter" in line)
    argv = [*shlex.split(command), "--ServerApp.open_browser=False"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        config = _page_config(f"http://127.0.0.1:{port}/lab", time.monotonic() + 90)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert config["news"] == {"disabled": True}
    # the server came up with it, so the class the flag names is one Lab takes
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in argv
