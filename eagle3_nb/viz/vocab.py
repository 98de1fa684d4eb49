"""Notebook 02's views: is the vocabulary mapping right? Pure functions: the `check_vocab` dict
(`eagle3-nb vocab --json`) and/or a `VocabMapping` in, HTML string or plotly figure out.

The rule they follow is the kit's: prove the table right or wrong from what the checkpoint holds,
never guess. Evidence comes first and is worded so a person can check it against the tensors
(`d2t[i]`, `i + d2t[i]`, `t2d[...]`); when nothing decides, the view says "undecided" and shows
what each reading maps to. Every checkpoint or tokenizer string is escaped.

Engines compute `target_id = draft_id + d2t[draft_id]` (the "offsets" reading; without a d2t,
`target_id = draft_id`). The "absolute" reading (`target_id = d2t[draft_id]`) is what a table
stored by mistake would mean.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from eagle3_nb.findings import (ABSOLUTE, AMBIGUOUS, ARANGE_SUBTRACTED, CODES, IDENTITY, INVALID, LOW_COVERAGE,
                                MISSING, OFFSET)
from eagle3_nb.viz.html import (AMBER, BLUE, BORDER, GREEN, MONO, MUTED, RED, SEVERITY_COLORS,
                                SOLID_GREEN, SOLID_RED, HTMLString, badge, cell, code, esc,
                                evidence_note, fmt_num, muted, note, panel, show, style, table)

MAX_POINTS = 5000        # points per figure trace before downsampling
MAX_ROWS = 40            # suspicious rows in the entries table
MAX_LOOKUP_IDS = 12      # draft ids / tokens listed in one lookup answer

FORMAT_TEXT = {
    OFFSET: "OFFSETS",
    ABSOLUTE: "ABSOLUTE IDS",
    MISSING: "MISSING",
    IDENTITY: "IDENTITY",
    AMBIGUOUS: "AMBIGUOUS",
    INVALID: "INVALID",
    ARANGE_SUBTRACTED: "OFFSETS MINUS ARANGE",
}
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
        out.append(_draft_record(t, i, None))
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
    body = head + meaning + _section("Evidence (checkable against the tensors)") + (
        f'<ul style="{style(margin="2px 0 6px 0", padding_left="20px")}">{"".join(ev)}</ul>'
        if ev else muted("no evidence recorded"))
    if mapping is not None:
        body += _zeros_note(mapping) + _spot_table(mapping)
    todo = WHAT_TO_DO.get(fmt, "")
    if fmt in (OFFSET, IDENTITY) and data.get("problems"):
        todo = ("The engines compute what the table says, but the problems above remain: t2d "
                "(used in training to mask targets) disagrees with d2t. Check that both came "
                "from the same vocab cache before trusting either; change nothing on a guess.")
    body += _section("What to do") + f"<div>{todo}</div>"
    findings = data.get("findings", [])
    if findings:
        rows = [([cell(badge(f["severity"].upper() if f["severity"] == "error" else f["severity"],
                             SEVERITY_COLORS[f["severity"]]), nowrap=True),
                  cell(code(f["code"]), title=CODES.get(f["code"], ""), nowrap=True),
                  cell(esc(f["message"]))],
                 SEVERITY_COLORS[f["severity"]][1] if f["severity"] == "error" else None)
                for f in findings]
        body += _section("Findings") + table(["severity", "code", "what it means"], rows)
    sub = (f"{code(data.get('checkpoint'))} · draft vocab {fmt_num(data.get('draft_vocab_size'))}"
           f" → target vocab {fmt_num(data.get('target_vocab_size'))}")
    return show(evidence_note(data.get("had"))
                + panel("Vocabulary mapping (d2t / t2d): the verdict", body, sub), display)


def _section(title: str) -> str:
    return (f'<div style="{style(font_weight="600", margin="8px 0 2px 0")}">{esc(title)}</div>')


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
                     cell(_mono("–" if r["d2t"] is None else r["d2t"]), align="right"),
                     _reading_cell(t, r["offsets"], None if r["d2t"] is None
                                   else f"{r['draft_id']} + {r['d2t']}", verbose=True),
                     _reading_cell(t, r["absolute"], None, verbose=True)
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
    return (_section("Spot checks: read d2t and t2d from the checkpoint and compare")
            + table(heads, rows) + note(esc(explain)))


def _mono(value: Any) -> str:
    return f'<span style="{style(font_family=MONO, font_size="12px")}">{esc(value)}</span>'


def _status(t, target: int | None) -> tuple[str, tuple[str, str] | None]:
    """(checkable text, colours): outside the vocab (red), t2d[x] False (amber), True (none)."""
    if target is None:
        return "", None
    if not 0 <= target < t.Vt:
        return f"outside [0, {t.Vt})", RED
    if t.t2d is None:
        return "", None
    return (f"t2d[{target}] = True", None) if t.t2d[target] else (f"t2d[{target}] = False", AMBER)


def _reading_cell(t, rec: dict[str, Any] | None, formula: str | None,
                  verbose: bool = False, dim: bool = False) -> str:
    """A target id (red when it does not exist, amber when t2d does not mark it), with its
    token; `verbose` spells out the t2d entry so a person can check it; `dim` greys out a
    reading the evidence has ruled out."""
    if rec is None:
        return cell(muted("–"))
    label, colors = _status(t, rec["target_id"])
    text = _mono(rec["target_id"]) if formula is None else (
        f'{_mono(formula)} = <b>{_mono(rec["target_id"])}</b>')
    if label and (verbose or colors is RED):
        text += f' <span style="{style(font_size="11.5px")}">· {esc(label)}</span>'
    if rec.get("token") is not None:
        text += "<br>" + _token(rec["token"])
    return cell(text, nowrap=True, colors=colors,
                extra="opacity:0.55" if dim and colors is None else "")


def _yes_no(t, rec: dict[str, Any] | None) -> str:
    if rec is None or t.t2d is None:
        return "–"
    if not rec["in_range"]:
        return "out of range"
    return "yes" if rec["in_t2d"] else "NO"


def _token(tok: str | None) -> str:
    if tok is None:
        return muted("–")
    css = style(font_family=MONO, font_size="12px", color=BLUE[0])
    return f'<code style="{css}">{esc(repr(tok))}</code>'


# ----------------------------------------------------------------------------- figure

def mapping_figure(mapping, max_points: int = MAX_POINTS):
    """Plotly, two rows sharing the draft-id axis: above, draft id -> target id as the engines
    compute it (offsets), the absolute reading when it is a real candidate (hidden behind its
    legend entry otherwise), nonzero(t2d) (the ids training kept), out-of-range and repeated ids
    marked, the target vocab boundary drawn; below, the stored d2t. Over `max_points` draft ids,
    evenly spaced ones are plotted plus every marked one (up to `max_points` per kind and
    reading), so a 32000-entry table stays a few hundred kB of HTML."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t = mapping.tables()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        row_heights=[0.64, 0.36],
                        subplot_titles=("target id per draft id", "stored d2t[i]"))
    if not t.usable:
        fig.add_annotation(text="d2t is not a usable table: " + esc("; ".join(t.problems)),
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.8)
        fig.update_layout(template="plotly_white", height=420, title="d2t / t2d mapping")
        return fig
    readings = [("offsets", t.offsets)] + ([("absolute", t.absolute)] if t.absolute_is_candidate
                                           else [])
    out_x, out_y, dup_x, dup_y = [], [], [], []  # marked points: out of range, repeated
    for _, ids in readings:
        bad = np.flatnonzero(~t.in_range(ids))[:max_points]
        out_x += bad.tolist()
        out_y += ids[bad].tolist()
        dups = list(t.duplicates(ids))[:max_points]
        dup_x += dups
        dup_y += ids[dups].tolist()
    idx = _sample(t.Vd, max_points, np.array(out_x + dup_x, dtype=np.int64))
    x = idx.astype(np.int32)
    d2t_at = t.d2t[idx] if t.d2t is not None else np.zeros(len(idx), np.int64)
    if t.kept is not None:
        k = np.arange(len(t.kept))
        kidx = _sample(len(k), max_points, np.array([], np.int64))
        fig.add_trace(go.Scatter(
            x=kidx.astype(np.int32), y=t.kept[kidx].astype(np.int64), mode="lines",
            name="nonzero(t2d)[i]: the ids training kept", line=dict(color="#98a2b3", width=6),
            opacity=0.55, hovertemplate="i %{x}<br>nonzero(t2d)[i] %{y}<extra>t2d</extra>"),
            row=1, col=1)
    off_name = ("i + d2t[i] (offsets): what engines compute" if t.d2t is not None
                else "no d2t: engines use target id = draft id")
    fig.add_trace(go.Scatter(
        x=x, y=t.offsets[idx].astype(np.int64), mode="markers", name=off_name,
        marker=dict(color="#2e90fa", size=4 if len(idx) <= 2000 else 3),
        customdata=d2t_at.astype(np.int64),
        hovertemplate="draft id %{x}<br>d2t %{customdata}<br>target (offsets) %{y}"
                      "<extra>offsets</extra>"), row=1, col=1)
    if t.absolute is not None and t.format != IDENTITY:
        fig.add_trace(go.Scatter(
            x=x, y=t.absolute[idx].astype(np.int64), mode="markers",
            name="d2t[i] (absolute reading)",
            marker=dict(color="#7a5af8", size=4, symbol="circle-open"),
            visible=True if t.absolute_is_candidate else "legendonly",
            hovertemplate="draft id %{x}<br>target (absolute) %{y}<extra>absolute</extra>"),
            row=1, col=1)
    if out_x:
        fig.add_trace(go.Scatter(x=out_x, y=out_y, mode="markers",
                                 name=f"outside [0, {t.Vt}): no such target id",
                                 marker=dict(color=RED[0], size=8, symbol="x"),
                                 hovertemplate="draft id %{x}<br>target %{y}: out of range"
                                               "<extra></extra>"), row=1, col=1)
    if dup_x:
        fig.add_trace(go.Scatter(x=dup_x, y=dup_y, mode="markers",
                                 name="repeated target id", marker=dict(
                                     color="#dc6803", size=8, symbol="diamond-open"),
                                 hovertemplate="draft id %{x}<br>target %{y}: repeated"
                                               "<extra></extra>"), row=1, col=1)
    fig.add_hline(y=t.Vt, line=dict(color=RED[0], dash="dash", width=1), row=1, col=1,
                  annotation_text=f"target vocab size {t.Vt}: ids from here on do not exist",
                  annotation_position="top left", annotation_font=dict(color=RED[0], size=11))
    if t.d2t is not None:
        fig.add_trace(go.Scatter(x=x, y=d2t_at.astype(np.int64), mode="markers", name="d2t[i]",
                                 marker=dict(color="#475467", size=3), showlegend=False,
                                 hovertemplate="draft id %{x}<br>d2t %{y}<extra>d2t</extra>"),
                      row=2, col=1)
        fig.add_hline(y=0, line=dict(color="#98a2b3", width=1), row=2, col=1)
    else:
        fig.add_trace(go.Scatter(x=[0, t.Vd - 1], y=[0, 0], mode="lines", showlegend=False,
                                 name="no d2t", line=dict(color="#98a2b3", dash="dot"),
                                 hoverinfo="skip"), row=2, col=1)
        lo, hi = fig.layout.yaxis2.domain
        fig.add_annotation(text="no d2t stored in the checkpoint: engines behave as if every "
                           "offset were 0", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=(lo + hi) / 2 + 0.05, font=dict(color=RED[0], size=13))
    shown = (f"all {t.Vd} draft ids" if len(idx) == t.Vd else
             f"{len(idx)} of {t.Vd} draft ids (evenly spaced, plus the marked ones)")
    fig.update_layout(
        title=dict(text=f"d2t / t2d: {esc(FORMAT_TEXT.get(t.format, t.format))}; {shown}",
                   font=dict(size=14)),
        template="plotly_white", height=640, margin=dict(t=110, b=50, l=70, r=20),
        legend=dict(orientation="h", yanchor="bottom", y=1.06, xanchor="left", x=0,
                    font=dict(size=11)),
        hovermode="closest")
    fig.update_yaxes(title_text="target id", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="d2t[i]", row=2, col=1)
    fig.update_xaxes(title_text="draft id i", row=2, col=1)
    return fig


