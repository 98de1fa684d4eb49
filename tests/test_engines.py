"""Engine profiles applied by the planner: each test pins one engine fact from DOMAIN.md /
reference notes to the fate the kit reports. Configs and key sets are built here, not read from
the samples, so every rule is exercised in isolation."""

import dataclasses

import pytest

from eagle3_nb.config import parse_config, parse_target_config
from eagle3_nb.engines import RELEASES
from eagle3_nb.engines import PROFILES, resolve_engine, resolve_engines
from eagle3_nb.engines.planner import plan_load
from eagle3_nb.errors import EngineSpecError
from eagle3_nb.layouts import expected_schema

H, L = 64, 32


def flat_config(**extra):
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
           "vocab_size": 512, "draft_vocab_size": 256, "num_hidden_layers": 1,
           "max_position_embeddings": 4096}
    cfg.update(extra)
    return cfg


def speculators_config(**extra):
    # as the speculators library saves one: a whole LlamaConfig as the layer config (vLLM builds
    # the draft's config from it with no defaults) and a speculators_config (vLLM's marker)
    layer = {k: v for k, v in flat_config().items()
             if k not in ("architectures", "draft_vocab_size")}
    layer.update(hidden_act="silu", rms_norm_eps=1e-5)
    cfg = {"speculators_model_type": "eagle3", "architectures": ["Eagle3DraftModel"],
           "speculators_config": {"algorithm": "eagle3",
                                  "verifier": {"architectures": ["LlamaForCausalLM"]}},
           "transformer_layer_config": layer, "draft_vocab_size": 256,
           "eagle_aux_hidden_state_layer_ids": [2, 16, 29], "norm_before_residual": False,
           "norm_before_fc": False, "fc_norm": False, "norm_output": False,
           "target_hidden_size": None}
    cfg.update(extra)
    return cfg


def shapes_for(cfg, layer0="midlayer.", prefix="", drop=(), num_aux=None):
    schema = expected_schema(cfg, num_aux)
    out = {}
    for name, entry in schema.items():
        if name == "embed_tokens.weight" or name in drop:
            continue
        key = layer0 + name[len("layers.0."):] if name.startswith("layers.0.") else name
        out[prefix + key] = entry.shape
    return out


def target(layers=L, model_type="llama", max_pos=4096, arch="LlamaForCausalLM"):
    return parse_target_config({"num_hidden_layers": layers, "hidden_size": H, "vocab_size": 512,
                                "max_position_embeddings": max_pos, "model_type": model_type,
                                "architectures": [arch]}, "target")


def plan(engine, raw, **kw):
    cfg = parse_config(raw)
    shapes = kw.pop("shapes", None) or shapes_for(cfg, **kw.pop("layout", {}))
    return plan_load(resolve_engine(engine), cfg, shapes, kw.pop("target", target()))


def codes(p):
    return {f.code for f in p.findings}


def fates(p):
    return {k.name: k.fate for k in p.keys}


# --- engine names ----------------------------------------------------------------------------

def test_version_spellings_resolve_to_one_profile():
    assert resolve_engine("vllm==0.33") is resolve_engine("vllm==0.33.0")
    assert resolve_engine("SGLang==0.5.23").version == "0.5.23"
    assert resolve_engine("sglang==0.5.9+cu128") is not resolve_engine("sglang==0.5.9")


@pytest.mark.parametrize("spec", ["sglang==0.5.9.post1", "sglang==0.5.10rc0",
                                  "sglang==0.5.23+local.build", "vllm==0.33.0+cu130"])
def test_a_build_inside_a_range_that_was_never_published_says_so(spec):
    """A post, rc, dev or local build the survey never read answers with the profile whose
    range holds it, and says that build itself was not checked."""
    profile = resolve_engine(spec)
    assert profile.based_on and profile.version == spec.split("==")[1]
    warning = [f for f in plan(spec, flat_config()).findings if f.code == "ENGINE_UNVERIFIED"]
    assert warning and "not a published release" in warning[0].message


