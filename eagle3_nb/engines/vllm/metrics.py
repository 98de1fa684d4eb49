"""vLLM's own words about speculative decoding: its `SpecDecoding metrics:` log line (the 0.33
format and the earliest V1 format) and its `vllm:spec_decode_*` counters (Prometheus text or the
offline `LLM.get_metrics()` objects).

Source: docs/speculators-and-vllm.md §6 (vllm/v1/spec_decode/metrics.py, SpecDecodingLogging and
SpecDecodingProm, read in 0.33.0).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from eagle3_nb.engines.registry import Reader
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, check_positions,
                                   choose_model, count, draft_position, finite, normalize_samples)

RATE_VLLM = "vllm: accepted draft tokens / drafted tokens, bonus excluded"


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
                           accepted=count(vals["accepted"].group(1), "Accepted", where),
                           drafted=count(vals["drafted"].group(1), "Drafted", where),
                           raw=line.rstrip("\n"))
        if vals["mean_acceptance_length"]:
            rec.format = "0.33"
            rec.mean_acceptance_length = finite(vals["mean_acceptance_length"].group(1),
                                                 "Mean acceptance length", where)
        for key in ("accepted_throughput", "drafted_throughput"):
            if vals[key]:
                setattr(rec, key, finite(vals[key].group(1), key.replace("_", " "), where))
        rate = vals["avg_draft_acceptance_rate"] or vals["draft_acceptance_rate"]
        if rate:
            rec.draft_acceptance_rate = finite(rate.group(1), "draft acceptance rate", where) / 100
        pp = _VLLM_PERPOS_RE.search(body)
        if pp:
            items = [s for s in (x.strip() for x in pp.group(1).split(",")) if s]
            if not items:
                raise MetricsFormatError("empty Per-position acceptance rate list", where)
            check_positions(len(items), "Per-position acceptance rate list", where)
            rec.per_position = [finite(s, f"per-position acceptance rate {i}", where)
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
        obs.mean_acceptance_length = 1.0 + acc / nd
        obs.mean_accept_length = obs.mean_acceptance_length
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
        obs.mean_acceptance_length = 1.0 + acc / drafts
        obs.mean_accept_length = obs.mean_acceptance_length
        per = self.num_draft_tokens / drafts
        if abs(per - round(per)) < 1e-6:
            obs.draft_tokens_per_step = int(round(per))
        if self.accepted_per_pos:
            obs.per_position_acceptance = [a / drafts for a in self.accepted_per_pos]
        obs.notes.append("mean acceptance length = 1 + accepted / num_drafts (accepted + 1 bonus "
                         "per step, as SGLang's accept len); per-position = accepted_per_pos[i] / "
                         "num_drafts")
        return obs




def vllm_spec_counters(samples: Any, model_name: str | None = None) -> VLLMSpecCounters:
    """Sum the vLLM spec-decode counters over engines (names with or without ``_total``)."""
    where = "vLLM metrics"
    rel, model = choose_model(normalize_samples(samples), _V, model_name, where)

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
            pos = draft_position(s.labels["position"], "position label", where)
            v = finite(s.value, f"{s.name}{{position={pos}}}", where)
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



# ------------------------------------------------------------------------------------------------
# the readers eagle3_nb.observed.metrics tries, in rank order over every engine

def _read_log(text: str, source: str, **options: Any) -> ObservedMetrics:
    return summarize_vllm_log(parse_vllm_log(text), source=source,
                              num_speculative_tokens=options.get("num_speculative_tokens"))


def _read_counters(text: str, source: str, **options: Any) -> ObservedMetrics:
    return vllm_spec_metrics(text, options.get("model_name"), source=source,
                             num_speculative_tokens=options.get("num_speculative_tokens"))


READERS = (
    Reader("log", "text", 0, lambda text: "SpecDecoding metrics:" in text, _read_log,
           "a vLLM log with 'SpecDecoding metrics:'"),
    Reader("counters", "text", 1, lambda text: "vllm:spec_decode" in text, _read_counters,
           "Prometheus text with vllm:spec_decode_*"),
)

# What vLLM calls the kit's figures, in its SpecDecoding metrics log line (labels only)
FIGURE_NAMES = {"mean_acceptance_length": "Mean acceptance length",
                "per_position_acceptance": "Per-position acceptance rate"}
