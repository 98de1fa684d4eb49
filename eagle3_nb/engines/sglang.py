"""SGLang profiles. Facts and citations: ../shared/reference/sglang-serving.md (code of the
released wheels 0.4.10.post2, 0.5.4.post3, 0.5.9, 0.5.16, 0.5.23; line numbers of those releases).
Releases between the ones read are not claimed: each profile covers one release series."""

from __future__ import annotations

from dataclasses import replace

from eagle3_nb.engines.profile import (AS_IS_IF_MAX_IS_L, NO_CAPTURE, PLUS_ONE,
                                       PLUS_ONE_IF_FIRST_IS_1, EngineProfile, FlagRule)

_NEVER = FlagRule(read=False, default={"flat": False, "speculators": False})
_TOP = FlagRule(read=True, default={"flat": False, "speculators": False})

SGLANG_0_5_23 = EngineProfile(
    name="sglang", version="0.5.23", covers=("0.5.23", "0.5.23"),
    evidence="code of the 0.5.23 wheel (built 2026-10-30)",
    dialects=frozenset({"flat"}),
    dialect_error=("SGLang reads only flat HF-style draft configs through transformers' "
                   "AutoConfig; a speculators config (nested transformer_layer_config, no "
                   "model_type) fails at startup. Convert it first: eagle3-nb convert SRC DST --to eagle"),
    architectures={"LlamaForCausalLMEagle3": "llama_eagle3.py LlamaForCausalLMEagle3"},
    architecture_errors={
        "LlamaForCausalLM": "loads the plain target class LlamaForCausalLM, not the EAGLE-3 draft "
                            "(open PR #33966); set architectures to [\"LlamaForCausalLMEagle3\"]",
        "DeepseekV3ForCausalLM": "rewritten to the MTP class DeepseekV3ForCausalLMNextN "
                                 "(model_config.py _config_draft_model)",
        "DeepseekV32ForCausalLM": "rewritten to the MTP class DeepseekV3ForCausalLMNextN",
    },
    speculators_layer_types=frozenset(), speculators_layer_type_error="",
    decoder_param="model.layers.{i}.", max_layers=None, too_many_layers_error="",
    renames=(("midlayer", "layers.0"), ("aux_norm_low", "fc_norm.0"),
             ("aux_norm_mid", "fc_norm.1"), ("aux_norm_high", "fc_norm.2")),
    key_resolution="bare_or_model", unknown_keys="drop_silent", unknown_error="",
    ignored_unknown_suffixes=(),
    d2t_param="hot_token_id", d2t_param_needs_pruned_vocab=False,
    fc_aux_count="num_aux_then_eagle_config_then_3", fc_aux_top_level_layer_types=frozenset(),
    has_input_norm=True, has_fc_norm=True, has_q_k_norm=False,
    extra_layer_attn_norm="hidden_norm", extra_layers_have_hidden_norm=True,
    flags={"norm_before_residual": _NEVER,
           "norm_before_fc": FlagRule(True, {"flat": False, "speculators": False},
                                      ("eagle_config", "top_level")),
           "fc_norm": _TOP, "norm_output": _TOP},
    aux_id_sources=("eagle_config",), reads_use_aux_hidden_state=True,
    aux_rules={"llama": PLUS_ONE, "deepseek": PLUS_ONE_IF_FIRST_IS_1, "gpt_oss": AS_IS_IF_MAX_IS_L},
    aux_sorted={"llama": True, "deepseek": True, "gpt_oss": True},
    last_layer_capturable=False, graphs_use_default_ids=False,
    fc_skip_when_width_is_hidden=True,
    embed_policy="target_unless_hidden_differs", lm_head_policy="target_if_draft_vocab_null",
    target_hidden_null_breaks_fc=True,
    missing_draft_vocab_error=("config has no draft_vocab_size: LlamaForCausalLMEagle3.__init__ "
                               "reads it as a plain attribute (AttributeError, inferred from the code)"),
    context_error=("ValueError at startup: the target context exceeds the draft's "
                   "max_position_embeddings (ModelConfig._derive_context_length) unless "
                   "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
    capture_switch="--speculative-algorithm EAGLE3",
    context_override="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    cites={
        "capture_switch": "reference/sglang-serving.md §2, §4.5: with EAGLE (not EAGLE3) no aux "
                          "capture, the target head replaces the draft's, d2t ignored "
                          "(eagle_worker.py, is_eagle3())",
        "load_weights": "llama_eagle3.py L325-378 (load_weights) [0.5.23]: legacy_name_map, "
                        "d2t -> hot_token_id = d2t + arange, t2d skipped, unknown names dropped silently",
        "aux_ids": "spec_aux_hidden_state.py L132-196 (_resolve_eagle_aux_hidden_state): only the "
                   "draft's nested eagle_config is read",
        "plus_one": "llama.py L929-941 set_eagle3_layers_to_capture: [val + 1 for val in layer_ids]",
        "deepseek": "deepseek_v2.py L3458-3473: +1 only when layer_ids[0] == 1 (PR #25454)",
        "gpt_oss": "gpt_oss.py L1337-1352: as-is when max(ids) == num_layers",
        "fc_skip": "llama_eagle3.py L237-247: fc only if hidden.shape[-1] != embeds.shape[-1] (PR #21272)",
        "fc_width": "llama_eagle3.py L156-167: num_aux_hidden_states, else len(eagle_config ids), else 3",
        "embed": "llama.py L910-924 set_embed: target embeddings unless target_hidden_size != hidden_size",
        "lm_head": "llama_eagle3.py L303-314: draft_vocab_size null -> load_lm_head_from_target",
        "norm_before_fc": "llama_eagle3.py L159-182: eagle_config.norm_before_fc, else top level",
        "context": "model_config.py L1291-1316 _derive_context_length (PR #9388)",
        "extra_layers": "llama_eagle3.py L88-119 LlamaDecoderLayer.forward: layers >= 1 use hidden_norm",
    },
)

