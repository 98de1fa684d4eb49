"""What the counts of one pass mean: the findings of checks 1-5 and 7 (8 and 10: vocab.py)."""

from __future__ import annotations

from typing import Any

from eagle3_nb.checks.data.scan import Scan
from eagle3_nb.findings import ERROR, INFO, WARNING, Finding

# Check 5 quotes what the published recipes used (docs/training-data.md); it sets no threshold.
RECIPES = [
    {"source": "SpecForge examples/configs/llama3.1-8b-eagle3-online.yaml",
     "data": "ShareGPT (sharegpt_train.jsonl)", "num_epochs": 10, "max_steps": 10000,
     "max_length": 4096},
    {"source": "speculators user_guide/tutorials/train.md in its docs (Expected Results)",
     "data": "5K ShareGPT samples", "num_epochs": 5,
     "note": "sanity-check runs, not production numbers; for production quality, train on "
             "significantly more data"},
]


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def template_findings(s: Scan, serve_thinking: bool | None) -> list[Finding]:
    """Check 1: think markers supervised that the served target never drafts, or missing."""
    out = []
    mode = {True: "thinking", False: "non-thinking", None: "the template's default mode"}
    ev = {"rows_checked": s.token_rows, "served_mode": mode[serve_thinking],
          "think_supervised": s.think_supervised, "think_missing": s.think_missing,
          "rerendered": s.rerendered, "rerender_equal": s.rerender_equal}
    if s.think_supervised:
        out.append(Finding("TRAIN_TEMPLATE_MISMATCH", ERROR,
                           f"{s.think_supervised} of {s.token_rows} rows supervise think "
                           f"markers, but the target is served {mode[serve_thinking]}: its "
                           "answers start after the (empty) think block, so the draft learned "
                           "tokens it is never asked to draft",
                           {**ev, "examples": s.examples.get("think_supervised", [])}))
    if s.think_missing:
        out.append(Finding("TRAIN_TEMPLATE_MISMATCH", ERROR,
                           f"{s.think_missing} of {s.token_rows} rows supervise no think "
                           "markers, but served thinking the target writes a think block first: "
                           "the draft never saw one", ev))
    return out


def mask_findings(s: Scan) -> list[Finding]:
    """Check 2: empty masks (and the trainer's header never found); misplaced span edges."""
    out = []
    if s.header_missing and s.header_missing == s.conversations:
        out.append(Finding("LOSS_MASK_EMPTY", ERROR,
                           f"the trainer template's assistant header "
                           f"{s.trainer.assistant_header!r} occurs in none of the "
                           f"{s.conversations} rendered conversations: every loss mask is "
                           "empty (the trainer only prints 'No assistant response spans')",
                           {"empty_rows": s.empty, "rows": s.token_rows,
                            "header_missing": s.header_missing,
                            "end_of_turn_missing": s.eot_missing}))
    elif s.empty:
        sev = ERROR if s.empty == s.token_rows else WARNING
        out.append(Finding("LOSS_MASK_EMPTY", sev,
                           f"{s.empty} of {s.token_rows} rows ({s.empty / s.token_rows:.1%}) "
                           "have no supervised token: they teach nothing (SpecForge drops such rows before "
                           "EAGLE-3 training, minimum_valid_tokens: the conversations they "
                           "held are lost)",
                           {"empty_rows": s.empty, "rows": s.token_rows,
                            "examples": s.examples.get("empty", [])}))
    if s.bad_starts or s.bad_ends:
        out.append(Finding("LOSS_MASK_COVERAGE", WARNING,
                           f"{s.bad_starts} of {s.spans} supervised spans do not start right "
                           f"after the assistant header, {s.bad_ends} do not end at the "
                           "end-of-turn: the mask covers other tokens than the answers",
                           {"bad_starts": s.bad_starts, "bad_ends": s.bad_ends,
                            "spans": s.spans,
                            "examples": s.examples.get("bad_start", []) +
                            s.examples.get("bad_end", [])}))
    return out


def coverage_findings(s: Scan) -> list[Finding]:
    """Check 3: turns supervised, rows dropped by the parser or failed in regeneration."""
    out = []
    failed = sum(n for status, n in s.status.items() if status != "success")
    lost = s.dropped_leading + s.truncated_turns
    if failed or lost or s.no_conversation:
        out.append(Finding("TRAIN_ROWS_DROPPED", WARNING,
                           f"{failed} rows marked failed in regeneration "
                           f"({dict(s.status)}), {s.dropped_leading} leading non-user turns "
                           f"and {s.truncated_turns} turns after a role-order break dropped "
                           f"by the parser, {s.no_conversation} rows without conversations",
                           {"status": dict(s.status), "dropped_leading": s.dropped_leading,
                            "truncated_turns": s.truncated_turns,
                            "no_conversation": s.no_conversation,
                            "examples": s.examples.get("failed_rows", []) +
                            s.examples.get("dropped_leading", []) +
                            s.examples.get("truncated_turns", [])}))
    kept = s.turns_kept
    if not s.last_turn_only and kept > s.turns_covered and not s.header_missing:
        out.append(Finding("LOSS_MASK_COVERAGE", WARNING,
                           f"{s.turns_covered} of {kept} assistant turns are supervised",
                           {"assistant_turns": kept, "covered": s.turns_covered}))
    return out


