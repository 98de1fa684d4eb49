"""The evidence decides what is simulated and ranked (#24): a named release is simulated by
default, an observed figure without a release is explained by every release range's wiring,
and a hypothesis the checkpoint's own evidence excludes is shown as ruled out, never as
consistent. On the bundled layers0-flat draft, whose layers.0.* keys SGLang up to 0.5.11 drops:
the first seed story's trap (a d2t that is fine) must not reappear."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_nb.checks.acceptance import evidence_engines, what_if
from eagle3_nb.engines import ENGINES
from eagle3_nb.observation import ObservedMetrics

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data_samples"
DRAFT = SAMPLES / "drafts" / "layers0-flat"


def test_which_releases_a_run_simulates_follows_the_evidence():
    named, why = evidence_engines(["sglang==0.5.9"], None, None)
    assert named == ["sglang==0.5.9"] and "--engine" in why
    stated = ObservedMetrics(engine="sglang", source="log", version_detected="0.5.9")
    assert evidence_engines(None, None, stated)[0] == ["sglang==0.5.9"]
    engine_only = ObservedMetrics(engine="vllm", source="log")
    ranges, why = evidence_engines(None, None, engine_only)
    assert ranges == [p.key for p in ENGINES["vllm"].profiles] and "not known" in why
    number = ObservedMetrics(engine="unknown", source="number", mean_accept_length=1.0)
    ranges, _ = evidence_engines(None, None, number)
    assert len(ranges) == sum(len(e.profiles) for e in ENGINES.values())
    assert evidence_engines(None, None, None)[0] is None  # each engine's newest


@pytest.mark.slow
def test_an_observed_1_0_without_a_release_points_at_the_release_not_the_d2t():
    report = what_if(DRAFT, SAMPLES / "target", SAMPLES / "prompts.jsonl", observed=1.0,
                     n_samples=8, max_new_tokens=16)
    assert report["evidence"].startswith("your engine release is not known")
    rows = {r["wiring"]: r for r in report["rows"]}
    assert rows["sglang==0.5.10.post1"]["consistent"]  # covers 0.5.9: layers.0.* dropped
    assert not rows["sglang==0.5.23"]["consistent"]
    for name in ("d2t_absolute", "d2t_none"):
        assert rows[name]["ruled_out"] and not rows[name]["consistent"]
    assert "d2t" not in report["explanation"].split(";")[0]


@pytest.mark.slow
def test_a_named_release_is_simulated_beside_trained():
    report = what_if(DRAFT, SAMPLES / "target", SAMPLES / "prompts.jsonl",
                     wirings=["trained", "sglang==0.5.9"], engines=["sglang==0.5.9"],
                     n_samples=8, max_new_tokens=16)
    rows = {r["wiring"]: r for r in report["rows"]}
    assert set(rows) == {"trained", "sglang==0.5.9"}
    assert rows["sglang==0.5.9"]["mean_accept_length"] < 1.1 < rows["trained"][
        "mean_accept_length"]
    assert rows["sglang==0.5.9"]["vs_trained"]["verdict"] == "lower"
