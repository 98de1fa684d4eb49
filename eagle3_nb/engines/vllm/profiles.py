"""vLLM profiles: every release from 0.8.5 (the first with EAGLE-3) to 0.34.0 in contiguous ranges.

The 0.33.0 profile was read in full (docs/speculators-and-vllm.md, code of the
0.33.0 wheel). The older ranges come from a field-by-field survey of every release tag: the code
of each watched file was compared across all 45 releases and read at each change point
(docs/engine-survey.md gives the method; tags to 0.10.0 are upstream tags, later ones the
published wheels). Each range cites the change that starts it by file, function and PR; PRs
after 2026-08-17 (0.29.0 on) have no recoverable history and are cited by release only."""

from __future__ import annotations

from dataclasses import replace

from eagle3_nb.engines.config_rules import LENIENT_CONFIG, NUM_AUX_READ, STRICT_CONFIG_ALL
from eagle3_nb.engines.profile import (AS_IS, EngineProfile, FlagRule, earlier_range,
                                       later_range, release_key)
from eagle3_nb.engines.vllm.config_readers import (
    PATH_GUESSED_MODEL_TYPE, QWEN3_COUNT_CITE, QWEN3_IDS_COUNTED, QWEN3_SPECULATORS_IDS_COUNTED,
    SPEC_READER_CITE, SPECULATORS_KEYS_PASSED, SPECULATORS_LAYERS_OLD, SPECULATORS_MODEL_TYPE_V4,
    SPECULATORS_READER, SPECULATORS_READER_OLD)

# registry.py _SPECULATIVE_DECODING_MODELS: EAGLE-3 draft names served by llama_eagle3, with the
# release that registered each (the release survey, docs/engine-facts-vllm.md)
# (first release, first release without it or None, name); P-EAGLE's names left the registry in
# 0.34.0 (registry.py [0.33.0] L698-699; absent in 0.34.0)
_LLAMA_DRAFT_NAMES = (("0.11.1", None, "Eagle3Qwen2_5vlForCausalLM"),
                      ("0.12.0", None, "Eagle3Qwen3vlForCausalLM"),
                      ("0.20.0", None, "Eagle3MiniMaxM2ForCausalLM"),
                      ("0.22.0", "0.34.0", "PEagleDraftModel"),
                      ("0.22.0", "0.34.0", "PeagleLlamaForCausalLM"))


def _llama_drafts(release: str) -> dict[str, str]:
    """The architecture names that reach llama_eagle3 in this release."""
    key = release_key(release)
    return {"LlamaForCausalLMEagle3": "llama_eagle3.Eagle3LlamaForCausalLM",
            "Eagle3LlamaForCausalLM": "llama_eagle3.Eagle3LlamaForCausalLM",
            # EAGLEConfig prefixes "Eagle3" to a name that lacks it (configs/eagle.py)
            "LlamaForCausalLM": "prefixed to Eagle3LlamaForCausalLM",
            **{name: "llama_eagle3.Eagle3LlamaForCausalLM (registry alias)"
               for since, until, name in _LLAMA_DRAFT_NAMES
               if release_key(since) <= key and (until is None or key < release_key(until))}}


# vllm/transformers_utils/config.py maybe_override_with_speculators, read in the wheels: a served
# speculators checkpoint is replaced by its speculators_config.verifier.name_or_path
LOCAL_VERIFIER_0_33 = (
    "vllm/transformers_utils/config.py maybe_override_with_speculators [0.33.0]: ValueError "
    "'Speculators verifier must name a remote model repository. Select local verifiers "
    "explicitly with --model and --speculative-config.' when the verifier is not a str, fails "
    "huggingface_hub validate_repo_id, or exists as a local path (the same in 0.34.0)")
LOCAL_VERIFIER_0_32 = (
    "vllm/transformers_utils/config.py maybe_override_with_speculators [0.32.0]: `model = "
    "tokenizer = verifier_model` with no check, so a local verifier path is served")


