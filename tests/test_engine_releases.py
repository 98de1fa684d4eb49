"""Every engine release, in contiguous ranges read from the engines' code, and the known bugs.

The ranges and bugs were located by surveying every release tag (docs/engine-survey.md); these
tests hold the data to its own promises (contiguous, cited, every release answered) and check
the facts the survey found at the change points on plans of real configs."""

import pytest

from test_engines import H, codes, flat_config, plan, speculators_config, target
from eagle3_nb.engines import PROFILES, FIRST_EAGLE3, resolve_engine
from eagle3_nb.engines.sglang import profiles as sglang_profiles
from eagle3_nb.engines.planner import BUG_CONDITIONS, BUG_EFFECTS
from eagle3_nb.engines.profile import earlier_range, release_key
from eagle3_nb.engines import ENGINES, RELEASES


@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_profiles_cover_every_release_once_without_gaps(engine):
    releases = [r for r, _ in RELEASES[engine]]
    mine = sorted((p for p in PROFILES if p.name == engine), key=lambda p: release_key(p.covers[0]))
    assert mine[0].covers[0] == FIRST_EAGLE3[engine] == releases[0]
    assert mine[-1].covers[1] == releases[-1]
    for before, after in zip(mine, mine[1:]):
        assert releases.index(after.covers[0]) == releases.index(before.covers[1]) + 1, \
            (before.range_text(), after.range_text())
    for release in releases:
        assert sum(p.covers_release(release) for p in mine) == 1, release


@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_every_published_release_answers_without_a_warning(engine):
    for release, _ in RELEASES[engine]:
        profile = resolve_engine(f"{engine}=={release}")
        assert not profile.based_on and release_key(profile.version) == release_key(release)
        p = plan(f"{engine}=={release}", flat_config())
        assert "ENGINE_UNVERIFIED" not in codes(p), release


def test_a_range_that_changes_a_field_without_a_citation_is_refused():
    with pytest.raises(ValueError, match="no citation for \\['max_layers'\\]"):
        earlier_range(sglang_profiles.SGLANG_0_5_11, "0.5.11", "0.5.11", {}, max_layers=2)


# --- facts at the change points ----------------------------------------------------------------

def test_sglang_reads_aux_ids_only_from_0_4_9():
    raw = flat_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 10, 20]})
    before, after = plan("sglang==0.4.8.post1", raw), plan("sglang==0.4.9", raw)
    assert before.aux.source == "default" and "AUX_LAYERS_DEFAULTED" in codes(before)
    assert after.aux.source == "eagle_config" and after.aux.captured == [2, 11, 21]


def test_sglang_multi_layer_drafts_from_0_5_12():
    raw = flat_config(num_hidden_layers=2)
    assert plan("sglang==0.5.11", raw).verdict == "load_error"
    assert plan("sglang==0.5.12", raw).verdict != "load_error"


def test_sglang_use_aux_hidden_state_read_from_0_5_8():
    raw = flat_config(eagle_config={"use_aux_hidden_state": False})
    assert "AUX_LAYER_CONVENTION" in codes(plan("sglang==0.5.7", raw))
    assert "AUX_LAYER_CONVENTION" not in codes(plan("sglang==0.5.8", raw))


def test_vllm_reads_no_aux_ids_before_0_11_1():
    raw = flat_config(eagle_aux_hidden_state_layer_ids=[1, 10, 20])
    assert plan("vllm==0.11.0", raw).aux.source == "default"
    assert plan("vllm==0.11.1", raw).aux.captured == [1, 10, 20]


def test_vllm_speculators_configs_from_0_10_1():
    raw = speculators_config()
    assert plan("vllm==0.10.0", raw).verdict == "load_error"
    assert plan("vllm==0.10.1", raw).verdict != "load_error"


