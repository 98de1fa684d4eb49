"""TensorRT-LLM profiles: every listed release from 0.19.0 (the first with EAGLE-3 on the PyTorch
backend) to 1.4.0rc1, in contiguous ranges.

Read from source, not checked with the engine's loader: TensorRT-LLM's wheels are not
installable here (PyPI holds only stub sdists that fetch the wheel from NVIDIA's own index, and
their pins need Python 3.10/3.12 and another torch; docs/engine-facts-trtllm.md). The newest
range was read in the stored copy of NVIDIA/TensorRT-LLM main at commit 00679c66 (2026), taken
to be 1.4.0rc1. No release tag could be checked out (the repository is too large to fetch), so
each older range rests on a stored older copy of the same file where one was found, or on the
PR that changed the field and the release its merge date falls in; every such assumption is
written in the field's citation ("read in X, assumed for Y")."""

from __future__ import annotations

from dataclasses import replace

from eagle3_nb.engines.profile import PLUS_ONE, EngineProfile, FlagRule, earlier_range

SRC = "NVIDIA/TensorRT-LLM"
SPEC = "tensorrt_llm/_torch/models/modeling_speculative.py"
EAGLE3 = "tensorrt_llm/_torch/speculative/eagle3.py"
ARGS = "tensorrt_llm/llmapi/llm_args.py"
MAIN = "main@00679c66"
# every answer for this engine carries this (Engine.read names the release it stands for)
NOT_PROBED = ("read from source, not checked with the engine's loader (TensorRT-LLM's wheels "
              "are not installable here)")

_NEVER = FlagRule(read=False, default={"flat": False, "speculators": False})
_TOP = FlagRule(read=True, default={"flat": False, "speculators": False})
_NESTED = FlagRule(read=True, default={"flat": False, "speculators": False},
                   sources=("eagle_config",))

