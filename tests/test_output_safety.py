"""Nothing a user owns is lost: what `report` and `convert` write appears whole or not at all,
next to what it replaces, and never over or inside anything else. Each case here failed before
io/files.py's staging, lock and swap (issue: hardening), with the data loss named in its doc.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import DRAFTS, REPO, SAMPLES
from eagle3_nb.cli import main
from eagle3_nb.io.files import OWNER_NAME, directory_lock, remove_stale_staging
from eagle3_nb.report import options as report_options
from eagle3_nb.report import run as report_run
from eagle3_nb.report import summary as report_summary

LAYERS0 = DRAFTS / "layers0-flat"
NB01 = REPO / "notebooks" / "01_checkpoint_keys.ipynb"
TARGET_CONFIG = SAMPLES / "target" / "config.json"


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".eagle3nb-" in p.name)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def fake_report(out: Path, extra: dict[str, str] | None = None) -> None:
    """A report as this version writes it: files plus the marker listing them."""
    files = {"index.html": "old", "summary.json": "{}",
             "01_checkpoint_keys/01_checkpoint_keys.html": "old"}
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (out / report_options.MARKER).write_text(json.dumps(
        {"written_by": "eagle3-nb report", "files": [*files, report_options.MARKER]}))
    for rel, text in (extra or {}).items():
        (out / rel).write_text(text)


# ----------------------------------------------------------------------------- what --out may be

def test_overwrite_never_deletes_a_file_the_report_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    fake_report(out, {"NOTES.md": "my notes"})
    before = snapshot(out)
    assert main(["report", str(LAYERS0), "--out", str(out), "--overwrite"]) == 2
    assert "NOTES.md" in capsys.readouterr().err
    assert snapshot(out) == before


def test_a_notebook_named_folder_of_the_users_is_not_report_output(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "07_mine").mkdir(parents=True)
    (out / "07_mine" / "draft.txt").write_text("mine")
    assert main(["report", str(LAYERS0), "--out", str(out), "--overwrite"]) == 2
    assert "07_mine/draft.txt" in capsys.readouterr().err
    assert (out / "07_mine" / "draft.txt").read_text() == "mine"


@pytest.mark.parametrize("how", ["dotdot", "link"])
def test_out_that_resolves_into_the_checkpoint_is_refused(tmp_path, capsys, how):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(LAYERS0, ckpt)
    (tmp_path / "x").mkdir()
    (tmp_path / "link").symlink_to(ckpt)
    out = tmp_path / "x" / ".." / "ckpt" / "sub" if how == "dotdot" else tmp_path / "link" / "sub"
    before = snapshot(ckpt)
    assert main(["report", str(ckpt), "--out", str(out)]) == 2
    assert "inside the checkpoint" in capsys.readouterr().err
    assert snapshot(ckpt) == before and leftovers(ckpt) == []


def test_out_inside_the_target_or_holding_an_input_is_refused(tmp_path, capsys):
    target = tmp_path / "target"
    shutil.copytree(SAMPLES / "target", target)
    assert main(["report", str(LAYERS0), "--target", str(target),
                 "--out", str(target / "report")]) == 2
    assert "inside --target" in capsys.readouterr().err
    outer = tmp_path / "outer"
    outer.mkdir()
    shutil.copy(SAMPLES / "prompts.jsonl", outer / "prompts.jsonl")
    assert main(["report", str(LAYERS0), "--prompts", str(outer / "prompts.jsonl"),
                 "--out", str(outer), "--overwrite"]) == 2
    assert "inside --out" in capsys.readouterr().err
    assert sorted(p.name for p in outer.iterdir()) == ["prompts.jsonl"]
    assert not (target / "report").exists()


@pytest.mark.parametrize("case", ["dangling link", "parent is a file"])
def test_unusable_out_is_bad_input_with_nothing_written(tmp_path, capsys, case):
    if case == "dangling link":
        out = tmp_path / "out"
        out.symlink_to(tmp_path / "nowhere")
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
    assert main(["report", str(LAYERS0), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle3-nb: error:") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if case == "dangling link"
                                                          else ["file"])


def test_a_second_run_on_the_same_out_is_refused_while_the_first_holds_it(tmp_path, capsys):
    out = tmp_path / "out"
    with directory_lock(out):
        assert main(["report", str(LAYERS0), "--out", str(out)]) == 2
    assert "another eagle3-nb run is writing here" in capsys.readouterr().err
    assert not out.exists() and leftovers(tmp_path) == []


# ----------------------------------------------------------------------------- killed runs

REPORT_CODE = """
import sys
from pathlib import Path
from eagle3_nb.report.options import ReportOptions
from eagle3_nb.report.run import run_report
run_report(ReportOptions(checkpoint=Path({ckpt!r}), out=Path({out!r}), overwrite=True,
                         target_config=Path({cfg!r}), notebooks=[Path({nb!r})]),
           progress=lambda line: None)
