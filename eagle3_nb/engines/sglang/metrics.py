"""SGLang's own words about speculative decoding: its decode log line, /generate meta_info,
/get_server_info and its Prometheus gauges, each in every surveyed release's field names, and
which accept-rate formula each release prints.

Sources: docs/sglang-serving.md §4.3-4.4 (the decode log line, the `sglang:spec_accept_rate`
gauge and /generate meta_info, read in the 0.4.10, 0.5.9, 0.5.16 and 0.5.23 wheels:
python/sglang/srt/managers/scheduler_metrics_mixin.py, log_decode_stats, and
python/sglang/srt/managers/tokenizer_manager.py, meta_info).

The decode log line is read in decode_log, meta_info in meta_info, the formulas and field names
per release are in formulas; this module reads /get_server_info and the gauges, and lists the
readers eagle3_nb.observed.metrics tries.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.registry import Reader
from eagle3_nb.engines.sglang.decode_log import (SGLangDecodeLine, parse_sglang_log,
                                                 summarize_sglang_log)
from eagle3_nb.engines.sglang.formulas import (RATE_SGLANG_LOG_NEW, RATE_SGLANG_LOG_OLD,
                                               RATE_SGLANG_LOG_UNKNOWN, RATE_SGLANG_REQUEST,
                                               checked_version, sglang_log_rate_convention,
                                               sglang_meta_family, version_tuple)
from eagle3_nb.engines.sglang.meta_info import (RequestSpecStats, parse_sglang_meta_info,
                                                parse_sglang_responses, summarize_sglang_requests)
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, choose_model, finite,
                                   load_json, normalize_samples)

__all__ = ["FIGURE_NAMES", "RATE_SGLANG_LOG_NEW", "RATE_SGLANG_LOG_OLD", "RATE_SGLANG_LOG_UNKNOWN",
           "RATE_SGLANG_REQUEST", "READERS", "RequestSpecStats", "SGLangDecodeLine",
           "parse_sglang_log", "parse_sglang_meta_info", "parse_sglang_responses",
           "parse_sglang_server_info", "sglang_log_rate_convention", "sglang_meta_family",
           "sglang_spec_metrics", "summarize_sglang_log", "summarize_sglang_requests",
           "version_tuple"]


# ------------------------------------------------------------------------------------------------
# SGLang /get_server_info


def parse_sglang_server_info(obj: Any, source: str = "SGLang /get_server_info") -> ObservedMetrics:
    """``internal_states[0].avg_spec_accept_length`` (server lifetime, accepted + bonus per step).

    Server settings found at the top level (``speculative_algorithm``,
    ``speculative_num_steps``, ``speculative_eagle_topk``, ``speculative_num_draft_tokens``,
    ``version``) go to ``details``; ``--speculative-algorithm EAGLE`` with an EAGLE-3 draft gives a
    note (accept len ~1.0, no error, in every version read).
    """
    obj = load_json(obj, source)
    if not isinstance(obj, dict):
        raise MetricsFormatError(f"expected a JSON object, got {type(obj).__name__}", source)
    states = obj.get("internal_states")
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        raise MetricsFormatError("no internal_states list: not a /get_server_info response",
                                 source, "query /get_server_info (older servers: /server_info)")
    algo = obj.get("speculative_algorithm")
    if "avg_spec_accept_length" not in states[0]:
        hint = (f"speculative_algorithm is {algo!r}" if "speculative_algorithm" in obj
                else "no speculative_algorithm in the server info")
        raise MetricsFormatError("internal_states[0] has no avg_spec_accept_length: speculative "
                                 f"decoding looks off ({hint})", source)
    avg = finite(states[0]["avg_spec_accept_length"], "internal_states[0].avg_spec_accept_length",
                  source)
    if avg < 1.0:
        raise MetricsFormatError(
            f"avg_spec_accept_length is {avg}: below 1 means no verify step has run yet (or "
            "speculative decoding is off)", source, "send some requests first")
    settings = {k: obj[k] for k in ("version", "speculative_algorithm", "speculative_num_steps",
                                    "speculative_eagle_topk", "speculative_num_draft_tokens",
                                    "speculative_draft_model_path", "model_path") if k in obj}
    obs = ObservedMetrics(engine="sglang", source=source, mean_accept_length=avg,
                          mean_acceptance_length=avg, details={"server": settings},
                          version_detected=str(obj["version"]) if "version" in obj else None)
    obs.notes.append("avg_spec_accept_length: accepted tokens incl. bonus / verify steps over the "
                     "server's lifetime (every request since start, not only yours)")
    if len(states) > 1:
        others = [s.get("avg_spec_accept_length") for s in states[1:] if isinstance(s, dict)]
        obs.details["other_internal_states"] = others
        obs.notes.append(f"{len(states)} internal_states (data-parallel ranks); the documented "
                         "figure is internal_states[0]")
    ndt = obj.get("speculative_num_draft_tokens")
    if isinstance(ndt, int) and ndt >= 2:
        obs.draft_tokens_per_step = ndt - 1
    if isinstance(algo, str) and algo.upper() == "EAGLE":
        obs.notes.append("speculative_algorithm is EAGLE, not EAGLE3: an EAGLE-3 draft then runs "
                         "without aux hidden states and d2t, accept len ~1.0 with no error")
    return obs


def sglang_spec_metrics(samples: Any, model_name: str | None = None, *, version: str | None = None,
                        source: str = "SGLang /metrics") -> ObservedMetrics:
    """``sglang:spec_accept_length`` and ``sglang:spec_accept_rate`` gauges (``--enable-metrics``).

    Gauges hold the last decode log interval, not a lifetime average. The accept-rate formula
    follows the log line's, which changed after 0.5.9 (give ``version`` to name it)."""
    where = "SGLang metrics"
    rel, model = choose_model(normalize_samples(samples), "sglang:spec_accept_", model_name,
                               where)
    lens = [s for s in rel if s.name == "sglang:spec_accept_length"]
    rates = [s for s in rel if s.name == "sglang:spec_accept_rate"]
    if not lens:
        raise MetricsFormatError("no sglang:spec_accept_length gauge: speculative decoding looks "
                                 "off or metrics are disabled", where,
                                 "start the server with --enable-metrics and a draft model")
    for s in lens + rates:
        finite(s.value, f"{s.name}{s.labels}", where)
    vals = [s.value for s in lens]
    mean_len = sum(vals) / len(vals)
    if mean_len < 1.0:
        raise MetricsFormatError(f"sglang:spec_accept_length is {mean_len}: below 1 means "
                                 "speculative decoding is off or no decode batch was logged yet",
                                 where, "send requests, then scrape again")
    obs = ObservedMetrics(engine="sglang", source=source, mean_accept_length=mean_len,
                          mean_acceptance_length=mean_len)
    obs.notes.append("sglang:spec_accept_length is a gauge: the last decode log interval only")
    if model:
        obs.details["model_name"] = model
    if len(vals) > 1:
        obs.notes.append(f"{len(vals)} sglang:spec_accept_length samples (ranks?), averaged")
        obs.details["samples"] = vals
    if rates:
        obs.accept_rate = sum(s.value for s in rates) / len(rates)
        checked_version(version)
        convention = sglang_log_rate_convention(version)
        obs.accept_rate_convention = convention or RATE_SGLANG_LOG_UNKNOWN
        if convention is not None:
            obs.version_detected = str(version)
            if convention == RATE_SGLANG_LOG_NEW:
                obs.draft_acceptance_rate = obs.accept_rate
    return obs


