"""vLLM's serving command: `vllm serve MODEL --speculative-config '{...}'` (or the
vllm.entrypoints.openai.api_server module). Flag names: vllm/engine/arg_utils.py EngineArgs."""

from __future__ import annotations

import json
from typing import Any

from eagle3_nb.engines.launch import LaunchSettings, as_int, read_flags
from eagle3_nb.engines.registry import LaunchDialect
from eagle3_nb.errors import ConfigError
from eagle3_nb.findings import ERROR, WARNING

BOOLEAN = ("--enforce-eager",)


def starts(joined: str) -> bool:
    return "vllm" in joined and (" serve" in joined or "entrypoints" in joined)


def speculative_config(flags: dict[str, Any]) -> dict[str, Any]:
    raw = flags.get("--speculative-config")
    if not isinstance(raw, str):
        return {}
    try:
        spec = json.loads(raw)
    except ValueError:
        raise ConfigError("--speculative-config is not JSON", "--launch",
                          "quote the JSON as the shell would") from None
    return spec if isinstance(spec, dict) else {}


def parse(words: list[str]) -> LaunchSettings:
    f = read_flags(words, BOOLEAN)
    spec = speculative_config(f)
    serve = words.index("serve") if "serve" in words else -1
    model = words[serve + 1] if 0 <= serve < len(words) - 1 and \
        not words[serve + 1].startswith("-") else f.get("--model")
    return LaunchSettings(
        "vllm", model, spec.get("model") or f.get("--speculative-model"), spec.get("method"),
        as_int(spec.get("num_speculative_tokens") or f.get("--num-speculative-tokens")), None,
        None, as_int(f.get("--tensor-parallel-size") or f.get("-tp")),
        not f.get("--enforce-eager"), f.get("--attention-backend"), None, f)


def checks(launch: LaunchSettings, cfg, p, ev: dict) -> list[tuple]:
    method = (launch.method or "").upper()
    if method == "EAGLE3":
        return []
    return [("LAUNCH_SETTING", ERROR if method else WARNING, "the speculative config's method is "
             f"{launch.method or 'not set (vLLM infers it from the draft path)'}: an EAGLE-3 "
             f"draft needs {p.capture_switch}", ev)]


def draft_tensor_parallel(launch: LaunchSettings) -> int | None:
    try:
        draft_tp = speculative_config(launch.flags).get("draft_tensor_parallel_size")
    except ConfigError:
        draft_tp = None
    return as_int(draft_tp) or launch.tensor_parallel


DIALECT = LaunchDialect(
    starts=starts, parse=parse, checks=checks, draft_tensor_parallel=draft_tensor_parallel,
    tensor_parallel_fix='add "draft_tensor_parallel_size": 1 to --speculative-config',
    tensor_parallel_cite="vllm vllm/config/speculative.py "
                         "SpeculativeConfig._verify_and_get_draft_tp (draft TP: the target's, or "
                         "1), vllm/config/model.py verify_with_parallel_config (heads % tp), "
                         "model_executor/models/llama.py LlamaAttention.__init__ and "
                         "model_executor/layers/linear.py MergedColumnParallelLinear, read in "
                         "0.33.0",
    example="vllm serve MODEL --speculative-config '{\"method\": \"eagle3\", ...}'",
    setting_names={"num_steps": "num_speculative_tokens", "method": '"method"'},
)
