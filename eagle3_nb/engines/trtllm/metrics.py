"""TensorRT-LLM's acceptance figures, read into ObservedMetrics (eagle3_nb/observation.py).

Two JSON forms, read from source and not checked against a running engine (its wheels are not
installable here):

* the iteration stats trtllm-serve returns at /metrics (and `LLM.get_stats()`): a list of
  per-iteration objects whose `specDecodingStats` holds numDraftTokens, numAcceptedTokens,
  numRequestsWithDraftTokens, acceptanceLength (tokens per step over the requests that drafted),
  iterLatencyMS and draftOverhead (NVIDIA/TensorRT-LLM cpp/include/tensorrt_llm/executor/types.h
  SpecDecodingStats, and its Python bindings' field names, read at main@00679c66);
* the per-request performance metrics (a `/perf_metrics` list or the JSON Lines its writer
  keeps): each record's perf_metrics.speculative_decoding holds acceptance_rate,
  total_accepted_draft_tokens and total_draft_tokens, present only when the request drafted
  (tensorrt_llm/serve/ build_request_metrics_record, _SPEC_FIELDS, read at main@00679c66). In
  the PyTorch flow before PR #17082 (2026-07-30) these per-request counts read zero: the reader
  says so and does not report 0 as a figure.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.registry import Reader
from eagle3_nb.observation import MetricsFormatError, ObservedMetrics, count, finite

STATS = ("NVIDIA/TensorRT-LLM cpp/include/tensorrt_llm/executor/types.h SpecDecodingStats "
         "[main@00679c66]")
PERF = "NVIDIA/TensorRT-LLM serve build_request_metrics_record _SPEC_FIELDS [main@00679c66]"
NOT_PROBED = "field names read from TensorRT-LLM's source, not checked against a running engine"
ZEROED = ("per-request speculative counts read zero in the PyTorch flow before "
          "NVIDIA/TensorRT-LLM#17082 (2026-07-30): use the /metrics iteration stats instead")


def _items(data: Any) -> list:
    return data if isinstance(data, list) else [data]


def is_iteration_stats(data: Any) -> bool:
    return any(isinstance(i, dict) and "specDecodingStats" in i for i in _items(data)[:64])


def is_perf_metrics(data: Any) -> bool:
    return any(isinstance(i, dict) and isinstance(i.get("perf_metrics"), dict)
               for i in _items(data)[:64])


def read_iteration_stats(data: Any, source: str, **options: Any) -> ObservedMetrics:
    drafted = accepted = steps = iterations = 0
    reported = 0.0
    for n, item in enumerate(_items(data)):
        spec = item.get("specDecodingStats") if isinstance(item, dict) else None
        if not isinstance(spec, dict):
            continue
        where = f"{source} [{n}].specDecodingStats"
        d = count(spec.get("numDraftTokens", 0), "numDraftTokens", where)
        if d == 0:
            continue
        a = count(spec.get("numAcceptedTokens", 0), "numAcceptedTokens", where)
        r = count(spec.get("numRequestsWithDraftTokens", 0), "numRequestsWithDraftTokens", where)
        if a > d or r == 0:
            raise MetricsFormatError(f"numAcceptedTokens {a} of numDraftTokens {d} with "
                                     f"{r} drafting requests: not what the engine counts", where)
        drafted, accepted, steps, iterations = drafted + d, accepted + a, steps + r, iterations + 1
        reported += finite(spec.get("acceptanceLength", 0), "acceptanceLength", where) * r
    if steps == 0:
        raise MetricsFormatError("no iteration drafted a token (every numDraftTokens is 0 or "
                                 "absent): speculative decoding looks off", source,
                                 "serve with a speculative_config and scrape /metrics while "
                                 "requests run")
    length = 1 + accepted / steps
    obs = ObservedMetrics(
        "trtllm", source, mean_accept_length=length, mean_acceptance_length=length,
        draft_acceptance_rate=accepted / drafted, n_verify_steps=steps, n_drafts=steps,
        n_accepted=accepted, n_drafted=drafted,
        draft_tokens_per_step=drafted // steps if drafted % steps == 0 else None,
        version_detected=options.get("version"),
        notes=[f"{NOT_PROBED} ({STATS})"],
        details={"iterations_with_drafts": iterations,
                 "reported_acceptance_length": reported / steps})
    return obs


def read_perf_metrics(data: Any, source: str, **options: Any) -> ObservedMetrics:
    drafted = accepted = 0
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(_items(data)):
        perf = item.get("perf_metrics") if isinstance(item, dict) else None
        spec = perf.get("speculative_decoding") if isinstance(perf, dict) else None
        if not isinstance(spec, dict):
            continue
        where = f"{source} [{n}].perf_metrics.speculative_decoding"
        d = count(spec.get("total_draft_tokens", 0), "total_draft_tokens", where)
        a = count(spec.get("total_accepted_draft_tokens", 0), "total_accepted_draft_tokens", where)
        if a > d:
            raise MetricsFormatError(f"total_accepted_draft_tokens {a} > total_draft_tokens {d}",
                                     where)
        drafted, accepted = drafted + d, accepted + a
        rows.append({"request_id": item.get("request_id"), "drafted": d, "accepted": a})
    if drafted == 0:
        raise MetricsFormatError("no record holds a drafted token (perf_metrics."
                                 f"speculative_decoding absent or zero): {ZEROED}", source,
                                 "pass trtllm-serve's /metrics iteration stats")
    obs = ObservedMetrics("trtllm", source, draft_acceptance_rate=accepted / drafted,
                          n_accepted=accepted, n_drafted=drafted, n_requests=len(rows),
                          version_detected=options.get("version"), per_request=rows,
                          notes=[f"{NOT_PROBED} ({PERF})"])
    k = options.get("num_speculative_tokens") or options.get("num_draft_tokens")
    if isinstance(k, int) and k > 0 and drafted % k == 0:
        steps = drafted // k  # a chain drafts k tokens per verify step
        obs.n_verify_steps = steps
        obs.mean_acceptance_length = obs.mean_accept_length = 1 + accepted / steps
    else:
        obs.notes.append("the acceptance length needs the drafted tokens per step "
                         "(max_draft_len): pass it to read one")
    return obs


READERS = (
    Reader("iteration-stats", "json", 0, is_iteration_stats, read_iteration_stats,
           "TensorRT-LLM /metrics iteration stats (specDecodingStats)"),
    Reader("perf-metrics", "json", 0, is_perf_metrics, read_perf_metrics,
           "TensorRT-LLM per-request perf_metrics (speculative_decoding)"),
)

# What TensorRT-LLM calls the kit's figures (labels only)
FIGURE_NAMES = {"mean_acceptance_length": "acceptanceLength",
                "draft_acceptance_rate": "acceptance_rate"}
