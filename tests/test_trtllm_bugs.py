"""TensorRT-LLM's known bugs (eagle3_nb/engines/trtllm/bugs.py) on the releases they affect,
each raised by the target config that meets its condition and by no other."""

from __future__ import annotations

import json

import pytest

from conftest import DRAFTS
from eagle3_nb.checks.load import inspect_checkpoint

GOOD = DRAFTS / "good"


def target(tmp_path, model_type="llama", arch="LlamaForCausalLM", quant=None):
    cfg = {"architectures": [arch], "model_type": model_type, "num_hidden_layers": 8,
           "hidden_size": 64, "vocab_size": 512, "max_position_embeddings": 4096}
    if quant:
        cfg["quantization_config"] = {"quant_method": quant}
    path = tmp_path / f"{model_type}-{quant}.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def bugs(path, *engines):
    data = inspect_checkpoint(GOOD, list(engines), path, stats=False).to_json()
    return {e: {f["evidence"]["bug"] for f in data["findings"]
                if f["code"] == "ENGINE_BUG" and f["engine"] == e} for e in engines}


def test_a_llama4_target_meets_the_neox_rope_bug_from_0_20(tmp_path):
    found = bugs(target(tmp_path, "llama4", "Llama4ForConditionalGeneration"),
                 "trtllm==0.19.0", "trtllm==0.20.0", "trtllm==1.4.0rc1")
    assert "trtllm#19036" not in found["trtllm==0.19.0"]
    assert "trtllm#19036" in found["trtllm==0.20.0"] and "trtllm#19036" in found["trtllm==1.4.0rc1"]


def test_an_fp8_target_meets_the_one_model_and_chunked_prefill_bugs(tmp_path):
    found = bugs(target(tmp_path, quant="fp8"), "trtllm==1.1.0", "trtllm==1.2.1")
    assert {"trtllm#7842", "trtllm#8910"} <= found["trtllm==1.1.0"]
    assert "trtllm#7842" in found["trtllm==1.2.1"] and "trtllm#8910" not in found["trtllm==1.2.1"]


def test_a_mistral_target_is_two_model_only(tmp_path):
    found = bugs(target(tmp_path, "mistral", "MistralForCausalLM"), "trtllm==1.4.0rc1")
    assert found["trtllm==1.4.0rc1"] == {"trtllm#6158"}


@pytest.mark.parametrize("engine", ["trtllm==0.19.0", "trtllm==1.2.1", "trtllm==1.4.0rc1"])
def test_a_plain_llama_target_meets_none(tmp_path, engine):
    assert bugs(target(tmp_path), engine)[engine] == set()


def test_the_fp8_and_mistral_bugs_cover_the_release_candidate_their_thread_ran(tmp_path):
    """#7842's log says "TensorRT-LLM version: 1.0.0rc6", and the kit orders 1.0.0rc6 before
    1.0.0: a range that started at 1.0.0 left the thread's own release unwarned."""
    fp8 = bugs(target(tmp_path, quant="fp8"), "trtllm==1.0.0rc6", "trtllm==1.0.0rc5")
    assert {"trtllm#7842", "trtllm#8910"} <= fp8["trtllm==1.0.0rc6"]
    assert not {"trtllm#7842", "trtllm#8910"} & fp8["trtllm==1.0.0rc5"]
    mistral = bugs(target(tmp_path, "mistral", "MistralForCausalLM"), "trtllm==1.0.0rc6")
    assert "trtllm#6158" in mistral["trtllm==1.0.0rc6"]


def test_the_way_out_is_named_on_the_release_candidate_too(tmp_path):
    data = inspect_checkpoint(GOOD, ["trtllm==1.0.0rc6"], target(tmp_path, quant="fp8"),
                              stats=False).to_json()
    found = {f["evidence"]["bug"]: f for f in data["findings"] if f["code"] == "ENGINE_BUG"}
    assert "eagle3_one_model: false" in found["trtllm#7842"]["evidence"]["way_out"]
    assert "enable_chunked_prefill: false" in found["trtllm#8910"]["evidence"]["way_out"]
