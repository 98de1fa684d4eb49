"""tools/wheel_history.py on wheels made here (no network: the cache holds them, pip is faked)."""

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


wh = _load("wheel_history")
rf = _load("release_fields")

DRAFT = "sglang/srt/models/llama_eagle3.py"
MLA = "sglang/srt/models/kimi_k25_eagle3.py"
OLD = "sglang/srt/old_module.py"
# 0.5.12 adds the MLA draft file (the marker "mla (MLA draft class)" flips) and drops OLD
RELEASES = {
    "0.5.11": {DRAFT: "EntryClass = [LlamaForCausalLMEagle3]\n", OLD: "x = 1\n"},
    "0.5.11.post1": {DRAFT: "EntryClass = [LlamaForCausalLMEagle3]\n", OLD: "x = 2\n"},
    "0.5.12": {DRAFT: "EntryClass = [LlamaForCausalLMEagle3]\n",
               MLA: "EntryClass = [Eagle3DeepseekV2ForCausalLM]\n"},
}


@pytest.fixture(autouse=True)
def _plain_git(monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def _wheel(cache: Path, version: str, files: dict[str, str]) -> Path:
    """A wheel as pip leaves it in the cache: the package, its dist-info and a binary."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"sglang-{version}.dist-info/METADATA", f"Version: {version}\n")
        archive.writestr("sglang/srt/_ext.cpython-311-x86_64-linux-gnu.so", b"\0ELF")
    return path


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                          capture_output=True, text=True).stdout


def _files(git_dir: Path, tag: str) -> set[str]:
    return set(_git(git_dir, "ls-tree", "-r", "--name-only", tag).split())


@pytest.fixture
def cache(tmp_path) -> Path:
    for version, files in RELEASES.items():
        _wheel(tmp_path / "wheels", version, files)
    return tmp_path / "wheels"


def _build(tmp_path: Path, cache: Path, *versions: str, extra: tuple[str, ...] = ()) -> int:
    return wh.main([str(tmp_path / "h.git"), "sglang", "--cache", str(cache), "--pip", "false",
                    "--versions", *versions, *extra])


def test_one_commit_per_release_in_release_order(tmp_path, cache, capsys):
    assert _build(tmp_path, cache, "0.5.12", "0.5.11.post1", "0.5.11") == 0
    git_dir = tmp_path / "h.git"
    assert "3 releases committed (v0.5.11 .. v0.5.12)" in capsys.readouterr().out
    subjects = _git(git_dir, "log", "--reverse", "--format=%s", "main").splitlines()
    assert [s.split()[1] for s in subjects] == ["v0.5.11", "v0.5.11.post1", "v0.5.12"]
    for tag in ("v0.5.11", "v0.5.11.post1", "v0.5.12"):
        assert _git(git_dir, "log", "-1", "--format=%s", tag).startswith(f"Release {tag} ")


def test_package_files_land_under_python_and_each_tree_is_whole(tmp_path, cache):
    _build(tmp_path, cache, "0.5.11", "0.5.12")
    git_dir = tmp_path / "h.git"
    # only the package's Python files, at SGLang's repository paths; a removed file is gone
    assert _files(git_dir, "v0.5.11") == {"python/" + DRAFT, "python/" + OLD}
    assert _files(git_dir, "v0.5.12") == {"python/" + DRAFT, "python/" + MLA}
    assert _git(git_dir, "show", "v0.5.11:python/" + OLD) == "x = 1\n"


def test_release_fields_markers_read_the_history(tmp_path, cache):
    _build(tmp_path, cache, "0.5.11", "0.5.12")
    marker = next(m for m in rf.SGLANG_MARKERS if m.field == "mla (MLA draft class)")
    repo = rf.GitRepo(str(tmp_path / "h.git"))
    try:
        rows = rf.evaluate(repo, (marker,), repo.release_tags())
    finally:
        repo.close()
    assert rows == [("v0.5.11", {marker.field: "none"}), ("v0.5.12", {marker.field: "kimi_k25"})]


def test_failed_download_and_empty_wheel_are_skipped(tmp_path, cache, capsys):
    _wheel(cache, "0.5.13", {"README.md": "no package\n"})
    assert _build(tmp_path, cache, "0.5.11", "0.5.12", "0.5.13", "0.5.14") == 0
    out, err = capsys.readouterr()
    assert "skipped 0.5.13: sglang-0.5.13-py3-none-any.whl has no sglang/ source files" in err
    assert "skipped 0.5.14: download failed" in err
    assert "skipped (see above): 0.5.13, 0.5.14" in out
    assert _git(tmp_path / "h.git", "tag").split() == ["v0.5.11", "v0.5.12"]


def test_existing_repository_is_refused(tmp_path, cache, capsys):
    _build(tmp_path, cache, "0.5.11")
    before = _git(tmp_path / "h.git", "rev-parse", "main")
    capsys.readouterr()
    assert _build(tmp_path, cache, "0.5.12") == 2
    assert "exists already" in capsys.readouterr().err
    assert _git(tmp_path / "h.git", "rev-parse", "main") == before


def test_listed_versions_keep_final_releases_within_the_range(tmp_path):
    fake_pip = tmp_path / "pip"
    fake_pip.write_text("#!/bin/sh\necho 'sglang (0.5.13rc0)'\n"
                        "echo 'Available versions: 0.5.13rc0, 0.5.12.post1, 0.5.12, 0.5.12.dev3, "
                        "0.5.11, 0.5.10.post1'\n")
    fake_pip.chmod(0o755)
    listed = wh.final_releases("sglang", [str(fake_pip)])
    assert listed == ["0.5.12.post1", "0.5.12", "0.5.11", "0.5.10.post1"]
    assert wh.select_versions(listed, "0.5.11", "0.5.12") == ["0.5.11", "0.5.12"]
