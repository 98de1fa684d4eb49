"""The draft against its target: each mismatch is a finding with both values (inspect with
--target-config)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DRAFTS, TARGET_CONFIG

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
            "hidden_size": 4096, "vocab_size": 128256, "max_position_embeddings": 131072,
            "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}


def findings(run_cli, tmp_path, target: dict, variant: str = "good") -> list[dict]:
    path = tmp_path / "target.json"
    path.write_text(json.dumps(target))
    rc, out, err = run_cli("inspect", DRAFTS / variant, "--target-config", path, "--json",
                           "--no-stats")
    assert rc in (0, 1), err
    return [f for f in json.loads(out)["findings"]
            if f["code"] in ("TARGET_MISMATCH", "TARGET_QUANTIZED")]


def test_a_tiny_draft_against_llama_8b_names_both_values(run_cli, tmp_path):
    """Before: a 64-wide draft with a 512-token vocab against a Llama-8B config got nothing."""
    got = {f["evidence"]["field"]: f for f in findings(run_cli, tmp_path, LLAMA_8B)}
    assert got["vocab_size"]["severity"] == "error"
    assert got["vocab_size"]["evidence"]["draft"] == 512
    assert got["vocab_size"]["evidence"]["target"] == 128256
    assert got["hidden_size"]["evidence"]["target"] == 4096
    assert {"rope_theta", "rope_scaling type"} <= set(got)


def test_a_drafts_own_config_as_the_target_is_called_out(run_cli, tmp_path):
    """Before: captured layers [2, 0, -2] and "ok"."""
    own = json.loads((DRAFTS / "good" / "config.json").read_text())
    got = findings(run_cli, tmp_path, own)
    assert any(f["severity"] == "error" and "looks like a draft's config" in f["message"]
               for f in got)


def test_the_bundled_target_matches_its_drafts(run_cli, tmp_path):
    assert findings(run_cli, tmp_path, json.loads(TARGET_CONFIG.read_text())) == []


def test_a_quantized_target_is_a_warning(run_cli, tmp_path):
    target = {**json.loads(TARGET_CONFIG.read_text()),
              "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    got = findings(run_cli, tmp_path, target)
    assert [f["code"] for f in got] == ["TARGET_QUANTIZED"] and "fp8" in got[0]["message"]


def test_a_speculators_verifier_other_than_the_target(run_cli, tmp_path):
    target = {**json.loads(TARGET_CONFIG.read_text()), "architectures": ["Qwen3ForCausalLM"],
              "model_type": "qwen3"}
    got = findings(run_cli, tmp_path, target, "good-speculators")
    assert any(f["evidence"]["field"] == "verifier architectures" for f in got), got


@pytest.mark.parametrize("command", ["accept", "report"])
def test_a_draft_directory_given_as_the_target_is_one_clear_error(run_cli, tmp_path, command):
    """Before: 33 lines of transformers' load report, then an error."""
    extra = ["--out", tmp_path / "r"] if command == "report" else []
    rc, out, err = run_cli(command, DRAFTS / "good", "--target", DRAFTS / "layers0-flat", *extra)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "EAGLE-3 draft's directory, not a target model" in err


def test_aux_ids_beyond_the_targets_layers(run_cli, tmp_path):
    import shutil
    draft = tmp_path / "d"
    shutil.copytree(DRAFTS / "good", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 23, 44]}  # a 48-layer model's
    (draft / "config.json").write_text(json.dumps(cfg))
    rc, out, _ = run_cli("inspect", draft, "--target-config", TARGET_CONFIG, "--json", "--no-stats")
    got = [f for f in json.loads(out)["findings"] if f["code"] == "TARGET_MISMATCH"]
    assert got and got[0]["evidence"]["field"] == "aux layer ids"
    assert "[23, 44]" in got[0]["message"]


# RoPE layouts. Tiny target configs built from the bundled one, each with the field that decides
# its layout in transformers 5.23 (llama4_text: apply_rotary_emb over adjacent pairs; glm4_moe:
# partial_rotary_factor 0.5 by default; qwen2.5-vl / qwen3-vl: mrope_section, mrope_interleaved;
# deepseek_v3: rope_interleave).
def tiny_target(**changes) -> dict:
    return {**json.loads(TARGET_CONFIG.read_text()), **changes}


def draft_variant(tmp_path, base: str = "good", **changes):
    import shutil
    draft = tmp_path / f"{base}-variant"
    shutil.copytree(DRAFTS / base, draft)
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, **changes}))
    return draft


def rope_findings(run_cli, tmp_path, target: dict, draft=None) -> dict[str, dict]:
    path = tmp_path / "target.json"
    path.write_text(json.dumps(target))
    rc, out, err = run_cli("inspect", draft or DRAFTS / "good", "--target-config", path,
                           "--json", "--no-stats")
    assert rc in (0, 1), err
    return {f["evidence"]["field"]: f for f in json.loads(out)["findings"]
            if f["code"] == "TARGET_MISMATCH"}


def test_a_llama4_target_rotates_interleaved_pairs_the_draft_neox_halves(run_cli, tmp_path):
    got = rope_findings(run_cli, tmp_path, tiny_target(model_type="llama4_text"))
    layout = got["rope layout"]
    assert layout["severity"] == "info"     # a Llama-style draft of a Llama 4 target: normal
    assert layout["evidence"]["target"] == "interleaved"
    # TensorRT-LLM's draft attention is NeoX whatever the target (its bug trtllm#19036)
    assert layout["evidence"]["draft"] == {"sglang": "neox", "trtllm": "neox", "vllm": "neox"}
    assert any("llama4" in c for c in layout["evidence"]["cites"])


