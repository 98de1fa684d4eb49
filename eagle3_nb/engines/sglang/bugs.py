"""Known SGLang bugs that hurt EAGLE-3 drafts, by the releases they affect (engines/bugs.py says
what each field means; the ranges come from the release survey, docs/engine-survey.md)."""

from __future__ import annotations

from eagle3_nb.engines.bugs import KnownBug
from eagle3_nb.findings import ERROR, WARNING

BUGS: tuple[KnownBug, ...] = (
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
