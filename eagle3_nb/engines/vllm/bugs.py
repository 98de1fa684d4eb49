"""Known vLLM bugs that hurt EAGLE-3 drafts, by the releases they affect (engines/bugs.py says
what each field means; the ranges come from the release survey, docs/engine-survey.md)."""

from __future__ import annotations

from eagle3_nb.engines.bugs import KnownBug
from eagle3_nb.findings import ERROR, WARNING

BUGS: tuple[KnownBug, ...] = (
    KnownBug("vllm#18909", "vllm", "0.9.0", "0.9.1", "pruned_vocab", ERROR,
             "d2t is loaded and then discarded (draft_id_to_target_id set to None after every "
             "load): draft ids are used as target ids, so almost no token is accepted",
             "vllm/model_executor/models/llama_eagle3.py load_weights [0.9.0] (PR #18488); "
             "fixed by PR #18909"),
    KnownBug("vllm#43482", "vllm", "0.22.0", "0.23.0", "mla_fc_norm", ERROR,
             "the MLA draft's fc_norm weights are loaded but never applied "
             "(combine_hidden_states skips them)",
             "deepseek_eagle3.py combine_hidden_states [0.22.0]; fixed in 0.23.0"),
    # The plan applies it from 0.29.0, where V2 runs every target unless a feature it lacks
    # forces V1 (0.33.0 config/vllm.py VllmConfig.use_v2_model_runner; 0.29.0 by the survey).
    KnownBug("survey:vllm-v2-runner-eagle_config-ids", "vllm", "0.22.0", None,
             "aux_ids_only_in_eagle_config", WARNING,
             "vLLM's model runner V2 (default for some targets from 0.22.0, dense targets from "
             "0.25.0, all targets from 0.29.0, the only runner from 0.34.0) never reads "
             "eagle_config.eagle_aux_hidden_state_layer_ids: the target captures the defaults "
             "[2, L//2, L-3]",
             "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
             "get_eagle3_aux_layers_from_config (top-level ids, dflash/dspark/target_layer_ids, "
             "eagle_config['layer_ids'] only; the same in 0.33.0 and 0.34.0; V1's "
             "gpu_model_runner._get_eagle3_aux_layers_from_config read the nested key until "
             "0.33.0); 0.34.0 vllm/platforms/interface.py Platform.validate_environ raises for "
             "VLLM_USE_V2_MODEL_RUNNER other than 1; no upstream issue found",
             effect="nested_aux_ids_ignored", effect_from="0.29.0",
             ways_out=(("0.22.0", "put the aux ids at the top level of a copy of the draft's "
                                  "config.json, as the hidden_states indices training used (vLLM "
                                  "adds no offset; eagle3-nb convert DRAFT NEW --engine "
                                  "vllm==VERSION writes them); or VLLM_USE_V2_MODEL_RUNNER=0, "
                                  "whose model runner V1 reads the nested ids as hidden_states "
                                  "indices"),
                       ("0.34.0", "put the aux ids at the top level of a copy of the draft's "
                                  "config.json, as the hidden_states indices training used (vLLM "
                                  "adds no offset; eagle3-nb convert DRAFT NEW --engine "
                                  "vllm==VERSION writes them); VLLM_USE_V2_MODEL_RUNNER=0 now "
                                  "stops startup (model runner V1 is removed)"))),
    KnownBug("survey:vllm-v2-runner-use_aux", "vllm", "0.22.0", "0.33.0", "use_aux_false",
             WARNING, "vLLM's model runner V2 ignores use_aux_hidden_state: false before 0.33.0 "
             "(V1 reads it from 0.12.0): under V2 the head gets 3 captured states",
             "vllm/v1/worker/gpu/ requires_aux_hidden_states [0.33.0]"),
    # vLLM infers a method from the draft path only when the speculative config names none
    KnownBug("survey:vllm-eagle3-path-as-eagle", "vllm", "0.8.5", "0.10.2", "always", WARNING,
             "a draft path containing 'eagle3-' is inferred as method 'eagle' (EAGLE-1): name "
             '"method": "eagle3" in --speculative-config explicitly',
             "vllm/config/speculative.py [<0.10.2]; changed by PR #24392",
             needs="launch_method_unset"),
)