VLLM_0_33 = EngineProfile(
    name="vllm", version="0.33", covers=("0.33.0", "0.33.0"),
    evidence="code of the 0.33.0 wheel (2026-11)",
    dialects=frozenset({"flat", "speculators"}), dialect_error="",
    architectures={**_llama_drafts("0.33.0"),
                   "Eagle3Qwen3ForCausalLM": "qwen3_eagle3.Eagle3Qwen3ForCausalLM",
                   "Qwen3ForCausalLM": "prefixed to Eagle3Qwen3ForCausalLM",
                   "PeagleQwen3ForCausalLM": "qwen3_eagle3.Eagle3Qwen3ForCausalLM"},
    architecture_errors={},
    speculators_layer_types=frozenset({"llama", "qwen3"}),
    speculators_layer_type_error="ValueError: Unsupported model_type {layer_model_type!r} for "
                                 "Eagle3 speculator",
    decoder_param="model.layers.{i}.", max_layers=None, too_many_layers_error="",
    renames=(("midlayer.", "layers.0."),),
    key_resolution="model_prefix_except_lm_head", unknown_keys="raise",
    unknown_error="ValueError: There is no module or parameter named '{param}' (AutoWeightsLoader)",
    ignored_unknown_suffixes=(".bias", "rotary_emb.inv_freq", "rotary_emb.cos_cached",
                              "rotary_emb.sin_cached"),
    d2t_param="draft_id_to_target_id", d2t_param_needs_pruned_vocab=True,
    fc_aux_count="num_aux_then_eagle_config_then_3",
    fc_aux_top_level_layer_types=frozenset({"qwen3"}),
    has_input_norm=True, has_fc_norm=True, has_q_k_norm=True,
    extra_layer_attn_norm="input_layernorm", extra_layers_have_hidden_norm=True,
    flags={"norm_before_residual": FlagRule(True, {"flat": False, "speculators": True}),
           "norm_before_fc": FlagRule(True, {"flat": False, "speculators": False},
                                      ("eagle_config", "top_level")),
           "fc_norm": FlagRule(True, {"flat": False, "speculators": False}),
           "norm_output": FlagRule(True, {"flat": False, "speculators": False})},
    aux_id_sources=("top_level", "eagle_config"), reads_use_aux_hidden_state=True,
    aux_rules={"llama": AS_IS, "deepseek": AS_IS, "gpt_oss": AS_IS},
    aux_sorted={"llama": True, "deepseek": False, "gpt_oss": True},
    last_layer_capturable=True, graphs_use_default_ids=False,
    fc_skip_when_width_is_hidden=False,
    embed_policy="own_if_present", lm_head_policy="target_if_absent_and_full_vocab",
    target_hidden_null_breaks_fc=frozenset({"flat"}), missing_draft_vocab_error=None,
    context_error=None,
    config_rules=(STRICT_CONFIG_ALL + NUM_AUX_READ + QWEN3_IDS_COUNTED + SPECULATORS_READER
                  + QWEN3_SPECULATORS_IDS_COUNTED), ties_lm_head=False,
    o_proj_bias=True, mlp_bias_params=True,
    speculators_keys_passed=SPECULATORS_KEYS_PASSED,
    drop_when_off=(("input_norm", "norm_before_fc"), ("fc", "use_aux_hidden_state")),
    draft_model_type_errors={"deepseek_v3": (
        "the speculative config rewrites a deepseek_v3 draft config to model_type deepseek_mtp "
        "and architectures [DeepSeekMTPModel], the MTP head, so the EAGLE-3 draft is never "
        "built (\"Model architectures ['Eagle3DeepSeekMTPModel'] are not supported\"); give the "
        "draft config model_type deepseek_v2 (the same MLA config class)")},
    capture_switch='"method": "eagle3" in --speculative-config',
    refuses_local_verifier=True,
    cites={
        "refuses_local_verifier": LOCAL_VERIFIER_0_33,
        "capture_switch": "docs/speculators-and-vllm.md §4: vllm/config/speculative.py "
                          "infers method eagle3 only from a draft path containing 'eagle3'",
        "load_weights": "llama_eagle3.py Eagle3LlamaForCausalLM.load_weights: t2d skipped, d2t -> "
                        "draft_id_to_target_id, 'model.' prefixed to every non-lm_head name",
        "unknown": "AutoWeightsLoader._load_module raises 'There is no module or parameter named'; "
                   ".bias and rotary buffers ignored",
        "missing": "load_weights returns None, so DefaultModelLoader does not track missing weights",
        "fc_width": "llama_eagle3.py LlamaModel: num_aux_hidden_states, else len(eagle_config ids), "
                    "else 3; top-level ids not read (vllm #54526); qwen3_eagle3.py reads them",
        "aux_ids": "gpu_model_runner._get_eagle3_aux_layers_from_config: top-level ids, then "
                   "eagle_config; EagleModelMixin sorts and de-duplicates; no offset",
        "deepseek": "deepseek_v2.py set_aux_hidden_state_layers: not sorted",
        "norm_before_residual": "speculators/algos.py update_eagle3: default True; native path "
                                "getattr(config, 'norm_before_residual', False)",
        "input_norm": "input_norm.* dropped silently when norm_before_fc is false",
        "embed": "llm_base_proposer._maybe_share_embeddings: target embeddings only when the "
                 "checkpoint has none",
        "d2t": "draft_id_to_target_id exists only if draft_vocab_size != target vocab",
        "draft_model_type_errors": "SpeculativeConfig.hf_config_override: model_type deepseek_v3 "
                                   "-> deepseek_mtp (vllm/config.py [0.8.5-0.10.0], "
                                   "vllm/config/speculative.py [0.10.1-0.33.0]); found by "
                                   "eagle3-nb probe on 0.33.0",
        "target_hidden_null": "llama_eagle3.py LlamaModel.__init__ (qwen3_eagle3.py, "
                              "deepseek_eagle3.py alike): getattr(config, 'target_hidden_size', "
                              "hidden_size) * A [0.34.0] (hasattr in older releases), so a null "
                              "is None * A: TypeError; speculators algos.py update_eagle3 passes "
                              "it on only when not null. Found by tools/config_ablation.py on "
                              "0.34.0 and 0.33.0 (the issue's report)",
        "config_rules": "the wheels pin transformers >=5.16.1,<5.21.0 (0.33.0) and "
                        ">=5.16.1,<5.23.0 (0.34.0) (METADATA Requires-Dist), with the @strict "
                        "LlamaConfig; the speculators reader: " + SPEC_READER_CITE + "; "
                        "num_aux_hidden_states: llama_eagle3.py LlamaModel.__init__ builds fc "
                        "from it (from 0.22.0, PR #42764); top-level ids: " + QWEN3_COUNT_CITE,
        "ties_lm_head": "llama_eagle3.py, qwen3_eagle3.py, deepseek_eagle3.py "
                        "Eagle3*ForCausalLM.__init__: lm_head = ParallelLMHead(draft_vocab_size, "
                        "H) whatever tie_word_embeddings says (read in 0.34.0; the older "
                        "ranges inherit it unread); confirmed by tools/config_ablation.py",
        "o_proj_bias": "model_executor/models/llama.py LlamaDecoderLayer.__init__: bias_o_proj "
                       "= attention_bias, LlamaMLP(bias=mlp_bias) [0.34.0]; llama_eagle3.py "
                       "replaces only qkv_proj (bias=attention_bias); found by "
                       "tools/config_ablation.py --keys on 0.33.0 and 0.34.0 (older ranges "
                       "inherit it unread)",
        "mlp_bias_params": "as o_proj_bias",
        "speculators_keys_passed": "algos.py update_eagle3 [0.34.0]: copies draft_vocab_size, "
                                   "target_hidden_size (not null), the four norm flags and "
                                   "eagle_aux_hidden_state_layer_ids; num_aux_hidden_states and "
                                   "tie_word_embeddings stay behind (confirmed by "
                                   "tools/config_ablation.py; older ranges inherit it unread)",
        "extra_layers": "llama_eagle3.py LlamaDecoderLayer.__init__: every layer builds "
                        "hidden_norm; forward: layers >= 1 take H inputs and use input_layernorm, "
                        "so their hidden_norm stays unwritten and unused (read in 0.11.1, 0.18.0, "
                        "0.25.0, 0.33.0; confirmed by eagle3-nb probe on 0.33.0)",
    },
)