def truncation_findings(s: Scan, draft_positions: int | None, serve_context: int | None
                        ) -> list[Finding]:
    """Check 4: rows cut at max_length; max_length against serving and the draft."""
    out = []
    if s.rows_cut:
        cut = f", {s.tokens_cut} supervised tokens lost" if s.tokens_cut else ""
        out.append(Finding("TRAIN_TRUNCATED", WARNING,
                           f"{s.rows_cut} of {s.token_rows} rows end inside an answer at "
                           f"max_length {s.max_length}{cut}: the tails and end-of-turn of long "
                           "answers are never trained",
                           {"rows_cut": s.rows_cut, "at_max_length": s.at_max_length,
                            "tokens_cut": s.tokens_cut, "max_length": s.max_length,
                            "examples": s.examples.get("cut", [])}))
    limits = {k: v for k, v in (("serving_context", serve_context),
                                ("draft_max_position_embeddings", draft_positions)) if v}
    short = {k: v for k, v in limits.items() if s.max_length and v > s.max_length}
    if short:
        out.append(Finding("TRAIN_MAX_LENGTH_SHORT", INFO,
                           f"training saw at most {s.max_length} positions; "
                           + ", ".join(f"{k} is {v}" for k, v in short.items())
                           + ": acceptance past that position is untrained",
                           {"max_length": s.max_length, **limits}))
    return out


def scale_findings(s: Scan, epochs: int | None, max_steps: int | None) -> list[Finding]:
    """Check 5: how much the draft saw, next to what the published recipes used."""
    seen = s.supervised * epochs if epochs else None
    return [Finding("TRAIN_DATA_SCALE", INFO,
                    f"{s.rows} rows ({s.conversations} conversations), {s.supervised} "
                    f"supervised tokens, {epochs or 'unknown'} epochs"
                    + (f" ({seen} supervised tokens seen)" if seen else "")
                    + "; published recipes: " + "; ".join(
                        f"{r['data']}, {r['num_epochs']} epochs ({r['source']})"
                        for r in RECIPES),
                    {"rows": s.rows, "conversations": s.conversations,
                     "supervised_tokens": s.supervised, "epochs": epochs,
                     "max_steps": max_steps, "supervised_tokens_seen": seen,
                     "recipes": RECIPES})]


def reasoning_findings(s: Scan, serve_thinking: bool | None, has_switch: bool | None
                       ) -> list[Finding]:
    """Check 7: reasoning_content and think markers against how the target is served."""
    out = []
    if s.content_markers:
        out.append(Finding("TRAIN_REASONING_MISMATCH", ERROR,
                           f"{s.content_markers} assistant answers carry <think> markers in "
                           "their content (regeneration skips these; validation "
                           "--strict-think-markers rejects them)",
                           {"content_markers": s.content_markers,
                            "examples": s.examples.get("content_markers", [])}))
    if serve_thinking is True and s.assistant_turns and not s.reasoning_turns:
        out.append(Finding("TRAIN_REASONING_MISMATCH", ERROR,
                           "served thinking, but no assistant turn has reasoning_content: "
                           "regenerate with --reasoning save",
                           {"assistant_turns": s.assistant_turns, "reasoning_turns": 0}))
    elif s.reasoning_turns and (serve_thinking is False or has_switch is False):
        why = "served non-thinking" if serve_thinking is False else \
            "the chat template has no thinking switch"
        out.append(Finding("TRAIN_REASONING_MISMATCH", WARNING,
                           f"{s.reasoning_turns} of {s.assistant_turns} assistant turns have "
                           f"reasoning_content, but {why}: the reasoning the template renders "
                           "is supervised text the served target never writes",
                           {"assistant_turns": s.assistant_turns,
                            "reasoning_turns": s.reasoning_turns}))
    return out


# A temperature-0 regeneration agrees with the target's argmax up to numerical near-ties (bf16
# dumps, other kernels); answers the target did not write fall far below this.
ON_POLICY_FLOOR = 0.9


def policy_findings(result: dict[str, Any], provenance: dict[str, int]) -> list[Finding]:
    a = result.get("agreement")
    if a is None and result.get("source"):
        return [Finding("TRAIN_DATA_OFF_POLICY", INFO,
                        f"not measured: no {result['source']} row could be scored (a dump "
                        "must hold its row's token ids and the last hidden state)", result)]
    if a is None:
        regenerated = provenance.get("success", 0)
        return [Finding("TRAIN_DATA_OFF_POLICY", INFO,
                        f"not measured (no dumps or target); {regenerated} rows carry a "
                        "regeneration status 'success'" if provenance else
                        "not measured (no dumps or target), and the rows carry no regeneration "
                        "status: whether the answers are the target's own is unknown",
                        {**result, "status": provenance})]
    if a < ON_POLICY_FLOOR:
        return [Finding("TRAIN_DATA_OFF_POLICY", WARNING,
                        f"the target's own next token matches the recorded one on {a:.1%} of "
                        f"{result['positions']} supervised positions (a temperature-0 "
                        "regeneration gives about 100%): the draft learned answers the target "
                        "does not give", result)]
    return [Finding("TRAIN_DATA_OFF_POLICY", INFO,
                    f"on-policy: the recorded answer is the target's argmax on {a:.1%} of "
                    f"{result['positions']} supervised positions", result)]