def test_vllm_llama_eagle3_architecture_missing_in_0_10_1_only():
    raw = flat_config()
    assert plan("vllm==0.10.1.1", raw).verdict == "load_error"
    assert plan("vllm==0.10.2", raw).verdict != "load_error"
    assert plan("vllm==0.8.5", flat_config(architectures=["AnythingAtAll"])).verdict != "load_error"


def test_vllm_norm_before_fc_dropped_for_speculators_in_0_18_only():
    raw = speculators_config(norm_before_fc=True)
    shapes = {"input_norm.weight": (3 * H,)}
    found = codes(plan("vllm==0.18.1", raw, shapes={**_speculators_shapes(raw), **shapes}))
    assert "NORM_FLAG_IGNORED" in found
    assert "NORM_FLAG_IGNORED" not in codes(plan("vllm==0.19.0", raw,
                                                 shapes={**_speculators_shapes(raw), **shapes}))


def _speculators_shapes(raw):
    from test_engines import shapes_for
    from eagle3_nb.config import parse_config
    return shapes_for(parse_config(raw), layer0="layers.0.")


def test_vllm_overwrote_a_trained_lm_head_in_0_11_0():
    raw = flat_config(draft_vocab_size=512)
    p = plan("vllm==0.11.0", raw)
    assert any(f.code == "LM_HEAD_FROM_TARGET" and f.severity == "error" for f in p.findings)
    assert "LM_HEAD_FROM_TARGET" not in codes(plan("vllm==0.11.1", raw))


def test_vllm_gated_targets_by_model_type_before_0_22():
    raw = flat_config()
    gated = plan("vllm==0.10.0", raw, target=target(model_type="qwen2", arch="Qwen2ForCausalLM"))
    assert gated.verdict == "load_error"
    assert any("only supported for llama" in f.message for f in gated.findings)
    assert plan("vllm==0.10.2", raw,
                target=target(model_type="qwen2", arch="Qwen2ForCausalLM")).verdict != "load_error"


# --- known bugs ---------------------------------------------------------------------------------

def test_every_bug_names_a_condition_the_planner_knows_and_a_real_range():
    for bug in (b for e in ENGINES.values() for b in e.bugs):
        assert bug.condition in BUG_CONDITIONS, bug.id
        assert bug.effect in ("", *BUG_EFFECTS) and bool(bug.effect) == bool(bug.effect_from)
        assert bug.engine in RELEASES and bug.cite and bug.symptom
        assert bug.fixed is None or release_key(bug.first) < release_key(bug.fixed), bug.id


def test_vllm_0_9_0_discards_d2t():
    p = plan("vllm==0.9.0", flat_config())
    assert any(f.code == "ENGINE_BUG" and "vllm#18909" in f.message and f.severity == "error"
               for f in p.findings)
    assert not [f for f in plan("vllm==0.9.1", flat_config()).findings if "#18909" in f.message]


def test_sglang_0_5_5_post3_drops_aux_states_of_vision_language_targets():
    vl = target(model_type="qwen2_5_vl", arch="Qwen2_5_VLForConditionalGeneration")
    bug = [f for f in plan("sglang==0.5.5.post3", flat_config(), target=vl).findings
           if f.code == "ENGINE_BUG"]
    assert bug and "sglang#13904" in bug[0].message and "0.5.6" in bug[0].message
    assert not [f for f in plan("sglang==0.5.6", flat_config(), target=vl).findings
                if f.code == "ENGINE_BUG"]


# --- the MLA draft class (Eagle3DeepseekV2ForCausalLM) ------------------------------------------

MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
       "v_head_dim": 16}


def mla_config(**extra):
    return flat_config(**{"architectures": ["Eagle3DeepseekV2ForCausalLM"],
                          "model_type": "deepseek_v2", **MLA, **extra})


def mla_shapes(raw, layer0="layers.0."):
    from test_engines import shapes_for
    from eagle3_nb.config import parse_config
    return shapes_for(parse_config(raw), layer0=layer0)


