"""Engine metrics: read what SGLang and vLLM report about speculative decoding.

Pure parsers (no network, no torch) for every format the reference notes document
(`docs/sglang-serving.md` §4.3-4.4,
`docs/speculators-and-vllm.md` §6):

* SGLang decode log lines: ``accept len: X, accept rate: Y`` (0.5.x) or ``accept len: X`` only
  (0.4.10) -> :func:`parse_sglang_log`, :func:`summarize_sglang_log`;
* SGLang per-request ``meta_info`` of ``POST /generate`` in each version's field names (0.5.23,
  0.5.16 legacy names, 0.5.9, 0.4.10) -> :func:`parse_sglang_meta_info`,
  :func:`summarize_sglang_requests`;
* SGLang ``/get_server_info`` (older: ``/server_info``)
  ``internal_states[0].avg_spec_accept_length``
  -> :func:`parse_sglang_server_info`;
* vLLM ``SpecDecoding metrics:`` log lines, the 0.33 format and the earliest V1 format ->
  :func:`parse_vllm_log`, :func:`summarize_vllm_log`;
* Prometheus text exposition -> :func:`parse_prometheus`, then :func:`vllm_spec_metrics` /
  :func:`sglang_spec_metrics` (the vLLM offline ``LLM.get_metrics()`` objects work too);
* anything of the above, a file holding it, or a bare number -> :func:`parse_observed`.

Conventions (what each number means)
------------------------------------
* **Accept length** (SGLang "accept len", ``ObservedMetrics.mean_accept_length``): tokens emitted
  per verify step = accepted draft tokens + 1 bonus token from the target, range 1..k+1.
* **Mean acceptance length** (vLLM, ``ObservedMetrics.vllm_mean_acceptance_length``):
  ``1 + accepted / num_drafts``. It counts the same thing (accepted + 1 bonus per step), so on the
  same steps both conventions give the same number. Differences come from *what* is averaged:
  SGLang's per-request ``spec_accept_length`` is ``completion_tokens / spec_verify_ct`` and so also
  counts the first token (sampled at prefill, no verify step): it sits about ``1/spec_verify_ct``
  above ``1 + correct_drafts / spec_verify_ct``, which is the exact per-step figure. Where the
  counts exist the kit fills ``vllm_mean_acceptance_length`` from them.
* **Accept rate**: the formula differs by engine and by SGLang version; ``accept_rate`` is always
  the figure as the source printed or reported it and ``accept_rate_convention`` says which formula
  it uses. ``draft_acceptance_rate`` is the engine-independent one (accepted draft tokens / drafted
  tokens, bonus excluded), filled where it can be derived.

  - SGLang log/gauge, <= 0.5.9: ``accepted incl. bonus / (verify steps x num_draft_tokens)``;
  - SGLang log/gauge, after 0.5.9 (read in 0.5.23): ``correct drafts / (verify steps x
    (num_draft_tokens - 1))``; ``accept len: 1.00, accept rate: 0.00`` = no draft token accepted;
  - SGLang per-request ``spec_accept_rate`` (0.5.9 and 0.5.23): correct drafts / (verify steps x
    (num_draft_tokens - 1));
  - vLLM: accepted draft tokens / drafted tokens.
* **Per-position acceptance** alpha_i (vLLM): ``accepted_per_pos[i] / num_drafts``. From an SGLang
  histogram of correct drafts per step it is P(correct drafts >= i + 1), the same quantity for
  chain drafting.

Nothing here returns a silent zero: a text with no speculative figures, a meta_info without spec
fields, a NaN counter or a malformed line raises :class:`MetricsFormatError` (an
:class:`~eagle3_nb.errors.Eagle3NbError`) naming what was expected.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from eagle3_nb.engines.metrics import (RATE_SGLANG_LOG_NEW, RATE_SGLANG_LOG_OLD,
                                       RATE_SGLANG_LOG_UNKNOWN, RATE_SGLANG_REQUEST, RATE_VLLM,
                                       SGLANG_META_0_5_9_NAMES, SGLANG_META_EXPECTED,
                                       SGLANG_META_LEGACY_NAMES, SGLANG_META_NEW_NAMES,
                                       sglang_log_rate_convention, sglang_meta_family,
                                       version_tuple)
from eagle3_nb.errors import Eagle3NbError, EngineSpecError
from eagle3_nb.io.checkpoint import json_problem

__all__ = [
    "MetricsFormatError", "ObservedMetrics", "SGLangDecodeLine", "RequestSpecStats", "VLLMSpecLine",
    "PromSample", "VLLMSpecCounters", "parse_sglang_log", "summarize_sglang_log",
    "parse_sglang_meta_info", "summarize_sglang_requests", "parse_sglang_responses",
    "parse_sglang_server_info", "parse_vllm_log", "summarize_vllm_log", "parse_prometheus",
    "vllm_spec_counters", "vllm_spec_metrics", "sglang_spec_metrics", "parse_observed",
    "RATE_SGLANG_LOG_OLD", "RATE_SGLANG_LOG_NEW", "RATE_SGLANG_REQUEST", "RATE_VLLM",
]


class MetricsFormatError(Eagle3NbError):
    """Engine metrics text or JSON that cannot be read as what it claims to be."""


# ------------------------------------------------------------------------------------------------
# conventions

def _version_tuple(version: str | None) -> tuple[int, int, int] | None:
    try:
        return version_tuple(version)
    except EngineSpecError:
        raise MetricsFormatError(f"cannot read version {version!r}", None,
                                 "give it like 0.5.23, 0.5.16, 0.5.9 or 0.4.10") from None


def _finite(value: Any, what: str, where: str | None = None, *, minimum: float | None = 0.0
            ) -> float:
    """A finite float from a JSON/Prometheus/log value, or a MetricsFormatError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise MetricsFormatError(f"{what} is {value!r}, expected a number", where)
    try:
        out = float(value)
    except ValueError:
        raise MetricsFormatError(f"{what} is {value!r}, expected a number", where) from None
    if not math.isfinite(out):
        raise MetricsFormatError(f"{what} is {value!r}: a NaN/Inf figure cannot be used", where,
                                 "speculative decoding may have produced no verify steps yet")
    if minimum is not None and out < minimum:
        raise MetricsFormatError(f"{what} is {out!r}, expected at least {minimum}", where)
    return out


def _count(value: Any, what: str, where: str | None = None) -> int:
    out = _finite(value, what, where)
    if abs(out - round(out)) > 1e-6:
        raise MetricsFormatError(f"{what} is {value!r}, expected a whole count", where)
    return int(round(out))


# ------------------------------------------------------------------------------------------------
# the common result


@dataclass
class ObservedMetrics:
    """What an engine reported about speculative decoding, in every convention it allows.

    ``mean_accept_length``: SGLang convention, accepted + 1 bonus per verify step.
    ``vllm_mean_acceptance_length``: ``1 + accepted / drafts`` (same quantity; filled from counts
    where they exist, see the module docstring for why it can differ slightly from SGLang's
    per-request figure). ``accept_rate`` is as reported; ``accept_rate_convention`` names its
    formula.
    ``draft_acceptance_rate``: accepted draft tokens / drafted tokens, bonus excluded.
    ``n_verify_steps``: verify steps (vLLM: one per draft, so equal to ``n_drafts``).
    ``n_accepted`` / ``n_drafted``: draft tokens accepted / proposed (bonus excluded).
    """

    engine: str
    source: str
    mean_accept_length: float | None = None
    vllm_mean_acceptance_length: float | None = None
    accept_rate: float | None = None
    accept_rate_convention: str | None = None
    draft_acceptance_rate: float | None = None
    per_position_acceptance: list[float] | None = None
    accept_length_histogram: dict[str, int] | None = None
    n_verify_steps: int | None = None
    n_drafts: int | None = None
    n_accepted: int | None = None
    n_drafted: int | None = None
    n_requests: int | None = None
    draft_tokens_per_step: int | None = None
    version_detected: str | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    per_request: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def headline(self) -> str:
        parts = [f"{self.engine} ({self.source})"]
        if self.mean_accept_length is not None:
            parts.append(f"accept length {self.mean_accept_length:.2f}")
        if self.vllm_mean_acceptance_length is not None:
            parts.append(f"mean acceptance length {self.vllm_mean_acceptance_length:.2f}")
        if self.draft_acceptance_rate is not None:
            parts.append(f"draft acceptance {self.draft_acceptance_rate:.1%}")
        return ", ".join(parts)