def test_a_draft_declaring_interleaved_pairs_is_served_neox_by_vllm(run_cli, tmp_path):
    """SGLang reads rope_is_neox_style from the draft's config (llama.py LlamaDecoderLayer);
    vLLM's LlamaAttention hard-codes is_neox_style = True: the same draft rotates two ways."""
    draft = draft_variant(tmp_path, rope_is_neox_style=False)
    layout = rope_findings(run_cli, tmp_path, tiny_target(), draft)["rope layout"]
    assert layout["severity"] == "warning"
    assert layout["evidence"]["draft"] == {"sglang": "interleaved", "trtllm": "neox",
                                           "vllm": "neox"}
    assert layout["evidence"]["draft_declared"] == "interleaved"
    assert "but trtllm and vllm serve it otherwise" in layout["message"]


def test_an_mla_draft_with_rope_interleave_false(run_cli, tmp_path):
    """SGLang's DeepseekV2AttentionMLA follows rope_interleave; vLLM's always interleaves."""
    draft = draft_variant(tmp_path, "mla-draft", rope_interleave=False)
    target = tiny_target(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                         num_hidden_layers=8, rope_interleave=False)
    layout = rope_findings(run_cli, tmp_path, target, draft)["rope layout"]
    # TensorRT-LLM has no MLA draft class in the kit's profiles: its row is not asserted here
    assert {e: layout["evidence"]["draft"][e] for e in ("sglang", "vllm")} == \
        {"sglang": "neox", "vllm": "interleaved"}
    assert layout["severity"] == "warning" and "vllm" in layout["message"]


def test_a_vl_target_with_mrope_and_a_draft_without(run_cli, tmp_path):
    target = tiny_target(rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})
    got = rope_findings(run_cli, tmp_path, target)
    assert got["mrope_section"]["evidence"] == {"field": "mrope_section", "draft": None,
                                                "target": [2, 3, 3]}
    assert "rope_scaling type" not in got   # mrope is a position layout, not a scaling type


def test_qwen3_vl_interleaves_its_mrope_sections(run_cli, tmp_path):
    mrope = {"rope_type": "default", "mrope_section": [2, 3, 3]}
    draft = draft_variant(tmp_path, rope_scaling=mrope)
    target = tiny_target(model_type="qwen3_vl_text",
                         rope_scaling={**mrope, "mrope_interleaved": True})
    got = rope_findings(run_cli, tmp_path, target, draft)
    assert got["mrope_interleaved"]["evidence"]["draft"] is False
    assert got["mrope_interleaved"]["evidence"]["target"] is True
    assert "mrope_section" not in got


def test_a_glm_target_rotates_half_of_each_head(run_cli, tmp_path):
    got = rope_findings(run_cli, tmp_path, tiny_target(model_type="glm4_moe"))
    assert got["partial_rotary_factor"]["evidence"]["target"] == 0.5
    assert "rope layout" not in got   # glm4_moe rotates NeoX halves (modeling_glm4_moe.py)
    got = rope_findings(run_cli, tmp_path, tiny_target(model_type="glm4"))
    assert got["rope layout"]["evidence"]["target"] == "interleaved"


def test_matching_rope_settings_give_nothing(run_cli, tmp_path):
    draft = draft_variant(tmp_path, partial_rotary_factor=0.5)
    got = rope_findings(run_cli, tmp_path, tiny_target(partial_rotary_factor=0.5), draft)
    assert not {"partial_rotary_factor", "rope layout", "mrope_section"} & set(got)


def test_a_draft_trained_on_the_quantized_target_is_not_warned(run_cli, tmp_path):
    """#25 class 6: a speculators draft records its verifier; when that verifier is the
    quantized target itself (or names a quantized checkpoint), the draft was trained on these
    hidden states and the warning would be a false alarm."""
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good-speculators", draft)
    raw = json.loads((draft / "config.json").read_text())
    raw["speculators_config"]["verifier"]["name_or_path"] = "RedHatAI/Tiny-Llama-FP8-dynamic"
    (draft / "config.json").write_text(json.dumps(raw))
    target = {**json.loads(TARGET_CONFIG.read_text()), "_name_or_path": "RedHatAI/Tiny-Llama-"
              "FP8-dynamic", "quantization_config": {"quant_method": "fp8"}}
    path = tmp_path / "target.json"
    path.write_text(json.dumps(target))
    rc, out, _ = run_cli("inspect", draft, "--target-config", path, "--json", "--no-stats")
    (found,) = [f for f in json.loads(out)["findings"] if f["code"] == "TARGET_QUANTIZED"]
    assert found["severity"] == "info" and "trained on these hidden states" in found["message"]
    full = {**target, "_name_or_path": "RedHatAI/Tiny-Llama-FP8-dynamic"}
    raw["speculators_config"]["verifier"]["name_or_path"] = "meta-llama/Tiny-Llama"
    (draft / "config.json").write_text(json.dumps(raw))
    path.write_text(json.dumps(full))
    rc, out, _ = run_cli("inspect", draft, "--target-config", path, "--json", "--no-stats")
    (found,) = [f for f in json.loads(out)["findings"] if f["code"] == "TARGET_QUANTIZED"]
    assert found["severity"] == "warning" and "looks full precision" in found["message"]
