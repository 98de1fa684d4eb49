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

_SRC = "NVIDIA/TensorRT-LLM tensorrt_llm/"
_SPEC = f"{_SRC}_torch/models/modeling_speculative.py"
_EAGLE3 = f"{_SRC}_torch/speculative/eagle3.py"
_ARGS = f"{_SRC}llmapi/llm_args.py"
_DRAFT_KEY = ("speculative_model (1.0 to 1.2 also read speculative_model_dir; 0.19 to 0.21 "
              "pytorch_weights_path)")
_FP8_MEANING = ("an FP8 KV cache (FP8 target) with a {dtype} draft in one-model mode: the "
                "attention kernel refuses the mixed types (NVIDIA/TensorRT-LLM#7842)")
_FP8_WAY_OUT = ("set eagle3_one_model: false in speculative_config (two-model mode), or serve a "
                "target without an FP8 KV cache")
_FP8_TEXT = r"KV cache data type e4m3 is not the same as input data type (?P<dtype>\w+)"
_FP8_SOURCE = ("NVIDIA/TensorRT-LLM#7842 (quoted there on 1.0.0rc6); "
               "cpp/tensorrt_llm/kernels/fmhaDispatcher.cpp:58 (TLLM_CHECK)")
_INSPECT = "eagle3-nb inspect DRAFT --engine trtllm==VERSION --launch CONFIG_YAML"
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
    # a Python exception carrying the C++ check's text, and the abort itself (std::terminate
    # prints "what():  [TensorRT-LLM][ERROR] Assertion failed: ..." with no Python traceback)
    Signature("trtllm-fp8-kv-bf16-draft", _FP8_TEXT, "ENGINE_BUG", ERROR, _FP8_MEANING,
              _FP8_WAY_OUT, _FP8_SOURCE, first="1.0.0rc0"),
    Signature("trtllm-fp8-kv-bf16-draft-abort", r"what\(\):.*" + _FP8_TEXT, "ENGINE_BUG",
              ERROR, _FP8_MEANING, _FP8_WAY_OUT, _FP8_SOURCE, first="1.0.0rc0", kind="line"),
    Signature("trtllm-static-tree-deprecated",
              r"eagle_choices/static tree feature is deprecated", "", INFO,
              "the launch config sets eagle_choices (a static draft tree), which this release "
              "deprecates",
              "the kit simulates a chain of max_draft_len; drop eagle_choices to serve one",
              f"{_ARGS} EagleDecodingConfig.validate_eagle_choices [main@00679c66]", kind="line"),
    Signature("trtllm-speculators-config",
              r"Unrecognized model in (?P<path>\S+?)\.? Should have a .model_type. key",
              "LOAD_ERROR", ERROR, "the draft's config.json has no model_type: a speculators-"
              "format config, which TensorRT-LLM reads through transformers' AutoConfig and "
              "cannot (it reads flat configs only)",
              "convert a copy to the flat form: eagle3-nb convert DRAFT NEW --to eagle",
              f"{_SRC}_torch/model_config.py load_pretrained_config (transformers "
              f"AutoConfig.from_pretrained), reached from {_SPEC} SpecDecOneEngineForCausalLM."
              "__init__ (ModelConfig.from_pretrained(speculative_model)) [main@00679c66 and "
              "stored older copies]; the profiles' dialect_error", first="0.19.0"),
    Signature("trtllm-unknown-architecture",
              r"Unknown architecture for AutoModelForCausalLM: (?P<arch>\S+)", "LOAD_ERROR",
              ERROR, "no class TensorRT-LLM registers answers to {arch}; for a draft, the "
              "lookup is the draft config's architectures[0] (with draft_vocab_size set, "
              "'EAGLE3' + the name without 'Eagle3': only EAGLE3LlamaForCausalLM and "
              "Eagle3DeepSeekV3ForCausalLM are registered)",
              "set architectures in a copy of the draft's config.json to a registered name "
              '(["LlamaForCausalLM"] for a Llama-layer draft, ["Eagle3DeepSeekV3ForCausalLM"] '
              "for an MLA one), and serve one-model (eagle3_one_model: true, the default)",
              f"{_SRC}_torch/models/modeling_auto.py AutoModelForCausalLM.from_config and "
              "_resolve_class (ValueError) [stored copy 01bffee1]; NVIDIA/TensorRT-LLM#15426 "
              "(quotes it for Eagle3DeepseekV2ForCausalLM, an open PR adding that alias)",
              first="0.19.0"),
    Signature("trtllm-draft-path-missing",
              r"Draft model must be provided for EAGLE|Path to EAGLE3 weights must be specified",
              "LAUNCH_SETTING", ERROR, "the launch config's speculative_config names no draft "
              "directory", f"give the draft's directory as {_DRAFT_KEY} in speculative_config",
              f"{_ARGS} EagleDecodingConfig.validate_speculative_model (recent stored copy) and "
              "validate() / BaseLlmArgs.validate_speculative_config (stored older copies, "
              f"assert); {_EAGLE3} Eagle3Config.__post_init__ (0.19-era stored copy)"),
    Signature("trtllm-max-draft-len-zero", r"max_draft_len must be > 0 for Eagle",
              "LAUNCH_SETTING", ERROR, "speculative_config has no max_draft_len (or 0): "
              "TensorRT-LLM refuses an EAGLE config that drafts nothing",
              "set max_draft_len (the chain length) in speculative_config",
              f"{_ARGS} EagleDecodingConfig.validate_eagle_config (ValueError in a pydantic "
              "model validator) [recent stored copy]"),
    Signature("trtllm-invalid-decoding-type", r"Invalid decoding type: (?P<decoding_type>\S+)",
              "LAUNCH_SETTING", ERROR, "this release does not know decoding_type "
              "{decoding_type}: its DecodingBaseConfig.from_dict maps only the names it lists "
              "(the name Eagle3 came with PR #10124; older releases run EAGLE-3 as Eagle)",
              "write decoding_type: Eagle in speculative_config for a release before "
              "Eagle3 was a name (eagle3-nb inspect DRAFT --launch CONFIG_YAML checks it)",
              f"{_ARGS} DecodingBaseConfig.from_dict (ValueError; stored older copies; the "
              "recent copies dispatch on a pydantic Literal instead)"),
    Signature("trtllm-weight-copy-shape",
              r"The size of tensor a \((?P<expected>\d+)\) must match the size of tensor b "
              r"\((?P<loaded>\d+)\) at non-singleton dimension (?P<dim>\d+)",
              "LOAD_ERROR", ERROR, "a checkpoint tensor {loaded} wide does not fit the "
              "parameter TensorRT-LLM built {expected} wide (dimension {dim}); for fc, "
              "TensorRT-LLM builds it for the target hidden size times the number of captured "
              "layers (3 unless eagle3_layers_to_capture lists another count)",
              f"{_INSPECT} names the tensor; for fc, list as many ids in "
              "eagle3_layers_to_capture as fc's input width divided by the target hidden size",
              f"{_SRC}_torch/modules/linear.py copy_weight (dst.data.copy_(src); torch's "
              "RuntimeError) [stored copy 00bbf71e]; fc built in "
              f"{_SPEC} Eagle3DraftModel.__init__ [main@00679c66]", first="0.19.0",
              frame=r"modules/linear\.py:\d+ (?:copy_weight|load_weights_vanilla_helper)"),
    Signature("trtllm-two-model-deprecated",
              r"Eagle3 2-model is deprecated and will be removed in release (?P<removed>\S+?)\.?$",
              "", INFO, "the launch config sets eagle3_one_model: false (two-model mode): the "
              "draft is resolved by its config's architectures and runs as its own engine; "
              "removed in {removed}",
              "nothing to do now; one-model mode (the default) builds Eagle3ForCausalLM "
              "whatever the draft's architectures says",
              f"{_ARGS} EagleDecodingConfig.validate_eagle_config (logger.warning) [recent stored "
              "copy]", kind="line"),
)


def server_args(text: str) -> dict | None:
    """TensorRT-LLM's log is not read for its resolved arguments (no such line was found in
    the source read): the launch config (--launch) gives them."""
    return None


DIALECT = LogDialect(markers=_MARKERS, versions=_VERSIONS, server_args=server_args,
                     signatures=SIGNATURES)