"""


def start_report(out: Path) -> subprocess.Popen:
    """The report in a child Python; its stderr goes to an unnamed file, not a pipe nobody reads
    while it runs (a pipe that fills would stall the child and read as a hang)."""
    code = REPORT_CODE.format(ckpt=str(LAYERS0), out=str(out), cfg=str(TARGET_CONFIG),
                              nb=str(NB01))
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=err)
    proc.err_file = err
    return proc


def stderr_of(proc: subprocess.Popen) -> str:
    proc.err_file.seek(0)
    return proc.err_file.read().decode(errors="replace")[-3000:]


def stopped(proc: subprocess.Popen, timeout: float = 60) -> int:
    """The child's exit code; a child still running after TIMEOUT is killed, and the test fails
    with what it wrote."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running {timeout} s after the signal:\n{stderr_of(proc)}")


def wait_for_staging(parent: Path, name: str, proc: subprocess.Popen, limit_s: float = 120):
    """Until the run is writing notebook output into its staging dir."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, stderr_of(proc)
        for d in parent.glob(f".{name}.eagle3nb-tmp-*"):
            if any(d.glob("01_checkpoint_keys/*")):
                return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the report never started writing")


def run_report_once(out: Path) -> dict:
    return report_run.run_report(report_options.ReportOptions(
        checkpoint=LAYERS0, out=out, overwrite=True, target_config=TARGET_CONFIG,
        notebooks=[NB01]), progress=lambda line: None)


@pytest.mark.notebook
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_report_stopped_by_a_signal_leaves_nothing(tmp_path, sig):
    out = tmp_path / "out"
    proc = start_report(out)
    wait_for_staging(tmp_path, "out", proc)
    proc.send_signal(sig)
    assert stopped(proc) != 0, stderr_of(proc)
    assert not out.exists() and leftovers(tmp_path) == []


@pytest.mark.notebook
def test_a_killed_overwrite_keeps_the_previous_report_and_the_next_run_cleans_up(tmp_path):
    out = tmp_path / "out"
    run_report_once(out)
    previous = snapshot(out)
    assert "index.html" in previous and report_options.MARKER in previous
    proc = start_report(out)
    wait_for_staging(tmp_path, "out", proc)
    proc.send_signal(signal.SIGKILL)
    stopped(proc)
    assert snapshot(out) == previous                      # the old report, complete
    left = leftovers(tmp_path)
    assert any(".eagle3nb-tmp-" in n for n in left) and any(n.endswith("-lock") for n in left)
    summary = run_report_once(out)                        # takes over the stale lock and tmp
    assert leftovers(tmp_path) == []
    assert summary["notebooks"][0]["status"] == "ok" and (out / "index.html").is_file()
    assert set(json.loads((out / report_options.MARKER).read_text())["files"]) == set(snapshot(out))


def test_a_run_killed_between_its_renames_gets_its_previous_report_back(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.Popen(["true"])
    dead.wait()
    aside = tmp_path / ".out.eagle3nb-old-abc"
    (aside / "previous").mkdir(parents=True)
    (aside / "previous" / "index.html").write_text("complete")
    (aside / OWNER_NAME).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    done = remove_stale_staging(out)
    assert any("restored" in line for line in done)
    assert (out / "index.html").read_text() == "complete" and leftovers(tmp_path) == []


def test_a_staging_dir_of_a_live_process_is_left_alone(tmp_path):
    mine = tmp_path / ".out.eagle3nb-tmp-live"
    mine.mkdir()
    (mine / OWNER_NAME).write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
    unowned = tmp_path / ".out.eagle3nb-tmp-unknown"   # no owner file: not provably stale
    unowned.mkdir()
    assert remove_stale_staging(tmp_path / "out") == []
    assert mine.is_dir() and unowned.is_dir()


CONVERT_CODE = """
import time
import eagle3_nb.convert as convert
import eagle3_nb.io.safetensors as safetensors_io
real = safetensors_io.copy_tensor
def slow(*args, **kwargs):
    time.sleep(0.2)
    return real(*args, **kwargs)