def _histogram_to_lengths(hist: list[int]) -> dict[str, int]:
    """Correct-drafts histogram (index = correct drafts) -> accept-length histogram (+1)."""
    return {str(i + 1): int(c) for i, c in enumerate(hist)}


def _per_position_from_histogram(hist: list[int]) -> list[float] | None:
    total = sum(hist)
    if total <= 0 or len(hist) < 2:
        return None
    # alpha_i = P(correct drafts >= i + 1)
    return [sum(hist[i + 1:]) / total for i in range(len(hist) - 1)]


# ------------------------------------------------------------------------------------------------
# SGLang decode log lines

_TS_RE = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?: ([^\]]*))?\]")
_SG_FIELDS = {
    "accept_len": re.compile(r"accept len:\s*([^,\s]+)"),
    "accept_rate": re.compile(r"accept rate:\s*([^,\s]+)"),
    "running_req": re.compile(r"#running-req:\s*([^,\s]+)"),
    "num_token": re.compile(r"#token:\s*([^,\s]+)"),
    "token_usage": re.compile(r"(?:^|[,.] )token usage:\s*([^,\s]+)"),
    "gen_throughput": re.compile(r"gen throughput \(token/s\):\s*([^,\s]+)"),
    "queue_req": re.compile(r"#queue-req:\s*([^,\s]+)"),
}
_SG_GRAPH_RE = re.compile(r"\b(cuda|cpu|npu) graph:\s*(True|False)\b")


@dataclass
class SGLangDecodeLine:
    """One SGLang ``Decode batch`` log line that carries ``accept len``."""

    line_no: int
    accept_len: float
    accept_rate: float | None = None
    running_req: int | None = None
    num_token: int | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    queue_req: int | None = None
    graph: bool | None = None
    timestamp: str | None = None
    rank: str | None = None
    raw: str = ""


def parse_sglang_log(text: str) -> list[SGLangDecodeLine]:
    """The decode-batch lines with ``accept len:`` of an SGLang server log, in order.

    0.5.x lines read ``Decode batch, #running-req: 1, #token: 812, token usage: 0.01, accept len:
    2.80, accept rate: 0.70, cuda graph: True, gen throughput (token/s): 245.31, #queue-req: 0``;
    0.4.10 lines have ``accept len`` only. Other lines are skipped. Raises when no such line exists
    (saying whether decode lines without ``accept len`` were seen: speculative decoding off) or a
    field of a spec line cannot be read.
    """
    out: list[SGLangDecodeLine] = []
    plain_decode = 0
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):  # a note added to a saved log, never a server line
            continue
        if "accept len:" not in line:
            if "Decode batch" in line:
                plain_decode += 1
            continue
        where = f"log line {no}"
        vals: dict[str, Any] = {}
        for key, rx in _SG_FIELDS.items():
            m = rx.search(line)
            if m:
                vals[key] = m.group(1)
        accept_len = _finite(vals.pop("accept_len", None), "accept len", where)
        rec = SGLangDecodeLine(line_no=no, accept_len=accept_len, raw=line.rstrip("\n"))
        for key in ("accept_rate", "token_usage", "gen_throughput"):
            if key in vals:
                setattr(rec, key, _finite(vals[key], key.replace("_", " "), where))
        for key in ("running_req", "num_token", "queue_req"):
            if key in vals:
                setattr(rec, key, _count(vals[key], "#" + key.replace("_", "-"), where))
        g = _SG_GRAPH_RE.search(line)
        if g:
            rec.graph = g.group(2) == "True"
        ts = _TS_RE.search(line)
        if ts:
            rec.timestamp, rec.rank = ts.group(1), ts.group(2)
        out.append(rec)
    if not out:
        if plain_decode:
            raise MetricsFormatError(
                f"{plain_decode} 'Decode batch' line(s) but none has 'accept len:': speculative "
                "decoding looks off", "SGLang log",
                "start the server with --speculative-algorithm EAGLE3 and a draft model")
        raise MetricsFormatError(
            "no SGLang decode line with 'accept len:' found; expected lines like 'Decode batch, "
            "#running-req: 1, #token: 812, token usage: 0.01, accept len: 2.80, accept rate: "
            "0.70, ...' (0.5.x) or with 'accept len' only (0.4.10)", "SGLang log")
    return out


def _infer_log_rate_convention(pairs: list[tuple[float, float]], num_draft_tokens: int | None
                               ) -> tuple[str | None, list[int], list[int]]:
    """Which SGLang log accept-rate formula fits every (accept len, accept rate) pair, as printed
    with two decimals. Returns (convention or None, old-formula candidates, new-formula candidates),
    the candidates being the num_draft_tokens values that fit."""
    cands_old: list[int] = []
    cands_new: list[int] = []
    ndts = [num_draft_tokens] if num_draft_tokens else list(range(2, 65))
    for ndt in ndts:
        if ndt < 2:
            continue
        tol_old = 0.005 + 0.005 / ndt + 1e-9
        tol_new = 0.005 + 0.005 / (ndt - 1) + 1e-9
        if all(L <= ndt + 0.005 and abs(L / ndt - R) <= tol_old for L, R in pairs):
            cands_old.append(ndt)
        if all(L <= ndt + 0.005 and abs((L - 1) / (ndt - 1) - R) <= tol_new for L, R in pairs):
            cands_new.append(ndt)
    if cands_old and not cands_new:
        return RATE_SGLANG_LOG_OLD, cands_old, cands_new
    if cands_new and not cands_old:
        return RATE_SGLANG_LOG_NEW, cands_old, cands_new
    return None, cands_old, cands_new