# The MLA draft class: vllm/model_executor/models/deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM
# (registered also as Eagle3DeepseekV3ForCausalLM), first in 0.18.0 (PR #36361).
_READ = FlagRule(True, {"flat": False, "speculators": False})
_NOT_READ = FlagRule(False, {"flat": False, "speculators": False})
VLLM_MLA_0_25 = replace(
    VLLM_0_33, covers=("0.25.0", "0.34.0"),
    evidence="deepseek_eagle3.py read at 0.18.0, 0.22.0, 0.25.0 and 0.33.0; unchanged in 0.34.0",
    architectures={"Eagle3DeepseekV2ForCausalLM": "deepseek_eagle3.Eagle3DeepseekV2ForCausalLM",
                   "Eagle3DeepseekV3ForCausalLM": "alias of Eagle3DeepseekV2ForCausalLM"},
    draft_attention="mla",
    stacked=((".fused_qkv_a_proj", ".q_a_proj", 0), (".fused_qkv_a_proj", ".kv_a_proj_with_mqa", 1),
             (".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1)),
    has_input_norm=False, has_q_k_norm=False, extra_layers_have_hidden_norm=True,
    fc_aux_top_level_layer_types=frozenset(), drop_when_off=(), mlp_bias_params=False,
    flags={"norm_before_residual": _READ, "norm_before_fc": _NOT_READ, "fc_norm": _READ,
           "norm_output": _READ},
    cites={**VLLM_0_33.cites,
           "draft_attention": "deepseek_eagle3.py DeepseekV2Eagle3DecoderLayer: "
                              "DeepseekV2MLAAttention with input_size 2H on layer 0 (PR #36361)",
           "load_weights": "deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM.load_weights: t2d "
                           "skipped, d2t -> draft_id_to_target_id, model. prefixed except lm_head; "
                           "DeepseekV2Eagle3Model.hf_to_vllm_mapper: midlayer. -> layers.0., "
                           "q_a_proj/kv_a_proj_with_mqa -> fused_qkv_a_proj shards; "
                           "AutoWeightsLoader raises on unknown names (0.25.0 on)",
           "norm_flags": "deepseek_eagle3.py: norm_before_residual, fc_norm, norm_output read "
                         "with getattr (False); no input_norm / norm_before_fc",
           "mlp_bias_params": "deepseek_eagle3.py builds deepseek_v2.py DeepseekV2MLP, whose "
                              "projections have bias=False [0.34.0]"},
)
VLLM_MLA_0_22 = replace(
    VLLM_MLA_0_25, covers=("0.22.0", "0.24.0"), unknown_keys="drop_silent",
    cites={**VLLM_MLA_0_25.cites,
           "unknown": "deepseek_eagle3.py DeepseekV2Eagle3Model.load_weights [0.22.0-0.24.0]: "
                      "`if name not in params_dict: continue` (the WeightsMapper loader came "
                      "in 0.25.0)"},
)
VLLM_MLA_0_18 = replace(
    VLLM_MLA_0_22, covers=("0.18.0", "0.21.0"), fc_aux_count="fixed_3", has_fc_norm=False,
    flags={**VLLM_MLA_0_22.flags, "fc_norm": _NOT_READ, "norm_output": _NOT_READ},
    cites={**VLLM_MLA_0_22.cites,
           "fc_width": "deepseek_eagle3.py DeepseekV2Eagle3Model.__init__ [0.18.0]: fc input "
                       "target_hidden_size * 3; num_aux_hidden_states from 0.22.0",
           "norm_flags": "0.18.0-0.21.0: no fc_norm, no norm_output in deepseek_eagle3.py"},
)
VLLM_0_33 = replace(VLLM_0_33, mla=VLLM_MLA_0_25,
                    evidence="code of the 0.33.0 wheel read in full")
_MODELS = "vllm/model_executor/models/"
_SPEC = "vllm/transformers_utils/configs/speculators/algos.py update_eagle3"


# 0.30.0-0.32.0: no other watched field differs from 0.33.0 (the release survey); the verifier
# check arrived in 0.33.0 (maybe_override_with_speculators read in the 0.32.0 and 0.33.0 wheels)
VLLM_0_30 = earlier_range(
    VLLM_0_33, "0.30.0", "0.32.0",
    {"refuses_local_verifier": LOCAL_VERIFIER_0_32,
     "config_rules": "the wheels pin transformers >=5.10.4 (0.30.0, 0.29.0), >=5.16.1 (0.32.0), "
     ">=5.5.3 (0.24.0, 0.25.0) (METADATA Requires-Dist): the @strict LlamaConfig; the "
     "speculators reader as in 0.33.0: " + SPEC_READER_CITE.replace("[0.34.0]", "[every wheel "
     "0.24.0-0.32.0; the layer model_type check from 0.24.0]") + ", rope validation in "
     "transformers configuration_utils.py PreTrainedConfig.__init__ [5.5.3, 5.10.4]; "
     "the qwen3 draft's len() count of top-level ids read in 0.33.0, assumed from 0.24.0 as "
     "fc_aux_top_level_layer_types is"},
    refuses_local_verifier=False,
    config_rules=STRICT_CONFIG_ALL + NUM_AUX_READ + QWEN3_IDS_COUNTED + SPECULATORS_READER)
VLLM_0_25 = earlier_range(
    VLLM_0_30, "0.25.0", "0.29.0",
    {"d2t_param_needs_pruned_vocab": "llama_eagle3.py Eagle3LlamaForCausalLM.__init__ "
     "[0.25.0-0.29.0]: draft_id_to_target_id always created (zeros); only for a pruned vocab "
     "from 0.30.0 (matches PR #53458)"},
    d2t_param_needs_pruned_vocab=False)
VLLM_0_24 = earlier_range(
    VLLM_0_25, "0.24.0", "0.24.0",
    {"unknown_keys": "llama_eagle3.py LlamaModel.load_weights [<=0.24.0]: params_dict[name] -> "
     "KeyError for an unknown model.* name; AutoWeightsLoader with hf_to_vllm_mapper from 0.25.0 "
     "(PR #47058)",
     "unknown_error": "as unknown_keys", "ignored_unknown_suffixes": "'.bias' ignored only from "
     "0.25.0 (PR #44589); rotary buffers skipped by substring",
     "flags": f"{_SPEC} [0.22.0-0.24.0]: fc_norm / norm_output not copied from a speculators "
     "config (PR #46488 in 0.25.0)", "mla": "deepseek_eagle3.py: see VLLM_MLA_0_22",
     "last_layer_capturable": "index L: EagleModelMixin._maybe_add_hidden_state (PR #36063, "
     "0.18.0); DeepSeek targets only from 0.25.0 (PR #46973)",
     "final_boundary_families": "as last_layer_capturable"},
    unknown_error="KeyError: '{param}' (LlamaModel.load_weights)",
    ignored_unknown_suffixes=("rotary_emb.inv_freq", "rotary_emb.cos_cached",
                              "rotary_emb.sin_cached"),
    flags={**VLLM_0_33.flags,
           "fc_norm": FlagRule(True, {"flat": False, "speculators": False},
                               ignored_in=frozenset({"speculators"})),
           "norm_output": FlagRule(True, {"flat": False, "speculators": False},
                                   ignored_in=frozenset({"speculators"}))},
    mla=VLLM_MLA_0_22, last_layer_capturable=False,
    final_boundary_families=frozenset({"llama", "gpt_oss"}),
)
VLLM_0_22 = earlier_range(
    VLLM_0_24, "0.22.0", "0.23.0",
    {"architectures": f"{_MODELS}registry.py [0.22.0-0.23.0]: no Eagle3Qwen3ForCausalLM "
     "(qwen3_eagle3.py, PR #43132 in 0.24.0)",
     "speculators_layer_types": f"{_SPEC} [0.10.1-0.23.0]: any transformer_layer_config "
     "model_type accepted, architectures forced to Eagle3LlamaForCausalLM",
     "has_q_k_norm": "the Llama draft has no q_norm/k_norm: a qwen3 layer's keys raise",
     "fc_aux_top_level_layer_types": "no qwen3_eagle3.py before 0.24.0",
     "config_rules": "the wheels pin transformers !=5.0.*-5.5.0,>=4.56.0 (0.20.0, 0.22.0, "
     "0.23.0) and <5,>=4.56.0 (0.19.0, 0.18.0, 0.16.0) (METADATA Requires-Dist): a 4.x "
     "LlamaConfig checks no field types and guesses a class from the path without model_type; "
     "only the rules that hold on both sides; no qwen3_eagle3.py before 0.24.0; the "
     "speculators reader: SPECULATORS_READER_OLD (its RoPE rules not asserted)"},
    architectures=_llama_drafts("0.23.0"),
    speculators_layer_types=frozenset({"*"}), has_q_k_norm=False,
    fc_aux_top_level_layer_types=frozenset(),
    config_rules=(LENIENT_CONFIG + NUM_AUX_READ + PATH_GUESSED_MODEL_TYPE
                  + SPECULATORS_READER_OLD + SPECULATORS_LAYERS_OLD),
)
VLLM_0_20 = earlier_range(
    VLLM_0_22, "0.20.0", "0.21.0",
    {"fc_aux_count": "llama_eagle3.py LlamaModel.__init__ [<=0.21.0]: fc = Linear(3 * Ht, H); "
     "num_aux_hidden_states / eagle_config ids from 0.22.0 (PR #42764)",
     "has_fc_norm": "fc_norm and norm_output arrive in 0.22.0 (PR #42764)",
     "flags": "[0.19.0-0.21.0]: norm_before_fc read at the top level only (eagle_config from "
     "0.22.0, PR #42143); fc_norm / norm_output not read",
     "aux_id_sources": "v1/worker/gpu_model_runner.py [0.11.1-0.21.0]: top-level "
     "eagle_aux_hidden_state_layer_ids only (PR #25961); eagle_config from 0.22.0 (PR #42764)",
     "target_allowlist": "v1/spec_decode/eagle.py [<=0.21.0]: EAGLE-3 only for target "
     "model_types in a list (the SupportsEagle3 check replaced it in 0.22.0, PR #42536)",
     "target_allowlist_error": "as target_allowlist",
     "architectures": "registry.py [<0.22.0]: no PEagleDraftModel / PeagleLlamaForCausalLM "
     "(PR #41826, 0.22.0)",
     "mla": "deepseek_eagle3.py: see VLLM_MLA_0_18",
     "config_rules": "as fc_aux_count: num_aux_hidden_states is never read before 0.22.0"},
    fc_aux_count="fixed_3", has_fc_norm=False, aux_id_sources=("top_level",),
    config_rules=(LENIENT_CONFIG + PATH_GUESSED_MODEL_TYPE + SPECULATORS_READER_OLD
                  + SPECULATORS_LAYERS_OLD),
    flags={"norm_before_residual": VLLM_0_33.flags["norm_before_residual"],
           "norm_before_fc": FlagRule(True, {"flat": False, "speculators": False}),
           "fc_norm": _NOT_READ, "norm_output": _NOT_READ},
    target_allowlist=(("0.8.5", ("llama",)), ("0.10.1", ("llama", "qwen")),
                      ("0.11.0", ("llama", "qwen", "minicpm", "gpt_oss")),
                      ("0.16.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl",
                                  "hunyuan_v1_dense", "afmoe")),
                      ("0.17.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl",
                                  "hunyuan_v1_dense", "afmoe", "nemotron_h")),
                      ("0.18.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl",
                                  "hunyuan_v1_dense", "afmoe", "nemotron_h", "deepseek_v2",
                                  "deepseek_v3", "kimi_k2", "kimi_k25")),
                      ("0.19.1", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl",
                                  "hunyuan_v1_dense", "afmoe", "nemotron_h", "deepseek_v2",
                                  "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4")),
                      ("0.21.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl",
                                  "hunyuan_v1_dense", "afmoe", "nemotron_h", "deepseek_v2",
                                  "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4",
                                  "laguna"))),
    target_allowlist_error="ValueError: Eagle3 is only supported for {allowed} models "
                           "(the target's model_type is {model_type!r})",
    mla=VLLM_MLA_0_18, architectures=_llama_drafts("0.21.0"),
)
VLLM_0_19 = earlier_range(
    VLLM_0_20, "0.19.0", "0.19.1",
    {"architectures": "registry.py [<0.20.0]: no Eagle3MiniMaxM2ForCausalLM (PR #37512, 0.20.0)"},
    architectures=_llama_drafts("0.19.1"),
)
VLLM_0_18 = earlier_range(
    VLLM_0_19, "0.18.0", "0.18.1",
    {"flags": f"{_SPEC} [0.18.x]: norm_before_fc not copied from a speculators config "
     "(vllm #38111, fixed in 0.19.0)", "config_rules": "the wheels 0.11.1-0.19.0 pin "
     "transformers<5: SPECULATORS_MODEL_TYPE_V4 (0.19.1 allows 5.5.1+)"},
    flags={**VLLM_0_19.flags, "norm_before_fc": FlagRule(
        True, {"flat": False, "speculators": False}, ignored_in=frozenset({"speculators"}))},
    config_rules=VLLM_0_19.config_rules + SPECULATORS_MODEL_TYPE_V4,
)
VLLM_0_16 = earlier_range(
    VLLM_0_18, "0.16.0", "0.17.1",
    {"has_input_norm": "llama_eagle3.py [<0.18.0]: no input_norm (norm_before_fc, PR #36545 in "
     "0.18.0): input_norm.weight raises KeyError",
     "flags": "norm_before_fc not read before 0.18.0",
     "drop_when_off": "the input_norm weight mapper arrived with PR #36545 (0.18.0)",
     "final_boundary_families": "index L not capturable before 0.18.0 (PR #36063)",
     "mla": "no deepseek_eagle3.py before 0.18.0 (PR #36361)"},
    has_input_norm=False, flags={**VLLM_0_19.flags, "norm_before_fc": _NOT_READ},
    drop_when_off=(("fc", "use_aux_hidden_state"),), final_boundary_families=frozenset(),
    mla=None,
)
VLLM_0_12 = earlier_range(
    VLLM_0_16, "0.12.0", "0.15.1",
    {"qkv_bias": "llama_eagle3.py LlamaDecoderLayer [<0.16.0]: qkv_proj built with bias=False; "
     "attention_bias from PR #32887 (0.16.0)"},
    qkv_bias=False,
)
VLLM_0_11_1 = earlier_range(
    VLLM_0_12, "0.11.1", "0.11.2",
    {"reads_use_aux_hidden_state": "use_aux_hidden_state read from 0.12.0 (vllm #27688): before, "
     "every head gets the 3 captured states through a 3H fc",
     "drop_when_off": "no use_aux_hidden_state mapper before 0.12.0",
     "architectures": "registry.py [<0.12.0]: no Eagle3Qwen3vlForCausalLM (PR #29594, 0.12.0)"},
    reads_use_aux_hidden_state=False, drop_when_off=(), architectures=_llama_drafts("0.11.2"),
)
VLLM_0_11_0 = earlier_range(
    VLLM_0_11_1, "0.11.0", "0.11.0",
    {"decoder_param": "llama_eagle3.py LlamaModel.__init__ [<0.11.1]: exactly one decoder "
     "layer, model.layers.0, whatever num_hidden_layers says; LlamaModel.load_weights then "
     "raises KeyError at params_dict[name] on the first layers.1.* key (multi-layer drafts from "
     "PR #26164 in 0.11.1; confirmed by eagle3-nb probe on 0.11.0)",
     "aux_id_sources": "gpu_model_runner.py [<0.11.1]: the draft's ids are never read; the "
     "target captures (2, L//2, L-3) (PR #25961 in 0.11.1)",
     "embed_policy": "v1/spec_decode/eagle.py load_model [0.9.1-0.11.0]: the target's "
     "embed_tokens whenever the shapes match, over a trained copy (vllm #27732, fixed by #28549 "
     "in 0.11.1)",
     "lm_head_policy": "eagle.py load_model [0.11.0]: the target's lm_head whenever the shapes "
     "match (PR #25406), fixed by #28549 in 0.11.1",
     "architectures": "registry.py [<0.11.1]: no Eagle3Qwen2_5vlForCausalLM (PR #22872)",
     "config_rules": "as decoder_param: num_hidden_layers not asserted [<0.11.1]"},
    decoder_param="model.layers.0.", aux_id_sources=(), embed_policy="target_if_shapes_match",
    lm_head_policy="target_if_shapes_match",
    config_rules=LENIENT_CONFIG + PATH_GUESSED_MODEL_TYPE + SPECULATORS_READER_OLD,
    architectures={"Eagle3LlamaForCausalLM": "llama_eagle3.Eagle3LlamaForCausalLM",
                   "LlamaForCausalLMEagle3": "llama_eagle3.Eagle3LlamaForCausalLM",
                   "LlamaForCausalLM": "prefixed to Eagle3LlamaForCausalLM"},
)
VLLM_0_10_2 = earlier_range(
    VLLM_0_11_0, "0.10.2", "0.10.2",
    {"lm_head_policy": "eagle.py load_model [<=0.10.2]: EAGLE-3 never shares the target's "
     "lm_head (method != 'eagle3' guard)"},
    lm_head_policy="own_always",
)
VLLM_0_10_1 = earlier_range(
    VLLM_0_10_2, "0.10.1", "0.10.1.1",
    {"architectures": "registry.py [0.10.1-0.10.1.1]: LlamaForCausalLMEagle3 not registered "
     "(re-enabled by PR #24392 in 0.10.2)", "architecture_errors": "as architectures",
     "capture_switch": "config/speculative.py [<0.10.2]: a path containing 'eagle3-' is inferred "
     "as method eagle (EAGLE-1); name the method"},
    architectures={"Eagle3LlamaForCausalLM": "llama_eagle3.Eagle3LlamaForCausalLM",
                   "LlamaForCausalLM": "prefixed to Eagle3LlamaForCausalLM"},
    architecture_errors={"LlamaForCausalLMEagle3": "not in the model registry in this release "
                         "(PR #24392 re-added it in 0.10.2): startup fails"},
    capture_switch='"method": "eagle3" in --speculative-config (required: a path is not enough)',
)
VLLM_0_9_1 = earlier_range(
    VLLM_0_10_1, "0.9.1", "0.10.0",
    {"dialects": "transformers_utils/configs/speculators/ [<0.10.1]: no speculators format "
     "(PR #21345 in 0.10.1)", "dialect_error": "as dialects", "config_rules": "as dialects",
     "flags": "norm_before_residual read from 0.10.1 (PR #21345)",
     "architecture_errors": "transformers_utils/configs/eagle.py EAGLEConfig [0.9.0-0.10.0]: "
     "'Eagle3' prefixed unless the name starts with it"},
    dialects=frozenset({"flat"}),
    dialect_error="this release reads only flat draft configs: a speculators config (no "
                  "model_type) fails in AutoConfig (speculators support arrived in 0.10.1, PR "
                  "#21345); convert it: eagle3-nb convert SRC DST --to eagle",
    flags={**VLLM_0_10_1.flags, "norm_before_residual": _NOT_READ},
    config_rules=LENIENT_CONFIG + PATH_GUESSED_MODEL_TYPE,
    architecture_errors={"LlamaForCausalLMEagle3": "prefixed to Eagle3LlamaForCausalLMEagle3, "
                         "which is not registered: startup fails"},
)
VLLM_0_9_0 = earlier_range(
    VLLM_0_9_1, "0.9.0", "0.9.0.1",
    {"missing_params": "model_loader DefaultModelLoader strict check [0.9.0-0.9.0.1]: "
     "load_weights returned the loaded set (PR #18273); 0.9.1 returns None again (PR #18909)",
     "embed_policy": "llama_eagle3.py [0.9.0-0.9.0.1]: the draft builds no embed_tokens when "
     "PP=1 (PR #17326): an own copy raises KeyError (vllm #18906)"},
    missing_params="raise", embed_policy="target_always",
)
VLLM_0_8_5 = earlier_range(
    VLLM_0_9_0, "0.8.5", "0.8.5.post1",
    {"architectures": "v1/spec_decode/eagle.py EagleProposer.load_model [0.8.5]: always builds "
     "Eagle3LlamaForCausalLM; the config's architectures is not read",
     "architecture_errors": "as architectures",
     "missing_params": "[0.8.5]: the proposer calls load_weights itself, no strict check",
     "embed_policy": "eagle.py load_model [0.8.5]: the target's embed_tokens only if the "
     "checkpoint has none (PR #16937)",
     "ignored_unknown_suffixes": "no rotary-buffer skip before 0.9.0"},
    architectures={"*": "EagleProposer builds Eagle3LlamaForCausalLM for any architectures"},
    architecture_errors={}, missing_params="silent", embed_policy="own_if_present",
    ignored_unknown_suffixes=(),
)

