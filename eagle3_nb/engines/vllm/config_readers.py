"""vLLM's config readers: what its get_config and speculators reader refuse in a draft's
config.json, per release (EngineProfile.config_rules; profiles.py gives each range its rules).
The citations say which wheels were read and what ran on a real loader."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from eagle3_nb.engines.config_rules import ROPE_ERROR, ids_counted_by_len, path_guessed_model_type
from eagle3_nb.engines.profile import UNSET, ConfigRule

# A flat draft config without model_type: get_config passes the path to AutoConfig, whose
# transformers up to 5.1 guesses the class from a model type written in it (the releases up to
# 0.23.0 allow such a pin) and raises without one
PATH_GUESSED_MODEL_TYPE = path_guessed_model_type(
    json.loads((Path(__file__).parent / "data" / "autoconfig-model-types.json")
               .read_text(encoding="utf-8"))["model_types"],
    "vllm transformers_utils/config.py get_config / HFConfigParser.parse [0.8.5, 0.11.0, 0.19.1, "
    "0.23.0 wheels]: config_dict.get('model_type') is None, not in _CONFIG_REGISTRY, so "
    "AutoConfig.from_pretrained(model) (transformers configuration_auto.py [4.57.1]: `for "
    "pattern in sorted(CONFIG_MAPPING, key=len, reverse=True): if pattern in str(path)`, else "
    "ValueError); the types: transformers 4.57.1's (engines/vllm/data/autoconfig-model-types."
    "json, which says why the three vLLM registers are left out); run on 0.23.0 with "
    "transformers 4.57.1 (tools/engine_env.sh vllm 0.23.0): a path naming no type raises "
    "ValueError Unrecognized model, .../llama-eagle3 reads LlamaConfig and the draft loads, "
    ".../sam-draft reads SamConfig and the draft loads; tools/config_ablation.py --engines "
    "vllm==0.23.0 --keys: 214 variants, 0 disagreements (not counted as evidence: the pin also "
    "allows transformers 5.5.1+); 0.8.5, 0.11.0 and 0.19.1 read only, the releases between "
    "assumed the same")


# vllm/transformers_utils/configs/speculators/: how vLLM reads a speculators config, read in the
# 0.34.0 wheel and confirmed by tools/config_ablation.py on 0.34.0 (and 0.33.0)
SPEC_READER_CITE = ("transformers_utils/configs/speculators/base.py SpeculatorsConfig."
                "extract_transformers_pre_trained_config and algos.py update_eagle3 [0.34.0]")
_NO_LAYER_DEFAULT = ("{value}: vLLM builds the draft's config from transformer_layer_config as it "
                     "stands (SpeculatorsConfig(**transformer_layer_config), no LlamaConfig "
                     "defaults), so the draft class or the model config raises at startup "
                     "(AttributeError: 'SpeculatorsConfig' object has no attribute ..., or a "
                     "validation error for a null)")
SPECULATORS_READER = (
    ConfigRule("speculators", "speculators_config", frozenset({"absent", "null"}),
               "vLLM reads a config as speculators only when speculators_config is not null "
               "(transformers_utils/config.py get_config); without it AutoConfig raises "
               "'Unrecognized model ... Should have a `model_type` key'", cite=SPEC_READER_CITE),
    ConfigRule("speculators", "speculators_model_type",
               frozenset({"absent", "null", "wrong_type", "other_value"}),
               "vLLM builds an EAGLE-3 draft only for speculators_model_type 'eagle3'; an "
               "unknown type raises 'Expected one of: {{eagle3, peagle, dflash, ...}}' "
               "(SpeculatorsConfig.extract_transformers_pre_trained_config), 'peagle' is refused "
               "and 'dflash' builds another algorithm's draft", allowed=("eagle3",),
               cite=SPEC_READER_CITE),
    ConfigRule("speculators", "transformer_layer_config.model_type", frozenset({"null"}),
               "ValueError: Unsupported model_type None for Eagle3 speculator (update_eagle3 "
               "reads model_type with a 'llama' default only when the key is absent)",
               cite=SPEC_READER_CITE),
    ConfigRule("speculators", "transformer_layer_config.hidden_act",
               frozenset({"absent", "null", "other_value"}),
               "the Llama draft layer needs hidden_act 'silu' (absent: AttributeError: "
               "'SpeculatorsConfig' object has no attribute 'hidden_act'; anything else: "
               "ValueError: Unsupported activation: {value}. Only silu is supported for now.)",
               allowed=("silu",), cite=SPEC_READER_CITE + "; model_executor/models/llama.py LlamaMLP"),
    ConfigRule("speculators", "transformer_layer_config.num_hidden_layers",
               frozenset({"absent", "null"}), _NO_LAYER_DEFAULT, cite=SPEC_READER_CITE),
    ConfigRule("speculators", "transformer_layer_config.rms_norm_eps", frozenset({"absent"}),
               _NO_LAYER_DEFAULT, cite=SPEC_READER_CITE),
    *(ConfigRule("speculators", f"transformer_layer_config.{key}", frozenset({"rope_keys"}),
                 ROPE_ERROR, cite=SPEC_READER_CITE + "; SpeculatorsConfig.__init__ -> "
                 "PreTrainedConfig.__init__ validates the RoPE settings")
      for key in ("rope_scaling", "rope_parameters")),
)
# Before 0.24.0 (every wheel 0.10.1-0.23.0 read): the same SpeculatorsConfig(**layer config),
# no layer model_type check in update_eagle3 (the draft is Llama), fewer speculators types
_SPEC_OLD = ("vllm transformers_utils/config.py get_config, configs/speculators/base.py "
             "SpeculatorsConfig.from_pretrained (extract_transformers_pre_trained_config from "
             "0.16.0), algos.py update_eagle3, models/llama.py LlamaMLP, llama_eagle3.py [every "
             "wheel 0.10.1-0.23.0]; run on 0.23.0 (transformers 4.57.1)")
SPECULATORS_READER_OLD = (
    ConfigRule("speculators", "speculators_config", frozenset({"absent", "null"}),
               "vLLM reads the config through AutoConfig without it: 'Unrecognized model', or "
               "with a model type in the path (transformers <= 5.1) that class from the top-level "
               "keys, not this draft ('Model architectures [...] are not supported' on 0.23.0)",
               cite=_SPEC_OLD),
    ConfigRule("speculators", "speculators_model_type", SPECULATORS_READER[1].fails_when,
               "ValueError: Expected one of: {{eagle3, ...}} (eagle3 only before 0.20.0; dflash "
               "from 0.20.0 and peagle from 0.22.0 build other drafts)", allowed=("eagle3",),
               cite=_SPEC_OLD),
    *(replace(rule, cite=_SPEC_OLD) for rule in SPECULATORS_READER[3:6:2]),  # hidden_act, eps
)
# llama_eagle3.py LlamaModel.__init__: range(num_hidden_layers) from 0.11.1 (PR #26164)
SPECULATORS_LAYERS_OLD = (replace(SPECULATORS_READER[4], cite=_SPEC_OLD + " (0.11.1 on)"),)
# transformers 4 keeps the layer's model_type as written and speculative.py hf_config_override
# tests it with `in ("pangu_ultra_moe")`, a str (0.11.1 on); transformers 5 (allowed from
# 0.19.1) has SpeculatorsConfig.__init__ skip it ('speculators'), so the draft starts there
SPECULATORS_MODEL_TYPE_V4 = (ConfigRule(
    "speculators", "transformer_layer_config.model_type", frozenset({"null", "wrong_type"}),
    "TypeError: 'in <string>' requires string as left operand (hf_config_override)",
    types=("str",), cite=_SPEC_OLD + "; config/speculative.py hf_config_override and METADATA "
    "transformers<5,>=4.56.0 [0.11.1-0.19.0 wheels]"),)
# qwen3_eagle3.py Eagle3Qwen3ForCausalLM's LlamaModel.__init__ counts its aux states as
# num_aux_layers, else num_aux_hidden_states, else `len(aux_ids)` of the top-level ids (or
# eagle_config's) [0.33.0, 0.34.0]; a flat config reaches it by its architectures, a speculators
# one by transformer_layer_config.model_type qwen3 (update_eagle3 passes the top-level ids on)
QWEN3_COUNT_CITE = ("vllm model_executor/models/qwen3_eagle3.py LlamaModel.__init__ "
                "(num_aux_features = len(aux_ids)) [0.33.0, 0.34.0]; the speculators path: "
                + SPEC_READER_CITE)
_QWEN3_UNCOUNTED = (("num_aux_layers", (UNSET, None)), ("num_aux_hidden_states", (UNSET, None)))
QWEN3_IDS_COUNTED = (
    ids_counted_by_len("flat", (("architectures.0", ("Eagle3Qwen3ForCausalLM",
                                                     "Qwen3ForCausalLM")), *_QWEN3_UNCOUNTED),
                       QWEN3_COUNT_CITE),
)
QWEN3_SPECULATORS_IDS_COUNTED = (
    ids_counted_by_len("speculators", (("transformer_layer_config.model_type", ("qwen3",)),
                                       *((f"transformer_layer_config.{k}", v)
                                         for k, v in _QWEN3_UNCOUNTED)), QWEN3_COUNT_CITE),
)
# update_eagle3 [0.34.0]: the only top-level keys copied into the draft's config
SPECULATORS_KEYS_PASSED = frozenset({
    "draft_vocab_size", "target_hidden_size", "norm_before_residual", "norm_before_fc",
    "fc_norm", "norm_output", "eagle_aux_hidden_state_layer_ids"})