def summarize_sglang_log(lines: list[SGLangDecodeLine], *, version: str | None = None,
                         num_draft_tokens: int | None = None, source: str = "SGLang log"
                         ) -> ObservedMetrics:
    """One figure from a series of decode lines.

    Each line is an average over one log interval, so the headline ``mean_accept_length`` weights
    lines by ``#running-req`` (an approximation of that interval's verify steps; plain mean when a
    line lacks it); ``details`` has the plain mean, min, max and last. The accept-rate formula is
    taken from ``version`` when given, else inferred from the printed pairs when only one formula
    fits; ``num_draft_tokens`` (the server's ``--speculative-num-draft-tokens``) sharpens that.
    """
    if not lines:
        raise MetricsFormatError("no SGLang decode lines to summarise", source)
    notes: list[str] = []
    usable = [ln for ln in lines if ln.accept_len >= 1.0 - 1e-9]
    dropped = [ln.line_no for ln in lines if ln.accept_len < 1.0 - 1e-9]
    if dropped:
        notes.append(f"ignored {len(dropped)} line(s) with accept len below 1.00, impossible in "
                     f"SGLang's convention (lines {dropped[:10]})")
    if not usable:
        raise MetricsFormatError("every decode line has accept len below 1.00; expected values "
                                 "in 1..k+1 (accepted + bonus per verify step)", source)
    if all(ln.running_req for ln in usable):
        weights = [float(ln.running_req) for ln in usable]
        notes.append("accept len averaged over log lines weighted by #running-req (each line "
                     "covers one log interval; the weight approximates its verify steps)")
    else:
        weights = [1.0] * len(usable)
        notes.append("accept len averaged over log lines, unweighted (#running-req missing)")
    wsum = sum(weights)
    mean_len = sum(w * ln.accept_len for w, ln in zip(weights, usable)) / wsum
    with_rate = [ln for ln in usable if ln.accept_rate is not None]
    obs = ObservedMetrics(engine="sglang", source=source, mean_accept_length=mean_len,
                          vllm_mean_acceptance_length=mean_len, notes=notes)
    notes.append("SGLang's log accept len is accepted tokens incl. bonus / verify steps, the same "
                 "quantity as vLLM's mean acceptance length")
    lens = [ln.accept_len for ln in usable]
    obs.details = {"n_lines": len(usable), "mean_unweighted": sum(lens) / len(lens),
                   "min": min(lens), "max": max(lens), "last": lens[-1],
                   "ranks": sorted({ln.rank for ln in usable if ln.rank})}
    thr = [ln.gen_throughput for ln in usable if ln.gen_throughput is not None]
    if thr:
        obs.details["gen_throughput_mean"] = sum(thr) / len(thr)

    if not with_rate:
        obs.version_detected = "0.4.10"
        notes.append("lines carry 'accept len' only: the 0.4.10 log format (no accept rate)")
    else:
        if len(with_rate) != len(usable):
            notes.append(f"{len(usable) - len(with_rate)} line(s) lack 'accept rate': logs of "
                         "different SGLang versions mixed?")
        rw = [w for w, ln in zip(weights, usable) if ln.accept_rate is not None]
        obs.accept_rate = sum(w * ln.accept_rate for w, ln in zip(rw, with_rate)) / sum(rw)
        pairs = [(ln.accept_len, ln.accept_rate) for ln in with_rate]
        conv, c_old, c_new = _infer_log_rate_convention(pairs, num_draft_tokens)
        _version_tuple(version)  # a version that cannot be read is bad input
        given = sglang_log_rate_convention(version)
        if given is not None:
            if conv is not None and conv != given:
                notes.append(f"version {version} was given, but the printed pairs fit the other "
                             f"accept-rate formula ({conv}); using the version's")
            conv = given
            obs.version_detected = str(version)
            cands = c_old if conv == RATE_SGLANG_LOG_OLD else c_new
        elif conv is not None:
            obs.version_detected = "<=0.5.9" if conv == RATE_SGLANG_LOG_OLD else ">0.5.9"
            cands = c_old if conv == RATE_SGLANG_LOG_OLD else c_new
            notes.append(f"accept-rate formula inferred from the printed (accept len, accept "
                         f"rate) pairs: {conv}")
        else:
            obs.version_detected = "0.5.x"
            cands = []
            why = ("both formulas fit" if c_old and c_new else "neither formula fits")
            notes.append(f"accept-rate formula unknown ({why}); pass version= or "
                         "num_draft_tokens= to decide")
        obs.accept_rate_convention = conv or RATE_SGLANG_LOG_UNKNOWN
        ndt = num_draft_tokens or (cands[0] if len(cands) == 1 else None)
        if ndt and not num_draft_tokens:
            notes.append(f"num_draft_tokens inferred as {ndt} from the printed pairs")
        if ndt and ndt >= 2:
            obs.draft_tokens_per_step = ndt - 1
            if conv == RATE_SGLANG_LOG_NEW:
                obs.draft_acceptance_rate = obs.accept_rate
            elif conv == RATE_SGLANG_LOG_OLD:
                obs.draft_acceptance_rate = (mean_len - 1.0) / (ndt - 1)
        obs.details["num_draft_tokens_candidates"] = {"old_formula": c_old, "new_formula": c_new}
        if all(abs(ln.accept_len - 1.0) < 1e-9 and ln.accept_rate == 0 for ln in with_rate):
            notes.append("accept len 1.00, accept rate 0.00 on every line: no draft token was "
                         "ever accepted, a structural failure (not 'needs more training')")
    if abs(mean_len - 1.0) < 0.005:
        notes.append("accept length ~1.00: the draft contributes nothing; look for a structural "
                     "failure (wrong algorithm, fc skipped, keys dropped, d2t)")
    return obs


# ------------------------------------------------------------------------------------------------
# SGLang per-request meta_info

@dataclass
class RequestSpecStats:
    """Speculative-decoding figures of one SGLang ``/generate`` request.

    ``accept_length`` = ``completion_tokens / spec_verify_ct`` (counts the bonus token and the
    first, prefill-sampled token); ``vllm_mean_acceptance_length`` = ``1 + correct / verify`` where
    the counts exist. ``num_correct_drafts`` / ``num_proposed_drafts``: draft tokens accepted /
    proposed (bonus excluded); in 0.5.9 these are ``spec_accept_token_num`` /
    ``spec_draft_token_num``. ``correct_drafts_histogram[i]`` = verify steps with i correct drafts.
    """

    version_detected: str
    verify_ct: int
    completion_tokens: int | None = None
    accept_length: float | None = None
    accept_length_reported: float | None = None
    vllm_mean_acceptance_length: float | None = None
    num_correct_drafts: int | None = None
    num_proposed_drafts: int | None = None
    accept_rate: float | None = None
    accept_rate_convention: str | None = None
    correct_drafts_histogram: list[int] | None = None
    draft_tokens_per_step: int | None = None
    version_given: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _load_json(obj: Any, what: str) -> Any:
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8", errors="replace")
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except (ValueError, RecursionError) as e:
            raise MetricsFormatError(f"not JSON ({json_problem(e)})", what) from None
    return obj