def test_every_published_release_has_an_answer():
    """Every release from the first EAGLE-3 one answers: covered ones with no warning."""
    for name, releases in RELEASES.items():
        for release, _date in releases:
            profile = resolve_engine(f"{name}=={release}")
            assert not profile.eagle3_since, release


@pytest.mark.parametrize("spec, based_on", [
    ("sglang==0.6.0", "sglang==0.5.23"), ("sglang==0.5.24", "sglang==0.5.23"),
    ("vllm==0.35.0", "vllm==0.34.0"), ("vllm==0.40", "vllm==0.34.0")])
def test_a_release_no_profile_covers_is_answered_by_the_nearest_and_says_so(spec, based_on):
    """Never refused, never silent: the newest profile not after the release (else the oldest)
    answers, and every plan carries ENGINE_UNVERIFIED naming both."""
    profile = resolve_engine(spec)
    assert profile.key == spec and profile.based_on == based_on and not profile.eagle3_since
    p = plan(spec, flat_config())
    unverified = [f for f in p.findings if f.code == "ENGINE_UNVERIFIED"]
    assert unverified and unverified[0].severity == "warning"
    assert spec.split("==")[1] in unverified[0].message and based_on in unverified[0].message
    assert p.verdict != "load_error"


@pytest.mark.parametrize("spec, first", [("sglang==0.4.4.post1", "0.4.4.post2"),
                                         ("sglang==0.3.0", "0.4.4.post2"),
                                         ("vllm==0.8.4", "0.8.5")])
def test_a_release_before_eagle3_is_a_load_error(spec, first):
    p = plan(spec, flat_config())
    assert p.verdict == "load_error"
    assert any(f.code == "LOAD_ERROR" and "predates EAGLE-3" in f.message and first in f.message
               for f in p.findings)


def test_an_unknown_engine_name_is_refused():
    with pytest.raises(EngineSpecError, match="no engine called 'tgi'"):
        resolve_engine("tgi==1.0")


@pytest.mark.parametrize("spec", ["sglang==", "sglang:", "==0.5.9", "sglang=0.5.9"])
def test_malformed_engine_spec(spec):
    with pytest.raises(EngineSpecError):
        resolve_engine(spec)


def test_no_engine_means_each_engines_newest_releases_and_all_means_every_range():
    newest = resolve_engines(None)
    assert [p.range_text() for p in newest] == ["sglang 0.5.17 .. 0.5.23",
                                                "trtllm 1.3.0rc29 .. 1.4.0rc1", "vllm 0.34.0"]
    assert resolve_engines(["all"]) == list(PROFILES)


@pytest.mark.parametrize("field_name, typo", [
    ("embed_policy", "own_if_presnt"), ("unknown_keys", "drop_silently"),
    ("key_resolution", "bare"), ("fc_aux_count", "fixed3"), ("lm_head_policy", "target"),
    ("extra_layer_attn_norm", "hidden_norms"), ("d2t_reading", "offset"),
    ("aux_rules", {"llama": "plus1"}), ("aux_id_sources", ("eagle_config", "toplevel")),
    ("dialects", frozenset({"flat", "speculator"})), ("covers", ("0.5.23", "0.5.22"))])
def test_a_policy_typo_is_refused_not_silently_another_branch(field_name, typo):
    with pytest.raises(ValueError, match=field_name.split("_")[0]):
        dataclasses.replace(PROFILES[0], **{field_name: typo})


def test_every_profile_cites_its_facts():
    for p in PROFILES:
        assert p.cites and p.evidence, p.key
        assert p.covers[1] == p.version or p.name == "vllm", p.key


# --- key fates -------------------------------------------------------------------------------

