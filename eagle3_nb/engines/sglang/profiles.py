"""SGLang profiles: every release from 0.4.4.post2 (the first with EAGLE-3) to 0.5.23 in
contiguous ranges.

The 0.5.23 profile was read in full (docs/sglang-serving.md; the wheels 0.4.10.post2,
0.5.4.post3, 0.5.9 and 0.5.16 were read too). The ranges come from a field-by-field survey of all
69 release tags: each watched file compared at every tag and read on both sides of each change
(docs/engine-survey.md gives the method). Each older range cites the change that ends it by
file, function and PR."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from eagle3_nb.engines.config_rules import (LENIENT_CONFIG, NO_AUX_COUNT, NUM_AUX_READ,
                                            STRICT_CONFIG_ALL, ids_counted_by_len,
                                            path_guessed_model_type)
from eagle3_nb.engines.profile import (AS_IS_IF_MAX_IS_L, NO_CAPTURE, PLUS_ONE,
                                       PLUS_ONE_IF_FIRST_IS_1, UNSET, ConfigRule, EngineProfile,
                                       FlagRule, earlier_range)

_NEVER = FlagRule(read=False, default={"flat": False, "speculators": False})
_TOP = FlagRule(read=True, default={"flat": False, "speculators": False})
# llama_eagle3.py LlamaModel.__init__ and kimi_k25_eagle3.py Eagle3MLAModel.__init__:
# `getattr(config, "fc_norm", None) or getattr(config, "use_aux_norm", False)` [0.5.12-0.5.23
# wheels; kimi from 0.5.13]: the legacy key counts where fc_norm is absent
_FC_NORM = FlagRule(read=True, default={"flat": False, "speculators": False},
                    sources=("top_level", "use_aux_norm"))

# The draft-extend CUDA graph's hidden-state input is as wide as len(top-level ids) x
# target_hidden_size when neither num_aux_hidden_states nor eagle_config's ids are set, while
# the Llama draft's fc takes 3 x target_hidden_size then and the target captures its default
# three layers (it reads ids only from eagle_config). Capture runs the draft's forward at
# startup, so fc meets the wrong width there; a CPU (the probe's) captures no graph.
_GRAPH_WIDTH = ("sglang srt/speculative/eagle_utils.py get_draft_input_from_target_hidden_dim "
                "(num_aux_hidden_states, else eagle_config ids, else the top-level ids: "
                "`len(layer_ids) if layer_ids else 3`), eagle_draft_extend_cuda_graph_runner.py "
                "EAGLEDraftExtendCudaGraphRunner.__init__ (the hidden_states buffer) and "
                "capture (model.forward; llama_eagle3.py LlamaModel.forward runs fc on it), "
                "eagle_worker_v2.py EagleDraftWorker._capture_cuda_graphs (no capture when "
                "_is_cpu or CUDA graphs are off) [0.5.23]; the function came in 0.5.15 (PR "
                "#29464) and is unchanged since (docs/engine-survey.md); 0.5.13's "
                "get_draft_hidden_dim read only eagle_config (0.5.13 wheel)")
GRAPH_WIDTH_FROM_TOP_LEVEL_IDS = (
    ConfigRule("flat", "eagle_aux_hidden_state_layer_ids", frozenset({"length"}),
               "SGLang sizes the draft-extend CUDA graph's hidden-state input from "
               "len(eagle_aux_hidden_state_layer_ids) x target_hidden_size (num_aux_hidden_states "
               "and eagle_config's ids being unset), while the draft builds fc for 3 aux states "
               "and the target captures its default layers (it reads ids only from "
               "eagle_config): capturing that graph at startup fails (RuntimeError: mat1 and mat2 "
               "shapes cannot be multiplied); move the ids into "
               "eagle_config.eagle_aux_hidden_state_layer_ids, or launch with --disable-cuda-graph",
               length=3, cite=_GRAPH_WIDTH,
               when=(("architectures.0", ("LlamaForCausalLMEagle3",)), *NO_AUX_COUNT,
                     ("eagle_config.use_aux_hidden_state", (UNSET, True)))),
)
# The EAGLE worker reads use_aux_hidden_state with getattr(hf_config, "eagle_config", {}).get():
# the {} default covers an absent key only, so an eagle_config written as null fails at startup
_WORKER_READS_EAGLE_CONFIG = (
    "sglang srt/speculative/eagle_worker.py EAGLEWorker.__init__ and eagle_worker_v2.py "
    "EAGLEWorkerV2.__init__ [every wheel 0.5.8 .. 0.5.12.post1; eagle_worker_v2.py alone in "
    "0.5.13, 0.5.13.post1, 0.5.14]: `getattr(hf_config, \"eagle_config\", {})` then "
    "`.get(\"use_aux_hidden_state\", True)`; absent in 0.5.7 (PR #14920 in 0.5.8), and from "
    "0.5.15 (PR #29464) the worker no longer reads eagle_config (eagle_utils.py `getattr(..., "
    "None) or {}`) (0.5.7, 0.5.15, 0.5.15.post1, 0.5.16 wheels)")
WORKER_EAGLE_CONFIG_NULL = (
    ConfigRule("flat", "eagle_config", frozenset({"null"}),
               "AttributeError: 'NoneType' object has no attribute 'get' (the EAGLE worker reads "
               "eagle_config.get('use_aux_hidden_state', True) at startup); remove the null "
               "eagle_config or write it as an object", cite=_WORKER_READS_EAGLE_CONFIG),
)
# transformers up to 5.1 (the pins before SGLang 0.5.10's 5.3.0) guess a config without
# model_type from the words of the draft's path; SGLang registers its own config classes first.
# With none of those words in the path AutoConfig raises; 5.2+ always raises (STRICT_CONFIG).
_MODEL_TYPES = json.loads((Path(__file__).parent / "data" / "autoconfig-model-types.json")
                          .read_text(encoding="utf-8"))
PATH_GUESSED_MODEL_TYPE = path_guessed_model_type(
    _MODEL_TYPES["model_types"],
    "transformers models/auto/configuration_auto.py AutoConfig.from_pretrained [4.57.1, the 0.5.9 "
    "wheel's pin]: `for pattern in sorted(CONFIG_MAPPING, key=len, reverse=True): if pattern in "
    "str(path)`, else ValueError; the model types are CONFIG_MAPPING's with SGLang 0.5.9's "
    "registrations (engines/sglang/data/autoconfig-model-types.json); confirmed by the ablation "
    "on sglang 0.5.9 with transformers 4.57.1. Older pins know fewer types (assumed a subset), "
    "so none of these in the path raises there too")
# The MLA draft class (kimi_k25_eagle3.py, from 0.5.12) counts its aux states from eagle_config's
# ids, else the top-level ones, with len() (num_aux_hidden_states is not read)
MLA_IDS_COUNTED = (ids_counted_by_len(
    "flat", (("architectures.0", ("Eagle3DeepseekV2ForCausalLM",)), NO_AUX_COUNT[1]),
    "sglang srt/models/kimi_k25_eagle3.py _get_eagle_aux_layer_count: `len(layer_ids)` of "
    "eagle_config's ids, else getattr(config, 'eagle_aux_hidden_state_layer_ids') [0.5.12, "
    "0.5.23]"),)

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
           "fc_norm": _FC_NORM, "norm_output": _TOP},
    aux_id_sources=("eagle_config",), reads_use_aux_hidden_state=True,
    aux_rules={"llama": PLUS_ONE, "deepseek": PLUS_ONE_IF_FIRST_IS_1, "gpt_oss": AS_IS_IF_MAX_IS_L},
    aux_sorted={"llama": True, "deepseek": True, "gpt_oss": True},
    last_layer_capturable=False, graphs_use_default_ids=False,
    fc_skip_when_width_is_hidden=True,
    embed_policy="target_unless_hidden_differs", lm_head_policy="target_if_draft_vocab_null",
    target_hidden_null_breaks_fc=frozenset({"flat"}),
    config_rules=(STRICT_CONFIG_ALL + NUM_AUX_READ + GRAPH_WIDTH_FROM_TOP_LEVEL_IDS
                  + MLA_IDS_COUNTED), qkv_bias=False, o_proj_bias=True,
    missing_draft_vocab_error=("config has no draft_vocab_size: LlamaForCausalLMEagle3.__init__ "
                               "reads it as a plain attribute (AttributeError, inferred from the code)"),
    context_error=("ValueError at startup: the target context exceeds the draft's "
                   "max_position_embeddings (ModelConfig._derive_context_length) unless "
                   "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
    capture_switch="--speculative-algorithm EAGLE3",
    draft_attention_flag="--speculative-draft-attention-backend",
    context_override="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    cites={
        "capture_switch": "docs/sglang-serving.md §2, §4.5: with EAGLE (not EAGLE3) no aux "
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
        "draft_attention_flag": "model_runner_components/attention_backend_setup.py: a draft "
                                "runner uses ModelRunner.draft_attention_backend when set, else "
                                "the process-wide backends [0.5.23]; the flag from 0.5.7 (PR "
                                "#14843)",
        "extra_layers": "llama_eagle3.py L88-119 LlamaDecoderLayer.forward: layers >= 1 use hidden_norm",
        "target_hidden_null": "llama_eagle3.py LlamaModel.__init__ L151-164 [0.5.23]: "
                              "hasattr(config, 'target_hidden_size') then Linear(None * A, H); "
                              "TypeError confirmed by tools/config_ablation.py on 0.5.23",
        "qkv_bias": "llama_eagle3.py LlamaDecoderLayer.__init__ [0.5.23]: every draft layer "
                    "replaces self_attn.qkv_proj with QKVParallelLinear(..., bias=False), so "
                    "attention_bias builds only o_proj's bias (llama.py LlamaAttention: "
                    "RowParallelLinear(bias=bias)); the draft's LlamaMLP has no bias; found by "
                    "tools/config_ablation.py --keys on 0.5.9 and 0.5.23 (older ranges inherit "
                    "it unread)",
        "o_proj_bias": "as qkv_bias",
        "config_rules": "the wheels pin transformers ==5.19.0 (0.5.22, 0.5.23), ==5.12.1 "
                        "(0.5.16, 0.5.17, 0.5.20), ==5.8.1 (0.5.13), ==5.6.0 (0.5.11, 0.5.12) "
                        "(METADATA Requires-Dist), all with the @strict LlamaConfig; "
                        "get_config reads a flat draft config through AutoConfig "
                        "(srt/utils/hf_transformers_utils.py); confirmed by "
                        "tools/config_ablation.py on 0.5.23; num_aux_hidden_states: "
                        "llama_eagle3.py LlamaModel.__init__ builds fc from it (from 0.5.12); "
                        "top-level ids: " + _GRAPH_WIDTH,
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
    flags={"norm_before_residual": _NEVER, "norm_before_fc": _NEVER, "fc_norm": _FC_NORM,
           "norm_output": _TOP},
    missing_draft_vocab_error=None, target_hidden_null_breaks_fc=frozenset(),
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

SGLANG_0_5_23 = replace(
    SGLANG_0_5_23, covers=("0.5.17", "0.5.23"), final_boundary_families=frozenset({"gpt_oss"}),
    evidence="code of the 0.5.23 wheel read in full; 0.5.17-0.5.22 by the release survey (no "
             "watched field differs)",
    cites={**SGLANG_0_5_23.cites,
           "has_input_norm": "llama_eagle3.py LlamaModel.__init__: input_norm when norm_before_fc "
                             "(PR #32334, first in 0.5.17)",
           "final_boundary_families": "gpt_oss.py set_eagle3_layers_to_capture and the capture "
                                      "loop yield boundary L (PR #32334, 0.5.17)"})


_LLAMA_EAGLE3 = "python/sglang/srt/models/llama_eagle3.py"
SGLANG_0_5_15 = earlier_range(
    SGLANG_0_5_23, "0.5.15", "0.5.16",
    {"has_input_norm": f"{_LLAMA_EAGLE3} [<0.5.17]: no input_norm; input_norm.weight dropped "
     "silently (PR #32334 in 0.5.17)", "flags": "norm_before_fc not read before 0.5.17",
     "aux_rules": "gpt_oss.py set_eagle3_layers_to_capture [0.5.1-0.5.16]: +1 always; the "
     "capture loop never yields boundary L (PR #32334 in 0.5.17)",
     "final_boundary_families": "as aux_rules"},
    has_input_norm=False, flags={**SGLANG_0_5_23.flags, "norm_before_fc": _NEVER},
    aux_rules={**SGLANG_0_5_23.aux_rules, "gpt_oss": PLUS_ONE},
    final_boundary_families=frozenset(),
)
SGLANG_0_5_15 = replace(
    SGLANG_0_5_15, evidence="the 0.5.15, 0.5.15.post1 and 0.5.16 wheels read for the graph "
    "(eagle_utils.py get_draft_input_from_target_hidden_dim, the same function as 0.5.23's; "
    "eagle_draft_extend_cuda_graph_runner.py, eagle_worker_v2.py _capture_cuda_graphs) and "
    "llama_eagle3.py; the other fields by the release survey")
SGLANG_0_5_13 = earlier_range(
    SGLANG_0_5_15, "0.5.13", "0.5.14",
    {"config_rules": "eagle_utils.py [0.5.13-0.5.14] get_draft_hidden_dim sizes the prefill "
     "graph's input from eagle_config's ids only, and eagle_draft_extend_cuda_graph_runner.py "
     "sizes the draft-extend graph with EagleDraftExtendInput.hidden_size_for (eagle_config's "
     "ids, else 3) (0.5.13, 0.5.13.post1 and 0.5.14 wheels): no top-level fallback before "
     "PR #29464 (0.5.15); "
     "and " + _WORKER_READS_EAGLE_CONFIG},
    config_rules=STRICT_CONFIG_ALL + NUM_AUX_READ + MLA_IDS_COUNTED + WORKER_EAGLE_CONFIG_NULL,
)
SGLANG_0_5_12 = earlier_range(
    SGLANG_0_5_13, "0.5.12", "0.5.12.post1",
    {"aux_rules": "deepseek_v2.py set_eagle3_layers_to_capture [0.5.4.post2-0.5.12.post1]: +1 "
     "always (PR #25454 in 0.5.13: +1 only when layer_ids[0] == 1)",
     "mla": "kimi_k25_eagle3.py [0.5.12]: see SGLANG_MLA_0_5_12"},
    aux_rules={**SGLANG_0_5_13.aux_rules, "deepseek": PLUS_ONE}, mla=SGLANG_MLA_0_5_12,
)
SGLANG_0_5_11 = earlier_range(
    SGLANG_0_5_12, "0.5.11", "0.5.11",
    {"decoder_param": f"{_LLAMA_EAGLE3} LlamaModel [<0.5.12]: one model.midlayer; layers.N and "
     "the legacy_name_map arrived with PR #24663 (0.5.12)", "max_layers": "as decoder_param",
     "too_many_layers_error": "as decoder_param", "renames": "as decoder_param",
     "fc_aux_count": f"{_LLAMA_EAGLE3} [<0.5.12]: fc = Linear(hidden_size_in * 3, H)",
     "has_fc_norm": "fc_norm / norm_output arrived with PR #24663 (0.5.12)",
     "flags": "no fc_norm / norm_output / norm_before_fc before 0.5.12",
     "architecture_errors": "no MLA draft class before 0.5.12 (PR #24826)",
     "mla": "as architecture_errors",
     "config_rules": "fc = Linear(hidden_size_in * 3, H) [<0.5.12]: num_aux_hidden_states is "
     "never read (the 0.5.9 wheel); no MLA draft class"},
    decoder_param="model.midlayer.", max_layers=1,
    too_many_layers_error='ValueError("EAGLE3 currently only supports 1 layer") '
                          '(llama_eagle3.py LlamaModel.__init__)',
    renames=(), fc_aux_count="fixed_3", has_fc_norm=False,
    config_rules=STRICT_CONFIG_ALL + WORKER_EAGLE_CONFIG_NULL,
    flags={name: _NEVER for name in SGLANG_0_5_23.flags},
    architecture_errors={**SGLANG_0_5_23.architecture_errors, **_NO_MLA}, mla=None,
)
SGLANG_0_5_8 = earlier_range(
    SGLANG_0_5_11, "0.5.8", "0.5.10.post1",
    {"graphs_use_default_ids": "cuda_graph_runner.py [0.4.9-0.5.10.post1]: "
     "set_eagle3_layers_to_capture() with no args before graph capture, so replayed decode "
     "captures the defaults (fixed by PR #22836 in 0.5.11)",
     "config_rules": "the wheels pin transformers ==5.3.0 (0.5.10), ==4.57.1 (0.5.9) (METADATA "
     "Requires-Dist): no @strict LlamaConfig (from 5.4.0), and 4.57.1 guesses a config class "
     "from the path when model_type is absent; only the rules that hold on both"},
    graphs_use_default_ids=True,
    config_rules=LENIENT_CONFIG + PATH_GUESSED_MODEL_TYPE + WORKER_EAGLE_CONFIG_NULL,
)
SGLANG_0_5_7 = earlier_range(
    SGLANG_0_5_8, "0.5.7", "0.5.7",
    {"reads_use_aux_hidden_state": "model_runner.py [<0.5.8]: no use_aux_hidden_state, capture "
     "always on (PR #14920 in 0.5.8)",
     "config_rules": "eagle_worker.py [0.5.7 wheel]: the worker does not read eagle_config"},
    reads_use_aux_hidden_state=False, config_rules=LENIENT_CONFIG + PATH_GUESSED_MODEL_TYPE,
)
SGLANG_0_5_4_POST2 = earlier_range(
    SGLANG_0_5_7, "0.5.4.post2", "0.5.6.post2",
    {"draft_attention_flag": "server_args.py [<0.5.7]: no --speculative-draft-attention-backend "
     "(PR #14843 in 0.5.7); the draft always runs the target's attention backend"},
    draft_attention_flag="",
)
SGLANG_0_5_2 = earlier_range(
    SGLANG_0_5_4_POST2, "0.5.2", "0.5.4.post1",
    {"aux_rules": "deepseek_v2.py [<0.5.4.post2]: no set_eagle3_layers_to_capture "
     "(AttributeError at startup; PR #12319 in 0.5.4.post2)",
     "missing_draft_vocab_error": f"{_LLAMA_EAGLE3} [<0.5.4.post2]: draft_vocab_size read as a "
     "plain attribute only when the head is not tied (PR #12002)"},
    aux_rules={**SGLANG_0_5_4_POST2.aux_rules, "deepseek": NO_CAPTURE},
    missing_draft_vocab_error=("config has no draft_vocab_size and does not tie embeddings: "
                               "LlamaForCausalLMEagle3.__init__ reads it as a plain attribute "
                               "(AttributeError)"),
)
SGLANG_0_5_1 = earlier_range(
    SGLANG_0_5_2, "0.5.1", "0.5.1.post3",
    {"lm_head_policy": f"{_LLAMA_EAGLE3} [<0.5.2]: always its own ParallelLMHead(draft_vocab_"
     "size); draft_vocab_size: null -> target lm_head from PR #9739 (0.5.2)"},
    lm_head_policy="own_always",
)
SGLANG_0_4_9 = earlier_range(
    SGLANG_0_5_1, "0.4.9", "0.4.10.post2",
    {"aux_rules": "no gpt_oss.py before 0.5.1 (PR #8824)",
     "context_error": "model_config.py [0.4.x]: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN "
     "defaulted to true, so a longer target context only warned (ValueError from PR #9388, "
     "0.5.1)", "context_override": "as context_error"},
    aux_rules={**SGLANG_0_5_1.aux_rules, "gpt_oss": NO_CAPTURE}, context_error=None,
    context_override="",
)
SGLANG_0_4_4 = earlier_range(
    SGLANG_0_4_9, "0.4.4.post2", "0.4.8.post1",
    {"aux_id_sources": "model_runner.py [<0.4.9]: set_eagle3_layers_to_capture() with no "
     "arguments: the draft's ids are never read, the target captures [2, L//2, L-3] (PR #6985 "
     "in 0.4.9)",
     "graphs_use_default_ids": "ids are never read, so graphs and eager agree",
     "key_resolution": f"{_LLAMA_EAGLE3} load_weights [<0.4.9]: every name without "
     "d2t/t2d/lm_head gets 'model.' prepended (PR #6985 changed it to bare-or-model)",
     "unknown_keys": f"{_LLAMA_EAGLE3} load_weights [<0.4.9]: unknown names get a warning (or a "
     "KeyError when they contain a stacked name such as .q_proj); modelled as skipped with a "
     "warning"},
    aux_id_sources=(), graphs_use_default_ids=False,
    key_resolution="model_prefix_except_lm_head", unknown_keys="drop_logged",
)

PROFILES = (SGLANG_0_4_4, SGLANG_0_4_9, SGLANG_0_5_1, SGLANG_0_5_2, SGLANG_0_5_4_POST2,
            SGLANG_0_5_7, SGLANG_0_5_8, SGLANG_0_5_11, SGLANG_0_5_12, SGLANG_0_5_13, SGLANG_0_5_15,
            SGLANG_0_5_23)

# How the EAGLE-3 draft rotates its q/k: from the draft's own config, never the target's.
# The Llama draft (llama_eagle3.py) builds llama.py LlamaDecoderLayer, whose __init__ reads
# rope_is_neox_style (default True: NeoX halves) and LlamaAttention.__init__ partial_rotary_factor;
# llama_eagle3.py LlamaModel.__init__ switches to M-RoPE positions only when the draft's own
# rope_scaling / rope_parameters has mrope_section (rotary_embedding get_rope reads
# mrope_interleaved there). The MLA draft (kimi_k25_eagle3.py) builds deepseek_v2.py
# DeepseekV2AttentionMLA: is_neox_style = not rope_interleave (default True: interleaved pairs).
# Read in the 0.5.7, 0.5.9, 0.5.12.post1, 0.5.16 and 0.5.23 wheels (the MLA draft from 0.5.12).
DRAFT_ROPE = {
    "llama": {"field": "rope_is_neox_style", "interleaved_if": False, "default": "neox"},
    "mla": {"field": "rope_interleave", "interleaved_if": True, "default": "interleaved"},
    "cite": "sglang python/sglang/srt/models/llama.py LlamaDecoderLayer.__init__ "
            "(rope_is_neox_style, default True); deepseek_v2.py DeepseekV2AttentionMLA.__init__ "
            "(not rope_interleave, default True); llama_eagle3.py LlamaModel.__init__ "
            "(mrope_section of the draft's config) [0.5.7-0.5.23]",
}

# How SGLang drafts and verifies a tree (--speculative-eagle-topk > 1), applied by
# eagle3_nb/tree.py; the same rule in every release read. The draft KV layout keeps a beam's
# attention on the beams that ran in its slot before, not on its ancestors; sampling verifies
# target-only (no draft probabilities).
TREE_DRAFTING = {
    "selection": "topk beams by parent score x child probability; the num_draft_tokens - 1 "
                 "best-scored candidates of all levels, in candidate order",
    "draft_kv": "per beam slot (slot j at step i sees the prefix and slot j's earlier beams)",
    "verify": "greedy: from the root, the first child in candidate order equal to the target's "
              "token; sampling: target-only rejection (one coin per node over the children's "
              "running target mass, the bonus from the target with the rejected tokens removed)",
    "cite": "sglang python/sglang/srt/speculative/eagle_worker_v2.py EagleWorkerV2.draft_forward, "
            "spec_utils.py select_top_k_tokens, eagle_utils.py organize_draft_results and "
            "build_tree_kernel_efficient; kernels/ops/speculative/spec_tree.py "
            "verify_tree_greedy_kernel_triton; kernels/ops/speculative/cache_locs.py "
            "generate_draft_decode_kv_indices (slot topk_id reads seq_len + topk_id * num_steps "
            "+ [0, iter)); kernels/jit/include/sgl_kernel/speculative/sampling.cuh "
            "TreeSpeculativeSamplingTargetOnly [0.5.23; the selection and the slot-indexed KV also "
            "read in 0.4.4.post2 (eagle_utils.py, slot layout seq_len + iter * topk + topk_id), "
            "0.4.10, 0.5.4, 0.5.7, 0.5.9 and 0.5.16]",
}
