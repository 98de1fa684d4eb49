"""The draft against its target: each mismatch is a finding with both values (inspect with
--target-config)."""

from __future__ import annotations

import json

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
