"""Notebook 03 headless on the bundled tiny target: its summary.json carries the answer."""

import json

import pytest

from conftest import DRAFTS, REPO, SAMPLES
from eagle3_nb.report import render_html, run_notebook

NB03 = REPO / "notebooks" / "03_hidden_state_shapes.ipynb"
pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not (SAMPLES / "target" / "model.safetensors").exists(),
                                 reason="trained target not built (make train-samples)")]


def test_notebook_03_separates_trained_from_single_layer(tmp_path):
    executed = run_notebook(NB03, tmp_path, {
        "checkpoint": str(DRAFTS / "good"), "target": str(SAMPLES / "target"),
        "prompts": str(SAMPLES / "prompts.jsonl"), "engine": "sglang:0.5.23,vllm:0.33",
        "n_samples": 4, "device": "cpu", "output_dir": str(tmp_path)})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["notebook"] == "03_hidden_state_shapes"
    rows = {r["wiring"]["name"]: r for r in summary["wirings"]}
    assert {"trained", "single_layer", "layers_plus_one", "sglang==0.5.23", "vllm==0.33"} <= set(rows)
    assert rows["trained"]["fc_applied"] and rows["trained"]["width"] == 192
    assert rows["single_layer"]["fc_applied"] is False and rows["single_layer"]["width"] == 64
    assert rows["single_layer"]["accuracy"] <= 0.5 * rows["trained"]["accuracy"]
    html = render_html(executed, tmp_path / "03.html").read_text()
    assert "plotly" in html and "First-step draft accuracy" in html