def _int_list(value: Any, what: str, where: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise MetricsFormatError(f"{what} is {value!r}, expected a non-empty list of counts", where)
    return [_count(v, f"{what}[{i}]", where) for i, v in enumerate(value)]


def parse_sglang_meta_info(obj: Any, version: str | None = None) -> RequestSpecStats:
    """Read one SGLang ``/generate`` response's ``meta_info`` (or the whole response, or its JSON).

    The field names are detected when ``version`` is not given (0.5.23: ``spec_num_correct_drafts``
    ...; 0.5.16: also the legacy ``spec_accepted_drafts``/``spec_proposed_drafts``; 0.5.9:
    ``spec_accept_token_num``/``spec_draft_token_num``; 0.4.10: ``spec_verify_ct`` only) and
    recorded in ``version_detected``. Raises when no spec field is present (speculative decoding
    looks off), when names of different versions are mixed, when the given version expects other
    names, or when a value is not a finite count.
    """
    where = "SGLang meta_info"
    obj = _load_json(obj, where)
    if isinstance(obj, list):
        raise MetricsFormatError("a list of responses, expected one meta_info", where,
                                 "use parse_sglang_responses for a batch")
    if not isinstance(obj, dict):
        raise MetricsFormatError(f"expected a JSON object, got {type(obj).__name__}", where)
    meta = obj.get("meta_info", obj)
    if not isinstance(meta, dict):
        raise MetricsFormatError(f"meta_info is {type(meta).__name__}, expected an object", where)
    spec_keys = sorted(k for k in meta if k.startswith("spec_"))
    if not spec_keys:
        raise MetricsFormatError(
            "meta_info has no spec_* field: speculative decoding looks off (SGLang adds "
            "spec_verify_ct only when a request had verify steps)", where,
            "check the server was started with --speculative-algorithm EAGLE3 "
            f"(fields seen: {sorted(meta)[:12]})")
    if "spec_verify_ct" not in meta:
        raise MetricsFormatError(f"spec_verify_ct is missing (spec fields: {spec_keys})", where,
                                 "every documented SGLang version reports spec_verify_ct")
    verify = _count(meta["spec_verify_ct"], "spec_verify_ct", where)
    if verify <= 0:
        raise MetricsFormatError("spec_verify_ct is 0: no verify step ran for this request, "
                                 "speculative decoding looks off", where)
    has_new = any(k in meta for k in SGLANG_META_NEW_NAMES)
    has_legacy = any(k in meta for k in SGLANG_META_LEGACY_NAMES)
    has_old9 = any(k in meta for k in SGLANG_META_0_5_9_NAMES)
    if has_old9 and (has_new or has_legacy):
        raise MetricsFormatError(
            "meta_info mixes 0.5.9 names (spec_accept_token_num/spec_draft_token_num) with "
            "0.5.16+ names (spec_num_correct_drafts/spec_accepted_drafts)", where)
    if has_legacy:
        detected = "0.5.16"
    elif has_new:
        detected = "0.5.23"
    elif has_old9:
        detected = "0.5.9"
    elif spec_keys == ["spec_verify_ct"]:
        detected = "0.4.10"
    else:
        detected = "unknown"
    notes: list[str] = []
    if version is not None:
        fam = sglang_meta_family(version)
        det_fam = {"0.5.23": "0.5.16+", "0.5.16": "0.5.16+", "0.5.9": "0.5.9",
                   "0.4.10": "0.4.10"}.get(detected, "unknown")
        if fam == "undocumented":
            notes.append(f"version {version}: its field names are not in the reference notes; "
                         f"read as {detected}")
        elif detected == "0.4.10" and fam != "0.4.10":
            notes.append(f"version {version} was given but meta_info has spec_verify_ct only: "
                         "accept length from completion_tokens / spec_verify_ct")
        elif det_fam != fam:
            exp = SGLANG_META_EXPECTED["0.5.23" if fam == "0.5.16+" else fam]
            raise MetricsFormatError(
                f"version {version} was given, so meta_info should carry {exp}; it carries "
                f"{spec_keys} (the names of SGLang {detected})", where,
                "drop version= to detect it from the fields, or check which server answered")
    st = RequestSpecStats(version_detected=detected, verify_ct=verify, version_given=version,
                          notes=notes)
    if "completion_tokens" in meta:
        st.completion_tokens = _count(meta["completion_tokens"], "completion_tokens", where)
        st.accept_length = st.completion_tokens / verify
    if "spec_accept_length" in meta:
        st.accept_length_reported = _finite(meta["spec_accept_length"], "spec_accept_length", where)
        if st.accept_length is None:
            st.accept_length = st.accept_length_reported
        elif abs(st.accept_length - st.accept_length_reported) > 1e-6 * max(1.0, st.accept_length):
            notes.append(f"spec_accept_length {st.accept_length_reported} differs from "
                         f"completion_tokens / spec_verify_ct = {st.accept_length:.6g}")
    if st.accept_length is None:
        raise MetricsFormatError("neither completion_tokens nor spec_accept_length present: "
                                 "cannot compute an accept length", where)

    def pick(new: str, legacy: str) -> int | None:
        a = meta.get(new)
        b = meta.get(legacy)
        if a is not None and b is not None and _count(a, new, where) != _count(b, legacy, where):
            raise MetricsFormatError(f"{new}={a} disagrees with its legacy name {legacy}={b}",
                                     where)
        if a is not None:
            return _count(a, new, where)
        return None if b is None else _count(b, legacy, where)

    if detected in ("0.5.23", "0.5.16"):
        st.num_correct_drafts = pick("spec_num_correct_drafts", "spec_accepted_drafts")
        st.num_proposed_drafts = pick("spec_num_proposed_drafts", "spec_proposed_drafts")
        hist_new = meta.get("spec_correct_drafts_histogram")
        hist_old = meta.get("spec_accept_histogram")
        if hist_new is not None:
            st.correct_drafts_histogram = _int_list(hist_new, "spec_correct_drafts_histogram",
                                                    where)
            if hist_old is not None and _int_list(hist_old, "spec_accept_histogram",
                                                  where) != st.correct_drafts_histogram:
                raise MetricsFormatError("spec_correct_drafts_histogram disagrees with its "
                                         "legacy name spec_accept_histogram", where)
        elif hist_old is not None:
            st.correct_drafts_histogram = _int_list(hist_old, "spec_accept_histogram", where)
    elif detected == "0.5.9":
        if "spec_accept_token_num" in meta:
            st.num_correct_drafts = _count(meta["spec_accept_token_num"], "spec_accept_token_num",
                                           where)
        if "spec_draft_token_num" in meta:
            st.num_proposed_drafts = _count(meta["spec_draft_token_num"], "spec_draft_token_num",
                                            where)
        if "spec_accept_histogram" in meta:
            st.correct_drafts_histogram = _int_list(meta["spec_accept_histogram"],
                                                    "spec_accept_histogram", where)
    elif detected == "0.4.10":
        notes.append("0.4.10 format: spec_verify_ct only; accept length = completion_tokens / "
                     "spec_verify_ct, no draft counts")
    else:
        notes.append(f"spec fields {spec_keys} match no documented version; only the accept "
                     "length is read")
        if "spec_accept_histogram" in meta:
            st.correct_drafts_histogram = _int_list(meta["spec_accept_histogram"],
                                                    "spec_accept_histogram", where)
    if "spec_accept_rate" in meta:
        st.accept_rate = _finite(meta["spec_accept_rate"], "spec_accept_rate", where)
        st.accept_rate_convention = RATE_SGLANG_REQUEST
    elif st.num_correct_drafts is not None and st.num_proposed_drafts:
        st.accept_rate = st.num_correct_drafts / st.num_proposed_drafts
        st.accept_rate_convention = RATE_SGLANG_REQUEST
    if st.num_correct_drafts is not None:
        st.vllm_mean_acceptance_length = 1.0 + st.num_correct_drafts / verify
    if st.num_proposed_drafts is not None:
        per = st.num_proposed_drafts / verify
        if abs(per - round(per)) < 1e-9 and per >= 1:
            st.draft_tokens_per_step = int(round(per))
        else:
            notes.append(f"proposed drafts / verify steps = {per:.4g} is not whole")
        if st.num_correct_drafts is not None and st.num_correct_drafts > st.num_proposed_drafts:
            raise MetricsFormatError(f"{st.num_correct_drafts} correct drafts exceed the "
                                     f"{st.num_proposed_drafts} proposed", where)
    h = st.correct_drafts_histogram
    if h is not None:
        if sum(h) != verify:
            notes.append(f"histogram counts {sum(h)} steps, spec_verify_ct says {verify}")
        if st.num_correct_drafts is not None and sum(i * c for i, c in enumerate(h)) != \
                st.num_correct_drafts:
            notes.append("histogram's correct drafts differ from the reported count")
    return st


def summarize_sglang_requests(stats: list[RequestSpecStats], source: str = "SGLang /generate"
                              ) -> ObservedMetrics:
    """Pool per-request stats: accept length = sum(completion_tokens) / sum(spec_verify_ct)."""
    if not stats:
        raise MetricsFormatError("no request stats to summarise", source)
    versions = sorted({s.version_detected for s in stats})
    if len(versions) > 1:
        raise MetricsFormatError(f"requests carry field names of several SGLang versions "
                                 f"{versions}", source, "measure one server at a time")
    verify = sum(s.verify_ct for s in stats)
    notes: list[str] = []
    obs = ObservedMetrics(engine="sglang", source=source, version_detected=versions[0],
                          n_requests=len(stats), n_verify_steps=verify, notes=notes,
                          per_request=[s.to_dict() for s in stats])
    if all(s.completion_tokens is not None for s in stats):
        obs.mean_accept_length = sum(s.completion_tokens for s in stats) / verify
        notes.append("accept length = sum(completion_tokens) / sum(spec_verify_ct), as SGLang "
                     "computes spec_accept_length; it counts the first (prefill) token too, "
                     "about 1/spec_verify_ct above the per-step figure")
    else:
        obs.mean_accept_length = sum(s.accept_length * s.verify_ct for s in stats) / verify
        notes.append("accept length from the reported spec_accept_length, weighted by verify steps")
    obs.details["mean_of_requests"] = sum(s.accept_length for s in stats) / len(stats)
    if all(s.num_correct_drafts is not None for s in stats):
        obs.n_accepted = sum(s.num_correct_drafts for s in stats)
        obs.vllm_mean_acceptance_length = 1.0 + obs.n_accepted / verify
    if all(s.num_proposed_drafts is not None for s in stats):
        obs.n_drafted = sum(s.num_proposed_drafts for s in stats)
        if obs.n_accepted is not None and obs.n_drafted:
            obs.draft_acceptance_rate = obs.n_accepted / obs.n_drafted
            obs.accept_rate = obs.draft_acceptance_rate
            obs.accept_rate_convention = RATE_SGLANG_REQUEST
    per = {s.draft_tokens_per_step for s in stats}
    if len(per) == 1 and None not in per:
        obs.draft_tokens_per_step = per.pop()
    if all(s.correct_drafts_histogram for s in stats):
        width = max(len(s.correct_drafts_histogram) for s in stats)
        hist = [0] * width
        for s in stats:
            for i, c in enumerate(s.correct_drafts_histogram):
                hist[i] += c
        obs.accept_length_histogram = _histogram_to_lengths(hist)
        obs.per_position_acceptance = _per_position_from_histogram(hist)
        notes.append("per-position acceptance from the histogram: P(correct drafts >= i + 1)")
    if versions[0] == "0.4.10":
        debiased = sum((s.completion_tokens or 0) - 1 for s in stats) / verify
        obs.details["accept_length_without_first_token"] = debiased
        notes.append("0.4.10 reports no draft counts; (completion_tokens - 1) / spec_verify_ct "
                     f"= {debiased:.3f} estimates the per-step figure (truncation at "
                     "max_new_tokens can lower it slightly)")
    for i, s in enumerate(stats):
        for n in s.notes:
            notes.append(f"request {i}: {n}")
    return obs


def parse_sglang_responses(obj: Any, version: str | None = None,
                           source: str = "SGLang /generate") -> ObservedMetrics:
    """A list (or JSON Lines text) of ``/generate`` responses or meta_infos -> pooled figures."""
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8", errors="replace")
    if isinstance(obj, str):
        s = obj.strip()
        if s.startswith("["):
            obj = _load_json(s, source)
        else:
            obj = [_load_json(ln, f"{source} line {i}")
                   for i, ln in enumerate(s.splitlines(), 1) if ln.strip()]
    if isinstance(obj, dict):
        obj = [obj]
    if not isinstance(obj, list) or not obj:
        raise MetricsFormatError("expected one or more /generate responses", source)
    stats = []
    for i, item in enumerate(obj):
        try:
            stats.append(parse_sglang_meta_info(item, version))
        except MetricsFormatError as e:
            raise MetricsFormatError(e.what, f"{source} item {i}", e.todo) from None
    return summarize_sglang_requests(stats, source)


# ------------------------------------------------------------------------------------------------
# SGLang /get_server_info


def parse_sglang_server_info(obj: Any, source: str = "SGLang /get_server_info") -> ObservedMetrics:
    """``internal_states[0].avg_spec_accept_length`` (server lifetime, accepted + bonus per step).

    Server settings found at the top level (``speculative_algorithm``,
    ``speculative_num_steps``, ``speculative_eagle_topk``, ``speculative_num_draft_tokens``,
    ``version``) go to ``details``; ``--speculative-algorithm EAGLE`` with an EAGLE-3 draft gives a
    note (accept len ~1.0, no error, in every version read).
    """
    obj = _load_json(obj, source)
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
    avg = _finite(states[0]["avg_spec_accept_length"], "internal_states[0].avg_spec_accept_length",
                  source)
    if avg < 1.0:
        raise MetricsFormatError(
            f"avg_spec_accept_length is {avg}: below 1 means no verify step has run yet (or "
            "speculative decoding is off)", source, "send some requests first")
    settings = {k: obj[k] for k in ("version", "speculative_algorithm", "speculative_num_steps",
                                    "speculative_eagle_topk", "speculative_num_draft_tokens",
                                    "speculative_draft_model_path", "model_path") if k in obj}
    obs = ObservedMetrics(engine="sglang", source=source, mean_accept_length=avg,
                          vllm_mean_acceptance_length=avg, details={"server": settings},
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


# ------------------------------------------------------------------------------------------------
# vLLM SpecDecoding log lines

_VLLM_FIELDS = {
    "mean_acceptance_length": re.compile(r"Mean acceptance length:\s*([^,\s]+)"),
    "accepted_throughput": re.compile(r"Accepted throughput:\s*([^,\s]+)\s*tokens/s"),
    "drafted_throughput": re.compile(r"Drafted throughput:\s*([^,\s]+)\s*tokens/s"),
    "accepted": re.compile(r"Accepted:\s*([^,\s]+)\s*tokens"),
    "drafted": re.compile(r"Drafted:\s*([^,\s]+)\s*tokens"),
    "avg_draft_acceptance_rate": re.compile(r"Avg Draft acceptance rate:\s*([^,\s%]+)%"),
    "draft_acceptance_rate": re.compile(r"(?<!Avg )Draft acceptance rate:\s*([^,\s%]+)%"),
}
_VLLM_PERPOS_RE = re.compile(r"Per-position acceptance rate:\s*(.*?)(?:,\s*Avg Draft|\s*$)")


@dataclass
class VLLMSpecLine:
    """One vLLM ``SpecDecoding metrics:`` line. Rates are fractions (the log prints percents)."""

    line_no: int
    format: str  # "0.33" (mean acceptance length, per-position) or "v1-early"
    accepted: int
    drafted: int
    mean_acceptance_length: float | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    per_position: list[float] | None = None
    draft_acceptance_rate: float | None = None
    raw: str = ""


def parse_vllm_log(text: str) -> list[VLLMSpecLine]:
    """The ``SpecDecoding metrics:`` lines of a vLLM log (0.33 format and the earliest V1 one).

    0.33: ``SpecDecoding metrics: Mean acceptance length: 2.68, Accepted throughput: 52.40
    tokens/s, Drafted throughput: 93.60 tokens/s, Accepted: 524 tokens, Drafted: 936 tokens,
    Per-position acceptance rate: 0.792, 0.567, 0.321, Avg Draft acceptance rate: 56.0%``;
    early V1: ``SpecDecoding metrics: Draft acceptance rate: 56.0%, Accepted: 524 tokens, Drafted:
    936 tokens``. Raises when there is no such line or a field cannot be read.
    """
    out: list[VLLMSpecLine] = []
    for no, line in enumerate(text.splitlines(), 1):
        if "SpecDecoding metrics:" not in line or line.lstrip().startswith("#"):
            continue
        where = f"vLLM log line {no}"
        body = line.split("SpecDecoding metrics:", 1)[1]
        vals = {k: rx.search(body) for k, rx in _VLLM_FIELDS.items()}
        if not vals["accepted"] or not vals["drafted"]:
            raise MetricsFormatError("SpecDecoding line without 'Accepted: N tokens, Drafted: N "
                                     "tokens'", where)
        rec = VLLMSpecLine(line_no=no, format="v1-early",
                           accepted=_count(vals["accepted"].group(1), "Accepted", where),
                           drafted=_count(vals["drafted"].group(1), "Drafted", where),
                           raw=line.rstrip("\n"))
        if vals["mean_acceptance_length"]:
            rec.format = "0.33"
            rec.mean_acceptance_length = _finite(vals["mean_acceptance_length"].group(1),
                                                 "Mean acceptance length", where)
        for key in ("accepted_throughput", "drafted_throughput"):
            if vals[key]:
                setattr(rec, key, _finite(vals[key].group(1), key.replace("_", " "), where))
        rate = vals["avg_draft_acceptance_rate"] or vals["draft_acceptance_rate"]
        if rate:
            rec.draft_acceptance_rate = _finite(rate.group(1), "draft acceptance rate", where) / 100
        pp = _VLLM_PERPOS_RE.search(body)
        if pp:
            items = [s for s in (x.strip() for x in pp.group(1).split(",")) if s]
            if not items:
                raise MetricsFormatError("empty Per-position acceptance rate list", where)
            rec.per_position = [_finite(s, f"per-position acceptance rate {i}", where)
                                for i, s in enumerate(items)]
        if rec.accepted > rec.drafted:
            raise MetricsFormatError(f"Accepted {rec.accepted} exceeds Drafted {rec.drafted}",
                                     where)
        out.append(rec)
    if not out:
        raise MetricsFormatError(
            "no 'SpecDecoding metrics:' line found; expected e.g. 'SpecDecoding metrics: Mean "
            "acceptance length: 2.68, ..., Accepted: 524 tokens, Drafted: 936 tokens, ...'",
            "vLLM log", "vLLM logs it only with speculative decoding on and log stats enabled")
    return out


def summarize_vllm_log(lines: list[VLLMSpecLine], *, num_speculative_tokens: int | None = None,
                       source: str = "vLLM log") -> ObservedMetrics:
    """Pool the lines: drafts per line = Drafted / k (k = per-position entries, or
    ``num_speculative_tokens``), mean acceptance length = 1 + sum(Accepted) / sum(drafts),
    per-position = drafts-weighted mean of each line's rates."""
    if not lines:
        raise MetricsFormatError("no vLLM SpecDecoding lines to summarise", source)
    notes: list[str] = []
    ks = {len(ln.per_position) for ln in lines if ln.per_position}
    if len(ks) > 1:
        raise MetricsFormatError(f"lines disagree on the number of speculative tokens {sorted(ks)}",
                                 source, "summarise one server run at a time")
    k = num_speculative_tokens or (ks.pop() if ks else None)
    acc = sum(ln.accepted for ln in lines)
    drafted = sum(ln.drafted for ln in lines)
    if drafted <= 0:
        raise MetricsFormatError("every line says Drafted: 0 tokens: nothing was drafted", source)
    fmts = sorted({ln.format for ln in lines})
    obs = ObservedMetrics(engine="vllm", source=source, accept_rate=acc / drafted,
                          accept_rate_convention=RATE_VLLM, draft_acceptance_rate=acc / drafted,
                          n_accepted=acc, n_drafted=drafted, notes=notes,
                          version_detected="vllm " + "+".join(
                              "0.33 log format" if f == "0.33" else "early V1 log format"
                              for f in fmts))
    obs.details = {"n_lines": len(lines)}
    if k:
        drafts = [ln.drafted / k for ln in lines]
        if any(abs(d - round(d)) > 1e-6 for d in drafts):
            notes.append(f"Drafted is not a multiple of k={k} on some line; drafts estimated")
        nd = sum(drafts)
        obs.draft_tokens_per_step = k
        obs.n_drafts = obs.n_verify_steps = int(round(nd))
        obs.vllm_mean_acceptance_length = 1.0 + acc / nd
        obs.mean_accept_length = obs.vllm_mean_acceptance_length
        notes.append(f"drafts per line = Drafted / {k} (every draft proposes k tokens); mean "
                     "acceptance length = 1 + sum(Accepted) / sum(drafts), the same quantity as "
                     "SGLang's accept len")
        if all(ln.per_position for ln in lines):
            obs.per_position_acceptance = [
                sum(ln.per_position[i] * d for ln, d in zip(lines, drafts)) / nd
                for i in range(k)]
        for ln, d in zip(lines, drafts):
            if ln.mean_acceptance_length is not None and d > 0 and \
                    abs(1 + ln.accepted / d - ln.mean_acceptance_length) > 0.006:
                notes.append(f"line {ln.line_no}: printed mean acceptance length "
                             f"{ln.mean_acceptance_length} differs from 1 + Accepted/drafts "
                             f"= {1 + ln.accepted / d:.3f}")
    else:
        notes.append("early V1 format: no per-position list, so the number of speculative tokens "
                     "k is unknown and the mean acceptance length cannot be computed; pass "
                     "num_speculative_tokens= (vLLM's num_speculative_tokens)")
    return obs


# ------------------------------------------------------------------------------------------------
# Prometheus text exposition

_PROM_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_PROM_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass
class PromSample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp: int | None = None
    type: str | None = None  # from the family's # TYPE line


def _prom_value(tok: str, where: str) -> float:
    special = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
    if tok.lower() in special:
        return special[tok.lower()]
    try:
        return float(tok)
    except ValueError:
        raise MetricsFormatError(f"sample value {tok!r} is not a number", where) from None


def _prom_labels(s: str, i: int, where: str) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",b="y\\"z"}`` starting at s[i] == '{'; return the labels and the index
    after the closing brace."""
    labels: dict[str, str] = {}
    i += 1
    n = len(s)
    while True:
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == "}":
            return labels, i + 1
        m = _PROM_LABEL_RE.match(s, i)
        if not m:
            raise MetricsFormatError(f"bad label name at column {i + 1}", where)
        name = m.group(0)
        i = m.end()
        while i < n and s[i] in " \t":
            i += 1
        if i + 1 >= n or s[i] != "=" or s[i + 1] != '"':
            raise MetricsFormatError(f"label {name!r}: expected =\"...\" at column {i + 1}", where)
        i += 2
        buf = []
        while True:
            if i >= n:
                raise MetricsFormatError(f"label {name!r}: unterminated value", where)
            c = s[i]
            if c == "\\":
                if i + 1 >= n:
                    raise MetricsFormatError(f"label {name!r}: dangling backslash", where)
                nxt = s[i + 1]
                buf.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        if name in labels:
            raise MetricsFormatError(f"label {name!r} repeated", where)
        labels[name] = "".join(buf)
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            continue
        if i < n and s[i] == "}":
            return labels, i + 1
        raise MetricsFormatError(f"expected ',' or '}}' after label {name!r} at column {i + 1}",
                                 where)


def parse_prometheus(text: str) -> list[PromSample]:
    """Samples of a Prometheus text exposition (``# HELP``/``# TYPE`` comments, labels with escaped
    quotes, ``NaN``/``+Inf`` values, optional timestamps). A ``_total``/``_created``/``_bucket``...
    sample gets the type of its family's ``# TYPE`` line. Raises on a malformed sample line."""
    types: dict[str, str] = {}
    out: list[PromSample] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        where = f"Prometheus line {no}"
        if line.startswith("#"):
            parts = line[1:].split(None, 3)
            if len(parts) >= 3 and parts[0] == "TYPE":
                types[parts[1]] = parts[2]
            continue
        m = _PROM_NAME_RE.match(line)
        if not m:
            raise MetricsFormatError(f"not a metric name at the start: {line[:60]!r}", where)
        name = m.group(0)
        i = m.end()
        labels: dict[str, str] = {}
        if i < len(line) and line[i] == "{":
            labels, i = _prom_labels(line, i, where)
        rest = line[i:].split()
        if not rest or len(rest) > 2:
            raise MetricsFormatError(f"expected 'value [timestamp]' after {name}, got "
                                     f"{line[i:][:60]!r}", where)
        value = _prom_value(rest[0], where)
        ts = None
        if len(rest) == 2:
            try:
                ts = int(float(rest[1]))
            except ValueError:
                raise MetricsFormatError(f"bad timestamp {rest[1]!r}", where) from None
        typ = types.get(name)
        if typ is None:
            for suf in ("_total", "_created", "_bucket", "_count", "_sum", "_info"):
                if name.endswith(suf) and name[: -len(suf)] in types:
                    typ = types[name[: -len(suf)]]
                    break
        out.append(PromSample(name, labels, value, ts, typ))
    return out


# ------------------------------------------------------------------------------------------------
# vLLM counters (Prometheus or the offline LLM.get_metrics())

_V = "vllm:spec_decode_"


@dataclass
class VLLMSpecCounters:
    """The vLLM spec-decode counters, summed over engines for one model.

    ``num_drafts`` is None for legacy V0 metrics (no such counter)."""

    num_drafts: float | None
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_pos: list[float] | None = None
    model_name: str | None = None
    legacy_v0: bool = False

    def minus(self, before: "VLLMSpecCounters") -> "VLLMSpecCounters":
        """Counts between two scrapes (``self`` after, ``before`` earlier)."""
        def sub(a: float | None, b: float | None, what: str) -> float | None:
            if a is None or b is None:
                return None
            if a < b:
                raise MetricsFormatError(f"{what} went down between the two scrapes ({b} -> {a}): "
                                         "the server restarted", "vLLM /metrics",
                                         "measure again")
            return a - b
        pp = None
        if self.accepted_per_pos is not None and before.accepted_per_pos is not None:
            n = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
            a = self.accepted_per_pos + [0.0] * (n - len(self.accepted_per_pos))
            b = before.accepted_per_pos + [0.0] * (n - len(before.accepted_per_pos))
            pp = [sub(x, y, f"accepted_per_pos[{i}]") for i, (x, y) in enumerate(zip(a, b))]
        elif self.accepted_per_pos is not None:
            pp = list(self.accepted_per_pos)
        return VLLMSpecCounters(
            num_drafts=sub(self.num_drafts, before.num_drafts, "num_drafts"),
            num_draft_tokens=sub(self.num_draft_tokens, before.num_draft_tokens,
                                 "num_draft_tokens"),
            num_accepted_tokens=sub(self.num_accepted_tokens, before.num_accepted_tokens,
                                    "num_accepted_tokens"),
            accepted_per_pos=pp, model_name=self.model_name, legacy_v0=self.legacy_v0)

    def to_observed(self, source: str, num_speculative_tokens: int | None = None
                    ) -> ObservedMetrics:
        where = source
        if self.num_draft_tokens <= 0:
            raise MetricsFormatError("no draft tokens counted (num_draft_tokens is 0): no "
                                     "speculative step ran", where,
                                     "send requests first, or check speculative decoding is on")
        acc = self.num_accepted_tokens
        obs = ObservedMetrics(engine="vllm", source=source,
                              accept_rate=acc / self.num_draft_tokens,
                              accept_rate_convention=RATE_VLLM,
                              draft_acceptance_rate=acc / self.num_draft_tokens,
                              n_accepted=int(round(acc)),
                              n_drafted=int(round(self.num_draft_tokens)),
                              version_detected="vllm V0 legacy metrics" if self.legacy_v0
                              else "vllm V1 metrics")
        if self.model_name:
            obs.details["model_name"] = self.model_name
        drafts = self.num_drafts
        if drafts is None and num_speculative_tokens:
            drafts = self.num_draft_tokens / num_speculative_tokens
            obs.notes.append(f"no num_drafts counter; drafts = draft tokens / "
                             f"{num_speculative_tokens}")
        if drafts is None:
            obs.notes.append("legacy V0 metrics have no num_drafts: the mean acceptance length "
                             "needs num_speculative_tokens=")
            return obs
        if drafts <= 0:
            raise MetricsFormatError("num_drafts is 0 but draft tokens were counted", where)
        obs.n_drafts = obs.n_verify_steps = int(round(drafts))
        obs.vllm_mean_acceptance_length = 1.0 + acc / drafts
        obs.mean_accept_length = obs.vllm_mean_acceptance_length
        per = self.num_draft_tokens / drafts
        if abs(per - round(per)) < 1e-6:
            obs.draft_tokens_per_step = int(round(per))
        if self.accepted_per_pos:
            obs.per_position_acceptance = [a / drafts for a in self.accepted_per_pos]
        obs.notes.append("mean acceptance length = 1 + accepted / num_drafts (accepted + 1 bonus "
                         "per step, as SGLang's accept len); per-position = accepted_per_pos[i] / "
                         "num_drafts")
        return obs


def _as_float(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise MetricsFormatError(f"{what} is {v!r}, expected a number", "vLLM metrics")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise MetricsFormatError(f"{what} is {v!r}, expected a number", "vLLM metrics") from None


def _normalize_samples(samples: Any) -> list[PromSample]:
    """PromSamples, Prometheus text, or vLLM offline metric objects (``.name`` with ``.value`` or
    ``.values``, e.g. ``vllm.v1.metrics.reader.Counter``/``Vector``) or dicts like them."""
    if isinstance(samples, (str, bytes, bytearray)):
        text = samples.decode("utf-8", "replace") if not isinstance(samples, str) else samples
        return parse_prometheus(text)
    out: list[PromSample] = []
    for i, s in enumerate(samples):
        if isinstance(s, PromSample):
            out.append(s)
            continue
        get = s.get if isinstance(s, dict) else (lambda k, d=None, _s=s: getattr(_s, k, d))
        name = get("name")
        if not isinstance(name, str):
            raise MetricsFormatError(f"metric {i} has no name: {s!r}", "vLLM metrics")
        labels = dict(get("labels") or {})
        values = get("values")
        if values is not None:  # Vector: one value per position
            for pos, v in enumerate(values):
                out.append(PromSample(name, {**labels, "position": str(pos)},
                                      _as_float(v, f"{name}[{pos}]")))
            continue
        v = get("value")
        if v is None:
            raise MetricsFormatError(f"metric {name} has neither value nor values", "vLLM metrics")
        out.append(PromSample(name, labels, _as_float(v, name)))
    return out


def _choose_model(samples: list[PromSample], prefix: str, model_name: str | None, where: str
                  ) -> tuple[list[PromSample], str | None]:
    rel = [s for s in samples if s.name.startswith(prefix)]
    models = sorted({s.labels["model_name"] for s in rel if "model_name" in s.labels})
    if model_name is not None:
        if model_name not in models:
            raise MetricsFormatError(f"no {prefix}* sample for model_name={model_name!r} "
                                     f"(models: {models})", where)
        rel = [s for s in rel if s.labels.get("model_name") == model_name]
        return rel, model_name
    if len(models) > 1:
        raise MetricsFormatError(f"{prefix}* samples for several models {models}", where,
                                 "pass model_name= to pick one")
    return rel, (models[0] if models else None)


def vllm_spec_counters(samples: Any, model_name: str | None = None) -> VLLMSpecCounters:
    """Sum the vLLM spec-decode counters over engines (names with or without ``_total``)."""
    where = "vLLM metrics"
    rel, model = _choose_model(_normalize_samples(samples), _V, model_name, where)

    def total(base: str) -> float | None:
        hit = [s for s in rel if s.name in (_V + base, _V + base + "_total")]
        if not hit:
            return None
        for s in hit:
            if not math.isfinite(s.value):
                raise MetricsFormatError(f"{s.name}{s.labels} is {s.value}: a counter must be a "
                                         "finite number", where)
            if s.value < 0:
                raise MetricsFormatError(f"{s.name} is negative ({s.value})", where)
        # the same counter exported both with and without _total would double: keep one spelling
        names = sorted({s.name for s in hit})
        return sum(s.value for s in hit if s.name == names[-1])

    drafts = total("num_drafts")
    draft_tokens = total("num_draft_tokens")
    accepted = total("num_accepted_tokens")
    if draft_tokens is None or accepted is None:
        seen = sorted({s.name for s in rel})
        raise MetricsFormatError(
            "no vllm:spec_decode_num_draft_tokens / vllm:spec_decode_num_accepted_tokens counters"
            f" (spec samples seen: {seen or 'none'}): speculative decoding looks off", where,
            "start vLLM with --speculative-config and scrape /metrics")
    per_pos = None
    pp = [s for s in rel if s.name in (_V + "num_accepted_tokens_per_pos",
                                       _V + "num_accepted_tokens_per_pos_total")]
    if pp:
        keep = sorted({s.name for s in pp})[-1]
        by_pos: dict[int, float] = {}
        for s in pp:
            if s.name != keep:
                continue
            if "position" not in s.labels:
                raise MetricsFormatError(f"{s.name} sample without a position label", where)
            pos = _count(s.labels["position"], "position label", where)
            v = _finite(s.value, f"{s.name}{{position={pos}}}", where)
            by_pos[pos] = by_pos.get(pos, 0.0) + v
        n = max(by_pos) + 1
        per_pos = [by_pos.get(i, 0.0) for i in range(n)]
    legacy = drafts is None
    return VLLMSpecCounters(drafts, draft_tokens, accepted, per_pos, model, legacy_v0=legacy)


def vllm_spec_metrics(samples: Any, model_name: str | None = None, *,
                      num_speculative_tokens: int | None = None,
                      source: str = "vLLM /metrics") -> ObservedMetrics:
    """Mean acceptance length, acceptance rate and per-position acceptance from vLLM counters
    (Prometheus text or samples, or the offline ``LLM.get_metrics()`` list). These are lifetime
    totals; :mod:`eagle3_nb.observed.client` takes the difference of two scrapes instead."""
    return vllm_spec_counters(samples, model_name).to_observed(source, num_speculative_tokens)


def sglang_spec_metrics(samples: Any, model_name: str | None = None, *, version: str | None = None,
                        source: str = "SGLang /metrics") -> ObservedMetrics:
    """``sglang:spec_accept_length`` and ``sglang:spec_accept_rate`` gauges (``--enable-metrics``).

    Gauges hold the last decode log interval, not a lifetime average. The accept-rate formula
    follows the log line's, which changed after 0.5.9 (give ``version`` to name it)."""
    where = "SGLang metrics"
    rel, model = _choose_model(_normalize_samples(samples), "sglang:spec_accept_", model_name,
                               where)
    lens = [s for s in rel if s.name == "sglang:spec_accept_length"]
    rates = [s for s in rel if s.name == "sglang:spec_accept_rate"]
    if not lens:
        raise MetricsFormatError("no sglang:spec_accept_length gauge: speculative decoding looks "
                                 "off or metrics are disabled", where,
                                 "start the server with --enable-metrics and a draft model")
    for s in lens + rates:
        _finite(s.value, f"{s.name}{s.labels}", where)
    vals = [s.value for s in lens]
    mean_len = sum(vals) / len(vals)
    if mean_len < 1.0:
        raise MetricsFormatError(f"sglang:spec_accept_length is {mean_len}: below 1 means "
                                 "speculative decoding is off or no decode batch was logged yet",
                                 where, "send requests, then scrape again")
    obs = ObservedMetrics(engine="sglang", source=source, mean_accept_length=mean_len,
                          vllm_mean_acceptance_length=mean_len)
    obs.notes.append("sglang:spec_accept_length is a gauge: the last decode log interval only")
    if model:
        obs.details["model_name"] = model
    if len(vals) > 1:
        obs.notes.append(f"{len(vals)} sglang:spec_accept_length samples (ranks?), averaged")
        obs.details["samples"] = vals
    if rates:
        obs.accept_rate = sum(s.value for s in rates) / len(rates)
        _version_tuple(version)
        convention = sglang_log_rate_convention(version)
        obs.accept_rate_convention = convention or RATE_SGLANG_LOG_UNKNOWN
        if convention is not None:
            obs.version_detected = str(version)
            if convention == RATE_SGLANG_LOG_NEW:
                obs.draft_acceptance_rate = obs.accept_rate
    return obs


# ------------------------------------------------------------------------------------------------
# auto-detection

_NUMBER_RE = re.compile(r"^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$")


def _from_number(x: float, source: str) -> ObservedMetrics:
    if not math.isfinite(x):
        raise MetricsFormatError(f"observed accept length {x} is not finite", source)
    if x < 1.0:
        raise MetricsFormatError(
            f"observed accept length {x} is below 1; accept lengths count accepted + 1 bonus "
            "token per verify step (1..k+1)", source,
            "if this is an accept rate, pass the accept length (or the log line) instead")
    obs = ObservedMetrics(engine="unknown", source=source, mean_accept_length=float(x),
                          vllm_mean_acceptance_length=float(x))
    obs.notes.append("a bare number, read as the mean accept length (accepted + 1 bonus per "
                     "verify step; SGLang's accept len and vLLM's mean acceptance length both "
                     "count this way)")
    return obs


def _from_json(data: Any, source: str, kw: dict[str, Any]) -> ObservedMetrics:
    if isinstance(data, list):
        if data and all(isinstance(d, dict) and "internal_states" in d for d in data):
            raise MetricsFormatError("a list of server_info objects; give one", source)
        return parse_sglang_responses(data, kw.get("version"), source)
    if not isinstance(data, dict):
        raise MetricsFormatError(f"JSON {type(data).__name__} is none of the known formats", source)
    if "internal_states" in data:
        return parse_sglang_server_info(data, source)
    if {"engine", "source", "mean_accept_length", "accept_rate_convention"} <= set(data):
        return _from_saved(data, source)  # what `eagle3-nb observe --out` wrote
    if "meta_info" in data or "completion_tokens" in data or any(
            k.startswith("spec_") for k in data):
        return parse_sglang_responses([data], kw.get("version"), source)
    raise MetricsFormatError(
        f"JSON object with keys {sorted(data)[:12]} is none of: an SGLang /generate response "
        "(meta_info), a meta_info (spec_verify_ct ...), a /get_server_info (internal_states)",
        source)


def _from_saved(data: dict[str, Any], source: str) -> ObservedMetrics:
    names = {f.name for f in fields(ObservedMetrics)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise MetricsFormatError(f"saved figures with unknown fields {unknown[:8]}", source,
                                 "write them again with this version's eagle3-nb observe --out")
    obs = ObservedMetrics(**data)
    if obs.mean_accept_length is not None:
        obs.mean_accept_length = _finite(obs.mean_accept_length, "mean_accept_length", source)
    obs.notes = [*obs.notes, f"read from {source} (written by eagle3-nb observe)"]
    return obs


def parse_observed(observed: Any, *, version: str | None = None,
                   num_draft_tokens: int | None = None, num_speculative_tokens: int | None = None,
                   model_name: str | None = None) -> ObservedMetrics:
    """Whatever the user has about the engine's acceptance -> :class:`ObservedMetrics`.

    Accepts a number (``1.9`` or ``"1.9"``: the mean accept length), an :class:`ObservedMetrics`,
    a path to a file, or the text itself: an SGLang log (``accept len:``), a vLLM log
    (``SpecDecoding metrics:``), Prometheus text (``vllm:spec_decode_*`` or
    ``sglang:spec_accept_*``),
    or JSON (a ``/generate`` response or a list / JSON Lines of them, a ``meta_info``, a
    ``/get_server_info``). Keyword arguments pass to the matching parser.
    """
    kw = {"version": version}
    if isinstance(observed, ObservedMetrics):
        return observed
    if isinstance(observed, bool):
        raise MetricsFormatError(f"observed is {observed!r}", "observed",
                                 "give a number, a file, or the engine's text")
    if isinstance(observed, (int, float)):
        return _from_number(float(observed), "number")
    source = "text"
    if isinstance(observed, (dict, list)):
        return _from_json(observed, "JSON object", kw)
    if isinstance(observed, os.PathLike):
        path = Path(observed)
        if not path.is_file():
            raise MetricsFormatError("file not found", str(path))
        observed, source = path.read_text(encoding="utf-8", errors="replace"), str(path)
    elif isinstance(observed, (bytes, bytearray)):
        observed = observed.decode("utf-8", errors="replace")
    if not isinstance(observed, str):
        raise MetricsFormatError(f"cannot read {type(observed).__name__} as engine metrics",
                                 "observed", "give a number, a file path, or the engine's text")
    text = observed
    if source == "text":
        if _NUMBER_RE.match(text):
            return _from_number(float(text), "number")
        one_line = text.strip()
        if one_line and "\n" not in one_line and len(one_line) < 4096:
            p = Path(one_line).expanduser()
            try:
                is_file = p.is_file()
            except OSError:
                is_file = False
            if is_file:
                text, source = p.read_text(encoding="utf-8", errors="replace"), str(p)
            elif re.search(r"\.(log|txt|json|jsonl|prom|out)$", one_line) or one_line.startswith(
                    ("/", "./", "~")):
                raise MetricsFormatError("file not found", one_line)
    stripped = text.strip()
    if not stripped:
        raise MetricsFormatError("empty input: no engine metrics to read", source)
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            data = None
            if stripped[0] == "{":  # JSON Lines
                try:
                    data = [json.loads(ln) for ln in stripped.splitlines() if ln.strip()]
                except (ValueError, RecursionError):
                    data = None
        if data is not None:
            return _from_json(data, source, kw)
    if "SpecDecoding metrics:" in text:
        return summarize_vllm_log(parse_vllm_log(text), source=source,
                                  num_speculative_tokens=num_speculative_tokens)
    if "accept len:" in text:
        return summarize_sglang_log(parse_sglang_log(text), version=version,
                                    num_draft_tokens=num_draft_tokens, source=source)
    if "vllm:spec_decode" in text:
        return vllm_spec_metrics(text, model_name, source=source,
                                 num_speculative_tokens=num_speculative_tokens)
    if "sglang:spec_accept" in text:
        return sglang_spec_metrics(text, model_name, version=version, source=source)
    if "Decode batch" in text:
        parse_sglang_log(text)  # raises: decode lines without accept len
    raise MetricsFormatError(
        "cannot tell what this is: expected a number (mean accept length), an SGLang log with "
        "'accept len:', a vLLM log with 'SpecDecoding metrics:', Prometheus text with "
        "vllm:spec_decode_* or sglang:spec_accept_*, or SGLang JSON (/generate meta_info, "
        "/get_server_info)", source)
