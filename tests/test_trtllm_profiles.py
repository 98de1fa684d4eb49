"""TensorRT-LLM's release ranges on tiny drafts built here, one per rule the profiles encode
(eagle3_nb/engines/trtllm/profiles.py cites each; docs/engine-facts-trtllm.md). Every rule is
read from the engine's source, not run: these tests hold the kit to what the source says."""

from __future__ import annotations

import json
from math import prod

import pytest

from conftest import write_raw_safetensors
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.config import parse_config
from eagle3_nb.engines import resolve_engine
from eagle3_nb.layouts import expected_schema

NEW, OLD, SINGLE, NO_VOCAB_DEFAULT = ("trtllm==1.4.0rc1", "trtllm==1.2.1", "trtllm==1.0.0",
                                      "trtllm==1.1.0")
H = 64


def config(**extra):
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
           "vocab_size": 512, "draft_vocab_size": 256, "num_hidden_layers": 1,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    cfg.update(extra)
    return cfg


def draft(root, cfg, layer0="midlayer.", prefix="", drop=(), add=None):
    """A draft directory: CFG and one zero tensor per key the config promises (layer 0 written
    as LAYER0, layers >= 1 as layers.N.), minus DROP, plus ADD {name: shape}."""
    shapes = {}
    for name, entry in expected_schema(parse_config(cfg)).items():
        if name == "embed_tokens.weight" or name in drop:
            continue
        key = layer0 + name[len("layers.0."):] if name.startswith("layers.0.") else name
        shapes[prefix + key] = list(entry.shape)
    shapes.update(add or {})
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * prod(shape)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    write_raw_safetensors(root / "model.safetensors", header, bytes(offset))
    return root


def target_config(tmp_path, layers=8):
    path = tmp_path / "target.json"
    path.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                "num_hidden_layers": layers, "hidden_size": H,
                                "vocab_size": 512, "max_position_embeddings": 4096}))
    return path


def inspect(path, *engines, target=None):
    return inspect_checkpoint(path, list(engines), target, stats=False).to_json()


def answer(data, engine):
    return next(e for e in data["engines"] if e["profile"] == engine)


def codes(data, engine):
    return {f["code"] for f in data["findings"] if f["engine"] in (engine, None)}


def found(data, engine, code):
    return [f for f in data["findings"] if f["engine"] in (engine, None) and f["code"] == code]


def fate(data, engine, key):
    return next(k for k in answer(data, engine)["keys"] if k["name"] == key)


# --- key fates ---------------------------------------------------------------------------------

def test_layers_0_keys_are_renamed_to_midlayer_only_from_the_1_3_line(tmp_path):
    data = inspect(draft(tmp_path / "d", config(), layer0="layers.0."), NEW, OLD)
    assert fate(data, NEW, "layers.0.mlp.down_proj.weight")["fate"] == "renamed"
    assert fate(data, NEW, "layers.0.mlp.down_proj.weight")["param"] == \
        "model.midlayer.mlp.down_proj.weight"
    assert answer(data, NEW)["verdict"] == "ok"
    assert fate(data, OLD, "layers.0.mlp.down_proj.weight")["fate"] == "dropped"
    assert answer(data, OLD)["verdict"] == "silent_failure"
    assert "KEYS_DROPPED" in codes(data, OLD) and "LOAD_ERROR" not in codes(data, OLD)


def test_a_multi_layer_draft_gets_midlayer_n_and_no_input_norm_after_the_first(tmp_path):
    data = inspect(draft(tmp_path / "d", config(num_hidden_layers=2), layer0="layers.0."), NEW)
    assert fate(data, NEW, "layers.1.mlp.up_proj.weight")["param"] == \
        "model.midlayer.1.mlp.gate_up_proj.weight"
    # Eagle3DecoderLayer: next_layer_regular layers build no input_layernorm, run hidden_norm
    assert fate(data, NEW, "layers.1.input_layernorm.weight")["fate"] == "dropped"
    unloaded = answer(data, NEW)["unloaded_params"]
    assert "model.midlayer.1.hidden_norm.weight" in unloaded
    assert answer(data, NEW)["verdict"] == "silent_failure"


def test_before_multi_layer_support_one_midlayer_is_built(tmp_path):
    data = inspect(draft(tmp_path / "d", config(num_hidden_layers=2), layer0="midlayer."),
                   SINGLE)
    assert fate(data, SINGLE, "midlayer.mlp.down_proj.weight")["fate"] == "loaded"
    assert fate(data, SINGLE, "layers.1.mlp.down_proj.weight")["fate"] == "dropped"


@pytest.mark.parametrize("prefix", ["model.", "draft_model."])
def test_any_other_prefix_is_dropped_silently(tmp_path, prefix):
    data = inspect(draft(tmp_path / "d", config(), prefix=prefix), NEW)
    assert all(k["fate"] in ("dropped", "skipped") for k in answer(data, NEW)["keys"])
    assert "KEYS_DROPPED" in codes(data, NEW) and "LOAD_ERROR" not in codes(data, NEW)
    assert answer(data, NEW)["verdict"] == "silent_failure"


