"""TensorRT-LLM's capture table (eagle3_nb/engines/trtllm/data/capture.json): the target classes
read in its source for the newest range capture aux hidden states and get a real verdict; a class
or a range not read stays TARGET_CAPTURE_UNCHECKED (a warning), never a refusal."""

from __future__ import annotations

import json

import pytest

from conftest import DRAFTS
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.engines import releases_in, resolve_engine
from eagle3_nb.engines.capture import CAPTURE, capture_fact, capture_table
from eagle3_nb.engines.profile import release_key

GOOD = DRAFTS / "good"
NEWEST = "trtllm==1.4.0rc1"
# architecture -> model_type of a config that declares it
READ = {"LlamaForCausalLM": "llama", "Llama4ForConditionalGeneration": "llama4",
        "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
        "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
        "KimiK25ForConditionalGeneration": "kimi_k25", "GptOssForCausalLM": "gpt_oss",
        "MistralForCausalLM": "mistral"}


def target(tmp_path, arch, model_type):
    cfg = {"architectures": [arch], "model_type": model_type, "num_hidden_layers": 8,
           "hidden_size": 64, "vocab_size": 512, "max_position_embeddings": 4096}
    path = tmp_path / f"{arch}.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def findings(tmp_path, arch, model_type, engine=NEWEST):
    data = inspect_checkpoint(GOOD, [engine], target(tmp_path, arch, model_type),
                              stats=False).to_json()
    return [f for f in data["findings"] if f["engine"] == engine]


def test_the_table_lists_exactly_the_classes_read():
    assert set(capture_table("trtllm")["architectures"]) == set(READ)


@pytest.mark.parametrize("arch", sorted(READ))
def test_a_class_read_in_the_newest_range_is_checked_not_unchecked(tmp_path, arch):
    codes = {f["code"] for f in findings(tmp_path, arch, READ[arch])}
    assert "TARGET_CAPTURE_UNCHECKED" not in codes
    assert "LOAD_ERROR" not in codes  # an 8-layer target: the default ids need no launch config


def test_every_release_of_the_newest_range_is_answered_by_the_table():
    newest = resolve_engine("trtllm")
    assert capture_table("trtllm")["releases"] == releases_in(newest)
    for release in releases_in(newest):
        assert capture_fact("trtllm", release, "LlamaForCausalLM").status == CAPTURE


@pytest.mark.parametrize("engine", ["trtllm==1.2.1", "trtllm==1.3.0rc0", "trtllm==1.1.0"])
def test_a_range_not_read_stays_unchecked(tmp_path, engine):
    codes = {f["code"] for f in findings(tmp_path, "LlamaForCausalLM", "llama", engine)}
    assert "TARGET_CAPTURE_UNCHECKED" in codes


@pytest.mark.parametrize("arch,model_type", [("Glm4MoeForCausalLM", "glm4_moe"),
                                             ("Qwen2ForCausalLM", "qwen2"),
                                             ("GPT2LMHeadModel", "gpt2")])
def test_a_class_not_read_is_unchecked_not_refused(tmp_path, arch, model_type):
    """The table is partial: its silence about a class is no evidence the class cannot
    capture (SGLang's and vLLM's full surveys refuse an unlisted class; this one must not)."""
    found = findings(tmp_path, arch, model_type)
    assert "TARGET_CAPTURE_UNCHECKED" in {f["code"] for f in found}
    assert not [f for f in found if f["severity"] == "error"], found


def test_mistral_captures_but_only_two_model_as_its_known_bug_says(tmp_path):
    entry = capture_table("trtllm")["architectures"]["MistralForCausalLM"][0]
    assert entry["one_model"] is False and "#6158" in entry["cite"]
    found = findings(tmp_path, "MistralForCausalLM", "mistral")
    bugs = {f["evidence"]["bug"] for f in found if f["code"] == "ENGINE_BUG"}
    assert bugs == {"trtllm#6158"}


def test_every_entry_cites_the_file_its_hook_names_and_spans_the_range():
    table = capture_table("trtllm")
    first = table["releases"][0]
    for arch, ranges in table["architectures"].items():
        (entry,) = ranges
        assert entry["from"] == first and entry["until"] is None, arch
        assert entry["status"] == CAPTURE and entry["rule"] == "plus_one", arch
        module = entry["hook"].split()[0]
        assert module.startswith("tensorrt_llm/_torch/models/modeling_"), arch
        assert module in entry["cite"] and "maybe_capture_hidden_states" in entry["cite"], arch
    assert all(release_key(r) >= release_key(first) for r in table["releases"])
