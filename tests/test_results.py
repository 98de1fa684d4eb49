"""#23: every check returns a result that says what it is: its kind (one of SUMMARY_KINDS), its
JSON form and its summary.json part, which declares that kind. A notebook showing the report's
saved inspection writes the same part as one that inspects the draft itself."""

from __future__ import annotations

import json

import pytest

from conftest import DRAFTS, SAMPLES, TARGET_CONFIG
from eagle3_nb.checks.acceptance import AcceptanceCheck
from eagle3_nb.checks.data import DataCheck, check_data
from eagle3_nb.checks.hidden import HiddenStatesCheck
from eagle3_nb.checks.load import Inspection, SavedInspection, inspect_checkpoint, inspection_of
from eagle3_nb.checks.result import CheckResult, JsonResult
from eagle3_nb.checks.triage import Triage
from eagle3_nb.checks.vocab import VocabCheck, check_vocab
from eagle3_nb.findings import SUMMARY_KINDS, part_kind
from eagle3_nb.io.files import json_text

ENGINES = ["sglang==0.5.9", "vllm==0.33"]


def test_every_result_class_declares_a_kind_and_its_notebook():
    kinds = {cls: cls.kind for cls in (Inspection, SavedInspection, Triage, VocabCheck,
                                       HiddenStatesCheck, AcceptanceCheck, DataCheck)}
    assert set(kinds.values()) == set(SUMMARY_KINDS)
    for cls in kinds:
        assert issubclass(cls, CheckResult) and cls.notebook[:2].isdigit(), cls


def test_a_result_class_with_an_unknown_kind_is_refused():
    with pytest.raises(TypeError, match="not one of"):
        type("Keys", (JsonResult,), {"kind": "keys"})


def test_inspection_parts_declare_their_kind_and_survive_the_report_round_trip(tmp_path):
    """The report writes Inspection.to_json() to inspection.json; notebooks 00 and 01 read it
    back (inspection_of) and write the same summary part as an inspection made in place."""
    inspected = inspect_checkpoint(DRAFTS / "layers0-flat", ENGINES, TARGET_CONFIG)
    saved = tmp_path / "inspection.json"
    saved.write_text(json_text(inspected.to_json()))
    shown = inspection_of(DRAFTS / "layers0-flat", saved)
    assert isinstance(shown, SavedInspection)
    assert json.loads(json_text(shown.summary())) == json.loads(json_text(inspected.summary()))
    assert part_kind(inspected.summary()) == "inspection"
    assert shown.summary()["verdicts"]["sglang==0.5.9"] == "silent_failure"
    triage = Triage(shown.to_json()).summary()
    assert part_kind(triage) == "triage" and triage["notebook"] == "00_triage"
    assert {k: v for k, v in triage.items() if k not in ("kind", "notebook")} == {
        **{k: v for k, v in inspected.summary().items() if k not in ("kind", "notebook")},
        "top_findings": triage["top_findings"], "engine_flags": triage["engine_flags"],
        "ab_plan": []}
    assert triage["top_findings"][0]["severity"] == "error"


def test_inspection_of_without_a_saved_inspection_inspects():
    shown = inspection_of(DRAFTS / "good", "", engines=ENGINES, stats=False)
    assert isinstance(shown, Inspection) and shown.to_json()["checkpoint"].endswith("good")


def test_vocab_and_data_results_give_their_json_and_a_kinded_part():
    vocab = check_vocab(DRAFTS / "d2t-absolute", engines=ENGINES)
    assert vocab.to_json()["format"] == vocab.mapping.format == "absolute"
    part = vocab.summary()
    assert part_kind(part) == "vocab" and part["codes"] == ["D2T_ABSOLUTE"]
    training = check_data(SAMPLES / "training" / "specforge", tokenizer=SAMPLES / "target",
                          chat_template=SAMPLES / "training" / "chat_template.jinja",
                          serve_thinking=False)
    data = training.to_json()
    assert data["kind"] == "data" and data["rows_read"] > 0
    part = training.summary()
    assert part_kind(part) == "data" and part["findings"] == data["findings"]
    assert part["stats"]["rows"] == data["stats"]["rows"]
