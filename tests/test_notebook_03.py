"""Notebook 03 headless on the bundled tiny target: its summary.json carries the answer, and its
findings reach the triage report's merged list."""

import json

import pytest

from conftest import DRAFTS, REPO, SAMPLES, write_dumps
from eagle3_nb.findings import evidence_line
from eagle3_nb.report.notebooks import render_html, run_notebook
from eagle3_nb.report.steps import Step
from eagle3_nb.report.summary import merge_findings
from test_notebooks import first_output

NB03 = REPO / "notebooks" / "03_hidden_state_shapes.ipynb"
pytestmark = pytest.mark.notebook


def test_notebook_03_separates_trained_from_single_layer(tmp_path):
    """layers0-flat: SGLang 0.5.9 drops its layers.0.* keys, so the served draft collapses
    while the features reaching it are the trained ones."""
    executed = run_notebook(NB03, tmp_path, {
        "checkpoint": str(DRAFTS / "layers0-flat"), "target": str(SAMPLES / "target"),
        "prompts": str(SAMPLES / "prompts.jsonl"), "engine": "sglang:0.5.9,sglang:0.5.23,vllm:0.33",
        "n_samples": 4, "device": "cpu", "output_dir": str(tmp_path)})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["notebook"] == "03_hidden_state_shapes"
    # what it had, in summary.json and atop its output (the target run live: no dumps needed)
    assert summary["had"] == {"checkpoint": "given", "target weights": "given (run live)",
                              "engine release": "named (--engine)"}
    assert evidence_line(summary["had"]) in first_output(executed)
    rows = {r["wiring"]["name"]: r for r in summary["wirings"]}
    assert {"trained", "single_layer", "layers_plus_one", "sglang==0.5.23", "vllm==0.33"} <= set(rows)
    assert rows["trained"]["fc_applied"] and rows["trained"]["width"] == 192
    assert rows["single_layer"]["fc_applied"] is False and rows["single_layer"]["width"] == 64
    assert rows["single_layer"]["accuracy"] <= 0.5 * rows["trained"]["accuracy"]
    assert rows["trained"]["feature_cosine"] == pytest.approx(1.0, abs=1e-5)
    assert rows["single_layer"]["aux_cosine"] is None
    assert len(rows["layers_plus_one"]["aux_cosine"]) == 3
    assert summary["trained_layer_ids"] == [2, 4, 5]
    assert len(summary["layer_similarity"]) == summary["num_layers"] + 1 == 9
    assert {(f["code"], f["engine"]) for f in summary["findings"]} == {
        ("HIDDEN_COLLAPSES", "sglang==0.5.9")}
    merged = merge_findings([Step("03_hidden_state_shapes", NB03, {}, summary=summary)])
    assert [(f["code"], f["notebooks"]) for f in merged] == [
        ("HIDDEN_COLLAPSES", ["03_hidden_state_shapes"])]
    assert "sglang==0.5.9" in merged[0]["todo"] and merged[0]["meaning"]
    html = render_html(executed, tmp_path / "03.html").read_text()
    assert "plotly" in html and "First-step draft accuracy" in html
    assert "How alike are the target" in html  # the layer-similarity heatmap's section
    assert "Data path per wiring" in html and "unloaded" in html  # sglang==0.5.9's layer 0
    assert "HIDDEN_COLLAPSES" in html and "feature cos" in html


def test_notebook_03_on_dumps_without_a_target(tmp_path):
    """A target too big to run: the engine's dumps alone (the draft brings its embeddings)."""
    dumps = write_dumps(tmp_path / "dumps", n=3)
    executed = run_notebook(NB03, tmp_path, {
        "checkpoint": str(DRAFTS / "good-speculators"), "target": "", "hidden_states": str(dumps),
        "engine": "vllm:0.33,sglang:0.5.23", "n_samples": 3, "device": "cpu",
        "output_dir": str(tmp_path)})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["source"] == "dumps" and summary["n_samples"] == 3
    assert summary["had"] == {"checkpoint": "given", "hidden-state dumps": "given",
                              "target weights": "not given (--target)",
                              "dump layer ids": "not given, the trained layers assumed "
                                                "(-p dump_layer_ids 2,4,5,8)",
                              "engine release": "named (--engine)"}
    assert evidence_line(summary["had"]) in first_output(executed)
    rows = {r["wiring"]["name"]: r for r in summary["wirings"]}
    assert rows["vllm==0.33"]["accuracy"] == pytest.approx(rows["trained"]["accuracy"])
    assert rows["sglang==0.5.23"]["error"]            # SGLang cannot load a speculators config
    assert summary["findings"] == []                  # a refusal to load is notebook 01's
    html = render_html(executed, tmp_path / "03.html").read_text()
    assert "hidden-state dumps" in html and "Not measured" in html