@pytest.mark.parametrize("engine, served", [
    ("sglang==0.5.11", False), ("sglang==0.5.12", True), ("sglang==0.5.23", True),
    ("vllm==0.17.1", False), ("vllm==0.18.0", True), ("vllm==0.33", True)])
def test_mla_drafts_load_where_the_engine_has_the_class(engine, served):
    raw = mla_config()
    p = plan(engine, raw, shapes=mla_shapes(raw))
    assert (p.verdict != "load_error") == served, [(f.code, f.message) for f in p.findings]
    if served:
        assert not {"KEYS_DROPPED", "PARAMS_UNLOADED"} & codes(p)
        fused = [k for k in p.keys if "kv_a_proj_with_mqa" in k.name]
        assert fused and fused[0].param.endswith(("fused_qkv_a_proj_with_mqa.weight",
                                                  "fused_qkv_a_proj.weight"))


def test_sglang_mla_needs_one_layer_and_a_low_rank_query():
    assert plan("sglang==0.5.23", mla_config(num_hidden_layers=2),
                shapes=mla_shapes(mla_config())).verdict == "load_error"
    raw = mla_config(q_lora_rank=None)
    p = plan("sglang==0.5.23", raw, shapes=mla_shapes(raw))
    assert any("q_lora_rank" in f.message and f.code == "LOAD_ERROR" for f in p.findings)


def test_mla_unknown_keys_dropped_by_vllm_0_22_raised_from_0_25():
    raw = mla_config()
    shapes = {**mla_shapes(raw), "layers.0.self_attn.extra.weight": (4, 4)}
    assert plan("vllm==0.24.0", raw, shapes=shapes).keys[-1].fate == "dropped"
    assert plan("vllm==0.25.0", raw, shapes=shapes).verdict == "load_error"
    logged = plan("sglang==0.5.23", raw, shapes=shapes)
    assert any(f.code == "KEYS_DROPPED" and "warning line" in f.message for f in logged.findings)


def test_mla_takes_its_target_rules_from_the_release():
    """The draft class changes the loader, not the target runner: sglang 0.5.16 still adds 1 to
    gpt-oss ids for an MLA draft, as for any draft of that release."""
    t = target(layers=36, model_type="gpt_oss", arch="GptOssForCausalLM")
    raw = mla_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [24, 30, 36]})
    assert plan("sglang==0.5.16", raw, shapes=mla_shapes(raw), target=t).aux.captured == [25, 31]
    assert plan("sglang==0.5.23", raw, shapes=mla_shapes(raw),
                target=t).aux.captured == [24, 30, 36]


# --- target classes per release (engines/<engine>/data/capture.json) ---------------------------------

KIMI_K25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": {"model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": H,
                            "vocab_size": 512, "max_position_embeddings": 262144}}


def kimi_target():
    from eagle3_nb.config import parse_target_config
    return parse_target_config(KIMI_K25, "kimi-k2.5/config.json")


@pytest.mark.parametrize("engine, starts", [
    ("sglang==0.5.4", False), ("sglang==0.5.9", False), ("sglang==0.5.16", True),
    ("sglang==0.5.23", True), ("vllm==0.17.1", False), ("vllm==0.33", True)])
def test_the_seed_story_kimi_k25_target_capture_per_release(engine, starts):
    """Kimi-K2.5's KimiK25ForConditionalGeneration: sglang 0.5.4 has no kimi_k25.py, 0.5.9 has
    the class without set_eagle3_layers_to_capture (PR #19689 came after): startup fails, and the
    finding names the release that captures; 0.5.16 and 0.5.23 serve it."""
    raw = mla_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
    p = plan(engine, raw, shapes=mla_shapes(raw), target=kimi_target())
    errors = [f for f in p.findings if f.code == "LOAD_ERROR"
              and ("KimiK25ForConditionalGeneration" in f.message or "only supported" in f.message)]
    assert bool(errors) != starts, [(f.code, f.message) for f in p.findings]
    if engine == "sglang==0.5.9":
        assert "has no working EAGLE-3 capture hook" in errors[0].message
        assert errors[0].evidence["fixed_in"] and "captures from sglang" in errors[0].message
    if engine == "sglang==0.5.4":
        assert "not a model class it serves" in errors[0].message