def _sample(n: int, max_points: int, extra: np.ndarray) -> np.ndarray:
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    base = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return np.union1d(base, extra[(extra >= 0) & (extra < n)]).astype(np.int64)


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
        rec = _draft_record(t, i, tokenizer)
        cells = [cell(_mono(i), align="right"),
                 cell(_mono("–" if rec["d2t"] is None else rec["d2t"]), align="right"),
                 _reading_cell(t, rec["offsets"], None)]
        if has_abs:
            cells.append(_reading_cell(t, rec["absolute"], None,
                                       dim=t.format in (OFFSET, IDENTITY)))
        if t.t2d is not None:
            yn = [_yes_no(t, rec["offsets"])] + ([_yes_no(t, rec["absolute"])] if has_abs else [])
            cells.append(cell(esc(" / ".join(yn)), nowrap=True))
        if t.kept is not None:
            kept = rec["kept"]
            cells.append(cell(_mono("–" if kept is None else kept) + (
                "<br>" + _token(_tok(tokenizer, kept)) if tokenizer is not None and kept is not None
                else ""), nowrap=True))
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


def _tok(tokenizer, tid: int | None) -> str | None:
    if tokenizer is None or tid is None:
        return None
    try:
        return tokenizer.id_to_token(int(tid))
    except (OverflowError, ValueError, TypeError):
        return None


