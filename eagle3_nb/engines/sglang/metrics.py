"""SGLang's own words about speculative decoding: its decode log line, /generate meta_info,
/get_server_info and its Prometheus gauges, each in every surveyed release's field names, and
which accept-rate formula each release prints.

Sources: docs/sglang-serving.md §4.3-4.4 (the decode log line, the `sglang:spec_accept_rate`
gauge and /generate meta_info, read in the 0.4.10, 0.5.9, 0.5.16 and 0.5.23 wheels:
python/sglang/srt/managers/scheduler_metrics_mixin.py, log_decode_stats, and
python/sglang/srt/managers/tokenizer_manager.py, meta_info).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from eagle3_nb.engines.profile import parse_version
from eagle3_nb.errors import EngineSpecError
from eagle3_nb.engines.registry import Reader
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, choose_model, count, finite,
                                   histogram_to_lengths, int_list, load_json, normalize_samples,
                                   per_position_from_histogram)

RATE_SGLANG_LOG_OLD = ("sglang<=0.5.9 log/gauge: accepted tokens incl. bonus / "
                       "(verify steps x num_draft_tokens)")
RATE_SGLANG_LOG_NEW = ("sglang>0.5.9 log/gauge (read in 0.5.23): correct drafts / "
                       "(verify steps x (num_draft_tokens - 1)), bonus excluded")
RATE_SGLANG_LOG_UNKNOWN = ("sglang log/gauge, formula unknown: <=0.5.9 accepted incl. bonus / "
                           "(verify steps x num_draft_tokens); later correct drafts / "
                           "(verify steps x (num_draft_tokens - 1))")
RATE_SGLANG_REQUEST = ("sglang per-request spec_accept_rate: correct drafts / "
                       "(verify steps x (num_draft_tokens - 1)), bonus excluded")

# The last SGLang release whose log line and gauge print the old accept-rate formula. Read in
# 0.5.9 (old) and 0.5.16 / 0.5.23 (new); the releases in between are not read, and the new
# formula is assumed for them (the readers say so in their notes).
SGLANG_LAST_OLD_RATE = (0, 5, 9)

# /generate meta_info field names per family of releases (docs/sglang-serving.md §4.4)
SGLANG_META_NEW_NAMES = ("spec_num_correct_drafts", "spec_num_proposed_drafts",
                         "spec_correct_drafts_histogram")
SGLANG_META_LEGACY_NAMES = ("spec_accepted_drafts", "spec_proposed_drafts")
SGLANG_META_0_5_9_NAMES = ("spec_accept_token_num", "spec_draft_token_num")
SGLANG_META_EXPECTED = {
    "0.5.23": "spec_verify_ct, spec_accept_length, spec_accept_rate, spec_num_correct_drafts, "
              "spec_num_proposed_drafts, spec_correct_drafts_histogram",
    "0.5.16": "those of 0.5.23 plus the legacy spec_accepted_drafts, spec_proposed_drafts, "
              "spec_accept_histogram",
    "0.5.9": "spec_verify_ct, spec_accept_length, spec_accept_rate, spec_accept_token_num, "
             "spec_draft_token_num, spec_accept_histogram",
    "0.4.10": "spec_verify_ct only (plus completion_tokens)",
}


def version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """'0.5.23' / '0.4.10.post2' / 'v0.5.9' -> (0, 5, 23); None stays None. One grammar for the
    whole kit: engines.profile.parse_version."""
    return None if version is None else parse_version(str(version))


def sglang_log_rate_convention(version: str | None) -> str | None:
    """The accept-rate formula of SGLang's decode log line and spec_accept_rate gauge in this
    release; None when no version is given (the readers then infer it from the numbers)."""
    vt = version_tuple(version)
    if vt is None:
        return None
    return RATE_SGLANG_LOG_OLD if vt <= SGLANG_LAST_OLD_RATE else RATE_SGLANG_LOG_NEW


def sglang_meta_family(version: str) -> str:
    """Which documented meta_info field-name set a release uses: "0.5.16+", "0.5.9", "0.4.10",
    or "undocumented" (a release whose names the notes do not record)."""
    vt = version_tuple(version)
    assert vt is not None
    if vt >= (0, 5, 16):
        return "0.5.16+"
    if vt == (0, 5, 9):
        return "0.5.9"
    if (0, 4, 0) <= vt <= (0, 4, 10):
        return "0.4.10"
    return "undocumented"


def _version_tuple(version: str | None) -> tuple[int, int, int] | None:
    try:
        return version_tuple(version)
    except EngineSpecError:
        raise MetricsFormatError(f"cannot read version {version!r}", None,
                                 "give it like 0.5.23, 0.5.16, 0.5.9 or 0.4.10") from None



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
    first, prefill-sampled token); ``mean_acceptance_length`` = ``1 + correct / verify`` where
    the counts exist. ``num_correct_drafts`` / ``num_proposed_drafts``: draft tokens accepted /
    proposed (bonus excluded); in 0.5.9 these are ``spec_accept_token_num`` /
    ``spec_draft_token_num``. ``correct_drafts_histogram[i]`` = verify steps with i correct drafts.
    """

    version_detected: str
    verify_ct: int
    completion_tokens: int | None = None
    accept_length: float | None = None
    accept_length_reported: float | None = None
    mean_acceptance_length: float | None = None
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
    obj = load_json(obj, where)
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
    verify = count(meta["spec_verify_ct"], "spec_verify_ct", where)
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
        st.completion_tokens = count(meta["completion_tokens"], "completion_tokens", where)
        st.accept_length = st.completion_tokens / verify
    if "spec_accept_length" in meta:
        st.accept_length_reported = finite(meta["spec_accept_length"], "spec_accept_length", where)
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
        if a is not None and b is not None and count(a, new, where) != count(b, legacy, where):
            raise MetricsFormatError(f"{new}={a} disagrees with its legacy name {legacy}={b}",
                                     where)
        if a is not None:
            return count(a, new, where)
        return None if b is None else count(b, legacy, where)

    if detected in ("0.5.23", "0.5.16"):
        st.num_correct_drafts = pick("spec_num_correct_drafts", "spec_accepted_drafts")
        st.num_proposed_drafts = pick("spec_num_proposed_drafts", "spec_proposed_drafts")
        hist_new = meta.get("spec_correct_drafts_histogram")
        hist_old = meta.get("spec_accept_histogram")
        if hist_new is not None:
            st.correct_drafts_histogram = int_list(hist_new, "spec_correct_drafts_histogram",
                                                    where)
            if hist_old is not None and int_list(hist_old, "spec_accept_histogram",
                                                  where) != st.correct_drafts_histogram:
                raise MetricsFormatError("spec_correct_drafts_histogram disagrees with its "
                                         "legacy name spec_accept_histogram", where)
        elif hist_old is not None:
            st.correct_drafts_histogram = int_list(hist_old, "spec_accept_histogram", where)
    elif detected == "0.5.9":
        if "spec_accept_token_num" in meta:
            st.num_correct_drafts = count(meta["spec_accept_token_num"], "spec_accept_token_num",
                                           where)
        if "spec_draft_token_num" in meta:
            st.num_proposed_drafts = count(meta["spec_draft_token_num"], "spec_draft_token_num",
                                            where)
        if "spec_accept_histogram" in meta:
            st.correct_drafts_histogram = int_list(meta["spec_accept_histogram"],
                                                    "spec_accept_histogram", where)
    elif detected == "0.4.10":
        notes.append("0.4.10 format: spec_verify_ct only; accept length = completion_tokens / "
                     "spec_verify_ct, no draft counts")
    else:
        notes.append(f"spec fields {spec_keys} match no documented version; only the accept "
                     "length is read")
        if "spec_accept_histogram" in meta:
            st.correct_drafts_histogram = int_list(meta["spec_accept_histogram"],
                                                    "spec_accept_histogram", where)
    if "spec_accept_rate" in meta:
        st.accept_rate = finite(meta["spec_accept_rate"], "spec_accept_rate", where)
        st.accept_rate_convention = RATE_SGLANG_REQUEST
    elif st.num_correct_drafts is not None and st.num_proposed_drafts:
        st.accept_rate = st.num_correct_drafts / st.num_proposed_drafts
        st.accept_rate_convention = RATE_SGLANG_REQUEST
    if st.num_correct_drafts is not None:
        st.mean_acceptance_length = 1.0 + st.num_correct_drafts / verify
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
        obs.mean_acceptance_length = 1.0 + obs.n_accepted / verify
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
        obs.accept_length_histogram = histogram_to_lengths(hist)
        obs.per_position_acceptance = per_position_from_histogram(hist)
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
            obj = load_json(s, source)
        else:
            obj = [load_json(ln, f"{source} line {i}")
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
        _version_tuple(version)
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