def test_sglang_059_drops_layers0_keys_silently():
    p = plan("sglang==0.5.9", flat_config(), layout={"layer0": "layers.0."})
    f = fates(p)
    assert f["layers.0.self_attn.q_proj.weight"] == "dropped"
    assert f["fc.weight"] == "loaded" and f["t2d"] == "skipped" and f["d2t"] == "loaded"
    assert any("model.midlayer.self_attn.qkv_proj.weight" in u for u in p.unloaded)
    assert {"KEYS_DROPPED", "PARAMS_UNLOADED"} <= codes(p) and "LOAD_ERROR" not in codes(p)
    assert p.verdict == "silent_failure"


@pytest.mark.parametrize("engine", ["sglang==0.5.16", "sglang==0.5.23"])
def test_sglang_new_renames_midlayer(engine):
    p = plan(engine, flat_config())
    assert fates(p)["midlayer.mlp.gate_proj.weight"] == "renamed"
    q = next(k for k in p.keys if k.name == "midlayer.self_attn.q_proj.weight")
    assert q.param == "model.layers.0.self_attn.qkv_proj.weight"
    assert p.verdict == "ok" and not p.unloaded


def test_sglang_accepts_model_prefix_but_drops_others_except_d2t():
    ok = plan("sglang==0.5.9", flat_config(), layout={"prefix": "model."})
    f = fates(ok)
    assert f["model.midlayer.self_attn.q_proj.weight"] == "loaded" and f["model.fc.weight"] == "loaded"
    # lm_head is a top-level parameter: "model.lm_head.weight" -> "model.model.lm_head.weight"
    assert f["model.lm_head.weight"] == "dropped" and "lm_head.weight" in ok.unloaded
    bad = plan("sglang==0.5.23", flat_config(), layout={"prefix": "draft_model."})
    f = fates(bad)
    assert f["draft_model.fc.weight"] == "dropped" and f["draft_model.d2t"] == "loaded"
    assert bad.verdict == "silent_failure"


@pytest.mark.parametrize("prefix", ["model.", "draft_model.", "module."])
def test_vllm_raises_on_prefixed_keys(prefix):
    p = plan("vllm==0.33", flat_config(), layout={"prefix": prefix})
    assert p.verdict == "load_error"
    assert any("There is no module or parameter named" in k.reason for k in p.keys)


def test_vllm_loads_both_layouts():
    for layer0 in ("midlayer.", "layers.0."):
        assert plan("vllm==0.33", flat_config(), layout={"layer0": layer0}).verdict == "ok"


def test_vllm_rejects_d2t_when_vocab_is_full():
    raw = flat_config(draft_vocab_size=512)
    cfg = parse_config(raw)
    shapes = shapes_for(cfg)
    shapes["d2t"] = (512,)
    p = plan_load(resolve_engine("vllm==0.33"), cfg, shapes, target())
    assert fates(p)["d2t"] == "error" and p.verdict == "load_error"


def test_vllm_ignores_unknown_bias_but_raises_on_other_unknowns():
    cfg = parse_config(flat_config())
    shapes = shapes_for(cfg)
    shapes["fc.bias"] = (H,)
    shapes["extra.weight"] = (3,)
    p = plan_load(resolve_engine("vllm==0.33"), cfg, shapes, target())
    assert fates(p)["fc.bias"] == "dropped" and fates(p)["extra.weight"] == "error"


def test_input_norm_loaded_only_where_norm_before_fc_exists():
    raw = flat_config(eagle_config={"norm_before_fc": True})
    shapes = shapes_for(parse_config(raw))
    assert "input_norm.weight" in shapes
    assert fates(plan("sglang==0.5.23", raw, shapes=shapes))["input_norm.weight"] == "loaded"
    p16 = plan("sglang==0.5.16", raw, shapes=shapes)
    assert fates(p16)["input_norm.weight"] == "dropped"
    assert "NORM_FLAG_IGNORED" in codes(p16)
    assert fates(plan("vllm==0.33", raw, shapes=shapes))["input_norm.weight"] == "loaded"


