"""The failure catalogue on the bundled samples: inspect names the right fate per engine.

Expectations live in data_samples/drafts/manifest.json, written from DOMAIN.md independently
of the planner (samples.py); this test holds the planner to them.
"""

import json

import pytest

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.inspection import inspect_checkpoint

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
