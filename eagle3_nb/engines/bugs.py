"""Known engine bugs that hurt EAGLE-3 drafts, by the releases they affect, as data.

Each bug names the first affected release and the first fixed one (None: not fixed in any
surveyed release), the condition under which a draft is affected (a name the planner evaluates:
planner.BUG_CONDITIONS), the symptom, and the upstream issue or PR. Behaviour that a profile
field already models (a flag not read, ids not read, fc width) is not repeated here. Ranges come
from the release survey (docs/engine-survey.md): the code at the tags on both sides."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_nb.engines.profile import EngineProfile, release_key
from eagle3_nb.findings import ERROR, WARNING


@dataclass(frozen=True)
class KnownBug:
    id: str
    engine: str
    first: str            # first affected release
    fixed: str | None     # first release with the fix; None: open in every surveyed release
    condition: str        # planner.BUG_CONDITIONS key
    severity: str
    symptom: str
    cite: str


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
    KnownBug("sglang#8163", "sglang", "0.4.7", "0.4.9.post3", "target_hidden_differs", ERROR,
             "the draft-extend CUDA-graph buffer is sized 3 x the draft's hidden_size, not the "
             "target's: drafts with target_hidden_size != hidden_size fail under CUDA graphs",
             "python/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py; fixed by "
             "PR #8163 (issue #7011)"),
    KnownBug("sglang#10106", "sglang", "0.4.10.post2", "0.5.4.post2", "draft_vocab_not_64",
             ERROR, "the draft-extend CUDA graph's logits buffer does not match the draft "
             "LogitsProcessor's vocab for draft_vocab_size not a multiple of 64: startup or "
             "first-request failure with CUDA graphs (run with --disable-cuda-graph to confirm)",
             "eagle_draft_extend_cuda_graph_runner.py next_token_logits_buffer; fix PR #12002 "
             "(the link to issue #10106 is inferred)"),
    KnownBug("sglang#29464", "sglang", "0.5.12", "0.5.15", "aux_count_not_3", ERROR,
             "the draft-extend CUDA-graph buffer takes its aux count from the TARGET config (3 x "
             "Ht): a draft with another aux count has its copy skipped and the graph reruns on "
             "stale hidden states, without an error (inferred from the code)",
             "eagle_info.py EagleDraftExtendInput.hidden_size_for (PR #24663); fixed by PR #29464"),
    KnownBug("sglang#13904", "sglang", "0.5.5.post3", "0.5.6", "multimodal_target", ERROR,
             "vision-language targets (Qwen2.5-VL) no longer pass aux hidden states to the "
             "logits processor: the draft gets the final-norm state",
             "python/sglang/srt/models/qwen2_5_vl.py forward (PR #13075); fixed by PR #13904"),
    KnownBug("sglang#13297", "sglang", "0.5.5.post1", "0.5.5.post3", "target_minimax_m2", ERROR,
             "MiniMax-M2 targets gained set_eagle3_layers_to_capture but not get_embed_and_head, "
             "which the EAGLE worker calls: AttributeError at startup",
             "python/sglang/srt/models/minimax_m2.py (PR #12798); fixed by PR #13297"),
    KnownBug("sglang#6985-d2t", "sglang", "0.4.4.post2", "0.4.9", "no_d2t", ERROR,
             "a draft without d2t fails at startup: hot_token_id is never set and "
             "get_hot_token_id() is called unconditionally (AttributeError)",
             "llama_eagle3.py load_weights [<0.4.9]; fixed by PR #6985"),
)


def affects(bug: KnownBug, version: str) -> bool:
    v = release_key(version)
    return release_key(bug.first) <= v and (bug.fixed is None or v < release_key(bug.fixed))


def bugs_in(profile: EngineProfile) -> list[KnownBug]:
    """The known bugs that affect any release of the profile's range."""
    first, last = (release_key(v) for v in profile.covers)
    return [b for b in BUGS if b.engine == profile.name and release_key(b.first) <= last
            and (b.fixed is None or release_key(b.fixed) > first)]
