"""#23: a default report opens the draft at most twice (once in the report, once in the kernel
its notebooks share) and plans each engine range once per process: the notebooks take the
inspection the report made, and share the draft, the target and the wirings planned from them."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

import open_counter
from eagle3_nb.io.resources import samples_dir
from eagle3_nb.report.options import ReportOptions
from eagle3_nb.report.run import run_report

SAMPLES = samples_dir()
DRAFT = SAMPLES / "drafts" / "layers0-flat"
ENGINES = ["sglang==0.5.9", "vllm==0.34.0"]


@pytest.fixture
def counted(tmp_path, monkeypatch):
    log = tmp_path / "count.jsonl"
    ipython = tmp_path / "ipython"
    open_counter.write_startup(ipython)
    monkeypatch.setenv(open_counter.LOG_VARIABLE, str(log))
    monkeypatch.setenv("IPYTHONDIR", str(ipython))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from eagle3_nb.engines import planner
    from eagle3_nb.io import checkpoint
    from eagle3_nb.io.checkpoint import Checkpoint

    # this test process may hold the draft open from an earlier test: count from nothing
    monkeypatch.setattr(checkpoint, "_OPENED", {})

    monkeypatch.setattr(Checkpoint, "open", Checkpoint.open)  # restored after the test
    open_counter.import_planners()  # so that every patched plan_load is restored below
    plans = {name: m for name, m in list(__import__("sys").modules.items())
             if name.startswith("eagle3_nb") and getattr(m, "plan_load", None) is planner.plan_load}
    for m in plans.values():
        monkeypatch.setattr(m, "plan_load", m.plan_load)
    open_counter.install()
    return log


@pytest.mark.notebook
def test_a_default_report_opens_the_draft_twice_and_plans_once_per_process(counted, tmp_path):
    summary = run_report(ReportOptions(
        checkpoint=DRAFT, out=tmp_path / "report", target=SAMPLES / "target", engines=ENGINES,
        extra={"n_samples": "4", "max_new_tokens": "16"}, fail_on="never"),
        progress=lambda line: None)
    assert [s["status"] for s in summary["notebooks"]] == ["ok"] * 5, summary["notebooks"]
    events = open_counter.read(counted)
    processes = {e["pid"] for e in events}
    assert os.getpid() in processes and len(processes) == 2, processes  # the report, one kernel
    opens = [e for e in events if e["event"] == "open" and e["what"] == str(DRAFT.resolve())]
    assert len(opens) <= 2, opens
    assert {e["pid"] for e in opens} == processes  # once in each
    per_process = collections.Counter((e["pid"], e["what"]) for e in events
                                      if e["event"] == "plan")
    assert per_process and max(per_process.values()) == 1, per_process
    for pid in processes:
        assert {what.split(" keys ")[0] for p, what in per_process if p == pid} >= set(ENGINES)


@pytest.mark.notebook
def test_notebooks_00_and_01_show_the_reports_inspection(counted, tmp_path):
    """They read inspection.json instead of inspecting again; opened alone they inspect."""
    out = tmp_path / "report"
    summary = run_report(ReportOptions(checkpoint=DRAFT, out=out, engines=ENGINES,
                                       fail_on="never"), progress=lambda line: None)
    steps = {s["notebook"]: s for s in summary["notebooks"]}
    for name in ("00_triage", "01_checkpoint_keys"):
        assert steps[name]["status"] == "ok"
        assert steps[name]["parameters"]["inspection"] == str(out / "inspection.json")
    assert (out / "inspection.json").is_file()
    kernel = {e["pid"] for e in open_counter.read(counted)} - {os.getpid()}
    kernel_opens = [e for e in open_counter.read(counted)
                    if e["pid"] in kernel and e["event"] == "open"]
    assert len(kernel_opens) == 1  # notebook 02's vocabulary check; 00 and 01 opened nothing


@pytest.mark.slow
def test_notebooks_03_and_04_checks_share_one_session_and_its_target(monkeypatch):
    """In one process (a report's kernel), the hidden-state and acceptance checks take the same
    Session: the target model is loaded once, and the session keeps the threads it chose."""
    from eagle3_nb.checks.acceptance import check_acceptance
    from eagle3_nb.checks.hidden import check_hidden_states
    from eagle3_nb.checks.options import AcceptanceOptions, HiddenStateOptions
    from eagle3_nb.session import Session
    from eagle3_nb.target import TargetModel

    monkeypatch.setattr(Session, "_current", None)
    loads = []
    real_load = TargetModel.load.__func__
    monkeypatch.setattr(TargetModel, "load", classmethod(
        lambda cls, *a, **kw: loads.append(a[0]) or real_load(cls, *a, **kw)))
    target, prompts = SAMPLES / "target", SAMPLES / "prompts.jsonl"
    hidden = check_hidden_states(DRAFT, target, prompts,
                                 HiddenStateOptions(n_samples=2, device="cpu")).to_json()
    session = Session.current("cpu")
    accept = check_acceptance(DRAFT, target, prompts, AcceptanceOptions(
        n_samples=2, max_new_tokens=4, what_if=False, device="cpu"))
    assert Session.current("cpu") is session and len(loads) == 1, loads
    assert hidden["threads"] == session.threads.label() == accept.threads
