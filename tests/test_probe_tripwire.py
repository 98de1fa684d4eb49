"""The probe runs untrusted checkpoints: nothing in the checkpoint's folder is ever imported, from
whatever directory and by whichever entry point it is started (issue #28, code executed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_nb.engines.registry import engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.resources import samples_dir
from eagle3_nb.probe import refuse_checkpoint_code

ROOT = Path(__file__).resolve().parents[1]
SHADOWED = ["json", "argparse", "ctypes", "importlib_metadata", "safetensors"]


def _tripwired(tmp_path: Path) -> tuple[Path, Path]:
    """The bundled good draft, plus .py files that would shadow real modules, each writing the
    marker if ever imported."""
    ckpt = tmp_path / "downloaded-draft"
    shutil.copytree(samples_dir() / "drafts" / "good", ckpt)
    marker = tmp_path / "FIRED"
    wire = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in SHADOWED + [e.name for e in engines().values()] + [e.package for e in engines().values()]:
        (ckpt / f"{name}.py").write_text(wire)
    (ckpt / "eagle3_nb").mkdir()
    (ckpt / "eagle3_nb" / "__init__.py").write_text(wire)
    return ckpt, marker


def _side_env(engine: str) -> Path | None:
    found = sorted((ROOT / ".cache" / "engines").glob(f"{engine}-*/bin/eagle3-nb"))
    return found[-1] if found else None


def test_the_tripwire_fires_when_the_working_directory_is_on_the_path(tmp_path):
    """The control: a plain `python -c` from the checkpoint imports its json.py."""
    ckpt, marker = _tripwired(tmp_path)
    subprocess.run([sys.executable, "-c", "import json"], cwd=ckpt, capture_output=True)
    assert marker.exists()


def test_module_entry_from_inside_the_checkpoint_imports_none_of_its_files(tmp_path):
    ckpt, marker = _tripwired(tmp_path)
    shutil.rmtree(ckpt / "eagle3_nb")  # only -P or the console script can guard the package name
    for engine in engines().values():
        r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "probe", ".", "--engine",
                            engine.name], cwd=ckpt, capture_output=True, text=True, timeout=300)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not marker.exists(), marker.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("engine", [e.name for e in engines().values() if e.probe])
def test_side_environment_console_script_from_inside_the_checkpoint(tmp_path, engine):
    script = _side_env(engine)
    if script is None:
        pytest.skip(f"no side environment for {engine} under .cache/engines (tools/engine_env.sh "
                    "builds one where the engine's wheel installs on this machine)")
    ckpt, marker = _tripwired(tmp_path)
    r = subprocess.run([str(script), "probe", ".", "--engine", engine], cwd=ckpt,
                       capture_output=True, text=True, timeout=600)
    assert not marker.exists(), marker.read_text()
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert "agrees with the profile" in r.stdout


@pytest.mark.slow
def test_probe_refuses_a_checkpoint_on_pythonpath(tmp_path):
    engine = next((e.name for e in engines().values() if e.probe and _side_env(e.name)), None)
    if engine is None:
        pytest.skip("no side environment (make engine-env)")
    ckpt = tmp_path / "draft"
    shutil.copytree(samples_dir() / "drafts" / "good", ckpt)
    env = dict(os.environ, PYTHONPATH=str(ckpt))
    r = subprocess.run([str(_side_env(engine)), "probe", str(ckpt), "--engine", engine],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    assert "could run its own code" in r.stderr and "Traceback" not in r.stderr


def test_refusal_names_a_module_already_imported_from_the_checkpoint(tmp_path, monkeypatch):
    ckpt = tmp_path / "draft"
    ckpt.mkdir()
    (ckpt / "planted_module.py").write_text("X = 1\n")
    refuse_checkpoint_code(ckpt)  # nothing of it on the path or loaded yet
    monkeypatch.syspath_prepend(str(ckpt))
    with pytest.raises(Eagle3NbError, match="on sys.path"):
        refuse_checkpoint_code(ckpt)
    __import__("planted_module")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(ckpt)])
    try:
        with pytest.raises(Eagle3NbError, match="planted_module"):
            refuse_checkpoint_code(ckpt)
    finally:
        sys.modules.pop("planted_module", None)
