"""Known TensorRT-LLM bugs that hurt EAGLE-3 drafts, by the releases they affect
(engines/bugs.py says what each field means). Ranges come from the upstream threads and PRs
against the release dates (releases.py), not from a tag survey: each entry says so. A range
starts at the release a thread itself ran (its "TensorRT-LLM version:" line), which may be a
release candidate: release_key orders 1.0.0rc6 before 1.0.0, so a range that started at 1.0.0
would miss the very release the bug was seen on. Read from source and upstream threads, not
checked with the engine's loader.

Not here, because the serving command carries them (engines/trtllm/launch.py checks them):
`--backend trt` (NVIDIA/TensorRT-LLM#10396: the TensorRT backend's Eagle model is EAGLE-1/2
only) and a decoding_type other than Eagle3."""

from __future__ import annotations

from eagle3_nb.engines.bugs import KnownBug
from eagle3_nb.findings import ERROR, WARNING

SPEC = "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_speculative.py"
ONE_MODEL = "set eagle3_one_model: false in speculative_config (two-model mode)"
# the release NVIDIA/TensorRT-LLM#7842 ran (its log's "TensorRT-LLM version:" line), a release
# candidate: the first release the FP8-KV and Mistral one-model entries are known to affect
SEEN_7842 = "1.0.0rc6"

BUGS: tuple[KnownBug, ...] = (
    KnownBug("trtllm#19036", "trtllm", "0.20.0", None, "target_llama4", ERROR,
             "the draft's Eagle3Attention rotates q/k with NeoX (rotate-half) pairs whatever the "
             "target uses, while Llama 4 and its EAGLE-3 drafts use interleaved (GPT-J) pairs: "
             "the drafter is effectively dead (acceptance length 1.012 in the upstream repro)",
             f"{SPEC} Eagle3Attention.__init__ (PositionEmbeddingType.rope_gpt_neox) "
             "[main@00679c66 and the stored older copies]; NVIDIA/TensorRT-LLM#19036 (open PR, "
             "2026-09-11: stamps target_model_type and selects rope_gptj for llama4/llama4_text); "
             "first release: 0.20.0, which added EAGLE-3 for Llama 4 (release notes), assumed"),
    KnownBug("trtllm#7842", "trtllm", SEEN_7842, None, "target_fp8", WARNING,
             "an FP8 target with a BF16/FP16 draft in one-model mode (eagle3_one_model: true, the "
             "default) fails at startup: \"KV cache data type e4m3 is not the same as input data "
             "type fp16\" (fmhaDispatcher.cpp)",
             "NVIDIA/TensorRT-LLM#7842 (open feature request, 2025-09-18; its log: "
             "\"TensorRT-LLM version: 1.0.0rc6\"): first release 1.0.0rc6, the one the thread "
             "ran; one-model releases before it (0.21.0 on) were not checked",
             ways_out=((SEEN_7842, ONE_MODEL),)),
    KnownBug("trtllm#8910", "trtllm", SEEN_7842, "1.2.0", "target_fp8", WARNING,
             "an FP8-KV target with a BF16 draft fails with chunked prefill "
             "(enable_chunked_prefill)",
             "NVIDIA/TensorRT-LLM#8910 (merged 2025-11-06, nvbugs 5498478; first attempt #7805, "
             "opened 2025-09-17: the draft layers' 16-bit attention must read the target's FP8 "
             "KV cache from the second context chunk on, the same kernel check #7842 quotes on "
             "1.0.0rc6); first release 1.0.0rc6 assumed from #7842 (no release is named in "
             "either PR); fixed-in 1.2.0 assumed (the first release cut after the merge; "
             "1.1.0's branch date is not known)",
             ways_out=((SEEN_7842, "serve without chunked prefill "
                                   "(enable_chunked_prefill: false)"),)),
    KnownBug("trtllm#6158", "trtllm", SEEN_7842, None, "target_mistral", WARNING,
             "a Mistral-family target serves EAGLE-3 in two-model mode only; one-model mode (the "
             "default) does not work",
             "NVIDIA/TensorRT-LLM#6158 (the reporter's comment of 2025-09-26 to the maintainer: "
             "Mistral works two-model, not one-model; the same reporter ran 1.0.0rc6 in #7842 "
             "eight days before, so first release 1.0.0rc6 assumed; earlier one-model releases "
             "were not checked). Still so in the newest stored copy of "
             "tensorrt_llm/_torch/models/modeling_mistral.py [002f3cc3]: MistralForCausalLM "
             "derives DecoderModelForCausalLM, not SpecDecOneEngineForCausalLM (whose __init__ "
             "builds the one-model draft; no stored copy makes it one, searched), though "
             "MistralDecoderLayer.forward calls maybe_capture_hidden_states (two-model capture "
             "works)",
             ways_out=((SEEN_7842, ONE_MODEL),)),
)