def test_a_target_without_architectures_is_said_to_be_unchecked():
    from eagle3_nb.config import parse_target_config
    t = parse_target_config({"num_hidden_layers": 32, "hidden_size": H, "model_type": "llama"},
                            "target")
    p = plan("sglang==0.5.23", flat_config(), target=t)
    assert "TARGET_CAPTURE_UNCHECKED" in codes(p)


@pytest.mark.parametrize("arch", ["Glm4ForCausalLM", "GPT2LMHeadModel"])
def test_a_target_class_that_never_captures_is_a_load_error(arch):
    """Glm4ForCausalLM is served without a capture hook in sglang 0.5.23; GPT2LMHeadModel is in no
    release's capture table at all."""
    p = plan("sglang==0.5.23", flat_config(), target=target(model_type="x", arch=arch))
    assert p.verdict == "load_error" and any(arch in f.message for f in p.findings)


def test_a_release_past_the_capture_survey_is_unchecked_not_ok():
    p = plan("sglang==0.5.24", flat_config(), target=target())
    assert "ENGINE_UNVERIFIED" in codes(p)


def test_vllm_rewrites_a_deepseek_v3_draft_config_to_its_mtp_head():
    """Found by eagle3-nb probe on vllm 0.33.0: the speculative config turns model_type
    deepseek_v3 into deepseek_mtp before the draft class is chosen; SGLang keys on the class."""
    raw = mla_config(model_type="deepseek_v3")
    p = plan("vllm==0.33", raw, shapes=mla_shapes(raw))
    assert p.verdict == "load_error" and any("deepseek_mtp" in f.message for f in p.findings)
    assert plan("sglang==0.5.23", raw, shapes=mla_shapes(raw)).verdict != "load_error"


def test_qwen3_style_drafts_per_engine_release():
    """SGLang has no Qwen3-style EAGLE-3 draft class in any release: its Llama draft drops the
    q_norm/k_norm tensors silently. vLLM serves Eagle3Qwen3ForCausalLM from 0.24.0."""
    from test_engines import shapes_for
    from eagle3_nb.config import parse_config

    qwen = flat_config(model_type="qwen3")
    shapes = shapes_for(parse_config(qwen), layer0="layers.0.")
    assert any(".q_norm." in k for k in shapes)
    sg = plan("sglang==0.5.23", qwen, shapes=shapes)
    dropped = {k.name for k in sg.keys if k.fate == "dropped"}
    assert dropped == {k for k in shapes if k.endswith(("q_norm.weight", "k_norm.weight"))}
    native = flat_config(model_type="qwen3", architectures=["Eagle3Qwen3ForCausalLM"])
    assert plan("vllm==0.24.0", native, shapes=shapes).verdict == "ok"
    assert plan("vllm==0.23.0", native, shapes=shapes).verdict == "load_error"


def test_vllm_before_0_11_1_builds_one_layer_and_raises_on_the_second():
    """Found by eagle3-nb probe on vllm 0.11.0: the draft builds (one layer, whatever the config
    says), and load_weights raises KeyError on the first layers.1.* key."""
    from test_engines import shapes_for
    from eagle3_nb.config import parse_config

    raw = flat_config(num_hidden_layers=2)
    shapes = shapes_for(parse_config(raw), layer0="layers.0.")
    old = plan("vllm==0.11.0", raw, shapes=shapes)
    errored = [k for k in old.keys if k.fate == "error"]
    assert old.verdict == "load_error" and errored
    assert all(k.name.startswith("layers.1.") and "KeyError" in k.reason for k in errored)
    assert not any(f.evidence.get("num_hidden_layers") for f in old.findings)  # builds fine
    assert plan("vllm==0.11.1", raw, shapes=shapes).verdict == "ok"