def test_legacy_aux_norm_names_renamed_by_new_sglang():
    raw = flat_config(fc_norm=True)
    cfg = parse_config(raw)
    shapes = {k.replace("fc_norm.0", "aux_norm_low").replace("fc_norm.1", "aux_norm_mid")
              .replace("fc_norm.2", "aux_norm_high"): v for k, v in shapes_for(cfg).items()}
    p = plan_load(resolve_engine("sglang==0.5.23"), cfg, shapes, target())
    assert fates(p)["aux_norm_mid.weight"] == "renamed"
    assert p.verdict == "ok"
    old = plan_load(resolve_engine("sglang==0.5.9"), cfg, shapes, target())
    assert fates(old)["aux_norm_mid.weight"] == "dropped"


def test_shape_mismatch_is_loud():
    raw = flat_config()
    cfg = parse_config(raw)
    shapes = shapes_for(cfg)
    shapes["norm.weight"] = (H + 1,)
    for engine in ("sglang==0.5.23", "vllm==0.33"):
        p = plan_load(resolve_engine(engine), cfg, shapes, target())
        assert fates(p)["norm.weight"] == "error" and p.verdict == "load_error"


# --- startup ---------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["sglang==0.5.9", "sglang==0.5.16", "sglang==0.5.23"])
def test_sglang_cannot_start_from_speculators_config(engine):
    p = plan(engine, speculators_config(), layout={"layer0": "layers.0."})
    assert p.verdict == "load_error" and "convert" in p.findings[0].message


def test_vllm_reads_speculators_config():
    p = plan("vllm==0.33", speculators_config(), layout={"layer0": "layers.0."})
    assert p.verdict == "ok", [f.message for f in p.findings]


def test_an_unknown_speculators_layer_type_gets_the_profiles_own_error_text():
    raw = speculators_config()
    raw["transformer_layer_config"] = {**raw["transformer_layer_config"], "model_type": "mistral"}
    cfg = parse_config(raw)
    shapes = shapes_for(cfg, layer0="layers.0.")
    vllm = resolve_engine("vllm==0.33")
    errors = [f.message for f in plan_load(vllm, cfg, shapes, target()).findings
              if f.code == "LOAD_ERROR"]
    assert errors == ["ValueError: Unsupported model_type 'mistral' for Eagle3 speculator"]
    other = dataclasses.replace(vllm, speculators_layer_type_error="")  # an engine without one
    errors = [f.message for f in plan_load(other, cfg, shapes, target()).findings
              if f.code == "LOAD_ERROR"]
    assert errors == ["the engine has no EAGLE-3 draft class for layer model type 'mistral'"]


def test_sglang_059_refuses_two_layers_newer_runs_untrained_hidden_norm():
    raw = flat_config(num_hidden_layers=2)
    cfg = parse_config(raw)
    shapes = shapes_for(cfg, layer0="layers.0.")
    assert "layers.1.hidden_norm.weight" not in shapes  # speculators-style extra layer
    old = plan_load(resolve_engine("sglang==0.5.9"), cfg, shapes, target())
    assert old.verdict == "load_error"
    new = plan_load(resolve_engine("sglang==0.5.23"), cfg, shapes, target())
    assert "model.layers.1.hidden_norm.weight" in new.unloaded
    assert any("pre-attention" in f.message for f in new.findings)
    assert new.verdict == "silent_failure"
    assert plan_load(resolve_engine("vllm==0.33"), cfg, shapes, target()).verdict == "ok"


def test_context_shorter_than_target():
    raw = flat_config(max_position_embeddings=2048)
    p = plan("sglang==0.5.23", raw, target=target(max_pos=8192))
    assert {"LOAD_ERROR", "CONTEXT_TOO_SHORT"} <= codes(p)
    v = plan("vllm==0.33", raw, target=target(max_pos=8192))
    assert "CONTEXT_TOO_SHORT" in codes(v) and v.verdict == "ok"


