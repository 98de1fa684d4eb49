"""Notebook 02's lookup: a draft id, a target id or a token string, answered under each reading
of d2t (as a dict, and as a small HTML answer for the lookup widget)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from eagle3_nb.findings import AMBIGUOUS, MISSING
from eagle3_nb.viz.html import (AMBER, GREEN, RED, HTMLString, badge, cell, esc, muted, note,
                                panel, show, style, table)
from eagle3_nb.viz.vocab_cells import (draft_record, mono, reading_cell, section, token_cell,
                                       token_of)

MAX_LOOKUP_IDS = 12      # draft ids / tokens listed in one lookup answer

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
            out["draft"] = draft_record(t, draft_id, tokenizer)
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

    return {"target_id": tid, "token": token_of(tokenizer, tid),
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
                 reading_cell(t, d["offsets"], f"{d['draft_id']} + {d['d2t']}"
                               if t.d2t is not None else None)]]
        if d["absolute"] is not None:
            rows.append([cell(esc("as absolute: d2t[i]"), nowrap=True),
                         reading_cell(t, d["absolute"], None)])
        if d["kept"] is not None:
            rows.append([cell(esc("nonzero(t2d)[i]: kept by training"), nowrap=True),
                         cell(mono(d["kept"]) + (
                             ("<br>" + token_cell(token_of(tokenizer, d["kept"])))
                             if tokenizer is not None else ""))])
        parts.append(section(f"draft id {d['draft_id']}"
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
                         cell(mono(ids) if ids else muted("none: no draft id maps here"))])
        if r["in_t2d"] is not None:
            rows.append([cell(esc("in t2d (kept by training)"), nowrap=True),
                         cell(badge("yes", GREEN) if r["in_t2d"] else badge("no", AMBER))])
        if r["intended"] is not None:
            rows.append([cell(esc("draft ids the trainer meant for it"), nowrap=True),
                         cell(mono(r["intended"]) if r["intended"] else muted("none"))])
        tok = (" " + token_cell(r["token"])) if r["token"] is not None else ""
        parts.append(f'<div style="{style(font_weight="600", margin="8px 0 2px 0")}">'
                     f'target id {esc(r["target_id"])}{tok}</div>' + table(None, rows))
    if res["notes"]:
        parts.append("".join(note(esc(n)) for n in res["notes"]))
    if not parts:
        parts.append(muted("nothing found"))
    return show(panel(f"Lookup: {esc(res['query'])}", "".join(parts)), display)
