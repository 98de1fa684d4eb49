"""eagle3-nb diff: a draft against a known-good one, on the bundled samples."""

from __future__ import annotations

import json

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.checks.diff import diff_drafts


def test_the_same_draft_has_no_differences():
    data = diff_drafts(DRAFTS / "good", DRAFTS / "sharded", ["sglang==0.5.9"], TARGET_CONFIG)
    assert data["findings"] == [] and all(r["status"] == "same" for r in data["tensors"])


def test_the_first_seed_story_layers0_keys_against_the_good_draft():
    data = diff_drafts(DRAFTS / "good", DRAFTS / "layers0-flat", ["sglang==0.5.9"], TARGET_CONFIG)
    messages = " | ".join(f["message"] for f in data["findings"])
    assert "key layout eagle -> speculators" in messages
    assert "sglang==0.5.9 ok -> silent_failure" in messages
    assert all(r["status"] == "same" for r in data["tensors"])  # same tensors, other names


def test_a_nan_head_and_a_vocab_change_are_named():
    data = diff_drafts(DRAFTS / "good", DRAFTS / "nan-head", ["vllm==0.33"], TARGET_CONFIG)
    assert any(r["name"] == "lm_head.weight" and r["status"] == "NaN/Inf" for r in data["tensors"])
    data = diff_drafts(DRAFTS / "good", DRAFTS / "d2t-absolute", ["vllm==0.33"], TARGET_CONFIG)
    assert data["vocab"] == {"good": "offset", "other": "absolute"}
    assert any("d2t format offset -> absolute" in f["message"] for f in data["findings"])


def test_diff_cli(run_cli):
    rc, out, err = run_cli("diff", DRAFTS / "good", DRAFTS / "fresh-layer", "--engine",
                           "sglang==0.5.9", "--target-config", TARGET_CONFIG, "--json")
    data = json.loads(out)
    assert rc == 1, err
    moved = {r["name"] for r in data["tensors"] if r["status"] == "norm moved"}
    assert moved  # a freshly initialised layer is another tensor than the trained one
    rc, out, _ = run_cli("diff", DRAFTS / "good", DRAFTS / "good")
    assert rc == 0 and "no difference" in out
