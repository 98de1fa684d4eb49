"""What TensorRT-LLM reports, read by the kit: its /metrics iteration stats and per-request
perf metrics (eagle3_nb/engines/trtllm/metrics.py), its server log's signatures (log.py), and
its SaveState hidden-state dumps (eagle3_nb/target.py read_savestate_dump)."""

from __future__ import annotations

import json

import pytest

from eagle3_nb.checks.log import check_log_text
from eagle3_nb.errors import DumpFormatError, UnsafeInputError
from eagle3_nb.observation import MetricsFormatError
from eagle3_nb.observed.metrics import parse_observed


def iteration(i, drafted, accepted, requests):
    return {"iter": i, "specDecodingStats": {
        "numDraftTokens": drafted, "numAcceptedTokens": accepted,
        "numRequestsWithDraftTokens": requests,
        "acceptanceLength": (accepted + requests) / requests if requests else 0.0,
        "iterLatencyMS": 1.5, "draftOverhead": 0.2}}


def test_the_metrics_iteration_stats_give_the_acceptance_length(tmp_path):
    stats = [iteration(1, 8, 5, 2), iteration(2, 0, 0, 0), iteration(3, 4, 1, 1)]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(stats))
    obs = parse_observed(path)
    assert obs.engine == "trtllm" and obs.n_verify_steps == 3 and obs.n_drafted == 12
    assert obs.mean_acceptance_length == pytest.approx(1 + 6 / 3)
    assert obs.draft_acceptance_rate == pytest.approx(0.5) and obs.draft_tokens_per_step == 4
    assert obs.details["reported_acceptance_length"] == pytest.approx(3.0)
    assert any("not checked against a running engine" in n for n in obs.notes)


def test_stats_without_a_drafted_token_say_speculation_is_off():
    with pytest.raises(MetricsFormatError, match="no iteration drafted"):
        parse_observed([iteration(1, 0, 0, 0)])


def test_per_request_perf_metrics_are_read_and_zeroed_ones_are_unavailable_not_zero(tmp_path):
    lines = [{"request_id": r, "perf_metrics": {"speculative_decoding": {
        "acceptance_rate": a / 8, "total_accepted_draft_tokens": a, "total_draft_tokens": 8}}}
        for r, a in ((1, 4), (2, 6))]
    path = tmp_path / "perf_metrics.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    obs = parse_observed(path, num_speculative_tokens=4)
    assert obs.n_requests == 2 and obs.draft_acceptance_rate == pytest.approx(10 / 16)
    assert obs.mean_acceptance_length == pytest.approx(1 + 10 / 4)
    zeroed = [{"request_id": 1, "perf_metrics": {"timing_metrics": {}}}]
    with pytest.raises(MetricsFormatError, match="17082"):
        parse_observed(zeroed)


LOG = """[TensorRT-LLM] TensorRT-LLM version: 1.2.1
[TRT-LLM] [W] Missing 'draft_vocab_size' in pretrained config; defaulting to 'vocab_size'. Set 'draft_vocab_size' explicitly if the draft head uses a different vocabulary.
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/speculative/eagle3.py", line 120, in __post_init__
    raise ValueError(
ValueError: Not enough hidden layers for default EAGLE3 capture
"""


def test_the_server_log_names_the_release_and_explains_the_capture_error():
    reading = check_log_text(LOG)
    assert (reading.engine, reading.version) == ("trtllm", "1.2.1")
    codes = {f.code for f in reading.findings}
    assert "LOAD_ERROR" in codes
    text = " ".join(f.message for f in reading.findings)
    assert "eagle3_layers_to_capture" in text or "5 layers or fewer" in text


def _savestate(path, records):
    import torch

    torch.save(records, path)
    return path


def test_a_savestate_dump_reads_as_samples(tmp_path):
    import torch

    from eagle3_nb.target import read_dump

    T, H = 5, 8
    records = [{"id": i, "input_ids": torch.arange(T), "hidden_state": torch.randn(T, H),
                "hidden_state_features": torch.randn(T, 3 * H)} for i in (1, 2)]
    _savestate(tmp_path / "data_1.pt", records)
    samples = read_dump(tmp_path)
    assert len(samples) == 2 and samples[0].format == "savestate"
    assert samples[0].num_aux() == 3 and samples[0].last_hidden_kind == "final_norm"
    assert torch.equal(samples[1].aux_hidden_states, records[1]["hidden_state_features"])


def test_a_savestate_dump_of_one_layer_or_with_code_is_refused(tmp_path):
    import torch

    from eagle3_nb.target import read_dump

    one = _savestate(tmp_path / "one.pt", [{"id": 1, "input_ids": torch.arange(4),
                                            "hidden_state": torch.randn(4, 8)}])
    with pytest.raises(DumpFormatError, match="hidden_state_features"):
        read_dump(one)
    evil = _savestate(tmp_path / "evil.pt", [{"id": 1, "input_ids": torch.arange(4),
                                             "hidden_state": torch.randn(4, 8),
                                             "made": __import__("datetime").date(2026, 1, 1)}])
    with pytest.raises(UnsafeInputError):
        read_dump(evil)
