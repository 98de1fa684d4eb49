"""TensorRT-LLM's server log: how to tell it, its release, and the texts it prints when an
EAGLE-3 draft goes wrong. Each text was read in the engine's source (or an upstream thread that
quotes it), not produced by running the engine: its wheels are not installable here."""

from __future__ import annotations

import re

from eagle3_nb.engines.registry import LogDialect, Signature
from eagle3_nb.findings import ERROR, INFO, WARNING

_MARKERS = ("[TensorRT-LLM]", "[TRT-LLM]", "tensorrt_llm/", "trtllm-serve")
# tensorrt_llm/__init__.py logs "[TensorRT-LLM] TensorRT-LLM version: X" at import (quoted in
# NVIDIA/TensorRT-LLM#7842's log: "TensorRT-LLM version: 1.0.0rc6")
_VERSIONS = (re.compile(r"TensorRT-LLM version:\s*v?(\d+\.\d+\.\d+(?:rc\d+|\.post\d+)?)"),)

_SPEC = "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_speculative.py"
_EAGLE3 = "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/speculative/eagle3.py"
SIGNATURES = (
    Signature("trtllm-default-capture-too-few-layers",
              r"Not enough hidden layers for default EAGLE3 capture", "LOAD_ERROR", ERROR,
              "the target has 5 layers or fewer and the launch config gives no "
              "eagle3_layers_to_capture: the default (1, L//2-1, L-4) cannot be formed",
              "give speculative_config.eagle3_layers_to_capture in the --config YAML (TensorRT-LLM "
              "ids: the output of layer i, hidden_states[i + 1])",
              f"{_EAGLE3} Eagle3SpecMetadata.__post_init__ / Eagle3OneModelSpecMetadata."
              "__post_init__ (ValueError) [main@00679c66]", first="0.19.0"),
    Signature("trtllm-draft-vocab-defaulted",
              r"Missing 'draft_vocab_size' in pretrained config; defaulting to 'vocab_size'", "",
              WARNING, "the draft's config.json has no draft_vocab_size: TensorRT-LLM builds a "
              "full-vocabulary head and no d2t",
              "add draft_vocab_size to a copy of config.json when the draft's head is pruned",
              f"{_SPEC} _ensure_draft_vocab_size (logger.warning, PR #10124) [main@00679c66]",
              first="1.2.0", kind="line"),
    Signature("trtllm-fp8-kv-bf16-draft",
              r"KV cache data type e4m3 is not the same as input data type (?P<dtype>\w+)",
              "ENGINE_BUG", ERROR, "an FP8 KV cache (FP8 target) with a {dtype} draft in "
              "one-model mode: the attention kernel refuses the mixed types "
              "(NVIDIA/TensorRT-LLM#7842)",
              "set eagle3_one_model: false in speculative_config (two-model mode), or serve a "
              "target without an FP8 KV cache",
              "NVIDIA/TensorRT-LLM#7842 (the log quoted there, 1.0.0rc6; "
              "cpp/tensorrt_llm/kernels/fmhaDispatcher.cpp)", first="1.0.0"),
    Signature("trtllm-static-tree-deprecated",
              r"eagle_choices/static tree feature is deprecated", "", INFO,
              "the launch config sets eagle_choices (a static draft tree), which this release "
              "deprecates",
              "the kit simulates a chain of max_draft_len; drop eagle_choices to serve one",
              "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py "
              "EagleDecodingConfig.validate_eagle_choices [main@00679c66]", kind="line"),
)


def server_args(text: str) -> dict | None:
    """TensorRT-LLM's log is not read for its resolved arguments (no such line was found in
    the source read): the launch config (--launch) gives them."""
    return None


DIALECT = LogDialect(markers=_MARKERS, versions=_VERSIONS, server_args=server_args,
                     signatures=SIGNATURES)