# The MLA draft class (Kimi-K2.5/K2.6 EAGLE-3 drafts): python/sglang/srt/models/kimi_k25_eagle3.py
# Eagle3DeepseekV2ForCausalLM, first in 0.5.12 (PR #24826); fc_norm / norm_output from 0.5.13
# (PR #26506, the kimi-k2.6 eagle3.1 draft).
SGLANG_MLA_0_5_13 = replace(
    SGLANG_0_5_23, version="0.5.23", covers=("0.5.13", "0.5.23"),
    evidence="kimi_k25_eagle3.py read at 0.5.12, 0.5.13 and 0.5.23",
    architectures={"Eagle3DeepseekV2ForCausalLM": "kimi_k25_eagle3.py Eagle3DeepseekV2ForCausalLM"},
    architecture_errors={}, draft_attention="mla",
    decoder_param="model.midlayer.", max_layers=1,
    too_many_layers_error='ValueError("EAGLE3 currently only supports 1 layer") '
                          '(kimi_k25_eagle3.py Eagle3MLAModel.__init__)',
    renames=(("layers.0.", "midlayer."),), key_resolution="model_prefix_except_lm_head",
    unknown_keys="drop_logged",
    stacked=((".fused_qkv_a_proj_with_mqa", ".q_a_proj", 0),
             (".fused_qkv_a_proj_with_mqa", ".kv_a_proj_with_mqa", 1),
             (".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1)),
    required_fields=(("q_lora_rank", 'ValueError("Eagle3 MLA layer requires q_lora_rank in the '
                                     'draft config") (Eagle3MLADecoderLayer.__init__)'),),
    fc_aux_count="eagle_config_then_top_level_ids_then_3",
    has_input_norm=False, has_fc_norm=True, extra_layers_have_hidden_norm=False,
    flags={"norm_before_residual": _NEVER, "norm_before_fc": _NEVER, "fc_norm": _TOP,
           "norm_output": _TOP},
    missing_draft_vocab_error=None, target_hidden_null_breaks_fc=False,
    cites={**SGLANG_0_5_23.cites,
           "draft_attention": "kimi_k25_eagle3.py Eagle3MLADecoderLayer: DeepseekV2AttentionMLA "
                              "with fused_qkv_a_proj_with_mqa over 2H inputs (PR #24826, 0.5.12)",
           "load_weights": "kimi_k25_eagle3.py Eagle3DeepseekV2ForCausalLM.load_weights: d2t -> "
                           "hot_token_id, t2d skipped, ^layers.0. -> midlayer., model. prefixed "
                           "except lm_head., q_a_proj + kv_a_proj_with_mqa concatenated into "
                           "fused_qkv_a_proj_with_mqa, anything else: logger.warning and skip",
           "fc_width": "kimi_k25_eagle3.py _get_eagle_aux_layer_count: eagle_config ids, else "
                       "top-level ids, else 3 (num_aux_hidden_states is not read)",
           "norm_flags": "kimi_k25_eagle3.py Eagle3MLAModel.__init__: fc_norm (or use_aux_norm) "
                         "and norm_output from the top level, from 0.5.13 (PR #26506)",
           "lm_head": "kimi_k25_eagle3.py: draft_vocab_size read with getattr; null -> "
                      "load_lm_head_from_target"},
)
SGLANG_MLA_0_5_12 = replace(
    SGLANG_MLA_0_5_13, version="0.5.12.post1", covers=("0.5.12", "0.5.12.post1"),
    has_fc_norm=False, flags={name: _NEVER for name in SGLANG_0_5_23.flags},
    cites={**SGLANG_MLA_0_5_13.cites,
           "norm_flags": "0.5.12: no fc_norm or norm_output in kimi_k25_eagle3.py"},
)
SGLANG_0_5_23 = replace(SGLANG_0_5_23, mla=SGLANG_MLA_0_5_13)
_NO_MLA = {"Eagle3DeepseekV2ForCausalLM": "no MLA draft class before 0.5.12 (kimi_k25_eagle3.py, "
                                          "PR #24826): the architecture is not registered"}

SGLANG_0_5_16 = replace(
    SGLANG_0_5_23, version="0.5.16", covers=("0.5.16", "0.5.16"),
    evidence="code of the 0.5.16 wheel (built 2026-07-25)",
    has_input_norm=False,
    flags={**SGLANG_0_5_23.flags, "norm_before_fc": _NEVER},
    cites={**SGLANG_0_5_23.cites,
           "norm_before_fc": "absent in 0.5.16: input_norm.weight dropped silently (PR #32334)"},
)

SGLANG_0_5_9 = replace(
    SGLANG_0_5_16, version="0.5.9", covers=("0.5.9", "0.5.9"), mla=None,
    architecture_errors={**SGLANG_0_5_16.architecture_errors, **_NO_MLA},
    evidence="code of the 0.5.9 wheel (built 2026-02-23)",
    decoder_param="model.midlayer.", max_layers=1,
    too_many_layers_error='ValueError("EAGLE3 currently only supports 1 layer") (llama_eagle3.py L198-199 [0.5.9])',
    renames=(), fc_aux_count="fixed_3", has_fc_norm=False,
    flags={name: _NEVER for name in SGLANG_0_5_23.flags},
    aux_rules={"llama": PLUS_ONE, "deepseek": PLUS_ONE, "gpt_oss": AS_IS_IF_MAX_IS_L},
    graphs_use_default_ids=True,
    cites={**SGLANG_0_5_23.cites,
           "load_weights": "llama_eagle3.py L229-270 [0.5.9]: no legacy_name_map; params are "
                           "model.midlayer.*; unknown names dropped silently",
           "fc_width": "llama_eagle3.py L135-139 [0.5.9]: fc = Linear(hidden_size_in * 3, H)",
           "deepseek": "deepseek_v2.py L2963-2975 [0.5.9]: always +1",
           "graphs": "cuda_graph_runner.py L361-365 [0.5.9]: set_eagle3_layers_to_capture() with no "
                     "args before capture; fixed by PR #22836",
           "norm_flags": "no norm_before_fc / fc_norm / norm_output before PR #24663"},
)

SGLANG_0_5_4 = replace(
    SGLANG_0_5_9, version="0.5.4", covers=("0.5.4", "0.5.4.post3"),
    evidence="code of the 0.5.4.post3 wheel (built 2025-11-05)",
    reads_use_aux_hidden_state=False,
    cites={**SGLANG_0_5_9.cites, "use_aux": "model_runner.py L488-509 [0.5.4.post3]: no "
           "use_aux_hidden_state, capture always on"},
)

SGLANG_0_4_10 = replace(
    SGLANG_0_5_4, version="0.4.10", covers=("0.4.10", "0.4.10.post2"),
    evidence="code of the 0.4.10.post2 wheel (built 2025-08-03)",
    aux_rules={"llama": PLUS_ONE, "deepseek": NO_CAPTURE, "gpt_oss": NO_CAPTURE},
    cites={**SGLANG_0_5_4.cites, "targets": "0.4.10.post2: set_eagle3_layers_to_capture only in "
           "llama, mllama4, qwen3, qwen3_moe (AttributeError for other targets)"},
)

PROFILES = (SGLANG_0_4_10, SGLANG_0_5_4, SGLANG_0_5_9, SGLANG_0_5_16, SGLANG_0_5_23)