def test_embed_tokens_is_read_only_when_the_draft_is_narrower_than_the_target(tmp_path):
    same = inspect(draft(tmp_path / "a", config(), add={"embed_tokens.weight": [512, H]}), NEW)
    assert fate(same, NEW, "embed_tokens.weight")["fate"] == "skipped"
    assert "KEYS_DROPPED" not in codes(same, NEW) and answer(same, NEW)["verdict"] == "ok"
    narrow = config(target_hidden_size=2 * H)
    wide = inspect(draft(tmp_path / "b", narrow, add={"embed_tokens.weight": [512, H]}), NEW)
    assert fate(wide, NEW, "embed_tokens.weight")["fate"] == "loaded"


def test_d2t_is_read_as_offsets_only_for_a_smaller_draft_vocab(tmp_path):
    pruned = inspect(draft(tmp_path / "a", config()), NEW)
    assert fate(pruned, NEW, "d2t")["param"] == "model.d2t"
    assert resolve_engine(NEW).d2t_reading == "offsets"
    full = inspect(draft(tmp_path / "b", config(draft_vocab_size=512), add={"d2t": [512]}), NEW)
    assert fate(full, NEW, "d2t")["fate"] == "dropped"
    assert answer(full, NEW)["verdict"] == "ok"  # the identity mapping is right: no loss


def test_t2d_is_ignored(tmp_path):
    data = inspect(draft(tmp_path / "d", config()), NEW, OLD)
    assert fate(data, NEW, "t2d")["fate"] == fate(data, OLD, "t2d")["fate"] == "skipped"


def test_a_missing_lm_head_takes_the_targets_even_for_a_pruned_vocab(tmp_path):
    full = inspect(draft(tmp_path / "a", config(draft_vocab_size=512), drop=("lm_head.weight",)),
                   NEW)
    assert [f["severity"] for f in found(full, NEW, "LM_HEAD_FROM_TARGET")] == ["info"]
    pruned = inspect(draft(tmp_path / "b", config(), drop=("lm_head.weight",)), NEW)
    errors = [f for f in found(pruned, NEW, "LM_HEAD_FROM_TARGET") if f["severity"] == "error"]
    assert errors and "d2t" in errors[0]["message"]
    assert answer(pruned, NEW)["verdict"] == "silent_failure"


# --- norm flags --------------------------------------------------------------------------------

def test_input_norm_only_with_eagle_config_norm_before_fc_from_1_3(tmp_path):
    add = {"input_norm.weight": [3 * H]}
    nested = inspect(draft(tmp_path / "a", config(eagle_config={"norm_before_fc": True}),
                           add=add), NEW, OLD)
    assert fate(nested, NEW, "input_norm.weight")["param"] == "model.input_norm.weight"
    assert fate(nested, OLD, "input_norm.weight")["fate"] == "dropped"
    top = inspect(draft(tmp_path / "b", config(norm_before_fc=True), add=add), NEW)
    assert fate(top, NEW, "input_norm.weight")["fate"] == "dropped"
    assert any("top_level" in f["message"] for f in found(top, NEW, "NORM_FLAG_IGNORED"))


def test_fc_norm_per_release(tmp_path):
    add = {f"fc_norm.{i}.weight": [H] for i in range(3)}
    data = inspect(draft(tmp_path / "d", config(fc_norm=True), add=add), NEW, OLD)
    assert fate(data, NEW, "fc_norm.0.weight")["param"] == "model.fc_norm.0.weight"
    assert fate(data, OLD, "fc_norm.0.weight")["fate"] == "dropped"
    assert "NORM_FLAG_IGNORED" in codes(data, OLD) and "NORM_FLAG_IGNORED" not in codes(data, NEW)


def test_norm_before_residual_is_never_read(tmp_path):
    data = inspect(draft(tmp_path / "d", config(norm_before_residual=True)), NEW, OLD, SINGLE)
    for engine in (NEW, OLD, SINGLE):
        assert "NORM_FLAG_IGNORED" in codes(data, engine), engine


# --- aux hidden states -------------------------------------------------------------------------

def test_the_drafts_aux_ids_are_never_read_and_the_yaml_line_is_printed(tmp_path):
    ids = config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 3, 6]})
    data = inspect(draft(tmp_path / "d", ids), NEW, target=target_config(tmp_path))
    aux = answer(data, NEW)["aux_layers"]
    # TRT default (1, L//2-1, L-4) on 8 layers = outputs of 1, 3, 4 = hidden_states [2, 4, 5]
    assert aux["source"] == "default" and aux["ids"] == [2, 4, 5]
    [defaulted] = found(data, NEW, "AUX_LAYERS_DEFAULTED")
    assert defaulted["severity"] == "error"
    # TRT id i = hidden_states[i + 1]: the trained [2, 3, 6] are written as [1, 2, 5]
    assert defaulted["evidence"]["config_line"] == "eagle3_layers_to_capture: [1, 2, 5]"