# ------------------------------------------------------------------------------------------------
# the readers eagle3_nb.observed.metrics tries, in rank order over every engine

def _read_log(text: str, source: str, **options: Any) -> ObservedMetrics:
    return summarize_sglang_log(parse_sglang_log(text), version=options.get("version"),
                                num_draft_tokens=options.get("num_draft_tokens"), source=source)


def _read_gauges(text: str, source: str, **options: Any) -> ObservedMetrics:
    return sglang_spec_metrics(text, options.get("model_name"), version=options.get("version"),
                               source=source)


def _is_server_info(data: Any) -> bool:
    if isinstance(data, list):
        return bool(data) and all(isinstance(d, dict) and "internal_states" in d for d in data)
    return isinstance(data, dict) and "internal_states" in data


def _read_server_info(data: Any, source: str, **options: Any) -> ObservedMetrics:
    if isinstance(data, list):
        raise MetricsFormatError("a list of server_info objects; give one", source)
    return parse_sglang_server_info(data, source)


def _is_generate(data: Any) -> bool:
    if isinstance(data, list):
        return True
    return isinstance(data, dict) and ("meta_info" in data or "completion_tokens" in data
                                       or any(str(k).startswith("spec_") for k in data))


def _read_generate(data: Any, source: str, **options: Any) -> ObservedMetrics:
    return parse_sglang_responses(data if isinstance(data, list) else [data],
                                  options.get("version"), source)


def _read_decode_without_spec(text: str, source: str, **options: Any) -> ObservedMetrics:
    parse_sglang_log(text)  # raises: decode lines, none with accept len
    raise MetricsFormatError("no SGLang decode line with 'accept len:'", source)


READERS = (
    Reader("log", "text", 0, lambda text: "accept len:" in text, _read_log,
           "an SGLang log with 'accept len:'"),
    Reader("gauges", "text", 1, lambda text: "sglang:spec_accept" in text, _read_gauges,
           "Prometheus text with sglang:spec_accept_*"),
    Reader("decode-log-without-spec", "text", 2, lambda text: "Decode batch" in text,
           _read_decode_without_spec, ""),
    Reader("server-info", "json", 0, _is_server_info, _read_server_info,
           "an SGLang /get_server_info (internal_states)"),
    Reader("generate", "json", 1, _is_generate, _read_generate,
           "an SGLang /generate response (meta_info), a list or JSON Lines of them, or a meta_info"),
)

# What SGLang calls the kit's figures, in its log line and meta_info (labels only)
FIGURE_NAMES = {"mean_accept_length": "accept len"}