TRTLLM_1_4 = EngineProfile(
    name="trtllm", version="1.4.0rc1", covers=("1.3.0rc29", "1.4.0rc1"),
    evidence=f"{SRC} {MAIN} (stored copy, 2026), taken as 1.4.0rc1; {NOT_PROBED}",
    dialects=frozenset({"flat"}),
    dialect_error=("TensorRT-LLM builds the draft config with ModelConfig.from_pretrained "
                   "(transformers' AutoConfig) and reads only flat keys; no code reading a "
                   "speculators config (transformer_layer_config) was found in its source, so "
                   "such a draft is taken as unsupported. Convert it first: eagle3-nb convert "
                   "SRC DST --to eagle"),
    architectures={"*": "one-model mode (eagle3_one_model: true, the default) builds "
                        "Eagle3ForCausalLM whatever architectures says"},
    architecture_errors={},
    speculators_layer_types=frozenset(), speculators_layer_type_error="",
    decoder_param="model.midlayer.{i}.", single_layer_param="model.midlayer.",
    max_layers=None, too_many_layers_error="",
    regex_renames=(("single", r"^layers\.0\.", "midlayer."),
                   ("multi", r"^layers\.(\d+)\.", r"midlayer.\1.")),
    renames=(), key_resolution="model_prefix_except_lm_head", unknown_keys="drop_silent",
    unknown_error="", ignored_unknown_suffixes=(),
    d2t_param="model.d2t", d2t_param_needs_pruned_vocab=True, d2t_reading="offsets",
    fc_aux_count="fixed_3", fc_aux_top_level_layer_types=frozenset(),
    has_input_norm=True, has_fc_norm=True, has_q_k_norm=False,
    extra_layer_attn_norm="hidden_norm", extra_layers_have_hidden_norm=True,
    extra_layers_have_input_norm=False,
    flags={"norm_before_residual": _NEVER, "norm_before_fc": _NESTED, "fc_norm": _TOP,
           "norm_output": _TOP},
    drop_when_off=(("input_norm", "norm_before_fc"),),
    unused_unless=(("embed_tokens", "target_hidden_differs"),),
    aux_id_sources=(), reads_use_aux_hidden_state=False,
    aux_rules={"llama": PLUS_ONE, "deepseek": PLUS_ONE, "gpt_oss": PLUS_ONE},
    aux_sorted={"llama": True, "deepseek": True, "gpt_oss": True},
    last_layer_capturable=True, graphs_use_default_ids=False,
    fc_skip_when_width_is_hidden=True,
    embed_policy="target_unless_hidden_differs", lm_head_policy="target_if_absent",
    target_hidden_null_breaks_fc=frozenset({"flat"}), missing_draft_vocab_error=None,
    context_error=None,
    default_ids_min_layers=6,
    default_ids_error='ValueError("Not enough hidden layers for default EAGLE3 capture") at '
                      "startup; give eagle3_layers_to_capture in the launch config",
    aux_ids_launch_line="eagle3_layers_to_capture: {ids}", aux_ids_launch_offset=-1,
    caveat=NOT_PROBED,
    capture_switch="speculative_config with decoding_type: Eagle3 and speculative_model: "
                   "DRAFT in the trtllm-serve --config YAML",
    cites={
        "evidence": NOT_PROBED,
        "load_weights": f"{SRC} {SPEC} Eagle3ForCausalLM.load_weights [{MAIN}]: ^layers\\.0\\. "
                        "-> midlayer. for one layer, ^layers\\.(\\d+)\\. -> midlayer.\\1. for "
                        "more (PR #11010, 2026-01-28); 'model.' prefixed to every key without "
                        "'lm_head'",
        "unknown": f"{SRC} tensorrt_llm/_torch/models/modeling_utils.py _load_weights_impl / "
                   f"_load_weights_impl_v2 [{MAIN}]: each module pulls its own weights by name "
                   "(filter_weights); a checkpoint key no module asks for is never looked at, "
                   "and a module with no weights returns early (no error, no log line)",
        "missing": "as unknown: `if not module_weights: return`",
        "fc_width": f"{SRC} {SPEC} Eagle3DraftModel.__init__ [{MAIN}]: fc = Linear(Ht * "
                    "spec_config.num_capture_layers, H), only when num_capture_layers > 1; "
                    f"num_capture_layers = len(eagle3_layers_to_capture) or 3 ({EAGLE3} "
                    "Eagle3SpecMetadata.__post_init__); the draft's own ids are never read",
        "fc_skip": f"{SRC} {SPEC} Eagle3ForCausalLM.apply_eagle3_fc [{MAIN}]: fc only when "
                   "hidden_states.shape[-1] != hidden_size",
        "aux_ids": f"{SRC} {EAGLE3} Eagle3SpecMetadata / Eagle3OneModelSpecMetadata "
                   f"__post_init__ [{MAIN}]: layers_to_capture from the launch config "
                   "(EagleDecodingConfig.eagle3_layers_to_capture, sorted) else "
                   "_get_eagle3_default_capture_layers = (1, L//2-1, L-4); L <= 5 (L != 1) "
                   "raises 'Not enough hidden layers for default EAGLE3 capture'. The draft's "
                   "eagle_aux_hidden_state_layer_ids is read nowhere",
        "plus_one": f"{SRC} {EAGLE3} maybe_capture_hidden_states [{MAIN}]: the target's decoder "
                    "layer i hands (hidden_states, residual) after its MLP and to_save = "
                    "hidden_states + residual, the output of layer i = hidden_states[i+1]: TRT "
                    "id i is SGLang/vLLM id i+1",
        "norm_flags": f"{SRC} {SPEC} [{MAIN}]: Eagle3DraftModel.__init__ reads "
                      "eagle_config.norm_before_fc (PR #12561), config.fc_norm and "
                      "config.norm_output / eagle_config.return_hidden_post_norm (PR #14988); "
                      "norm_before_residual is read nowhere and Eagle3DecoderLayer.forward keeps "
                      "the un-normed residual",
        "dialects": f"{SRC} {SPEC} Eagle3DraftModel.__init__ [{MAIN}] reads flat keys "
                    "(hidden_size, eagle_config, target_hidden_size, draft_vocab_size) off the "
                    "transformers config; no reader of transformer_layer_config or "
                    "speculators_config was found in the stored TensorRT-LLM files (searched), "
                    "and a config without model_type fails in AutoConfig (inferred, not run)",
        "dialect_error": "as dialects",
        "flags": "as norm_flags",
        "norm_before_residual": "as norm_flags",
        "norm_before_fc": "eagle_config.norm_before_fc only: a top-level norm_before_fc "
                          "(speculators style) is not read (Eagle3DraftModel.__init__)",
        "embed": f"{SRC} {SPEC} Eagle3DraftModel.__init__ [{MAIN}]: embed_tokens only when "
                 "target_hidden_size != hidden_size, else None and "
                 "load_weights_from_target_model shares the target's",
        "lm_head": f"{SRC} {SPEC} Eagle3ForCausalLM.load_weights / "
                   f"load_weights_from_target_model [{MAIN}]: any key containing 'lm_head' "
                   "makes load_lm_head_from_target False; otherwise lm_head is skipped and "
                   "the target's is used, whatever draft_vocab_size says",
        "d2t": f"{SRC} {SPEC} Eagle3DraftModel.__init__ [{MAIN}]: d2t (int32) only when "
               f"draft_vocab_size != vocab_size; {EAGLE3} draft_decoder: draft_tokens = "
               "d2t[draft_tokens] + draft_tokens (offsets); t2d has no module",
        "extra_layers": f"{SRC} {SPEC} Eagle3DecoderLayer [{MAIN}]: layers after the first "
                        "(eagle_config.next_layer_regular, default True) build no "
                        "input_layernorm, take H inputs and run hidden_norm as their only "
                        "pre-attention norm",
        "draft_rope": f"{SRC} {SPEC} Eagle3Attention.__init__ [{MAIN}]: "
                      "PositionEmbeddingType.rope_gpt_neox whatever the target uses",
        "context": "no check of the draft's max_position_embeddings against the target's was "
                   "found in the source read",
        "capture_switch": f"{SRC} {ARGS} EagleDecodingConfig [{MAIN}]: decoding_type Eagle3 "
                          "(Eagle before PR #10124), speculative_model, eagle3_one_model "
                          "(default True)",
        "architectures": f"{SRC} {SPEC} SpecDecOneEngineForCausalLM.__init__ (stored "
                         "copies, 2026): the draft config comes from eagle3_model_arch (llama3: "
                         "ModelConfig.from_pretrained(speculative_model); mistral_large3: "
                         "MistralConfigLoader), the draft's architectures is not read",
        "last_layer_capturable": "any target layer id up to L-1 is captured (its output); -1 "
                                 "names the final post-norm state "
                                 "(SpecDecOneEngineForCausalLM.forward)",
    },
)