def test_sglang_wrong_architecture():
    p = plan("sglang==0.5.23", flat_config(architectures=["LlamaForCausalLM"]))
    assert p.verdict == "load_error"
    assert plan("vllm==0.33", flat_config(architectures=["LlamaForCausalLM"])).verdict == "ok"


# --- aux layer ids ---------------------------------------------------------------------------

def test_specforge_output_of_layer_ids():
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 15, 28]})
    s = plan("sglang==0.5.23", raw)
    assert s.aux.captured == [2, 16, 29] == s.aux.trained and s.verdict == "ok"
    v1 = plan("vllm==0.25.0", raw)  # model runner V1 where it runs: the nested ids, no offset
    assert v1.aux.captured == [1, 15, 28] and "AUX_LAYER_CONVENTION" in codes(v1)
    for release in ("vllm==0.33", "vllm==0.34.0"):  # V2, the default: the nested ids unread
        v = plan(release, raw)
        assert v.aux.source == "default" and v.aux.captured == [2, 16, 29], release
        # the defaults of a 32-layer target happen to be what training used: said, not an error
        bug = next(f for f in v.findings if f.code == "ENGINE_BUG")
        assert bug.severity == "warning" and bug.evidence["applied_to_plan"]
        assert v.verdict == "ok" and "AUX_LAYERS_DEFAULTED" in codes(v)
    other = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 10, 20]})
    v = plan("vllm==0.34.0", other)
    assert v.aux.captured == [2, 16, 29] and v.verdict == "silent_failure"
    bug = next(f for f in v.findings if f.code == "ENGINE_BUG")
    assert bug.severity == "error" and bug.evidence["config_line"] == \
        '"eagle_aux_hidden_state_layer_ids": [2, 11, 21]'
    assert "VLLM_USE_V2_MODEL_RUNNER=0 now stops startup" in bug.message
    assert "VLLM_USE_V2_MODEL_RUNNER=0, whose model runner V1" in next(
        f for f in plan("vllm==0.33", other).findings if f.code == "ENGINE_BUG").message


def test_input_to_layer_ids_are_shifted_by_sglang_llama():
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 16, 29]})
    s = plan("sglang==0.5.23", raw)
    assert s.aux.captured == [3, 17, 30] and s.aux.trained == [2, 16, 29]
    assert "AUX_LAYER_CONVENTION" in codes(s)
    assert plan("vllm==0.33", raw).verdict == "ok"


def test_deepseek_rule_changed_between_releases():
    t = target(layers=61, model_type="kimi_k2", arch="DeepseekV3ForCausalLM")
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 58]})
    assert plan("sglang==0.5.23", raw, target=t).aux.captured == [2, 30, 58]
    assert plan("sglang==0.5.9", raw, target=t).aux.captured == [3, 31, 59]
    raw1 = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
    assert plan("sglang==0.5.23", raw1, target=t).aux.captured == [2, 30, 58]
    assert plan("sglang==0.4.10", raw1, target=t).verdict == "load_error"


def test_gpt_oss_final_boundary_ids_are_served_from_sglang_0_5_17():
    """[24, 30, 36] on a 36-layer gpt-oss target (a real draft, accept length 2.68 on 0.5.23):
    PR #32334 (0.5.17) reads them as-is and captures boundary 36. Before it, gpt_oss.py added 1
    to every id and never captured the boundary: two states reach a 3-state fc."""
    t = target(layers=36, model_type="gpt_oss", arch="GptOssForCausalLM")
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [24, 30, 36]})
    s = plan("sglang==0.5.23", raw, target=t)
    assert s.aux.captured == [24, 30, 36] and s.verdict != "load_error", s.findings
    old = plan("sglang==0.5.16", raw, target=t)
    assert old.aux.captured == [25, 31] and old.verdict == "load_error"
    assert plan("vllm==0.25.0", raw, target=t).aux.captured == [24, 30, 36]
    assert plan("vllm==0.33", raw, target=t).aux.captured == [2, 18, 33]  # V2: nested ids unread