def _draft_record(t, i: int, tokenizer) -> dict[str, Any]:
    def reading(ids):
        if ids is None:
            return None
        target = int(ids[i])
        ok = 0 <= target < t.Vt
        return {"target_id": target, "in_range": ok,
                "in_t2d": None if t.t2d is None or not ok else bool(t.t2d[target]),
                "token": _tok(tokenizer, target) if ok else None}

    return {"draft_id": i, "d2t": None if t.d2t is None else int(t.d2t[i]),
            "offsets": reading(t.offsets), "absolute": reading(t.absolute),
            "engines": int(t.offsets[i]),
            "intended": None if t.intended is None else int(t.intended[i]),
            "kept": int(t.kept[i]) if t.kept is not None and i < len(t.kept) else None}


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


# ----------------------------------------------------------------------------- lookup

_PREFIXED = re.compile(r"^\s*(d|draft|t|target)\s*[:= ]\s*(-?\d+)\s*$", re.IGNORECASE)
_NUMBER = re.compile(r"^\s*-?\d+\s*$")


def lookup(mapping, query: Any, tokenizer=None) -> dict[str, Any]:
    """Look up a draft id, a target id or a token string.

    `query`: an int or a bare number (tried as a draft id and as a target id), `d:12` /
    `draft 12` (draft id only), `t:1786` / `target 1786` (target id only), or a token string
    (needs a tokenizer; quote it, e.g. `'42'`, to look up a token that is a number).

    Returns {"query", "draft": record | None, "targets": [record, ...], "notes": [...]}.
    A draft record: d2t, the target under each reading ("offsets", "absolute") with in range /
    in t2d / token, what the engines compute and what the trainer meant. A target record: its
    token, in t2d, and the draft ids that map to it under each reading."""
    t = mapping.tables()
    q = str(query).strip() if not isinstance(query, (int, np.integer)) else str(int(query))
    out: dict[str, Any] = {"query": q, "draft": None, "targets": [], "notes": []}
    if not t.usable:
        out["notes"].append("d2t is not a usable table: " + "; ".join(t.problems))
        return out
    if not q:
        out["notes"].append("empty query: type a draft id (d:12), a target id (t:1786), a number "
                            "(both) or a token string")
        return out
    m = _PREFIXED.match(q)
    draft_id = target_id = None
    tokens: list[int] = []
    if m:
        n = int(m.group(2))
        draft_id, target_id = (n, None) if m.group(1)[0].lower() == "d" else (None, n)
    elif _NUMBER.match(q):
        draft_id = target_id = int(q)
    else:
        tokens = _token_ids(tokenizer, q, out["notes"])
    if draft_id is not None:
        if 0 <= draft_id < t.Vd:
            out["draft"] = _draft_record(t, draft_id, tokenizer)
        else:
            out["notes"].append(f"{draft_id} is not a draft id (draft ids are 0..{t.Vd - 1})")
    if target_id is not None:
        tokens = [target_id]
    for tid in tokens[:MAX_LOOKUP_IDS]:
        if 0 <= tid < t.Vt:
            out["targets"].append(_target_record(t, tid, tokenizer))
        else:
            out["notes"].append(f"{tid} is not a target id (target ids are 0..{t.Vt - 1})")
    if len(tokens) > MAX_LOOKUP_IDS:
        out["notes"].append(f"only the first {MAX_LOOKUP_IDS} of {len(tokens)} tokens looked up")
    return out


