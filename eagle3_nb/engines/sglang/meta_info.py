"""SGLang's per-request figures: ``/generate`` meta_info in each release family's field names,
one request at a time and pooled over many.

Source: docs/sglang-serving.md §4.4 (tokenizer_manager.py, meta_info, read in the 0.4.10, 0.5.9,
0.5.16 and 0.5.23 wheels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from eagle3_nb.engines.sglang.formulas import (RATE_SGLANG_REQUEST, SGLANG_META_0_5_9_NAMES,
                                               SGLANG_META_EXPECTED, SGLANG_META_LEGACY_NAMES,
                                               SGLANG_META_NEW_NAMES, sglang_meta_family)
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, count, finite,
                                   histogram_to_lengths, int_list, load_json,
                                   per_position_from_histogram)


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
