"""Notebook 02's views: is the vocabulary mapping right? Pure functions: the `check_vocab` JSON
(`eagle3-nb vocab --json`) and/or a `VocabMapping` in, HTML string or plotly figure out.
This module holds the verdict, the entries table, the engines and coverage panels; the figure is
in vocab_figure, the lookup in vocab_lookup, the shared cells in vocab_cells.

The rule they follow is the kit's: prove the table right or wrong from what the checkpoint holds,
never guess. Evidence comes first and is worded so a person can check it against the tensors
(`d2t[i]`, `i + d2t[i]`, `t2d[...]`); when nothing decides, the view says "undecided" and shows
what each reading maps to. Every checkpoint or tokenizer string is escaped.

Engines compute `target_id = draft_id + d2t[draft_id]` (the "offsets" reading; without a d2t,
`target_id = draft_id`). The "absolute" reading (`target_id = d2t[draft_id]`) is what a table
stored by mistake would mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eagle3_nb.findings import (ABSOLUTE, AMBIGUOUS, ARANGE_SUBTRACTED, CODES, IDENTITY, INVALID,
                                LOW_COVERAGE, MISSING, OFFSET)
from eagle3_nb.viz.html import (AMBER, BORDER, GREEN, MUTED, RED, SEVERITY_COLORS, SOLID_GREEN,
                                SOLID_RED, HTMLString, badge, cell, code, esc, evidence_note,
                                fmt_num, muted, note, panel, show, style, table)
from eagle3_nb.viz.vocab_cells import (FORMAT_TEXT, draft_record, mono, reading_cell, section,
                                       token_cell, token_of, yes_no)
from eagle3_nb.viz.vocab_figure import MAX_POINTS, mapping_figure
from eagle3_nb.viz.vocab_lookup import MAX_LOOKUP_IDS, lookup, lookup_html

__all__ = ["FORMAT_HELP", "FORMAT_TEXT", "MAX_LOOKUP_IDS", "MAX_POINTS", "MAX_ROWS", "WHAT_TO_DO",
           "coverage_html", "engines_html", "entries_table_html", "leading_zeros", "lookup",
           "lookup_html", "mapping_figure", "spot_checks", "verdict_html"]

MAX_ROWS = 40            # suspicious rows in the entries table

FORMAT_HELP = {
    OFFSET: "d2t holds offsets: target_id = draft_id + d2t[draft_id], which is what every engine "
            "computes",
    ABSOLUTE: "d2t holds absolute target ids, but every engine adds arange to it: "
              "draft id i becomes target id i + d2t[i]",
    MISSING: "the draft vocab is pruned and there is no d2t: every engine uses draft id i as "
             "target id i",
    IDENTITY: "draft vocab = target vocab: draft id i is target id i",
    AMBIGUOUS: "d2t reads as valid offsets and as valid absolute ids, and nothing in the "
               "checkpoint decides (no t2d)",
    INVALID: "d2t is not a usable table under either reading",
    ARANGE_SUBTRACTED: "d2t holds correct offsets with arange subtracted once more: engines "
                       "compute target id = i + d2t[i], which is now the offset, not the token",
}
WHAT_TO_DO = {
    OFFSET: "Nothing to fix here. Leading zeros in d2t are normal: they mean the lowest target "
            "ids are among the kept ones. Subtracting arange from this table would break it.",
    ABSOLUTE: "Write a repaired copy with <code>eagle3-nb convert SRC DST --fix-d2t</code> (the "
              "source is never modified; the copy is re-read and checked before it is kept).",
    MISSING: "Rebuild d2t from t2d (<code>eagle3-nb convert SRC DST --fix-d2t</code>) or from the "
             "training token counts; the trainer's vocab cache holds both tables.",
    IDENTITY: "Nothing to map: the draft predicts target ids directly.",
    AMBIGUOUS: "Change nothing on a guess: trainers always write offsets. Look up a few draft ids "
               "with a tokenizer (below) and check which reading gives the tokens you expect, or "
               "find the trainer's t2d.",
    INVALID: "Re-export d2t/t2d from the trainer's vocab cache; no engine can use this table.",
    ARANGE_SUBTRACTED: "Write a repaired copy with <code>eagle3-nb convert SRC DST --fix-d2t</code>: "
                       "t2d proves the table, and the repair adds arange back.",
}


# ----------------------------------------------------------------------------- tables


def spot_checks(mapping, n_extra: int = 2) -> list[dict[str, Any]]:
    """A few draft ids a person can check by hand against the tensors: the first, the first
    nonzero offset, the first suspicious entries, the middle and the last."""
    t = mapping.tables()
    if not t.usable or t.Vd == 0:
        return []
    picks = [0]
    if t.d2t is not None and t.d2t.any():
        picks.append(int(np.flatnonzero(t.d2t)[0]))
    picks += list(mapping.suspicious_entries())[:n_extra]
    picks += [t.Vd // 2, t.Vd - 1]
    out, seen = [], set()
    for i in picks:
        if i in seen:
            continue
        seen.add(i)
        out.append(draft_record(t, i, None))
    return sorted(out, key=lambda r: r["draft_id"])


def leading_zeros(mapping) -> int:
    """How many d2t entries at the start are 0 (draft ids that map to themselves)."""
    d2t = mapping.d2t if mapping.readings else None
    if d2t is None or len(d2t) == 0 or d2t[0] != 0:
        return 0
    nz = np.flatnonzero(d2t != 0)
    return int(nz[0]) if len(nz) else len(d2t)


# ----------------------------------------------------------------------------- verdict

def verdict_html(data: dict[str, Any], mapping=None, display: bool = False) -> HTMLString:
    """The answer: format, valid / NOT valid / undecided, and the evidence behind it first.
    With `mapping` (the VocabMapping) it adds spot checks: single entries to verify by hand."""
    fmt, valid = data.get("format", ""), data.get("valid")
    big = style(display="inline-block", padding="6px 12px", border_radius="6px",
                font_size="15px", font_weight="700", margin="0 8px 6px 0")
    vfg, vbg = {True: SOLID_GREEN, False: SOLID_RED}.get(valid, ("#ffffff", "#b54708"))
    vtext = {True: "VALID for every engine", False: "NOT VALID",
             None: "UNDECIDED"}.get(valid, str(valid))
    head = (f'<div><span style="{big};color:{vfg};background:{vbg}">{esc(vtext)}</span>'
            f'<span style="{big};color:#1f2328;background:#f2f4f7;border:1px solid #d0d7de">'
            f'd2t format: {esc(FORMAT_TEXT.get(fmt, fmt))}</span></div>')
    meaning = f'<div style="{style(margin="2px 0 8px 0")}">{esc(FORMAT_HELP.get(fmt, ""))}</div>'
    ev = [f"<li>{esc(e)}</li>" for e in data.get("evidence", [])]
    ev += [f'<li style="{style(color=RED[0])}">problem: {esc(p)}</li>'
           for p in data.get("problems", [])]
    body = head + meaning + section("Evidence (checkable against the tensors)") + (
        f'<ul style="{style(margin="2px 0 6px 0", padding_left="20px")}">{"".join(ev)}</ul>'
        if ev else muted("no evidence recorded"))
    if mapping is not None:
        body += _zeros_note(mapping) + _spot_table(mapping)
    todo = WHAT_TO_DO.get(fmt, "")
    if fmt in (OFFSET, IDENTITY) and data.get("problems"):
        todo = ("The engines compute what the table says, but the problems above remain: t2d "
                "(used in training to mask targets) disagrees with d2t. Check that both came "
                "from the same vocab cache before trusting either; change nothing on a guess.")
    body += section("What to do") + f"<div>{todo}</div>"
    findings = data.get("findings", [])
    if findings:
        rows = [([cell(badge(f["severity"].upper() if f["severity"] == "error" else f["severity"],
                             SEVERITY_COLORS[f["severity"]]), nowrap=True),
                  cell(code(f["code"]), title=CODES.get(f["code"], ""), nowrap=True),
                  cell(esc(f["message"]))],
                 SEVERITY_COLORS[f["severity"]][1] if f["severity"] == "error" else None)
                for f in findings]
        body += section("Findings") + table(["severity", "code", "what it means"], rows)
    sub = (f"{code(data.get('checkpoint'))} · draft vocab {fmt_num(data.get('draft_vocab_size'))}"
           f" → target vocab {fmt_num(data.get('target_vocab_size'))}")
    return show(evidence_note(data.get("had"))
                + panel("Vocabulary mapping (d2t / t2d): the verdict", body, sub), display)


def _zeros_note(mapping) -> str:
    k = leading_zeros(mapping)
    if k < 2 or mapping.format not in (OFFSET, AMBIGUOUS, IDENTITY):
        return ""
    t = mapping.tables()
    kept = ""
    if t.t2d is not None:
        n = int(t.t2d[:k].sum())
        kept = (f"; t2d[0:{k}] is all True, so training kept exactly those ids" if n == k
                else f"; t2d marks {n} of target ids 0..{k - 1}")
    return note(f"<b>d2t[0:{k}] are all 0</b>: draft ids 0..{k - 1} map to target ids "
                f"0..{k - 1}{esc(kept)}. That is what a correct offset table looks like when "
                "the lowest target ids are among the most frequent ones, not a sign of a bug.")


def _spot_table(mapping) -> str:
    t = mapping.tables()
    recs = spot_checks(mapping)
    if not recs:
        return ""
    rows = []
    for r in recs:
        rows.append([cell(esc(r["draft_id"]), align="right"),
                     cell(mono("–" if r["d2t"] is None else r["d2t"]), align="right"),
                     reading_cell(t, r["offsets"], None if r["d2t"] is None
                                   else f"{r['draft_id']} + {r['d2t']}", verbose=True),
                     reading_cell(t, r["absolute"], None, verbose=True)
                     if t.d2t is not None else None])
    rows = [[c for c in row if c is not None] for row in rows]
    heads = ["draft id i", "d2t[i]", "i + d2t[i] (offsets: engines)" if t.d2t is not None
             else "target id (engines, no d2t: i)"]
    if t.d2t is not None:
        heads.append("d2t[i] (as absolute)")
    explain = ("t2d[x] = True: training kept target id x. Outside [0, vocab size): no such target "
               "id exists. A right table gives t2d[x] = True for every draft id."
               if t.t2d is not None else
               "No t2d in the checkpoint: nothing records which target ids training kept.")
    return (section("Spot checks: read d2t and t2d from the checkpoint and compare")
            + table(heads, rows) + note(esc(explain)))


# ----------------------------------------------------------------------------- entries

def entries_table_html(mapping, tokenizer=None, n_first: int = 12, max_rows: int = MAX_ROWS,
                       display: bool = False) -> HTMLString:
    """The first `n_first` entries, the last one and every suspicious entry (out of range,
    repeated target, not in t2d, d2t decreasing, engines vs trainer intent; the `max_rows` most
    serious when there are more): draft id, d2t, target id as offsets and as absolute,
    nonzero(t2d)[i], and token strings when a tokenizer is given."""
    t = mapping.tables()
    if not t.usable:
        return show(panel("d2t entries", muted("d2t is not a usable table: "
                                               + "; ".join(t.problems))), display)
    sus = mapping.suspicious_entries()
    chosen = list(sus)[:max_rows]
    ids = sorted(set(range(min(n_first, t.Vd))) | {t.Vd - 1} | set(chosen))
    has_abs = t.d2t is not None
    heads = ["draft id i", "d2t[i]",
             "i + d2t[i] (offsets)<br>what engines compute" if has_abs
             else "target id<br>what engines compute (no d2t: i)"]
    titles = ["the draft model's output index", "the stored offset",
              "target_id = draft_id + d2t[draft_id]: what the engines' loaders compute"]
    if has_abs:
        heads.append("d2t[i] read as<br>an absolute id")
        titles.append("what the table would mean if absolute ids had been stored")
    if t.t2d is not None:
        heads.append("in t2d?<br>" + ("offsets / absolute" if has_abs else "engines' target"))
        titles.append("t2d[target]: did training keep that target id?")
    if t.kept is not None:
        heads.append("nonzero(t2d)[i]<br>kept by training")
        titles.append("the i-th target id t2d marks: what the trainer meant for draft id i")
    intent = {OFFSET: 2, IDENTITY: 2, ABSOLUTE: 3 if has_abs else None}.get(t.format)
    if intent is not None:
        heads[intent] += "<br>" + badge("the trainer's intent", GREEN)
    heads.append("why listed")
    titles.append("")
    rows, prev = [], -1
    for i in ids:
        if i > prev + 1:
            rows.append([_gap_cell(i - prev - 1, len(heads))])
        prev = i
        rec = draft_record(t, i, tokenizer)
        cells = [cell(mono(i), align="right"),
                 cell(mono("–" if rec["d2t"] is None else rec["d2t"]), align="right"),
                 reading_cell(t, rec["offsets"], None)]
        if has_abs:
            cells.append(reading_cell(t, rec["absolute"], None,
                                       dim=t.format in (OFFSET, IDENTITY)))
        if t.t2d is not None:
            yn = [yes_no(t, rec["offsets"])] + ([yes_no(t, rec["absolute"])] if has_abs else [])
            cells.append(cell(esc(" / ".join(yn)), nowrap=True))
        if t.kept is not None:
            kept = rec["kept"]
            cells.append(cell(mono("–" if kept is None else kept) + (
                "<br>" + token_cell(token_of(tokenizer, kept))
                if tokenizer is not None and kept is not None else ""), nowrap=True))
        why = sus.get(i, [])
        label = "; ".join(why) if why else ("first entries" if i < n_first else "last entry")
        worst = _worst(why)
        cells.append(cell(esc(label) if why else muted(label), extra="font-size:12px"))
        rows.append((cells, worst[1] if worst else None))
    n_sus = len(sus)
    sub = (f"{n_sus} suspicious entr{'y' if n_sus == 1 else 'ies'} of {t.Vd}"
           + (f"; the {len(chosen)} most serious listed" if n_sus > len(chosen) else "")
           + ("" if t.t2d is not None else "; no t2d in the checkpoint to check against"))
    body = table(heads, rows, header_titles=titles)
    body += note("Red: the target id does not exist (outside [0, vocab size)) or repeats another "
                 "draft id's. Amber: t2d does not mark it. Token strings are Python literals.")
    return show(panel("d2t entries: the first ones and every suspicious one", body, esc(sub)),
                display)


def _gap_cell(n: int, span: int) -> str:
    css = style(padding="0 8px", color=MUTED, font_size="11px", font_style="italic",
                text_align="left",
                border_bottom=f"1px solid {BORDER}", white_space="nowrap")
    return (f'<td colspan="{span}" style="{css}">⋯ {n} entr{"y" if n == 1 else "ies"} '
            "not listed</td>")


def _worst(reasons: list[str]) -> tuple[str, str] | None:
    if not reasons:
        return None
    if any("outside" in r or "repeats" in r for r in reasons):
        return RED
    return AMBER


# ----------------------------------------------------------------------------- engines

def engines_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """Per engine profile: the parameter the stored table becomes, what it computes, how many
    draft ids land on another target than the trainer meant, and how many on no target."""
    fmt, vd = data.get("format"), data.get("draft_vocab_size")
    rows = []
    for e in data.get("engines", []):
        wrong, out = e.get("n_wrong"), e.get("n_out_of_range") or 0
        if fmt == MISSING:
            verdict = badge("WRONG", RED, "no d2t: draft id i is used as target id i")
            wrong_text = "unknown: without d2t, draft id i is used as target id i"
        elif wrong is None:
            verdict = badge("undecided", AMBER, "right if offsets were meant (trainers write "
                                                "offsets), wrong otherwise")
            wrong_text = "unknown: the trainer's intent is not decided"
        elif wrong == 0 and out == 0:
            verdict = badge("right", GREEN)
            wrong_text = f"0 of {fmt_num(vd)}"
        else:
            verdict = badge("WRONG", RED)
            wrong_text = f"{fmt_num(wrong)} of {fmt_num(vd)}"
        param = e.get("param") or ""
        formula = (f"{param} = d2t + arange(Vd)" if param == "hot_token_id"
                   else f"target = arange(Vd) + {param}")
        if fmt == MISSING:
            formula = "no d2t: target = draft id"
        elif fmt == IDENTITY and data.get("draft_vocab_size") == data.get("target_vocab_size"):
            formula += " (identity)"
        rows.append(([cell(code(e.get("profile")), nowrap=True), cell(code(param), nowrap=True),
                      cell(code(formula)), cell(esc(wrong_text), align="right"),
                      cell(fmt_num(out), align="right", colors=RED if out else None),
                      cell(verdict)], RED[1] if (out or (wrong or 0) > 0 or fmt == MISSING)
                     else None))
    heads = ["engine", "parameter", "what it computes from d2t", "wrong targets vs the trainer's "
             "intent", "outside the target vocab", ""]
    sub = ("every engine reads d2t as offsets and ignores t2d; out-of-range ids index past the "
           "target vocab (a crash or garbage at run time)")
    body = table(heads, rows) if rows else muted("no engine profiles")
    return show(panel("What each engine computes from the stored table", body, esc(sub)), display)


# ----------------------------------------------------------------------------- coverage

def coverage_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """Corpus coverage: the share of the corpus's target tokens inside the draft vocab, the
    ceiling on per-token acceptance (as the trainer meant the table, and as engines read it)."""
    cov = data.get("coverage")
    if not cov:
        return show(panel("Corpus coverage", muted(
            "no corpus given: pass corpus (JSON Lines with input_ids or text, or a text file, "
            "with a tokenizer for text) to measure the share of tokens the draft vocab can "
            "ever propose")), display)
    rows = []
    for key, label in (("intended", "as the trainer meant the table"),
                       ("as_engines_read_it", "as the engines read it")):
        v = cov.get(key)
        if v is None:
            rows.append([cell(esc(label), nowrap=True), cell(muted("unknown (intent undecided)")),
                         cell("")])
            continue
        colors = GREEN if v >= LOW_COVERAGE else AMBER
        rows.append([cell(esc(label), nowrap=True),
                     cell(f'<b>{v:.1%}</b>', align="right", colors=colors), cell(_bar(v))])
    sub = (f"{fmt_num(cov.get('n_tokens'))} corpus tokens counted (loss-masked ones only when the "
           f"corpus gives a loss_mask); below {LOW_COVERAGE:.0%} is flagged")
    body = table(["", "coverage", ""], rows)
    body += note("A draft can only propose tokens in its vocabulary, so no more than this share "
                 "of target tokens can ever be accepted: a ceiling, not a forecast. Coverage "
                 "measured on data like what you serve is what counts.")
    return show(panel("Corpus coverage: the ceiling on per-token acceptance", body, esc(sub)),
                display)


def _bar(v: float, width: int = 240) -> str:
    fg = GREEN[0] if v >= LOW_COVERAGE else AMBER[0]
    outer = style(display="inline-block", width=f"{width}px", height="10px", background="#eaecf0",
                  border_radius="3px", vertical_align="middle", position="relative")
    inner = style(display="block", width=f"{max(0.0, min(1.0, v)) * width:.0f}px", height="10px",
                  background=fg, border_radius="3px")
    mark = style(position="absolute", left=f"{LOW_COVERAGE * width:.0f}px", top="-2px",
                 width="1px", height="14px", background=MUTED)
    return (f'<span style="{outer}" title="{v:.1%}"><span style="{inner}"></span>'
            f'<span style="{mark}"></span></span>')