# 0.34.0, read in its wheel against 0.33.0 (tools/release_intake.py, then the changed files by
# hand): model runner V1 and its aux-id lookup
# are deleted, and P-EAGLE left the registry. Unchanged: llama_eagle3.py / qwen3_eagle3.py /
# deepseek_eagle3.py key handling (P-EAGLE's mask_hidden is now skipped with a warning),
# configs/eagle.py, speculators/algos.py update_eagle3, the (2, L//2, L-3) default
# (interfaces.py SupportsEagle3.get_eagle3_default_aux_hidden_state_layers).
VLLM_0_34 = later_range(
    VLLM_0_33,
    "0.34.0", "0.34.0", "code of the 0.34.0 wheel: the files that differ from 0.33.0 read in full",
    {"aux_id_sources": "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
     "get_eagle3_aux_layers_from_config [0.34.0]: top-level eagle_aux_hidden_state_layer_ids, "
     "dflash_config/dspark/target_layer_ids (+1), eagle_config['layer_ids']; never "
     "eagle_config.eagle_aux_hidden_state_layer_ids (V1's gpu_model_runner.py, which read it, "
     "is deleted); configs/eagle.py EAGLEConfig does not lift eagle_config keys to the top level",
     "aux_ids": "eagle3_utils.py get_eagle3_aux_layers_from_config, else the target's "
     "get_eagle3_default_aux_hidden_state_layers (interfaces.py: 2, L//2, L-3) [0.34.0]; "
     "EagleModelMixin sorts and de-duplicates; no offset",
     "architectures": "models/registry.py [0.34.0]: PEagleDraftModel, PeagleLlamaForCausalLM "
     "and PeagleQwen3ForCausalLM removed; speculators/algos.py update_peagle raises "
     "'P-EAGLE (parallel drafting EAGLE-3) is not supported.'",
     # fields kept whose code moved (the release intake flags them): where they live now
     "capture_switch": "v1/worker/gpu/spec_decode/speculator_config.py "
     "_resolve_checkpoint_config_class [0.34.0]: with no method given, eagle/config.py "
     "Eagle3SpeculatorConfig.matches ('eagle3' in the draft path, after 'eagle-' for EAGLE-1)",
     "embed": "v1/worker/gpu/spec_decode/eagle/utils.py maybe_share_target_embed and "
     "_should_share [0.34.0]: the target's embed_tokens / lm_head unless the checkpoint has its "
     "own that differs (or either is a packed quantized weight, new in 0.34.0)",
     "missing": "the draft is built by the default loader and load_weights returns the loaded "
     "names (llama_eagle3.py [0.34.0], as in 0.33.0); eagle3-nb probe on 0.34.0: 24 bundled "
     "drafts agree"},
    aux_id_sources=("top_level",),
    architectures={**_llama_drafts("0.34.0"),
                   "Eagle3Qwen3ForCausalLM": "qwen3_eagle3.Eagle3Qwen3ForCausalLM",
                   "Qwen3ForCausalLM": "prefixed to Eagle3Qwen3ForCausalLM"},
)

