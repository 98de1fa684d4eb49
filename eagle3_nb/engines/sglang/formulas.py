"""Which accept-rate formula SGLang's decode log line and gauge print in each release, and which
/generate meta_info field names each family of releases uses.

Sources: docs/sglang-serving.md §4.3-4.4 (read in the 0.4.10, 0.5.9, 0.5.16 and 0.5.23 wheels:
python/sglang/srt/managers/scheduler_metrics_mixin.py, log_decode_stats, and
python/sglang/srt/managers/tokenizer_manager.py, meta_info).
"""

from __future__ import annotations

from eagle3_nb.engines.profile import parse_version
from eagle3_nb.errors import EngineSpecError
from eagle3_nb.observation import MetricsFormatError

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


def checked_version(version: str | None) -> tuple[int, int, int] | None:
    try:
        return version_tuple(version)
    except EngineSpecError:
        raise MetricsFormatError(f"cannot read version {version!r}", None,
                                 "give it like 0.5.23, 0.5.16, 0.5.9 or 0.4.10") from None