safetensors_io.copy_tensor = slow
convert.convert_checkpoint({src!r}, {dst!r}, to="speculators")
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_stopped_convert_leaves_nothing_or_what_the_next_convert_removes(tmp_path, sig):
    src, dst = tmp_path / "src", tmp_path / "dst"
    shutil.copytree(LAYERS0, src)
    proc = subprocess.Popen([sys.executable, "-c", CONVERT_CODE.format(src=str(src),
                                                                       dst=str(dst))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".dst.eagle3nb-tmp-*/*.safetensors")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert not dst.exists()
    if sig != signal.SIGKILL:
        assert leftovers(tmp_path) == []
        return
    assert len(leftovers(tmp_path)) == 1                 # SIGKILL cannot be caught...
    assert main(["convert", str(src), str(dst), "--to", "speculators"]) == 0
    assert leftovers(tmp_path) == [] and dst.is_dir()    # ...the next convert clears it


@pytest.mark.notebook
def test_a_marker_listing_paths_outside_the_report_deletes_nothing_there(tmp_path):
    """The marker is input too: a listed ../../victim or /abs/victim is never joined to a path
    and removed."""
    out = tmp_path / "out"
    out.mkdir()
    fake_report(out)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    marker = json.loads((out / report_options.MARKER).read_text())
    marker["files"] += ["../../victim.txt", str(victim)]
    (out / report_options.MARKER).write_text(json.dumps(marker))
    run_report_once(out)
    assert victim.read_text() == "keep me" and (out / "index.html").is_file()
    assert leftovers(tmp_path) == []


@pytest.mark.notebook
def test_a_full_disk_mid_report_keeps_the_previous_report_whole(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: the first big write (a page with plotly.js
    embedded) fails. Before: truncated .ipynb/.html files in --out, the old report gone."""
    import resource

    out = tmp_path / "out"
    out.mkdir()
    fake_report(out)
    before = snapshot(out)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    code = REPORT_CODE.format(ckpt=str(LAYERS0), out=str(out), cfg=str(TARGET_CONFIG),
                              nb=str(NB01))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          preexec_fn=small_files, timeout=300)
    assert proc.returncode != 0
    assert snapshot(out) == before and leftovers(tmp_path) == []


# ----------------------------------------------------------------------------- preflight

@pytest.mark.parametrize("case", ["prompts", "tokenizer", "config", "observed", "corpus"])
def test_report_reads_its_inputs_before_running_anything(tmp_path, capsys, case):
    """Before: a report of failed notebooks and exit 1; now exit 2 and nothing written."""
    draft = tmp_path / "draft"
    shutil.copytree(LAYERS0, draft)
    bad = tmp_path / "bad"
    args = ["report", str(draft), "--out", str(tmp_path / "out"),
            "--target-config", str(TARGET_CONFIG)]
    if case == "prompts":
        bad.write_text('{"input_ids": ["x"]}\n')
        args += ["--prompts", str(bad)]
    elif case == "tokenizer":
        bad.write_text("{}")
        args += ["--tokenizer", str(bad)]
    elif case == "config":
        cfg = json.loads((draft / "config.json").read_text())
        cfg["num_hidden_layers"] = "abc"
        (draft / "config.json").write_text(json.dumps(cfg))
    elif case == "observed":
        bad.write_text("no figures here\n")
        args += ["--observed", str(bad)]
    else:
        bad.write_text('{"input_ids": [1, -5]}\n')
        args += ["--corpus", str(bad.rename(tmp_path / "bad.jsonl"))]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle3-nb: error:") and "Traceback" not in err
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_checkpoint_declaring_a_terabyte_is_hashed_within_the_budget(tmp_path):
    """A sparse 1 TiB safetensors file with a valid header: before, the report hashed every
    byte before it started (effectively forever); now the read is bounded and the summary says
    which file was only partly hashed."""
    import struct

    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(LAYERS0 / "config.json", draft / "config.json")
    n = 1 << 40
    header = json.dumps({"x": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    with open(draft / "model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        try:
            fh.truncate(8 + len(header) + n)
        except OSError:
            pytest.skip("this file system holds no sparse 1 TiB file")
    opts = report_options.resolve_options(report_options.ReportOptions(checkpoint=draft,
                                                               out=tmp_path / "out"))
    hashes = report_summary.input_hashes(opts, [])["checkpoint"]
    assert set(hashes["files"]) == {"config.json"}
    part = hashes["partially_hashed"]["model.safetensors"]
    assert part["size"] == 8 + len(header) + n and part["first_bytes"] == 64 << 20
    assert not (tmp_path / "out").exists()