def _token_ids(tokenizer, q: str, notes: list[str]) -> list[int]:
    if len(q) >= 2 and q[0] == q[-1] and q[0] in "'\"":
        q = q[1:-1]
    if tokenizer is None:
        notes.append("a token string needs a tokenizer (pass tokenizer=...): without one, look "
                     "up ids")
        return []
    tid = tokenizer.token_to_id(q)
    if tid is not None:
        return [int(tid)]
    ids = tokenizer.encode(q, add_special_tokens=False).ids
    if not ids:
        notes.append(f"{q!r} is no token of this tokenizer and encodes to nothing")
    else:
        notes.append(f"{q!r} is not one vocabulary entry; it encodes to {len(ids)} token(s): "
                     f"{[int(i) for i in ids][:MAX_LOOKUP_IDS]}")
    return [int(i) for i in ids]


def _target_record(t, tid: int, tokenizer) -> dict[str, Any]:
    def drafts(ids):
        return None if ids is None else np.flatnonzero(ids == tid)[:MAX_LOOKUP_IDS].tolist()

    return {"target_id": tid, "token": _tok(tokenizer, tid),
            "in_t2d": None if t.t2d is None else bool(t.t2d[tid]),
            "draft_ids": {"offsets": drafts(t.offsets), "absolute": drafts(t.absolute)},
            "engines": drafts(t.offsets), "intended": drafts(t.intended)}


