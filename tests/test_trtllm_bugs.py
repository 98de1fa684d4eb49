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