TRTLLM_1_2 = earlier_range(
    TRTLLM_1_4, "1.2.0", "1.3.0rc0",
    {"regex_renames": f"{SPEC} Eagle3ForCausalLM.load_weights before PR #11010 (merged "
     "2026-01-28, after 1.3.0rc0 of 2026-01-22): no layers.N -> midlayer rename, so layers.N.* "
     "keys become model.layers.N.* and are dropped silently (read in the stored pre-#11010 "
     "copy; assumed for 1.2.x, whose branch date is not known)",
     "has_input_norm": "no input_norm / norm_before_fc before PR #12561 (2026-03-27, after "
     "1.3.0rc0); assumed absent in 1.2.x",
     "drop_when_off": "as has_input_norm",
     "has_fc_norm": "no fc_norm / norm_output before PR #14988 (2026-06-05); absent in the "
     "stored pre-#11010 copy of modeling_speculative.py",
     "flags": "pre-#12561 / pre-#14988 copies read none of norm_before_fc, fc_norm, norm_output",
     "extra_layers_have_input_norm": "the stored pre-#11010 copy (Eagle3DecoderLayer without "
     "next_layer_regular): every layer builds input_layernorm and concatenates the embeddings "
     "(2H inputs; the plan's shapes for layers >= 1 assume H, not modelled)",
     "extra_layer_attn_norm": "as extra_layers_have_input_norm"},
    regex_renames=(), has_input_norm=False, drop_when_off=(), has_fc_norm=False,
    flags={"norm_before_residual": _NEVER, "norm_before_fc": _NEVER, "fc_norm": _NEVER,
           "norm_output": _NEVER},
    extra_layers_have_input_norm=True, extra_layer_attn_norm="input_layernorm",
)
TRTLLM_1_1 = earlier_range(
    TRTLLM_1_2, "1.1.0", "1.1.0",
    {"missing_draft_vocab_error": f"{SPEC} Eagle3ForCausalLM.__init__ before PR #10124 "
     "(opened 2025-12-18, after 1.1.0's branch): pretrained_config.draft_vocab_size read as a "
     "plain attribute (stored older copy); _ensure_draft_vocab_size, which defaults it to "
     "vocab_size with a warning, came with #10124 (first release 1.2.0rc7 or 1.3.0rc0, "
     "assumed in 1.2.0)",
     "capture_switch": f"{ARGS} DecodingBaseConfig.from_dict before PR #10124 (stored older "
     "copies): config_classes has 'Eagle' and no 'Eagle3' (Invalid decoding type); Eagle on "
     "the PyTorch backend runs EAGLE-3 (EagleDecodingConfig.spec_dec_mode)"},
    capture_switch="speculative_config with decoding_type: Eagle (no Eagle3 name before PR "
                   "#10124) and speculative_model: DRAFT in the trtllm-serve --config YAML",
    missing_draft_vocab_error="config has no draft_vocab_size: Eagle3ForCausalLM.__init__ "
                              "reads pretrained_config.draft_vocab_size as a plain attribute "
                              "(AttributeError); add \"draft_vocab_size\" to config.json",
)
TRTLLM_0_19 = earlier_range(
    TRTLLM_1_1, "0.19.0", "1.0.0",
    {"decoder_param": "release notes 1.1.0 (NVIDIA/TensorRT-LLM/docs/source/release-notes.md): "
     "\"Added multi-layer Eagle support\"; before it Eagle3DraftModel builds one midlayer whatever "
     "num_hidden_layers says (assumed from the note; no 0.19-1.0 copy was read)",
     "single_layer_param": "as decoder_param"},
    decoder_param="model.midlayer.", single_layer_param="",
)


