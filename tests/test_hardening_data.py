"""User data the kit must not change (issue 28): the report kept apart from every input
directory, `notebooks` kept out of the kit's own folders and reclaiming only its own leftovers,
probe runs cleaning their temporary folders, and temp files that cannot be redirected."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import eagle3_nb
from conftest import DRAFTS, REPO
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.report.options import ReportOptions, resolve_options


def listing(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def good_copy(tmp_path) -> Path:
    good = tmp_path / "good"
    shutil.copytree(DRAFTS / "good", good)
    return good


# ----------------------------------------------------------------------------- report

@pytest.mark.parametrize("out", ["good/rep", "good", "."])
def test_report_out_is_kept_apart_from_compare_to(good_copy, tmp_path, out):
    """-p compare_to GOOD with --out inside GOOD, GOOD itself, or a folder holding GOOD."""
    opts = ReportOptions(checkpoint=DRAFTS / "nan-head", out=tmp_path / out, overwrite=True,
                         extra={"compare_to": str(good_copy)})
    with pytest.raises(Eagle3NbError, match="compare_to"):
        resolve_options(opts)


def test_report_into_the_known_good_draft_is_exit_2_with_nothing_written(run_cli, good_copy):
    before = listing(good_copy)
    rc, _, err = run_cli("report", DRAFTS / "nan-head", "-p", "compare_to", good_copy,
                         "--out", good_copy / "rep")
    assert rc == 2 and "Traceback" not in err and "compare_to" in err
    assert listing(good_copy) == before
    assert sorted(p.name for p in good_copy.parent.iterdir()) == ["good"]


def test_report_compare_to_that_does_not_exist_is_refused_in_the_preflight(run_cli, tmp_path):
    out = tmp_path / "rep"
    with pytest.raises(Eagle3NbError, match="compare_to.*existing"):
        resolve_options(ReportOptions(checkpoint=DRAFTS / "nan-head", out=out,
                                      extra={"compare_to": str(tmp_path / "nonexistent")}))
    rc, _, err = run_cli("report", DRAFTS / "nan-head", "-p", "compare_to",
                         tmp_path / "nonexistent", "--out", out)
    assert rc == 2 and "Traceback" not in err and "not found" in err
    assert list(tmp_path.iterdir()) == []


def test_report_compare_to_is_passed_absolute(tmp_path, good_copy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    o = resolve_options(ReportOptions(checkpoint=DRAFTS / "nan-head", out=tmp_path / "rep",
                                      extra={"compare_to": "good"}))
    assert o.extra["compare_to"] == str(good_copy.resolve())


@pytest.mark.parametrize("flag", ["log", "launch"])
def test_report_never_replaces_a_folder_holding_its_log_or_launch_file(tmp_path, flag):
    """An earlier report's folder whose marker lists the file: --overwrite would delete it."""
    out = tmp_path / "rep"
    out.mkdir()
    held = out / "server.txt"
    held.write_text("python -m sglang.launch_server --model-path m "
                    "--speculative-algorithm EAGLE3 --speculative-num-steps 3\n")
    (out / ".eagle3-nb-report").write_text(json.dumps({"files": ["server.txt",
                                                                  ".eagle3-nb-report"]}))
    opts = ReportOptions(checkpoint=DRAFTS / "good", out=out, overwrite=True,
                         **{flag: held if flag == "log" else str(held)})
    with pytest.raises(Eagle3NbError, match=f"--{flag}.*inside --out"):
        resolve_options(opts)
    assert held.is_file()


# ----------------------------------------------------------------------------- notebooks

def test_notebooks_never_write_into_the_kit_package(run_cli):
    package = Path(eagle3_nb.__file__).parent
    for dest in (package / "my-notebooks", package / "notebooks" / "copies",
                 package / "data_samples" / "nb"):
        try:
            rc, _, err = run_cli("notebooks", dest)
            assert rc == 2 and "Traceback" not in err and "kit's own folder" in err, err
            assert not os.path.lexists(dest)
        finally:
            if dest.is_dir():   # the old code wrote it: leave the package as it was
                shutil.rmtree(dest)


