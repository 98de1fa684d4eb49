"""Notebook 05 under papermill, through `report --train-data` (one notebook run): its findings
reach the report's front page and its summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DRAFTS, REPO

NB05 = REPO / "notebooks" / "05_training_data.ipynb"
TRAINING = REPO / "data_samples" / "training"


def test_the_report_skips_notebook_05_without_training_data():
    from eagle3_nb.report.notebooks import notebook_parameters
    from eagle3_nb.report.options import ReportOptions
    from eagle3_nb.report.steps import skip_reason

    declared = notebook_parameters(NB05)
    why, how = skip_reason(declared, ReportOptions(checkpoint=DRAFTS / "good"))
    assert "--train-data" in how
    assert skip_reason(declared, ReportOptions(checkpoint=DRAFTS / "good",
                                               train_data=TRAINING)) is None


@pytest.mark.notebook
def test_report_train_data_runs_notebook_05_and_its_findings_reach_the_front_page(tmp_path):
    from eagle3_nb.report.options import ReportOptions
    from eagle3_nb.report.run import run_report

    out = tmp_path / "report"
    opts = ReportOptions(checkpoint=DRAFTS / "good", out=out, notebooks=[NB05],
                         train_data=TRAINING / "thinking-template",
                         tokenizer=REPO / "data_samples" / "target",
                         extra={"chat_template": str(TRAINING / "chat_template.jinja"),
                                "serve_thinking": "off"})
    summary = run_report(opts, progress=lambda line: None)
    step = summary["notebooks"][0]
    assert step["status"] == "ok", step
    nb_summary = json.loads((out / "05_training_data" / "summary.json").read_text())
    codes = {f["code"] for f in nb_summary["findings"]}
    assert "TRAIN_TEMPLATE_MISMATCH" in codes
    assert any(f["code"] == "TRAIN_TEMPLATE_MISMATCH" and f["severity"] == "error"
               for f in summary["findings"])
    front = (out / "index.html").read_text(encoding="utf-8")
    assert "TRAIN_TEMPLATE_MISMATCH" in front
    # the report's draft reaches the notebook: its t2d is checked against the data
    assert any(m["source"].endswith("drafts/good") for m in nb_summary["vocab"]["mappings"])


def test_the_report_command_takes_train_data():
    from eagle3_nb.cli import build_parser

    args = build_parser().parse_args(["report", "DRAFT", "--train-data", "data/"])
    assert args.train_data == "data/"
