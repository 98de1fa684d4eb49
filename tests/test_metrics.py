"""Engine-metric parsers on hand-written recordings of every documented format (tests/recordings).

Expected numbers are recomputed here by hand from the counts written in each recording.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from eagle3_nb.engines.sglang.metrics import (RATE_SGLANG_LOG_NEW, RATE_SGLANG_LOG_OLD,
                                              RATE_SGLANG_REQUEST, parse_sglang_log,
                                              parse_sglang_meta_info, parse_sglang_responses,
                                              parse_sglang_server_info,
                                              sglang_log_rate_convention, sglang_meta_family,
                                              sglang_spec_metrics, summarize_sglang_log)
from eagle3_nb.engines.vllm.metrics import (RATE_VLLM, parse_vllm_log, summarize_vllm_log,
                                            vllm_spec_counters, vllm_spec_metrics)
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observation import ObservedMetrics, parse_prometheus
from eagle3_nb.observed.metrics import parse_observed

REC = Path(__file__).parent / "recordings"


def rec(name: str) -> str:
    return (REC / name).read_text()


def approx(x, rel=1e-9):
    return pytest.approx(x, rel=rel, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# SGLang decode log lines


def test_sglang_059_log_lines_and_fields():
    lines = parse_sglang_log(rec("sglang-0.5.9-decode.log"))
    assert [ln.accept_len for ln in lines] == [2.80, 2.40, 3.00, 2.60]
    assert [ln.accept_rate for ln in lines] == [0.70, 0.60, 0.75, 0.65]
    assert [ln.running_req for ln in lines] == [1, 2, 3, 1]
    first = lines[0]
    assert first.num_token == 812 and first.token_usage == 0.01 and first.queue_req == 0
    assert first.gen_throughput == 245.31 and first.graph is True
    assert first.timestamp == "2026-02-25 14:00:11" and first.rank == "TP0"
    assert first.line_no == 3  # the recording note and the prefill line are skipped


def test_sglang_059_log_summary_old_rate_formula():
    obs = summarize_sglang_log(parse_sglang_log(rec("sglang-0.5.9-decode.log")))
    # weighted by #running-req 1, 2, 3, 1
    mean = (2.80 * 1 + 2.40 * 2 + 3.00 * 3 + 2.60 * 1) / 7
    assert obs.mean_accept_length == approx(mean)
    assert obs.mean_acceptance_length == approx(mean)
    assert obs.accept_rate == approx((0.70 + 0.60 * 2 + 0.75 * 3 + 0.65) / 7)
    assert obs.details["mean_unweighted"] == approx((2.80 + 2.40 + 3.00 + 2.60) / 4)
    # rate = L / 4 on every line: the <=0.5.9 formula with num_draft_tokens 4
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_OLD
    assert obs.version_detected == "<=0.5.9"
    assert obs.draft_tokens_per_step == 3
    assert obs.draft_acceptance_rate == approx((mean - 1) / 3)
    assert obs.engine == "sglang"


def test_sglang_0523_log_summary_new_rate_formula():
    obs = parse_observed(REC / "sglang-0.5.23-decode.log")
    mean = (2.80 * 1 + 2.50 * 4 + 3.10 * 2 + 1.90 * 1) / 8
    rate = (0.60 * 1 + 0.50 * 4 + 0.70 * 2 + 0.30 * 1) / 8
    assert obs.mean_accept_length == approx(mean)
    assert obs.accept_rate == approx(rate)
    # rate = (L - 1) / 3 on every line: the post-0.5.9 formula, bonus excluded
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_NEW
    assert obs.version_detected == ">0.5.9"
    assert obs.draft_acceptance_rate == approx(rate)
    assert rate == pytest.approx((mean - 1) / 3)
    assert obs.source.endswith("sglang-0.5.23-decode.log")


def test_sglang_log_version_given_overrides_and_notes_conflict():
    lines = parse_sglang_log(rec("sglang-0.5.23-decode.log"))
    obs = summarize_sglang_log(lines, version="0.5.9")
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_OLD
    assert any("fit the other accept-rate formula" in n for n in obs.notes)
    obs = summarize_sglang_log(lines, version="0.5.23")
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_NEW and obs.version_detected == "0.5.23"


@pytest.mark.parametrize("version, convention", [
    ("0.4.10", RATE_SGLANG_LOG_OLD), ("0.5.9", RATE_SGLANG_LOG_OLD),
    ("0.5.9.post1", RATE_SGLANG_LOG_OLD), ("0.5.10", RATE_SGLANG_LOG_NEW),
    ("0.5.15", RATE_SGLANG_LOG_NEW), ("0.5.16", RATE_SGLANG_LOG_NEW),
    ("0.5.23", RATE_SGLANG_LOG_NEW)])
def test_sglang_rate_formula_boundary_is_pinned(version, convention):
    """The formula flips after 0.5.9, in the log line and in the gauge alike."""
    assert sglang_log_rate_convention(version) == convention
    lines = parse_sglang_log(rec("sglang-0.5.23-decode.log"))
    assert summarize_sglang_log(lines, version=version).accept_rate_convention == convention
    gauge = sglang_spec_metrics(rec("sglang-0.5.23-metrics.prom"), version=version)
    assert gauge.accept_rate_convention == convention
    assert (gauge.draft_acceptance_rate is not None) == (convention == RATE_SGLANG_LOG_NEW)


@pytest.mark.parametrize("version, family", [
    ("0.4.0", "0.4.10"), ("0.4.10", "0.4.10"), ("0.4.11", "undocumented"),
    ("0.5.8", "undocumented"), ("0.5.9", "0.5.9"), ("0.5.10", "undocumented"),
    ("0.5.15", "undocumented"), ("0.5.16", "0.5.16+"), ("0.5.23", "0.5.16+")])
def test_sglang_meta_info_family_boundaries_are_pinned(version, family):
    assert sglang_meta_family(version) == family


def test_sglang_meta_info_of_an_undocumented_release_is_read_with_a_note():
    meta = json.loads(rec("sglang-0.5.23-generate.json"))["meta_info"]
    st = parse_sglang_meta_info(meta, version="0.5.12")
    assert st.version_detected == "0.5.23"
    assert any("0.5.12" in n and "not in the reference notes" in n for n in st.notes)


def test_an_unreadable_version_is_bad_input():
    lines = parse_sglang_log(rec("sglang-0.5.23-decode.log"))
    with pytest.raises(Eagle3NbError, match="cannot read version"):
        summarize_sglang_log(lines, version="next")


def test_sglang_0410_log_accept_len_only():
    lines = parse_sglang_log(rec("sglang-0.4.10-decode.log"))
    assert [ln.accept_len for ln in lines] == [1.87, 1.95, 1.80]
    assert all(ln.accept_rate is None for ln in lines)
    obs = summarize_sglang_log(lines)
    assert obs.mean_accept_length == approx((1.87 + 1.95 * 2 + 1.80) / 4)
    assert obs.accept_rate is None and obs.accept_rate_convention is None
    assert obs.version_detected == "0.4.10"


def test_sglang_broken_log_flags_structural_failure():
    obs = parse_observed(rec("sglang-0.5.23-broken-decode.log"))
    assert obs.mean_accept_length == approx(1.0)
    assert obs.accept_rate == 0.0
    # 1.00 / 0.00 is only possible with the post-0.5.9 formula
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_NEW
    assert any("structural failure" in n for n in obs.notes)


def test_sglang_log_without_spec_lines_is_an_error():
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        parse_sglang_log(rec("sglang-spec-off-decode.log"))
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        parse_observed(rec("sglang-spec-off-decode.log"))
    with pytest.raises(Eagle3NbError, match="no SGLang decode line"):
        parse_sglang_log("hello\nworld\n")


@pytest.mark.parametrize("bad", ["nan", "abc", "-1.5"])
def test_sglang_log_malformed_accept_len(bad):
    line = f"[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 1, accept len: {bad}, x\n"
    with pytest.raises(Eagle3NbError, match="accept len"):
        parse_sglang_log(line)


# ------------------------------------------------------------------------------------------------
# SGLang per-request meta_info


def test_meta_info_0523():
    st = parse_sglang_meta_info(json.loads(rec("sglang-0.5.23-generate.json")))
    assert st.version_detected == "0.5.23"
    assert st.verify_ct == 23 and st.completion_tokens == 64
    assert st.accept_length == approx(64 / 23)
    assert st.accept_length_reported == approx(64 / 23)
    assert st.num_correct_drafts == 40 and st.num_proposed_drafts == 69
    assert st.accept_rate == approx(40 / 69) and st.accept_rate_convention == RATE_SGLANG_REQUEST
    assert st.mean_acceptance_length == approx(1 + 40 / 23)
    assert st.correct_drafts_histogram == [3, 6, 8, 6]
    assert st.draft_tokens_per_step == 3
    assert st.notes == []


def test_meta_info_0516_legacy_names():
    st = parse_sglang_meta_info(rec("sglang-0.5.16-generate.json"))  # JSON text works too
    assert st.version_detected == "0.5.16"
    assert st.accept_length == approx(48 / 20)
    assert (st.num_correct_drafts, st.num_proposed_drafts) == (27, 60)
    assert st.correct_drafts_histogram == [5, 6, 6, 3]
    # legacy names alone are read too
    meta = json.loads(rec("sglang-0.5.16-generate.json"))["meta_info"]
    for k in ("spec_num_correct_drafts", "spec_num_proposed_drafts",
              "spec_correct_drafts_histogram"):
        del meta[k]
    st = parse_sglang_meta_info(meta)
    assert st.version_detected == "0.5.16"
    assert (st.num_correct_drafts, st.num_proposed_drafts) == (27, 60)
    assert st.correct_drafts_histogram == [5, 6, 6, 3]


def test_meta_info_059():
    st = parse_sglang_meta_info(json.loads(rec("sglang-0.5.9-generate.json")))
    assert st.version_detected == "0.5.9"
    assert st.accept_length == approx(64 / 30)
    assert (st.num_correct_drafts, st.num_proposed_drafts) == (33, 90)
    assert st.accept_rate == approx(33 / 90)
    assert st.mean_acceptance_length == approx(1 + 33 / 30)
    assert st.correct_drafts_histogram == [11, 9, 6, 4]


def test_meta_info_0410_only_verify_ct():
    st = parse_sglang_meta_info(json.loads(rec("sglang-0.4.10-generate.json")))
    assert st.version_detected == "0.4.10"
    assert st.accept_length == approx(64 / 34)
    assert st.num_correct_drafts is None and st.mean_acceptance_length is None
    assert st.accept_rate is None


def test_meta_info_version_given_must_match():
    data = json.loads(rec("sglang-0.5.9-generate.json"))
    assert parse_sglang_meta_info(data, version="0.5.9").version_given == "0.5.9"
    with pytest.raises(Eagle3NbError, match="spec_num_correct_drafts"):
        parse_sglang_meta_info(data, version="0.5.23")
    new = json.loads(rec("sglang-0.5.23-generate.json"))
    assert parse_sglang_meta_info(new, version="0.5.16").version_detected == "0.5.23"
    with pytest.raises(Eagle3NbError, match="spec_accept_token_num"):
        parse_sglang_meta_info(new, version="0.5.9")
    with pytest.raises(Eagle3NbError, match="spec_verify_ct only"):
        parse_sglang_meta_info(new, version="0.4.10")


def test_meta_info_errors():
    off = json.loads(rec("sglang-spec-off-generate.json"))
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        parse_sglang_meta_info(off)
    with pytest.raises(Eagle3NbError, match="spec_verify_ct is 0"):
        parse_sglang_meta_info({"completion_tokens": 10, "spec_verify_ct": 0})
    with pytest.raises(Eagle3NbError, match="spec_verify_ct is missing"):
        parse_sglang_meta_info({"completion_tokens": 10, "spec_accept_length": 2.0})
    with pytest.raises(Eagle3NbError, match="NaN"):
        parse_sglang_meta_info({"completion_tokens": 10, "spec_verify_ct": 5,
                                "spec_num_correct_drafts": float("nan")})
    with pytest.raises(Eagle3NbError, match="expected a number"):
        parse_sglang_meta_info({"completion_tokens": "ten", "spec_verify_ct": 5})
    with pytest.raises(Eagle3NbError, match="mixes 0.5.9 names"):
        parse_sglang_meta_info({"completion_tokens": 10, "spec_verify_ct": 5,
                                "spec_accept_token_num": 3, "spec_num_correct_drafts": 3})
    with pytest.raises(Eagle3NbError, match="disagrees with its legacy name"):
        parse_sglang_meta_info({"completion_tokens": 10, "spec_verify_ct": 5,
                                "spec_num_correct_drafts": 3, "spec_accepted_drafts": 4})
    with pytest.raises(Eagle3NbError, match="not JSON"):
        parse_sglang_meta_info("{not json")
    with pytest.raises(Eagle3NbError, match="cannot compute an accept length"):
        parse_sglang_meta_info({"spec_verify_ct": 5})


def test_requests_pooled():
    a = json.loads(rec("sglang-0.5.23-generate.json"))
    obs = parse_sglang_responses([a, a])
    assert obs.n_requests == 2 and obs.n_verify_steps == 46
    assert obs.mean_accept_length == approx(128 / 46)
    assert obs.mean_acceptance_length == approx(1 + 80 / 46)
    assert obs.draft_acceptance_rate == approx(80 / 138)
    assert obs.accept_length_histogram == {"1": 6, "2": 12, "3": 16, "4": 12}
    # alpha_i = P(correct drafts >= i + 1) from histogram [3, 6, 8, 6] (23 steps)
    assert obs.per_position_acceptance == [approx(20 / 23), approx(14 / 23), approx(6 / 23)]
    assert len(obs.per_request) == 2 and obs.version_detected == "0.5.23"
    # mixing versions across requests is refused
    b = json.loads(rec("sglang-0.5.9-generate.json"))
    with pytest.raises(Eagle3NbError, match="several SGLang versions"):
        parse_sglang_responses([a, b])


def test_requests_0410_debiased_estimate():
    obs = parse_observed(REC / "sglang-0.4.10-generate.json")
    assert obs.mean_accept_length == approx(64 / 34)
    assert obs.mean_acceptance_length is None
    assert obs.details["accept_length_without_first_token"] == approx(63 / 34)


def test_jsonl_of_responses():
    a = json.loads(rec("sglang-0.5.9-generate.json"))
    text = json.dumps(a) + "\n" + json.dumps(a) + "\n"
    obs = parse_observed(text)
    assert obs.mean_accept_length == approx(128 / 60)
    assert obs.n_accepted == 66 and obs.n_drafted == 180


# ------------------------------------------------------------------------------------------------
# SGLang server info and gauges


def test_server_info():
    obs = parse_sglang_server_info(rec("sglang-0.5.23-server_info.json"))
    assert obs.mean_accept_length == approx(2.7431)
    assert obs.details["server"]["speculative_algorithm"] == "EAGLE3"
    assert obs.draft_tokens_per_step == 3 and obs.version_detected == "0.5.23"
    eagle = parse_observed(REC / "sglang-server_info-eagle-algo.json")
    assert eagle.mean_accept_length == approx(1.02)
    assert any("not EAGLE3" in n for n in eagle.notes)


def test_server_info_errors():
    with pytest.raises(Eagle3NbError, match="internal_states"):
        parse_sglang_server_info({"version": "0.5.23"})
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        parse_sglang_server_info({"speculative_algorithm": None,
                                  "internal_states": [{"last_gen_throughput": 10.0}]})
    with pytest.raises(Eagle3NbError, match="NaN"):
        parse_sglang_server_info({"internal_states": [{"avg_spec_accept_length": "NaN"}]})
    with pytest.raises(Eagle3NbError, match="below 1"):
        parse_sglang_server_info({"internal_states": [{"avg_spec_accept_length": 0.0}]})


def test_sglang_gauges():
    obs = sglang_spec_metrics(rec("sglang-0.5.23-metrics.prom"), version="0.5.23")
    assert obs.mean_accept_length == approx(1.9) and obs.accept_rate == approx(0.3)
    assert obs.accept_rate_convention == RATE_SGLANG_LOG_NEW
    assert obs.draft_acceptance_rate == approx(0.3)
    assert obs.details["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(Eagle3NbError, match="below 1"):
        sglang_spec_metrics('sglang:spec_accept_length{model_name="m"} 0.0\n')
    with pytest.raises(Eagle3NbError, match="no sglang:spec_accept_length"):
        sglang_spec_metrics('sglang:num_running_reqs{model_name="m"} 1.0\n')


# ------------------------------------------------------------------------------------------------
# vLLM log lines


def test_vllm_033_log():
    lines = parse_vllm_log(rec("vllm-0.33-specdecode.log"))
    assert len(lines) == 2
    a, b = lines
    assert a.format == "0.33" and a.accepted == 524 and a.drafted == 936
    assert a.mean_acceptance_length == 2.68 and a.per_position == [0.792, 0.567, 0.321]
    assert a.accepted_throughput == 52.40 and a.drafted_throughput == 93.60
    assert a.draft_acceptance_rate == approx(0.560)
    assert b.per_position == [0.770, 0.533, 0.293]
    obs = summarize_vllm_log(lines)
    # k = 3 per-position entries: drafts 936/3 = 312 and 900/3 = 300
    assert obs.n_drafts == 612 and obs.n_verify_steps == 612
    assert obs.mean_acceptance_length == approx(1 + 1003 / 612)
    assert obs.mean_accept_length == obs.mean_acceptance_length
    assert obs.accept_rate == approx(1003 / 1836) and obs.accept_rate_convention == RATE_VLLM
    assert obs.per_position_acceptance == [approx((0.792 * 312 + 0.770 * 300) / 612),
                                           approx((0.567 * 312 + 0.533 * 300) / 612),
                                           approx((0.321 * 312 + 0.293 * 300) / 612)]
    assert obs.draft_tokens_per_step == 3
    assert not any("differs" in n for n in obs.notes)  # printed figures are consistent


def test_vllm_early_v1_log():
    lines = parse_vllm_log(rec("vllm-v1-early-specdecode.log"))
    assert [ln.format for ln in lines] == ["v1-early", "v1-early"]
    assert lines[0].draft_acceptance_rate == approx(0.56)
    assert lines[0].per_position is None and lines[0].mean_acceptance_length is None
    obs = summarize_vllm_log(lines)
    assert obs.accept_rate == approx(1003 / 1836)
    assert obs.mean_accept_length is None  # k unknown: no silent guess
    assert any("num_speculative_tokens" in n for n in obs.notes)
    obs = parse_observed(rec("vllm-v1-early-specdecode.log"), num_speculative_tokens=3)
    assert obs.mean_accept_length == approx(1 + 1003 / 612)


def test_vllm_log_errors():
    with pytest.raises(Eagle3NbError, match="no 'SpecDecoding metrics:' line"):
        parse_vllm_log("INFO nothing here\n")
    with pytest.raises(Eagle3NbError, match="Accepted: N tokens"):
        parse_vllm_log("SpecDecoding metrics: Mean acceptance length: 2.00\n")
    with pytest.raises(Eagle3NbError, match="NaN"):
        parse_vllm_log("SpecDecoding metrics: Mean acceptance length: nan, Accepted: 0 tokens, "
                       "Drafted: 0 tokens\n")
    with pytest.raises(Eagle3NbError, match="exceeds Drafted"):
        parse_vllm_log("SpecDecoding metrics: Draft acceptance rate: 10.0%, Accepted: 9 tokens, "
                       "Drafted: 3 tokens\n")


# ------------------------------------------------------------------------------------------------
# Prometheus


def test_prometheus_parser():
    samples = parse_prometheus(rec("vllm-0.33-metrics.prom"))
    by = {(s.name, tuple(sorted(s.labels.items()))): s for s in samples}
    esc = [s for s in samples if s.name == "test_escaped_label"][0]
    assert esc.labels == {"note": 'say "hi", then \\ and \n', "engine": "0"}
    assert math.isnan(esc.value) and esc.type == "gauge"
    inf = [s for s in samples if s.name == "test_inf_gauge"][0]
    assert inf.value == math.inf and inf.timestamp == 1762941605000 and inf.labels == {}
    drafts = [s for s in samples if s.name == "vllm:spec_decode_num_drafts_total"][0]
    assert drafts.value == 612.0 and drafts.type == "counter"
    assert drafts.labels == {"engine": "0", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    bucket = [s for s in samples if s.labels.get("le") == "+Inf"][0]
    assert bucket.type == "histogram" and bucket.value == 4.0
    assert len(by) == len(samples)


@pytest.mark.parametrize("bad", [
    'x{a="1} 2\n', 'x{a=1} 2\n', 'x 1 2 3\n', 'x abc\n', '{a="b"} 1\n', 'x{a="1",a="2"} 1\n',
    'x\n',
])
def test_prometheus_malformed(bad):
    with pytest.raises(Eagle3NbError, match="Prometheus line 1"):
        parse_prometheus(bad)


def test_vllm_prometheus_metrics():
    obs = vllm_spec_metrics(rec("vllm-0.33-metrics.prom"))
    assert obs.n_drafts == 612 and obs.n_drafted == 1836 and obs.n_accepted == 1003
    assert obs.mean_acceptance_length == approx(1 + 1003 / 612)
    assert obs.accept_rate == approx(1003 / 1836)
    assert obs.per_position_acceptance == [approx(478 / 612), approx(337 / 612),
                                           approx(188 / 612)]
    assert obs.draft_tokens_per_step == 3
    # parse_observed finds it too, and the log of the same run agrees within rounding
    auto = parse_observed(REC / "vllm-0.33-metrics.prom")
    log = parse_observed(REC / "vllm-0.33-specdecode.log")
    assert auto.mean_accept_length == approx(obs.mean_accept_length)
    assert log.mean_accept_length == pytest.approx(obs.mean_accept_length, abs=1e-9)
    for x, y in zip(log.per_position_acceptance, obs.per_position_acceptance):
        assert x == pytest.approx(y, abs=1e-3)


def test_vllm_names_without_total_and_engines_summed():
    text = "\n".join([
        'vllm:spec_decode_num_drafts{engine="0",model_name="m"} 10',
        'vllm:spec_decode_num_drafts{engine="1",model_name="m"} 30',
        'vllm:spec_decode_num_draft_tokens{engine="0",model_name="m"} 40',
        'vllm:spec_decode_num_draft_tokens{engine="1",model_name="m"} 120',
        'vllm:spec_decode_num_accepted_tokens{engine="0",model_name="m"} 20',
        'vllm:spec_decode_num_accepted_tokens{engine="1",model_name="m"} 50',
        'vllm:spec_decode_num_accepted_tokens_per_pos{engine="0",model_name="m",position="0"} 9',
        'vllm:spec_decode_num_accepted_tokens_per_pos{engine="1",model_name="m",position="0"} 27',
        'vllm:spec_decode_num_accepted_tokens_per_pos{engine="0",model_name="m",position="1"} 11',
        'vllm:spec_decode_num_accepted_tokens_per_pos{engine="1",model_name="m",position="1"} 23',
    ]) + "\n"
    obs = vllm_spec_metrics(text)
    assert obs.n_drafts == 40 and obs.n_drafted == 160 and obs.n_accepted == 70
    assert obs.mean_accept_length == approx(1 + 70 / 40)
    assert obs.per_position_acceptance == [approx(36 / 40), approx(34 / 40)]
    assert obs.draft_tokens_per_step == 4


def test_vllm_offline_get_metrics_objects():
    # vllm.v1.metrics.reader Counter / Vector objects are named without _total
    metrics = [
        SimpleNamespace(name="vllm:num_preemptions", labels={}, value=0),
        SimpleNamespace(name="vllm:spec_decode_num_drafts", labels={}, value=100),
        SimpleNamespace(name="vllm:spec_decode_num_draft_tokens", labels={}, value=300),
        SimpleNamespace(name="vllm:spec_decode_num_accepted_tokens", labels={}, value=150),
        SimpleNamespace(name="vllm:spec_decode_num_accepted_tokens_per_pos", labels={},
                        values=[70, 50, 30]),
    ]
    obs = vllm_spec_metrics(metrics)
    assert obs.mean_accept_length == approx(2.5)
    assert obs.per_position_acceptance == [approx(0.7), approx(0.5), approx(0.3)]
    assert obs.accept_rate == approx(0.5)


def test_vllm_counter_errors():
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        vllm_spec_metrics('vllm:num_requests_running{model_name="m"} 0\n')
    nan = ('vllm:spec_decode_num_drafts_total{model_name="m"} NaN\n'
           'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 3\n'
           'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 1\n')
    with pytest.raises(Eagle3NbError, match="finite"):
        vllm_spec_metrics(nan)
    zero = ('vllm:spec_decode_num_drafts_total{model_name="m"} 0\n'
            'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 0\n'
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 0\n')
    with pytest.raises(Eagle3NbError, match="no draft tokens counted"):
        vllm_spec_metrics(zero)
    two = zero.replace('"m"', '"a"') + zero.replace('"m"', '"b"')
    with pytest.raises(Eagle3NbError, match="several models"):
        vllm_spec_metrics(two)
    with pytest.raises(Eagle3NbError, match="model_name='c'"):
        vllm_spec_metrics(two, model_name="c")


def test_vllm_counter_difference():
    text = rec("vllm-0.33-metrics.prom")
    before = vllm_spec_counters(text)
    after_text = (text.replace("} 612.0", "} 652.0").replace("} 1836.0", "} 1956.0")
                  .replace("} 1003.0", "} 1073.0").replace('position="0"} 478.0',
                                                           'position="0"} 508.0'))
    diff = vllm_spec_counters(after_text).minus(before)
    assert (diff.num_drafts, diff.num_draft_tokens, diff.num_accepted_tokens) == (40, 120, 70)
    assert diff.accepted_per_pos == [30, 0, 0]
    obs = diff.to_observed("diff")
    assert obs.mean_accept_length == approx(1 + 70 / 40)
    with pytest.raises(Eagle3NbError, match="server restarted"):
        before.minus(vllm_spec_counters(after_text))


def test_vllm_legacy_v0_counters():
    text = ('vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 60\n'
            'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 120\n'
            'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.5\n')
    obs = vllm_spec_metrics(text)
    assert obs.accept_rate == approx(0.5) and obs.mean_accept_length is None
    assert obs.version_detected == "vllm V0 legacy metrics"
    obs = vllm_spec_metrics(text, num_speculative_tokens=4)
    assert obs.mean_accept_length == approx(1 + 60 / 30)


# ------------------------------------------------------------------------------------------------
# parse_observed


def test_parse_observed_numbers():
    for x in (1.9, "1.9", " 1.9\n", 2):
        obs = parse_observed(x)
        assert obs.mean_accept_length == approx(float(x))
        assert obs.mean_acceptance_length == obs.mean_accept_length
        assert obs.source == "number"
    with pytest.raises(Eagle3NbError, match="below 1"):
        parse_observed(0.45)
    with pytest.raises(Eagle3NbError, match="not finite"):
        parse_observed(float("nan"))
    with pytest.raises(Eagle3NbError):
        parse_observed(True)


def test_parse_observed_paths_and_text():
    obs = parse_observed(str(REC / "sglang-0.5.9-decode.log"))
    assert obs.engine == "sglang" and obs.source == str(REC / "sglang-0.5.9-decode.log")
    assert parse_observed(REC / "sglang-0.5.23-server_info.json").mean_accept_length == 2.7431
    assert parse_observed(rec("sglang-0.5.23-metrics.prom")).mean_accept_length == approx(1.9)
    assert parse_observed(json.loads(rec("sglang-0.5.23-generate.json"))).n_verify_steps == 23
    meta = json.loads(rec("sglang-0.5.9-generate.json"))["meta_info"]
    assert parse_observed(json.dumps(meta)).version_detected == "0.5.9"
    same = parse_observed(parse_observed(1.5))
    assert isinstance(same, ObservedMetrics) and same.mean_accept_length == 1.5
    with pytest.raises(Eagle3NbError, match="file not found"):
        parse_observed("/no/such/file.log")
    with pytest.raises(Eagle3NbError, match="cannot tell what this is"):
        parse_observed("some random words")
    with pytest.raises(Eagle3NbError, match="empty input"):
        parse_observed("   ")
    with pytest.raises(Eagle3NbError, match="none of"):
        parse_observed('{"hello": 1}')
    with pytest.raises(Eagle3NbError, match="speculative decoding looks off"):
        parse_observed(REC / "sglang-spec-off-generate.json")


def test_to_json_round_trip():
    obs = parse_observed(REC / "sglang-0.5.23-generate.json")
    data = json.loads(obs.to_json())
    assert data["mean_accept_length"] == pytest.approx(64 / 23)
    assert data["accept_length_histogram"] == {"1": 3, "2": 6, "3": 8, "4": 6}
    assert data["per_request"][0]["verify_ct"] == 23
    assert set(data) >= {"engine", "source", "mean_accept_length", "mean_acceptance_length",
                         "accept_rate", "accept_rate_convention", "per_position_acceptance",
                         "n_verify_steps", "n_drafts", "n_accepted", "n_drafted", "notes",
                         "version_detected"}