def _killed_staging(dest: Path) -> Path:
    """What a `notebooks DEST` killed with SIGKILL leaves: its staging directory, with the
    owner file of a process that is gone."""
    code = ("import sys, time; from pathlib import Path; from eagle3_nb.io.files import "
            "staging_dir; print(staging_dir(Path(sys.argv[1]), 'notebooks'), flush=True); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(dest)], stdout=subprocess.PIPE,
                             text=True)
    staged = Path(child.stdout.readline().strip())
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    return staged


def test_notebooks_rerun_reclaims_only_its_own_killed_staging(run_cli, tmp_path):
    dest = tmp_path / "nbs"
    staged = _killed_staging(dest)
    assert staged.is_dir() and staged.name.startswith(".nbs.eagle3nb-tmp-")
    (staged / "01_half_copied.ipynb").write_text("{")
    foreign = tmp_path / ".nbs.eagle3nb-tmp-mine"         # the same name, no owner file
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    alive = tmp_path / ".nbs.eagle3nb-tmp-alive"          # an owner that is still running
    alive.mkdir()
    (alive / ".eagle3nb-owner").write_text(json.dumps(
        {"pid": os.getpid(), "host": os.uname().nodename, "purpose": "notebooks"}))
    rc, _, err = run_cli("notebooks", dest)
    assert rc == 0, err
    assert not staged.exists() and "removed" in err
    assert (foreign / "keep.txt").read_text() == "mine" and alive.is_dir()
    assert len(list(dest.glob("*.ipynb"))) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".nbs.eagle3nb-tmp-alive", ".nbs.eagle3nb-tmp-mine", "nbs"])


# ----------------------------------------------------------------------------- probe

PROBE_WITHOUT_ENGINE = """
import sys, tempfile
tempfile.tempdir = sys.argv[1]
import eagle3_nb.engines.probing as probing
import eagle3_nb.engines.vllm.probe as adapter
probing.engine_version = adapter.engine_version = lambda engine: "0.34.0"
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.probe import probe_checkpoint
try:
    probe_checkpoint(sys.argv[2], "vllm")
except Eagle3NbError as exc:
    print("refused:", exc)
"""


def test_a_probe_that_fails_leaves_no_temporary_folder(tmp_path):
    """The vLLM adapter writes a sitecustomize folder before it imports the engine; here the
    engine is missing (its version faked so the adapter runs), and the folder must still go."""
    from importlib.util import find_spec
    if find_spec("vllm") is not None:
        pytest.skip("vllm is installed in this Python")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    r = subprocess.run([sys.executable, "-c", PROBE_WITHOUT_ENGINE, str(scratch),
                        str(DRAFTS / "good")], capture_output=True, text=True, cwd=REPO,
                       timeout=300)
    assert "refused:" in r.stdout and "does not import" in r.stdout, r.stderr[-2000:]
    assert list(scratch.iterdir()) == []


# ----------------------------------------------------------------------------- temp files

def test_atomic_write_never_writes_through_a_planted_link(tmp_path):
    """The old temp name was predictable (.NAME.PID.tmp): a link planted there redirected the
    write into another file."""
    from eagle3_nb.io.files import atomic_write_text

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "summary.json"
    (tmp_path / f".{out.name}.{os.getpid()}.tmp").symlink_to(victim)
    atomic_write_text(out, "new")
    assert victim.read_text() == "precious" and out.read_text() == "new"
    assert not out.is_symlink()


def test_create_text_never_replaces(tmp_path):
    from eagle3_nb.io.files import create_text

    fresh = tmp_path / "fresh.json"
    create_text(fresh, "one")
    with pytest.raises(Eagle3NbError, match="exists"):
        create_text(fresh, "two")
    assert fresh.read_text() == "one"
    assert oct(fresh.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
