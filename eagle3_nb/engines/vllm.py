"""vLLM profiles. Facts and citations: ../shared/reference/speculators-and-vllm.md (code of the
0.33.0 wheel). Patch releases of 0.33 are assumed to behave alike; nothing older is claimed."""

from __future__ import annotations

from eagle3_nb.engines.profile import AS_IS, EngineProfile, FlagRule

VLLM_0_33 = EngineProfile(
    name="vllm", version="0.33", covers=("0.33.0", "0.34.0"),
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

PROFILES = (VLLM_0_33,)
