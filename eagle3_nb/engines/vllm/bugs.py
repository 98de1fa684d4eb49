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
    KnownBug("survey:vllm-v2-runner-eagle_config-ids", "vllm", "0.22.0", None,
             "aux_ids_only_in_eagle_config", WARNING,
             "vLLM's model runner V2 (default for some targets from 0.22.0, dense targets from "
             "0.25.0, all targets from 0.29.0) never reads "
             "eagle_config.eagle_aux_hidden_state_layer_ids: it captures the defaults "
             "[2, L//2, L-3]. Put the ids at the top level, or set VLLM_USE_V2_MODEL_RUNNER=0",
             "vllm/v1/worker/gpu/ (model runner V2) aux layer lookup [0.22.0-0.33.0]; inferred "
             "from the code, no upstream issue found"),
    KnownBug("survey:vllm-v2-runner-use_aux", "vllm", "0.22.0", "0.33.0", "use_aux_false",
             WARNING, "vLLM's model runner V2 ignores use_aux_hidden_state: false before 0.33.0 "
             "(V1 reads it from 0.12.0): under V2 the head gets 3 captured states",
             "vllm/v1/worker/gpu/ requires_aux_hidden_states [0.33.0]"),
    KnownBug("survey:vllm-eagle3-path-as-eagle", "vllm", "0.8.5", "0.10.2", "always", WARNING,
             "a draft path containing 'eagle3-' is inferred as method 'eagle' (EAGLE-1): name "
             '"method": "eagle3" in --speculative-config explicitly',
             "vllm/config/speculative.py [<0.10.2]; changed by PR #24392"),
)
