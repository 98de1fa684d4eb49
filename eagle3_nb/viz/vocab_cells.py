"""What every view of the vocabulary mapping shows the same way: the format names, one draft
id's record under each reading, and the cells that show a target id, its t2d entry and its token.
Every checkpoint or tokenizer string is escaped."""

from __future__ import annotations

from typing import Any

from eagle3_nb.findings import (ABSOLUTE, AMBIGUOUS, ARANGE_SUBTRACTED, IDENTITY, INVALID, MISSING,
                                OFFSET)
from eagle3_nb.viz.html import AMBER, BLUE, MONO, RED, cell, esc, muted, style

FORMAT_TEXT = {  # each d2t format's name in the views
    OFFSET: "OFFSETS",
    ABSOLUTE: "ABSOLUTE IDS",
    MISSING: "MISSING",
    IDENTITY: "IDENTITY",
    AMBIGUOUS: "AMBIGUOUS",
    INVALID: "INVALID",
    ARANGE_SUBTRACTED: "OFFSETS MINUS ARANGE",
}


def section(title: str) -> str:
    return (f'<div style="{style(font_weight="600", margin="8px 0 2px 0")}">{esc(title)}</div>')


def mono(value: Any) -> str:
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


def reading_cell(t, rec: dict[str, Any] | None, formula: str | None,
                  verbose: bool = False, dim: bool = False) -> str:
    """A target id (red when it does not exist, amber when t2d does not mark it), with its
    token; `verbose` spells out the t2d entry so a person can check it; `dim` greys out a
    reading the evidence has ruled out."""
    if rec is None:
        return cell(muted("–"))
    label, colors = _status(t, rec["target_id"])
    text = mono(rec["target_id"]) if formula is None else (
        f'{mono(formula)} = <b>{mono(rec["target_id"])}</b>')
    if label and (verbose or colors is RED):
        text += f' <span style="{style(font_size="11.5px")}">· {esc(label)}</span>'
    if rec.get("token") is not None:
        text += "<br>" + token_cell(rec["token"])
    return cell(text, nowrap=True, colors=colors,
                extra="opacity:0.55" if dim and colors is None else "")


def yes_no(t, rec: dict[str, Any] | None) -> str:
    if rec is None or t.t2d is None:
        return "–"
    if not rec["in_range"]:
        return "out of range"
    return "yes" if rec["in_t2d"] else "NO"


def token_cell(tok: str | None) -> str:
    if tok is None:
        return muted("–")
    css = style(font_family=MONO, font_size="12px", color=BLUE[0])
    return f'<code style="{css}">{esc(repr(tok))}</code>'


def token_of(tokenizer, tid: int | None) -> str | None:
    if tokenizer is None or tid is None:
        return None
    try:
        return tokenizer.id_to_token(int(tid))
    except (OverflowError, ValueError, TypeError):
        return None


def draft_record(t, i: int, tokenizer) -> dict[str, Any]:
    def reading(ids):
        if ids is None:
            return None
        target = int(ids[i])
        ok = 0 <= target < t.Vt
        return {"target_id": target, "in_range": ok,
                "in_t2d": None if t.t2d is None or not ok else bool(t.t2d[target]),
                "token": token_of(tokenizer, target) if ok else None}

    return {"draft_id": i, "d2t": None if t.d2t is None else int(t.d2t[i]),
            "offsets": reading(t.offsets), "absolute": reading(t.absolute),
            "engines": int(t.offsets[i]),
            "intended": None if t.intended is None else int(t.intended[i]),
            "kept": int(t.kept[i]) if t.kept is not None and i < len(t.kept) else None}
