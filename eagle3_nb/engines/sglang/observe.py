"""Measuring a running SGLang server: greedy `POST /generate` per prompt, each response's
`meta_info` read in the release's own field names, then its server info for its arguments and
lifetime accept length. eagle3_nb.observed.client makes the HTTP client and checks the prompts."""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.sglang.metrics import (parse_sglang_meta_info, parse_sglang_server_info,
                                              summarize_sglang_requests)
from eagle3_nb.errors import ServingError
from eagle3_nb.observation import MetricsFormatError, ObservedMetrics, as_int, as_text

PORT = 30000


def sglang_server_info(client: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``GET /server_info``, else ``/get_server_info``. Returns (JSON, path) or (None, None) when
    neither endpoint exists. Both routes answer in every release read (0.5.7-0.5.23,
    python/sglang/srt/entrypoints/http_server.py); /get_server_info is the deprecated alias that
    logs a warning on the server, so it is asked only when /server_info is absent."""
    for path in ("/server_info", "/get_server_info"):
        resp = client.request("GET", path, ok_404=True)
        if resp.status == 404:
            continue
        data = resp.json()
        if not isinstance(data, dict):
            raise ServingError(f"{path} answered {type(data).__name__}, expected an object",
                               resp.url)
        return data, path
    return None, None


def measure(client: Any, plist: list[str | list[int]], max_new_tokens: int, *,
            version: str | None = None, sampling_params: dict[str, Any] | None = None,
            server_info: bool = True) -> tuple[ObservedMetrics, dict[str, Any] | None]:
    """Send each prompt to SGLang's native ``/generate`` (greedy) and pool the ``meta_info``
    figures. A prompt may be a string (``text``) or a list of token ids (``input_ids``).

    Returns the figures, with ``per_request`` filled (one RequestSpecStats dict per prompt, plus
    its ``prompt_index``), and the server's own arguments (None without server info).
    """
    params = {"temperature": 0, "max_new_tokens": max_new_tokens, **(sampling_params or {})}
    stats = []
    for i, prompt in enumerate(plist):
        body = {"sampling_params": params}
        body["input_ids" if isinstance(prompt, list) else "text"] = prompt
        data = client.post_json("/generate", body)
        where = f"{client.url('/generate')} (prompt {i})"
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict) or "meta_info" not in data:
            keys = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
            raise ServingError(f"answer has no meta_info ({keys}): not an SGLang /generate "
                               "response", where, "is this an SGLang server?")
        try:
            stats.append(parse_sglang_meta_info(data, version))
        except MetricsFormatError as e:
            raise ServingError(e.what, where, e.todo) from None
    obs = summarize_sglang_requests(stats, source=f"SGLang /generate at {client.base_url}")
    for i, rec in enumerate(obs.per_request or []):
        rec["prompt_index"] = i
    obs.details["max_new_tokens"] = max_new_tokens
    if not server_info:
        return obs, None
    info, path = sglang_server_info(client)
    if info is None:
        obs.notes.append("neither /get_server_info nor /server_info exists on this server")
        return obs, None
    obs.details["server_info_path"] = path
    try:
        srv = parse_sglang_server_info(info, f"SGLang {path}")
        obs.details["server"] = srv.details.get("server", {})
        obs.details["server_avg_spec_accept_length"] = srv.mean_accept_length
        obs.notes.append(f"server lifetime avg_spec_accept_length {srv.mean_accept_length:.3f} "
                         "(all requests since start) is in details; the headline figures are "
                         "your requests only")
        obs.notes.extend(n for n in srv.notes if "EAGLE3" in n)
        if srv.version_detected:
            obs.details["server_version"] = srv.version_detected
    except MetricsFormatError as e:
        obs.notes.append(f"server info not usable: {e.what}")
    return obs, server_args(info)


def server_args(info: dict[str, Any]) -> dict[str, Any]:
    """The speculative settings of an SGLang server-info answer. Its top level is the server's
    arguments, flat: dataclasses.asdict(server_args) in 0.5.7-0.5.16 (http_server.py
    server_info), server_args.resolved_dict() plus launch_command in 0.5.23 (utils/common.py
    build_server_info); the field names are server_args.py's (from 0.5.19
    arg_groups/fields/{spec,exec_,parallel}.py)."""
    return {"engine": "sglang", "version": as_text(info.get("version")),
            "model": as_text(info.get("model_path")),
            "draft": as_text(info.get("speculative_draft_model_path")),
            "method": as_text(info.get("speculative_algorithm")),
            "num_steps": as_int(info.get("speculative_num_steps")),
            "topk": as_int(info.get("speculative_eagle_topk")),
            "num_draft_tokens": as_int(info.get("speculative_num_draft_tokens")),
            "tensor_parallel": as_int(info.get("tp_size")),
            "cuda_graphs": not info.get("disable_cuda_graph", False),
            "attention_backend": as_text(info.get("attention_backend")),
            "draft_attention_backend": as_text(info.get("speculative_draft_attention_backend")),
            "launch_command": as_text(info.get("launch_command")),
            "source": "SGLang server info"}

# `eagle3-nb observe` options this engine's measure takes, and what each is
OPTIONS = {"version": "the release (its meta_info field names); detected if absent"}