PROFILES = (VLLM_0_8_5, VLLM_0_9_0, VLLM_0_9_1, VLLM_0_10_1, VLLM_0_10_2, VLLM_0_11_0,
            VLLM_0_11_1, VLLM_0_12, VLLM_0_16, VLLM_0_18, VLLM_0_19, VLLM_0_20, VLLM_0_22,
            VLLM_0_24, VLLM_0_25, VLLM_0_30, VLLM_0_33, VLLM_0_34)

# How the EAGLE-3 draft rotates its q/k: from the draft's own config
# (speculative_config.draft_model_config.hf_config), never the target's. The Llama draft
# (llama_eagle3.py) builds llama.py LlamaAttention: is_neox_style = True whatever the config says
# (_init_rotary_emb; before 0.24 only a GGUF llama turned it off), rope_parameters (theta, type,
# partial_rotary_factor, mrope_section, mrope_interleaved) from the draft's config. The MLA draft
# (deepseek_eagle3.py) builds deepseek_v2.py DeepseekV2MLAAttention with is_neox_style=False and
# never reads rope_interleave. A draft config without mrope_section gets the first row of a M-RoPE
# target's positions (v1/spec_decode/llm_base_proposer.py _set_positions [0.33.0]).
# Read in the 0.11.0, 0.18.1, 0.21.0, 0.24.0, 0.29.0 and 0.33.0 wheels (the MLA draft from 0.18.0).
DRAFT_ROPE = {
    "llama": {"field": None, "interleaved_if": None, "default": "neox"},
    "mla": {"field": None, "interleaved_if": None, "default": "interleaved"},
    "cite": "vllm vllm/model_executor/models/llama.py LlamaAttention._init_rotary_emb "
            "(is_neox_style = True); deepseek_v2.py DeepseekV2MLAAttention.__init__ "
            "(is_neox_style=False) [0.11.0-0.33.0]",
}
