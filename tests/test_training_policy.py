"""Checks 6 and 9 of `eagle3-nb data` (torch): on-policy answers against original ones on dumps
made from the bundled target, and the bundled mismatched dump."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import SAMPLES

TRAINING = SAMPLES / "training"
TEMPLATE = TRAINING / "chat_template.jinja"
TARGET = SAMPLES / "target"
CAPTURED = (2, 4, 5, 8)   # speculators' default capture for 8 layers; the last (8) is the loss layer


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    """hs_{i}.safetensors for each row of the on-policy and original-answer sets, as
    speculators' extraction writes them (the last captured layer pre-norm)."""
    import torch
    from safetensors.torch import save_file

    from eagle3_nb.target import TargetModel

    target = TargetModel.load(TARGET)
    out = {}
    for name in ("speculators", "off-policy"):
        d = tmp_path_factory.mktemp(name)
        rows = [json.loads(x) for x in (TRAINING / name / "data.jsonl").read_text().splitlines()]
        with torch.no_grad():
            for i, row in enumerate(rows):
                ids = torch.tensor(row["input_ids"])
                h = target.forward_hidden(ids)
                states = torch.stack([h.state(k, final="pre_norm") for k in CAPTURED], 1)
                save_file({"hidden_states": states.to(torch.bfloat16).contiguous(),
                           "token_ids": ids}, str(d / f"hs_{i}.safetensors"))
        out[name] = d
    return out


def run(variant: str, **kw):
    from eagle3_nb.checks.data import check_data

    return check_data(TRAINING / variant, tokenizer=TARGET, chat_template=TEMPLATE,
                      serve_thinking=False, **kw).to_json()


def policy_finding(data) -> dict:
    return next(f for f in data["findings"] if f["code"] == "TRAIN_DATA_OFF_POLICY")


def test_check6_separates_on_policy_from_original_answers_on_dumps(dumps):
    on = run("speculators", hidden_states=dumps["speculators"], target=TARGET)
    off = run("off-policy", hidden_states=dumps["off-policy"], target=TARGET)
    a, b = on["policy"], off["policy"]
    assert a["source"] == b["source"] == "dumps" and a["positions"] == b["positions"] > 200
    assert a["agreement"] > 0.95 and b["agreement"] < 0.6
    se = math.sqrt(a["se_rows"] ** 2 + b["se_rows"] ** 2)
    assert a["agreement"] - b["agreement"] > 2 * se
    assert policy_finding(on)["severity"] == "info"
    assert policy_finding(off)["severity"] == "warning"
    assert not [f for f in on["findings"] if f["code"] == "DUMP_MISMATCH"]


def test_check6_without_dumps_reads_the_provenance():
    f = policy_finding(run("specforge", hidden_states=None, run_target=True))
    assert f["severity"] == "info" and f["evidence"]["status"] == {"success": 12}


def test_check9_the_mismatched_dump():
    data = run("dumps-mismatched", hidden_states=TRAINING / "dumps-mismatched",
               draft=SAMPLES / "drafts" / "good")
    f = next(f for f in data["findings"] if f["code"] == "DUMP_MISMATCH")
    ev = f["evidence"]
    assert f["severity"] == "error"
    assert (ev["token_ids_differ"], ev["aux_slots_differ"], ev["non_finite"]) == (1, 1, 1)