def test_top_level_ids_in_flat_config_ignored_by_sglang():
    raw = flat_config(eagle_aux_hidden_state_layer_ids=[1, 10, 20])
    s = plan("sglang==0.5.23", raw)
    assert s.aux.source == "default" and s.aux.captured == [2, 16, 29]
    found = [f for f in s.findings if f.code == "AUX_LAYERS_DEFAULTED"]
    assert found and found[0].severity == "error"
    v = plan("vllm==0.33", raw)
    assert v.aux.source == "top_level" and v.aux.captured == [1, 10, 20]


def test_no_ids_declared_is_a_warning_everywhere():
    for engine in ("sglang==0.5.9", "sglang==0.5.23", "vllm==0.33"):
        p = plan(engine, flat_config())
        f = [f for f in p.findings if f.code == "AUX_LAYERS_DEFAULTED"]
        assert f and f[0].severity == "warning" and p.verdict == "ok"


def test_old_sglang_cuda_graphs_use_default_ids():
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [3, 10, 20]})
    p = plan("sglang==0.5.9", raw)
    assert any("CUDA graphs" in f.message for f in p.findings)


def test_four_aux_speculators_draft_fails_vllm_fc():
    raw = speculators_config(eagle_aux_hidden_state_layer_ids=[2, 16, 29, 31])
    p = plan("vllm==0.33", raw, layout={"layer0": "layers.0.", "num_aux": 4})
    assert p.fc_width_engine == 3 * H and p.fc_width_checkpoint == 4 * H
    assert {"AUX_COUNT_MISMATCH", "LOAD_ERROR"} <= codes(p)
    qwen = speculators_config(eagle_aux_hidden_state_layer_ids=[2, 16, 29, 31])
    qwen["transformer_layer_config"]["model_type"] = "qwen3"
    q = plan("vllm==0.33", qwen, layout={"layer0": "layers.0.", "num_aux": 4})
    assert q.fc_width_engine == 4 * H


def test_single_state_of_draft_width_skips_fc_in_sglang():
    # only one of three configured layers exists on a 4-layer target: one H-wide state arrives
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 7, 9]})
    s = plan("sglang==0.5.23", raw, target=target(layers=4))
    assert s.aux.captured == [2] and "FC_SKIPPED" in codes(s)


def test_use_aux_false_ignored_by_old_sglang():
    raw = flat_config(eagle_config={"use_aux_hidden_state": False})
    assert plan("sglang==0.5.23", raw).verdict == "ok"
    assert "AUX_LAYER_CONVENTION" in codes(plan("sglang==0.5.4", raw))


# --- norm flags and embeddings ---------------------------------------------------------------

def test_norm_before_residual_never_read_by_sglang():
    raw = flat_config(norm_before_residual=True)
    s = plan("sglang==0.5.23", raw)
    assert "NORM_FLAG_IGNORED" in codes(s) and s.flags["norm_before_residual"] is False
    assert plan("vllm==0.33", raw).flags["norm_before_residual"] is True


@pytest.mark.parametrize("release, built", [("sglang==0.5.23", True), ("sglang==0.5.12", True),
                                            ("vllm==0.34.0", False), ("vllm==0.23.0", False),
                                            ("trtllm==1.4.0rc1", False)])
