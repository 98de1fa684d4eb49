"""vLLM profiles. Facts and citations: ../shared/reference/speculators-and-vllm.md (code of the
0.33.0 wheel). Patch releases of 0.33 are assumed to behave alike; nothing older is claimed."""

from __future__ import annotations

from dataclasses import replace

from eagle3_nb.engines.profile import AS_IS, EngineProfile, FlagRule

VLLM_0_33 = EngineProfile(
    name="vllm", version="0.33", covers=("0.33.0", "0.33.0"),
    evidence="code of the 0.33.0 wheel (2026-11)",
    dialects=frozenset({"flat", "speculators"}), dialect_error="",
    # EAGLEConfig prefixes "Eagle3" to any architecture that lacks it, so LlamaForCausalLM
    # resolves to Eagle3LlamaForCausalLM (transformers_utils/configs/eagle.py).
    architectures={"LlamaForCausalLMEagle3": "llama_eagle3.Eagle3LlamaForCausalLM",
                   "Eagle3LlamaForCausalLM": "llama_eagle3.Eagle3LlamaForCausalLM",
                   "LlamaForCausalLM": "prefixed to Eagle3LlamaForCausalLM",
                   "Eagle3Qwen3ForCausalLM": "qwen3_eagle3.Eagle3Qwen3ForCausalLM",
                   "Qwen3ForCausalLM": "prefixed to Eagle3Qwen3ForCausalLM"},
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
    extra_layer_attn_norm="input_layernorm", extra_layers_have_hidden_norm=False,
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
    target_hidden_null_breaks_fc=False, missing_draft_vocab_error=None, context_error=None,
    drop_when_off=(("input_norm", "norm_before_fc"), ("fc", "use_aux_hidden_state")),
    capture_switch='"method": "eagle3" in --speculative-config',
    cites={
        "capture_switch": "reference/speculators-and-vllm.md §4: vllm/config/speculative.py "
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
        "extra_layers": "llama_eagle3.py LlamaDecoderLayer: layers >= 1 take H inputs; that they "
                        "carry no hidden_norm parameter is inferred (speculators' plain layers "
                        "load without error), not read in the 0.33 code",
    },
)

# The MLA draft class: vllm/model_executor/models/deepseek_eagle3.py Eagle3DeepseekV2ForCausalLM
# (registered also as Eagle3DeepseekV3ForCausalLM), first in 0.18.0 (PR #36361).
_READ = FlagRule(True, {"flat": False, "speculators": False})
_NOT_READ = FlagRule(False, {"flat": False, "speculators": False})
VLLM_MLA_0_25 = replace(
    VLLM_0_33, covers=("0.25.0", "0.33.0"),
    evidence="deepseek_eagle3.py read at 0.18.0, 0.22.0, 0.25.0 and 0.33.0",
    architectures={"Eagle3DeepseekV2ForCausalLM": "deepseek_eagle3.Eagle3DeepseekV2ForCausalLM",
                   "Eagle3DeepseekV3ForCausalLM": "alias of Eagle3DeepseekV2ForCausalLM"},
    draft_attention="mla",
    stacked=((".fused_qkv_a_proj", ".q_a_proj", 0), (".fused_qkv_a_proj", ".kv_a_proj_with_mqa", 1),
             (".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1)),
    has_input_norm=False, has_q_k_norm=False, extra_layers_have_hidden_norm=True,
    fc_aux_top_level_layer_types=frozenset(), drop_when_off=(),
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
                         "with getattr (False); no input_norm / norm_before_fc"},
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
VLLM_0_33 = replace(VLLM_0_33, mla=VLLM_MLA_0_25)

PROFILES = (VLLM_0_33,)
