"""SGLang's decode log line (``Decode batch, ... accept len: 2.80, accept rate: 0.70, ...``): the
lines that carry ``accept len``, and one figure from a series of them.

Source: docs/sglang-serving.md §4.3 (scheduler_metrics_mixin.py, log_decode_stats, read in the
0.4.10, 0.5.9, 0.5.16 and 0.5.23 wheels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eagle3_nb.engines.sglang.formulas import (RATE_SGLANG_LOG_NEW, RATE_SGLANG_LOG_OLD,
                                               RATE_SGLANG_LOG_UNKNOWN, checked_version,
                                               sglang_log_rate_convention)
from eagle3_nb.observation import MetricsFormatError, ObservedMetrics, count, finite

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
        accept_len = finite(vals.pop("accept_len", None), "accept len", where)
        rec = SGLangDecodeLine(line_no=no, accept_len=accept_len, raw=line.rstrip("\n"))
        for key in ("accept_rate", "token_usage", "gen_throughput"):
            if key in vals:
                setattr(rec, key, finite(vals[key], key.replace("_", " "), where))
        for key in ("running_req", "num_token", "queue_req"):
            if key in vals:
                setattr(rec, key, count(vals[key], "#" + key.replace("_", "-"), where))
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
                          mean_acceptance_length=mean_len, notes=notes)
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
        checked_version(version)  # a version that cannot be read is bad input
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
