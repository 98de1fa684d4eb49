"""TensorRT-LLM serving settings a person checks by hand, filled in from an inspection's JSON
form; each row cites the upstream file and function it comes from at the commit named by SRC
(read from source, not checked with the engine: its wheels are not installable here)."""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.advice import aux_text, loads_as_is, row

SRC = "NVIDIA/TensorRT-LLM main@00679c66 tensorrt_llm/"


def flag_rows(data: dict[str, Any], profiles: list[dict]) -> list[dict[str, str]]:
    ckpt = data.get("checkpoint")
    return [
        row("TensorRT-LLM", "trtllm-serve TARGET --config x.yaml",
            f"speculative_config: decoding_type Eagle3, speculative_model {ckpt}, "
            f"max_draft_len K (a chain of K); loads as is on: {loads_as_is(profiles)}",
            SRC + "llmapi/llm_args.py EagleDecodingConfig; docs/engine-facts-trtllm.md"),
        row("TensorRT-LLM", "speculative_config.eagle3_layers_to_capture",
            "the draft's own aux ids are never read: give them here, as the hidden_states "
            "indices training used minus 1 (id i is the output of layer i); without them "
            "(1, L//2-1, L-4). " + aux_text(profiles),
            SRC + "_torch/speculative/eagle3.py Eagle3SpecMetadata.__post_init__ and "
            "maybe_capture_hidden_states"),
        row("TensorRT-LLM", "--backend pytorch (the default from 1.0)",
            "the TensorRT backend's Eagle model is EAGLE-1/2 only (NVIDIA/TensorRT-LLM#10396)",
            SRC + "models/eagle/model.py EagleForCausalLM"),
    ]
