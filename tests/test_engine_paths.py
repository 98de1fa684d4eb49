"""An engine that reads a draft's folder name before its config.json (issue #28): SGLang from 0.5.11
sends a path naming 'eagle' and 'mistral' to the Mistral native-format parser. The kit says so per
release, as a load error, and the installed engine's own config loader agrees."""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DRAFTS
from eagle3_nb.checks.load import inspect_checkpoint

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ["sglang==0.5.10", "sglang==0.5.11", "sglang==0.5.12.post1", "sglang==0.5.23",
            "vllm==0.34.0"]


def copy_as(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(DRAFTS / "good", dst)
    return dst


def misread(inspection) -> dict[str, str]:
    return {f.engine: f.message for f in inspection.global_findings
            if f.code == "ENGINE_MISREADS_PATH"}


def test_a_folder_naming_eagle_and_mistral_is_a_load_error_from_sglang_0_5_11(tmp_path):
    found = inspect_checkpoint(copy_as(tmp_path, "My-Eagle3-Mistral-draft"), RELEASES,
                               stats=False)
    by_engine = misread(found)
    assert sorted(by_engine) == ["sglang==0.5.11", "sglang==0.5.12.post1", "sglang==0.5.23"]
    assert "--model-config-parser hf" in by_engine["sglang==0.5.23"]
    assert "--model-config-parser" not in by_engine["sglang==0.5.11"]  # no such flag there
    verdicts = {p.profile.key: p.verdict_with(found.beyond_plan(p)) for p in found.plans}
    assert verdicts["sglang==0.5.23"] == "load_error" and verdicts["sglang==0.5.10"] == "ok"
    assert verdicts["vllm==0.34.0"] == "ok"


def test_the_what_if_runs_no_release_that_misreads_the_path(tmp_path):
    """The what-if's row for a release that fails at startup on the path is refused, as the
    inspection's verdict says, not simulated."""
    from eagle3_nb.session import named_wirings

    presets = named_wirings(copy_as(tmp_path, "My-Eagle3-Mistral-draft"), None, RELEASES).presets
    refused = {key for key in RELEASES if presets[key].engine_error}
    assert refused == {"sglang==0.5.11", "sglang==0.5.12.post1", "sglang==0.5.23"}
    assert "Mistral's native format" in presets["sglang==0.5.23"].engine_error


@pytest.mark.parametrize("folder, served, native, misread_on_0_5_23", [
    ("plain-draft", "/srv/eagle3-mistral", False, True),   # the served path's words decide
    ("eagle3-mistral", "/srv/plain-draft", False, False),
    ("plain-draft", "/srv/eagle3-mistral", True, False),   # params.json here: the draft's own
])
def test_the_served_path_is_read_and_the_files_here(tmp_path, folder, served, native,
                                                     misread_on_0_5_23):
    draft = copy_as(tmp_path, folder)
    if native:
        (draft / "params.json").write_text("{}")
    launch = ("python -m sglang.launch_server --model-path /srv/target "
              f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {served}")
    found = misread(inspect_checkpoint(draft, ["sglang==0.5.23"], stats=False, launch=launch))
    assert bool(found) == misread_on_0_5_23
    if found:
        assert served in found["sglang==0.5.23"]


def test_an_ordinary_name_or_a_native_format_draft_is_left_alone(tmp_path):
    assert not misread(inspect_checkpoint(copy_as(tmp_path, "llama-eagle3-draft"), RELEASES,
                                          stats=False))
    native = copy_as(tmp_path, "eagle-mistral-native")
    (native / "params.json").write_text("{}")
    assert not misread(inspect_checkpoint(native, RELEASES, stats=False))


@pytest.mark.slow
def test_the_installed_engines_config_loader_agrees(tmp_path):
    python = ROOT / ".cache" / "engines" / "sglang-0.5.23" / "bin" / "python"
    if not python.exists():
        pytest.skip("no SGLang 0.5.23 side environment (make engine-env)")
    script = ("import sys, eagle3_nb.engines.stubs as s; s.install()\n"
              "from sglang.srt.utils.hf_transformers.config import get_config\n"
              "try:\n    get_config(sys.argv[1], trust_remote_code=False); print('OK')\n"
              "except Exception as e:\n    print('FAIL', type(e).__name__, e)\n")

    def loads(path: Path) -> str:
        r = subprocess.run([str(python), "-P", "-c", script, str(path)], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
        return r.stdout.strip().splitlines()[-1]

    assert loads(copy_as(tmp_path, "plain-draft")) == "OK"
    failed = loads(copy_as(tmp_path, "my-eagle-mistral-draft"))
    assert failed.startswith("FAIL") and "params.json" in failed
