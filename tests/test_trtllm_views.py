"""TensorRT-LLM beside the other engines wherever the kit lists engines: `eagle3-nb engines`,
an inspection without --engine, the verdict badges and notebook 01's engine view (all from the
registry: nothing outside eagle3_nb/engines/trtllm/ names it)."""

from __future__ import annotations

from conftest import DRAFTS
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.cli import main
from eagle3_nb.viz import keys as vk
from eagle3_nb.widgets import engine_view_html

NEWEST = "trtllm==1.4.0rc1"


def test_engines_lists_tensorrt_llm_and_its_ranges(capsys):
    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    assert "TensorRT-LLM: code read up to 1.4.0rc1" in out
    assert "trtllm 1.3.0rc29 .. 1.4.0rc1" in out and "trtllm 0.19.0 .. 1.0.0" in out


def test_an_inspection_without_engine_answers_for_tensorrt_llm_beside_the_others():
    data = inspect_checkpoint(DRAFTS / "good", None, stats=False).to_json()
    engines = {e["engine"] for e in data["engines"]}
    assert {"sglang", "vllm", "trtllm"} <= engines
    assert NEWEST in vk.verdict_html(data)
    assert NEWEST in engine_view_html(data, NEWEST)


def test_the_report_lists_tensorrt_llm_settings_to_check_by_hand():
    from eagle3_nb.engines.advice import engine_flags

    data = inspect_checkpoint(DRAFTS / "good", [NEWEST], stats=False).to_json()
    rows = [r for r in engine_flags(data) if r["engine"] == "TensorRT-LLM"]
    assert any(r["flag"] == "speculative_config.eagle3_layers_to_capture"
               and "minus 1" in r["why"] for r in rows)
    assert all("TensorRT-LLM" in r["source"] for r in rows)
