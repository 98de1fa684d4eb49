"""vLLM's serving command: `vllm serve MODEL --speculative-config '{...}'` (or the
vllm.entrypoints.openai.api_server module). Flag names: vllm/engine/arg_utils.py EngineArgs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
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
    launch = LaunchSettings(
        "vllm", model, spec.get("model") or f.get("--speculative-model"), spec.get("method"),
        _spec_count(spec, f), None,
        None, _tensor_parallel(f),
        not f.get("--enforce-eager"), f.get("--attention-backend"), None, f)
    if not launch.draft and model:
        _speculators_served(launch, model)
    return launch


def _spec_count(spec: dict[str, Any], flags: dict[str, Any]) -> int | None:
    if spec.get("num_speculative_tokens") is not None:
        return as_int(spec["num_speculative_tokens"], "--speculative-config num_speculative_tokens")
    return as_int(flags.get("--num-speculative-tokens"), "--num-speculative-tokens")


def _tensor_parallel(flags: dict[str, Any]) -> int | None:
    name = "--tensor-parallel-size" if "--tensor-parallel-size" in flags else "-tp"
    return as_int(flags.get(name), name)


# vllm/transformers_utils/config.py maybe_override_with_speculators [0.10.1 on; read in 0.33.0
# and 0.34.0]: a served model whose config.json has speculators_config is the draft; vLLM serves
# its speculators_config.verifier.name_or_path, with the method of speculators_model_type and
# num_speculative_tokens of proposal_methods[0].speculative_tokens (speculators/base.py
# build_vllm_speculative_config). Whether a local verifier path raises is the profile's
# refuses_local_verifier (from 0.33.0, cited there).
SPECULATORS_SERVED = "vllm/transformers_utils/config.py maybe_override_with_speculators"


def _speculators_served(launch: LaunchSettings, model: str) -> None:
    config = Path(model) / "config.json"
    try:
        raw = json.loads(config.read_text(encoding="utf-8")) if config.is_file() and \
            config.stat().st_size < (1 << 20) else None
    except (OSError, ValueError):
        raw = None
    if raw is None:
        launch.implied_draft = (f"{model} is a speculators checkpoint (vLLM then serves its "
                                "verifier and drafts with it; not a local directory, so not "
                                "checked)")
        return
    spec = raw.get("speculators_config") if isinstance(raw, dict) else None
    if not isinstance(spec, dict):
        return
    methods = spec.get("proposal_methods") or [{}]
    verifier = (spec.get("verifier") or {}).get("name_or_path")
    launch.draft, launch.model = model, verifier if isinstance(verifier, str) else model
    launch.method = launch.method or raw.get("speculators_model_type")
    launch.num_steps = launch.num_steps or as_int(methods[0].get("speculative_tokens"))
    launch.flags["speculators_checkpoint"] = model


def checks(launch: LaunchSettings, cfg, p, ev: dict, num_layers=None) -> list[tuple]:
    out = _speculators_checks(launch, p, ev) if launch.flags.get("speculators_checkpoint") else []
    method = (launch.method or "").upper()
    if method == "EAGLE3" or not launch.draft:
        return out
    return out + [("LAUNCH_SETTING", ERROR if method else WARNING, "the speculative config's "
                   f"method is {launch.method or 'not set (vLLM infers it from the draft path)'}"
                   f": an EAGLE-3 draft needs {p.capture_switch}", ev)]


def _speculators_checks(launch: LaunchSettings, p, ev: dict) -> list[tuple]:
    ev = {**ev, "cite": SPECULATORS_SERVED}
    if "speculators" not in p.dialects:
        return [("LAUNCH_SETTING", ERROR, f"the served model {launch.draft} is a speculators "
                 "checkpoint, which this release does not read as one (from 0.10.1): it is "
                 "loaded as a target model", ev)]
    verifier = launch.model or ""
    local = verifier.startswith((".", "/", "~")) or Path(verifier).exists()
    if local and p.refuses_local_verifier:
        return [("LAUNCH_SETTING", ERROR, f"the speculators checkpoint names a local verifier "
                 f"({verifier}): this release refuses it (\"Speculators verifier must name a "
                 "remote model repository\"); serve --model TARGET with --speculative-config",
                 {**ev, "cite": p.cites.get("refuses_local_verifier", SPECULATORS_SERVED)})]
    return []


def draft_tensor_parallel(launch: LaunchSettings) -> int | None:
    try:
        draft_tp = speculative_config(launch.flags).get("draft_tensor_parallel_size")
    except ConfigError:
        draft_tp = None
    return as_int(draft_tp) or launch.tensor_parallel


def serve(target: str, draft: str) -> str:
    spec = {"method": "eagle3", "model": draft, "num_speculative_tokens": 3}
    return f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(spec))}"


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
    serve=serve,
)
