"""`make lab` (#17): JupyterLab on the notebooks with the kit's kernel, bound to 127.0.0.1 with no
token, --allow-root when run as root. Checked from the command line make would run and from
the configuration Jupyter parses out of it (--show-config exits before a server starts)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from conftest import REPO


def lab_command() -> list[str]:
    proc = subprocess.run(["make", "-s", "-n", "lab"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "jupyter lab" in line]
    assert len(lines) == 1, proc.stdout
    return shlex.split(lines[0])


pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def test_make_lab_runs_jupyterlab_on_the_notebooks_locally_without_a_token():
    argv = lab_command()
    assert argv[:2] == [".venv/bin/jupyter", "lab"]
    assert f"--ServerApp.root_dir={REPO}/notebooks" in argv
    assert "--ServerApp.ip=127.0.0.1" in argv
    assert "--IdentityProvider.token=" in argv and "--ServerApp.password=" in argv
    assert "--MappingKernelManager.default_kernel_name=eagle3-nb" in argv
    assert ("--allow-root" in argv) == (os.geteuid() == 0)


def test_jupyter_parses_the_lab_command_line(tmp_path):
    jupyter = REPO / ".venv" / "bin" / "jupyter"
    if not jupyter.exists():
        pytest.skip("no .venv: run make setup")
    argv = [str(jupyter), *lab_command()[1:], "--show-config"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = " ".join(proc.stdout.split())
    for setting in (".ip = '127.0.0.1'", ".token = DeferredConfigString('')",
                    ".default_kernel_name = 'eagle3-nb'", f".root_dir = '{REPO}/notebooks'"):
        assert setting in shown, setting
    assert (".allow_root = True" in shown) == (os.geteuid() == 0)
    assert "not recognized" not in proc.stderr and "deprecated" not in proc.stderr