def _read_as(profile: EngineProfile, how: str) -> EngineProfile:
    """earlier_range's evidence speaks of a tag survey, which this engine did not have."""
    return replace(profile, evidence=f"{how}; {NOT_PROBED}")


TRTLLM_1_2 = _read_as(TRTLLM_1_2, f"{MAIN} and a stored pre-#11010 copy of {SPEC}; each "
                                  "changed field dated by its PR (assumed for 1.2.0-1.3.0rc0)")
TRTLLM_1_1 = _read_as(TRTLLM_1_1, f"a stored pre-#10124 copy of {SPEC}; assumed for 1.1.0")
TRTLLM_0_19 = _read_as(TRTLLM_0_19, "release notes 0.19.0-1.1.0 and the stored older copies; "
                                    "no copy of 0.19-1.0 code was read")

# The MLA draft attention: Eagle3ForCausalLM.__init__ sets _use_mla from the config's
# kv_lora_rank (whatever architectures says) and Eagle3DecoderLayer builds Eagle3MLAttention,
# whose first layer's kv_a_proj_with_mqa takes 2H inputs and holds q_a_proj's rows too;
# load_weights hands the keys to DeepseekV3WeightLoader, which concatenates q_a_proj and
# kv_a_proj_with_mqa (q_a first) into that one parameter.
MLA_STACKED = ((".kv_a_proj_with_mqa", ".q_a_proj", 0),
               (".kv_a_proj_with_mqa", ".kv_a_proj_with_mqa", 1),
               (".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1))
MLA_CITE = (f"{SRC} {SPEC} Eagle3ForCausalLM.__init__ (_use_mla = config.kv_lora_rank), "
            "Eagle3MLAttention.__init__ (kv_a_proj_with_mqa: 2H -> q_lora_rank + kv_lora_rank + "
            "qk_rope_head_dim) and Eagle3ForCausalLM.load_weights (DeepseekV3WeightLoader) "
            f"[{MAIN}]; tensorrt_llm/_torch/models/modeling_deepseekv3.py weight loader: "
            "fused_a = cat([q_a_proj, kv_a_proj_with_mqa]) (stored copies)")


def _with_mla(profile: EngineProfile, read: str) -> EngineProfile:
    """The release's draft class for a config with kv_lora_rank: the same Eagle3ForCausalLM
    with MLA attention (architectures "*": chosen by the config, not by its name)."""
    mla = replace(profile, draft_attention="mla", stacked=MLA_STACKED,
                  cites={**profile.cites, "draft_attention": f"{MLA_CITE}; {read}",
                         "load_weights": f"{profile.cites['load_weights']}; MLA keys: "
                                         f"{MLA_CITE}"})
    return replace(profile, mla=mla)


TRTLLM_1_4 = _with_mla(TRTLLM_1_4, "read at main@00679c66")
TRTLLM_1_2 = _with_mla(TRTLLM_1_2, "read in the stored pre-#11010 copy, assumed for 1.2.0-1.3.0rc0")

PROFILES = (TRTLLM_0_19, TRTLLM_1_1, TRTLLM_1_2, TRTLLM_1_4)

# How the EAGLE-3 draft rotates q/k: Eagle3Attention hard-codes rope_gpt_neox (the rotate-half
# layout) whatever the target uses; the MLA draft (Eagle3MLAttention) uses yarn with
# is_neox=False (interleaved). Read at main@00679c66 and in the stored pre-#11010 copy.
DRAFT_ROPE = {
    "llama": {"field": None, "interleaved_if": None, "default": "neox"},
    "mla": {"field": None, "interleaved_if": None, "default": "interleaved"},
    "cite": f"{SRC} {SPEC} Eagle3Attention.__init__ (PositionEmbeddingType.rope_gpt_neox); "
            f"Eagle3MLAttention.__init__ (is_neox=False) [{MAIN}]",
}
