"""Trust (#25): a finding condemns only the engine releases it applies to.

Class 1 of the issue: the draft's own embed_tokens differing from the target's used to be one
finding for every engine, so SGLang, which replaces them with the target's (set_embed unless
target_hidden_size differs), was called a SILENT FAILURE too. And any error tagged with one
release (a launch setting, a log line) turned every other release's verdict as well.
"""

from __future__ import annotations

import shutil

import torch
from safetensors.torch import load_file, save_file

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.checks.load import inspect_checkpoint

ENGINES = ["sglang==0.5.23", "vllm==0.34.0"]


def _random_embed_flat(tmp_path):
    draft = tmp_path / "random-embed-flat"
    shutil.copytree(DRAFTS / "good", draft)
    tensors = load_file(draft / "model.safetensors")
    generator = torch.Generator().manual_seed(0)
    tensors["embed_tokens.weight"] = (torch.randn(512, 64, generator=generator) * 0.02).to(
        torch.bfloat16)
    save_file(tensors, draft / "model.safetensors")
    return draft


def test_embeddings_that_differ_condemn_only_the_release_that_serves_them(tmp_path):
    data = inspect_checkpoint(_random_embed_flat(tmp_path), ENGINES, TARGET_CONFIG).to_json()
    verdicts = {e["profile"]: e["verdict"] for e in data["engines"]}
    found = {f["engine"]: f for f in data["findings"] if f["code"] == "EMBED_DIFFERS"}
    assert found["vllm==0.34.0"]["severity"] == "error"           # serves the draft's own copy
    assert found["sglang==0.5.23"]["severity"] == "info"          # replaces it with the target's
    assert verdicts == {"sglang==0.5.23": "ok", "vllm==0.34.0": "silent_failure"}


def test_a_launch_setting_of_one_engine_leaves_the_other_alone():
    launch = ("python -m sglang.launch_server --model-path T --speculative-algorithm EAGLE "
              "--speculative-draft-model-path D")
    data = inspect_checkpoint(DRAFTS / "good", ENGINES, TARGET_CONFIG, stats=False,
                              launch=launch).to_json()
    verdicts = {e["profile"]: e["verdict"] for e in data["engines"]}
    assert any(f["code"] == "LAUNCH_SETTING" and f["engine"] == "sglang==0.5.23"
               and f["severity"] == "error" for f in data["findings"])
    assert verdicts == {"sglang==0.5.23": "silent_failure", "vllm==0.34.0": "ok"}


def test_following_the_way_out_of_the_unread_nested_ids_removes_the_finding(tmp_path):
    """#25, wrong advice: the vLLM V2 finding names `eagle3-nb convert ... --engine`; following
    it writes the ids where vLLM 0.34.0 reads them, and the finding is gone (SGLang, which reads
    the nested ids, keeps capturing the same layers)."""
    import json

    from eagle3_nb.convert import convert_checkpoint

    draft = tmp_path / "nested"
    shutil.copytree(DRAFTS / "good", draft)
    raw = json.loads((draft / "config.json").read_text())
    raw["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}
    (draft / "config.json").write_text(json.dumps(raw))

    def engine_errors(path):
        data = inspect_checkpoint(path, ENGINES, TARGET_CONFIG, stats=False).to_json()
        errors = {(f["engine"], f["code"]) for f in data["findings"] if f["severity"] == "error"}
        aux = {e["profile"]: e["aux_layers"]["ids"] for e in data["engines"]}
        return errors, aux
    before, _ = engine_errors(draft)
    assert ("vllm==0.34.0", "ENGINE_BUG") in before
    convert_checkpoint(draft, tmp_path / "converted", engine="vllm==0.34.0")
    after, aux = engine_errors(tmp_path / "converted")
    assert after == set() and aux == {"sglang==0.5.23": [2, 4, 6], "vllm==0.34.0": [2, 4, 6]}