def lookup_html(mapping, query: Any, tokenizer=None, display: bool = False) -> HTMLString:
    """`lookup` as a small HTML answer (see `lookup` for the query forms)."""
    t = mapping.tables()
    res = lookup(mapping, query, tokenizer)
    parts = []
    d = res["draft"]
    if d is not None:
        verdict = ""
        if d["intended"] is not None:
            verdict = (badge("engines compute what the trainer meant", GREEN)
                       if d["engines"] == d["intended"]
                       else badge(f"engines compute {d['engines']}, the trainer meant "
                                  f"{d['intended']}", RED))
        elif t.format == AMBIGUOUS:
            verdict = badge("undecided: which reading gives the token you expect?", AMBER)
        elif t.format == MISSING:
            verdict = badge("no d2t: engines use the draft id as the target id", RED)
        rows = [[cell(esc("as offsets: i + d2t[i] (engines)") if t.d2t is not None
                      else esc("no d2t: engines use i"), nowrap=True),
                 _reading_cell(t, d["offsets"], f"{d['draft_id']} + {d['d2t']}"
                               if t.d2t is not None else None)]]
        if d["absolute"] is not None:
            rows.append([cell(esc("as absolute: d2t[i]"), nowrap=True),
                         _reading_cell(t, d["absolute"], None)])
        if d["kept"] is not None:
            rows.append([cell(esc("nonzero(t2d)[i]: kept by training"), nowrap=True),
                         cell(_mono(d["kept"]) + (("<br>" + _token(_tok(tokenizer, d["kept"])))
                                                  if tokenizer is not None else ""))])
        parts.append(_section(f"draft id {d['draft_id']}"
                              + ("" if d["d2t"] is None else f" (d2t = {d['d2t']})"))
                     + table(None, rows) + verdict)
    for r in res["targets"]:
        rows = []
        for name, label in (("offsets", "draft ids with i + d2t[i] = it (engines)"),
                            ("absolute", "draft ids with d2t[i] = it (absolute reading)")):
            ids = r["draft_ids"][name]
            if ids is None:
                continue
            rows.append([cell(esc(label if t.d2t is not None or name != "offsets"
                                  else "draft ids with i = it (no d2t)"), nowrap=True),
                         cell(_mono(ids) if ids else muted("none: no draft id maps here"))])
        if r["in_t2d"] is not None:
            rows.append([cell(esc("in t2d (kept by training)"), nowrap=True),
                         cell(badge("yes", GREEN) if r["in_t2d"] else badge("no", AMBER))])
        if r["intended"] is not None:
            rows.append([cell(esc("draft ids the trainer meant for it"), nowrap=True),
                         cell(_mono(r["intended"]) if r["intended"] else muted("none"))])
        tok = (" " + _token(r["token"])) if r["token"] is not None else ""
        parts.append(f'<div style="{style(font_weight="600", margin="8px 0 2px 0")}">'
                     f'target id {esc(r["target_id"])}{tok}</div>' + table(None, rows))
    if res["notes"]:
        parts.append("".join(note(esc(n)) for n in res["notes"]))
    if not parts:
        parts.append(muted("nothing found"))
    return show(panel(f"Lookup: {esc(res['query'])}", "".join(parts)), display)
