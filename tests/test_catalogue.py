"""The failure catalogue on the bundled samples: inspect names the right fate per engine.

Expectations live in data_samples/drafts/manifest.json, written from DOMAIN.md independently
of the planner (samples.py); this test holds the planner to them.
"""

import json

import pytest

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.findings import verdict_line
from eagle3_nb.viz import keys as vk
from eagle3_nb.widgets import engine_explorer

MANIFEST = json.loads((DRAFTS / "manifest.json").read_text())
VARIANTS = sorted(MANIFEST["variants"])


@pytest.fixture(scope="module")
def inspections():
    engines = list(MANIFEST["engines"])
    return {name: inspect_checkpoint(DRAFTS / name, engines, TARGET_CONFIG).to_json()
            for name in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_engine_verdicts_and_codes(variant, inspections):
    data = inspections[variant]
    spec = MANIFEST["variants"][variant]
    by_engine = {e["profile"]: e for e in data["engines"]}
    for engine, expect in spec["expect"].items():
        got = by_engine[engine]["verdict"]
        codes = {f["code"] for f in data["findings"] if f["engine"] == engine}
        assert got == expect["verdict"], (variant, engine, [
            (f["code"], f["message"]) for f in data["findings"] if f["engine"] in (engine, None)])
        missing = set(expect["codes"]) - codes
        assert not missing, (variant, engine, missing, codes)


@pytest.mark.parametrize("variant", VARIANTS)
def test_global_codes(variant, inspections):
    codes = {f["code"] for f in inspections[variant]["findings"] if f["engine"] is None}
    assert set(MANIFEST["variants"][variant]["expect_global_codes"]) <= codes


def test_the_seed_case_names_every_dropped_decoder_key(inspections):
    data = inspections["layers0-flat"]
    sg = next(e for e in data["engines"] if e["profile"] == "sglang==0.5.9")
    dropped = {k["name"] for k in sg["keys"] if k["fate"] == "dropped"}
    decoder = {t["name"] for t in data["tensors"] if t["name"].startswith("layers.0.")}
    assert decoder and dropped == decoder
    assert all(p.startswith("model.midlayer.") for p in sg["unloaded_params"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_notebook_01_cells_on_every_sample(variant):
    """What notebook 01 runs, cell by cell, on every sample (stats on, as its default), and the
    summary.json it writes held to the manifest. test_notebooks runs a few under papermill."""
    engines = list(MANIFEST["engines"])
    inspected = inspect_checkpoint(DRAFTS / variant, engines, TARGET_CONFIG, stats=True)
    data = inspected.to_json()
    for cell in (vk.summary_html, vk.findings_html, vk.verdict_html, vk.key_table_html,
                 vk.schema_diff_html, vk.stats_table_html, vk.aux_layers_html):
        assert str(cell(data))
    assert vk.tensor_norms_figure(data).data
    assert engine_explorer(data) is not None
    summary = inspected.summary()
    assert summary["kind"] == "inspection" and summary["notebook"] == "01_checkpoint_keys"
    for profile, want in MANIFEST["variants"][variant]["expect"].items():
        assert summary["verdicts"][profile] == want["verdict"], profile
        assert f"{profile}: {want['verdict']}" in verdict_line(data)