def test_use_aux_norm_is_fc_norm_only_where_the_engine_reads_it(release, built):
    """SGLang builds fc_norm for `fc_norm or use_aux_norm` (llama_eagle3.py, 0.5.12 on); vLLM
    and TensorRT-LLM read fc_norm alone (vLLM's llama_eagle3.py in the 0.23.0 and 0.34.0
    code): a draft trained with the legacy key is served there without its per-aux norms."""
    raw = flat_config(use_aux_norm=True)
    assert parse_config(raw).flag("fc_norm").value is True      # as trained
    p = plan(release, raw)
    assert p.flags["fc_norm"] is built
    assert ("NORM_FLAG_IGNORED" in codes(p)) is not built
    assert any(".fc_norm." in spec for spec in p.params) is built


def test_vllm_norm_before_residual_default_depends_on_dialect():
    spec = speculators_config()
    del spec["norm_before_residual"]
    assert plan("vllm==0.33", spec, layout={"layer0": "layers.0."}).flags["norm_before_residual"]
    assert not plan("vllm==0.33", flat_config()).flags["norm_before_residual"]


def test_embeddings_replaced_unless_widths_differ():
    s = plan("sglang==0.5.23", flat_config())
    assert "EMBED_REPLACED" in codes(s)
    raw = flat_config(target_hidden_size=128)
    cfg = parse_config(raw)
    p = plan_load(resolve_engine("sglang==0.5.23"), cfg, shapes_for(cfg), target())
    assert "model.embed_tokens.weight" in p.unloaded and p.verdict == "silent_failure"


def test_missing_lm_head_is_unloaded_unless_borrowed():
    p = plan("sglang==0.5.23", flat_config(), layout={"drop": ("lm_head.weight",)})
    assert "lm_head.weight" in p.unloaded and p.verdict == "silent_failure"
    b = plan("sglang==0.5.23", flat_config(draft_vocab_size=None, vocab_size=512),
             layout={"drop": ("lm_head.weight",)})
    assert "LM_HEAD_FROM_TARGET" in codes(b)


def test_pruned_vocab_without_d2t_leaves_mapping_unloaded():
    for engine, param in (("sglang==0.5.23", "hot_token_id"), ("vllm==0.33", "draft_id_to_target_id")):
        p = plan(engine, flat_config(), layout={"drop": ("d2t", "t2d")})
        assert param in p.unloaded and p.verdict == "silent_failure"


# --- serving advice ----------------------------------------------------------------------------

def test_next_steps_carry_the_named_engines_own_facts():
    from eagle3_nb.engines.advice import next_step

    sglang = next_step("AUX_LAYER_CONVENTION", ["sglang==0.5.9"])
    vllm = next_step("AUX_LAYER_CONVENTION", ["vllm==0.33"])
    assert "hidden_states[id + 1]" in sglang and "minus 1" in sglang
    assert "hidden_states[id]:" in vllm and "minus 1" not in vllm
    assert "eagle_config." in next_step("AUX_LAYERS_DEFAULTED", ["sglang==0.5.23"])
    assert "top-level" in next_step("AUX_LAYERS_DEFAULTED", ["vllm==0.33"])
    assert "--speculative-algorithm EAGLE3" in next_step("FC_SKIPPED", ["sglang==0.5.9"])
    assert '"method": "eagle3"' in next_step("FC_SKIPPED", ["vllm==0.33"])
    assert "SGLANG_ALLOW_OVERWRITE" in next_step("CONTEXT_TOO_SHORT", ["sglang==0.5.23"])
    assert "SGLANG" not in next_step("CONTEXT_TOO_SHORT", ["vllm==0.33"])
    # no engine named, or one no profile covers: the text says where the kit shows it instead
    for engines in (None, ["sglang==0.1.0"]):
        text = next_step("AUX_LAYER_CONVENTION", engines)
        assert "notebook 01" in text and "hidden_states[id" not in text


def test_every_next_step_is_filled_for_every_profile():
    from eagle3_nb.engines.advice import next_step
    from eagle3_nb.findings import CODES

    for code in CODES:
        for engines in (None, *([p.key] for p in PROFILES)):
            text = next_step(code, engines, "/ckpt")
            assert "{" not in text and "}" not in text, (code, engines, text)