@pytest.mark.parametrize("layers, fails", [(5, True), (2, True), (6, False), (1, False)])
def test_a_target_of_five_layers_or_fewer_with_no_ids_fails_at_startup(tmp_path, layers, fails):
    data = inspect(draft(tmp_path / "d", config()), NEW, target=target_config(tmp_path, layers))
    failed = [f for f in found(data, NEW, "LOAD_ERROR") if "Not enough hidden layers" in
              f["message"]]
    assert bool(failed) == fails and (answer(data, NEW)["verdict"] == "load_error") == fails


def test_a_config_without_draft_vocab_size_fails_only_before_its_default(tmp_path):
    cfg = config(draft_vocab_size=512)
    del cfg["draft_vocab_size"]
    data = inspect(draft(tmp_path / "d", cfg), NO_VOCAB_DEFAULT, OLD)
    assert answer(data, NO_VOCAB_DEFAULT)["verdict"] == "load_error"
    assert answer(data, OLD)["verdict"] != "load_error"


# --- releases ----------------------------------------------------------------------------------

def test_release_candidates_listed_are_answered_and_the_others_warned(tmp_path):
    assert not resolve_engine("trtllm==1.3.0rc29").based_on
    assert resolve_engine("trtllm==1.3.0rc29").covers == ("1.3.0rc29", "1.4.0rc1")
    between = resolve_engine("trtllm==1.3.0rc12")
    assert between.based_on == "trtllm==1.3.0rc0"
    data = inspect(draft(tmp_path / "d", config()), "trtllm==1.3.0rc12")
    assert "ENGINE_UNVERIFIED" in codes(data, "trtllm==1.3.0rc12")


def test_every_answer_says_it_was_read_from_source_not_probed(tmp_path):
    data = inspect(draft(tmp_path / "d", config()), NEW, OLD, SINGLE, NO_VOCAB_DEFAULT)
    for engine in (NEW, OLD, SINGLE, NO_VOCAB_DEFAULT):
        [note] = found(data, engine, "ENGINE_READ_ONLY")
        assert note["severity"] == "info" and "not checked with the engine's loader" in \
            note["message"]


def test_convert_writes_the_midlayer_keys_a_release_before_the_rename_loads(tmp_path):
    from eagle3_nb.convert import convert_checkpoint

    src = draft(tmp_path / "d", config(), layer0="layers.0.")
    result = convert_checkpoint(src, tmp_path / "out", engine=OLD)
    assert result.renames["layers.0.mlp.down_proj.weight"] == "midlayer.mlp.down_proj.weight"
    assert answer(inspect(tmp_path / "out", OLD), OLD)["verdict"] == "ok"


def test_norm_output_is_read_only_from_the_1_3_line(tmp_path):
    data = inspect(draft(tmp_path / "d", config(norm_output=True)), NEW, OLD)
    ignored = {f["engine"] for f in data["findings"] if f["code"] == "NORM_FLAG_IGNORED"
               and f["evidence"].get("flag") == "norm_output"}
    assert OLD in ignored and NEW not in ignored


# --- the MLA draft attention -------------------------------------------------------------------

MLA = {"kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
       "v_head_dim": 16}


def test_a_config_with_kv_lora_rank_gets_the_mla_attention_whatever_its_architecture(tmp_path):
    """Eagle3ForCausalLM picks MLA from kv_lora_rank (not from architectures): q_a_proj and
    kv_a_proj_with_mqa fill the two shards of one kv_a_proj_with_mqa (DeepseekV3WeightLoader's
    fused_a), the other MLA tensors load as named, and nothing is dropped."""
    cfg = config(model_type="deepseek_v2", **MLA)
    data = inspect(draft(tmp_path / "d", cfg, layer0="layers.0."), NEW, OLD)
    q_a = fate(data, NEW, "layers.0.self_attn.q_a_proj.weight")
    kv_a = fate(data, NEW, "layers.0.self_attn.kv_a_proj_with_mqa.weight")
    assert q_a["param"] == kv_a["param"] == "model.midlayer.self_attn.kv_a_proj_with_mqa.weight"
    # each fills its own shard: an unfilled one would be PARAMS_UNLOADED below
    assert fate(data, NEW, "layers.0.self_attn.kv_b_proj.weight")["fate"] == "renamed"
    assert answer(data, NEW)["verdict"] == "ok"
    assert not codes(data, NEW) & {"KEYS_DROPPED", "PARAMS_UNLOADED", "SHAPE_MISMATCH"}
    # before the midlayer rename the same layers.0.* keys are dropped, MLA or not
    assert fate(data, OLD, "layers.0.self_attn.q_a_proj.weight")["fate"] == "dropped"
    llama = inspect(draft(tmp_path / "l", config(architectures=["Eagle3DeepseekV2ForCausalLM"]),
                          layer0="layers.0."), NEW)
    assert fate(llama, NEW, "layers.0.self_attn.q_proj.weight")["param"] == \
        "model.midlayer.self_attn.qkv_proj.weight"
