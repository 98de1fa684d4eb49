"""Measuring a running vLLM server: `/metrics` before and after greedy OpenAI
`/v1/completions` requests, the figures from the difference of its spec-decode counters, and its
arguments from the dev-mode `/server_info`. eagle3_nb.observed.client makes the HTTP client."""

from __future__ import annotations

import time
from typing import Any

from eagle3_nb.engines.vllm.metrics import VLLMSpecCounters, vllm_spec_counters
from eagle3_nb.errors import ServingError
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, as_int, as_text,
                                   parse_prometheus)

PORT = 8000


def _vllm_model(client: Any) -> str:
    data = client.get_json("/v1/models")
    models = [m.get("id") for m in (data.get("data") or [])] if isinstance(data, dict) else []
    models = [m for m in models if isinstance(m, str)]
    if len(models) == 1:
        return models[0]
    if not models:
        raise ServingError("/v1/models lists no model", client.url("/v1/models"),
                           "pass model= explicitly")
    raise ServingError(f"the server serves several models {models}", client.url("/v1/models"),
                       "pass model= to choose one")


def _scrape(client: Any, model: str | None) -> VLLMSpecCounters | None:
    resp = client.request("GET", "/metrics")
    try:
        samples = parse_prometheus(resp.text())
    except MetricsFormatError as e:
        raise ServingError(f"/metrics is not Prometheus text: {e.one_line()}", resp.url) from None
    if not any(s.name.startswith("vllm:spec_decode_") for s in samples):
        if not any(s.name.startswith("vllm:") for s in samples):
            raise ServingError("/metrics has no vllm:* metric: not a vLLM server (or metrics "
                               "are disabled)", resp.url)
        return None
    try:
        return vllm_spec_counters(samples, model)
    except MetricsFormatError as e:
        raise ServingError(e.what, resp.url, e.todo) from None


def measure(client: Any, plist: list[str | list[int]], max_tokens: int, *,
            model: str | None = None, settle_polls: int = 3, settle_s: float = 0.5,
            num_speculative_tokens: int | None = None
            ) -> tuple[ObservedMetrics, dict[str, Any] | None]:
    """Scrape ``/metrics``, send each prompt to ``/v1/completions`` (temperature 0), scrape again,
    and compute the figures from the counter difference. If the counters have not moved yet the
    scrape is retried ``settle_polls`` times, ``settle_s`` apart; still nothing raises (no draft
    counted: speculative decoding looks off). ``model`` defaults to the only model of
    ``/v1/models``."""
    if model is None:
        model = _vllm_model(client)
    args = server_args(client)
    before = _scrape(client, model)
    completion_tokens = 0
    for i, prompt in enumerate(plist):
        data = client.post_json("/v1/completions", {"model": model, "prompt": prompt,
                                                    "max_tokens": max_tokens, "temperature": 0})
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise ServingError("answer has no choices: not an OpenAI completions response",
                               f"{client.url('/v1/completions')} (prompt {i})")
        usage = data.get("usage") or {}
        if isinstance(usage.get("completion_tokens"), int):
            completion_tokens += usage["completion_tokens"]
    after = None
    diff = None
    for poll in range(max(0, int(settle_polls)) + 1):
        if poll:
            time.sleep(settle_s)
        after = _scrape(client, model)
        if after is None:
            continue
        base = before or VLLMSpecCounters(0.0 if after.num_drafts is not None else None, 0.0, 0.0,
                                          [0.0] * len(after.accepted_per_pos or []),
                                          after.model_name, after.legacy_v0)
        try:
            diff = after.minus(base)
        except MetricsFormatError as e:
            raise ServingError(e.what, client.url("/metrics"), e.todo) from None
        if diff.num_draft_tokens > 0:
            break
    murl = client.url("/metrics")
    if after is None:
        raise ServingError("/metrics has no vllm:spec_decode_* counter after the requests: "
                           "speculative decoding looks off", murl,
                           "start vLLM with --speculative-config")
    assert diff is not None
    if diff.num_draft_tokens <= 0:
        raise ServingError(f"no draft token counted for these {len(plist)} request(s): "
                           "speculative decoding looks off", murl,
                           "check --speculative-config and that the draft loaded")
    try:
        obs = diff.to_observed(f"vLLM /v1/completions + /metrics difference at {client.base_url}",
                               num_speculative_tokens)
    except MetricsFormatError as e:
        raise ServingError(e.what, murl, e.todo) from None
    obs.n_requests = len(plist)
    obs.details.update({"model": model, "max_tokens": max_tokens,
                        "completion_tokens": completion_tokens})
    if before is None:
        obs.notes.append("no spec counters before the requests; counted from zero")
    obs.notes.append("counts are the /metrics difference around these requests; other clients "
                     "using the server at the same time would be counted too")
    if args is None:
        obs.notes.append("the server does not show its arguments (vLLM: only with "
                         "VLLM_SERVER_DEV_MODE=1); pass the serving command to inspect --launch")
    return obs, args


VLLM_SERVER_INFO = "/server_info?config_format=json"


def server_args(client: Any) -> dict[str, Any] | None:
    """vLLM answers /server_info only with VLLM_SERVER_DEV_MODE=1 (0.11.0
    entrypoints/openai/api_server.py show_server_info; from 0.18
    entrypoints/serve/dev/server_info/api_router.py): {"vllm_config": VllmConfig dumped as JSON
    with config_format=json, "vllm_env", "system_env"}. Otherwise a 404: None."""
    try:
        resp = client.request("GET", VLLM_SERVER_INFO, ok_404=True)
        data = None if resp.status == 404 else resp.json()
    except ServingError:       # optional: the measurement itself says what is wrong
        return None
    config = data.get("vllm_config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        return None
    spec = _section(config, "speculative_config")
    model = _section(config, "model_config")
    return {"engine": "vllm", "version": None, "model": as_text(model.get("model")),
            "draft": as_text(spec.get("model")), "method": as_text(spec.get("method")),
            "num_steps": as_int(spec.get("num_speculative_tokens")), "topk": None,
            "num_draft_tokens": None,
            "tensor_parallel": as_int(_section(config, "parallel_config")
                                      .get("tensor_parallel_size")),
            "cuda_graphs": not model.get("enforce_eager", False),
            "attention_backend": as_text(spec.get("attention_backend")),
            "draft_attention_backend": None, "max_model_len": as_int(model.get("max_model_len")),
            "source": f"vLLM {VLLM_SERVER_INFO}"}


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}

# `eagle3-nb observe` options this engine's measure takes, and what each is
OPTIONS = {"model": "the served model (default: the only one)"}
