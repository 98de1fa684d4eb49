"""`eagle3-nb diff GOOD OTHER` as HTML: the draft against one that worked (notebook 01's
`compare_to`). Findings first, then the verdicts, the tensors and config values that differ,
and the d2t format, side by side."""

from __future__ import annotations

from typing import Any

from eagle3_nb.viz.html import (AMBER, GREEN, RED, SEVERITY_COLORS, HTMLString, badge, cell,
                                code, esc, fmt_num, fmt_shape, muted, note, panel, show, table)

VERDICT_COLORS = {"ok": GREEN, "silent_failure": AMBER, "load_error": RED}
NO_GOOD_DRAFT = ("no known-good draft given: set <code>compare_to</code> to the directory of a "
                 "draft that worked (or run <code>eagle3-nb diff GOOD DRAFT</code>) to see what "
                 "changed since")


def diff_html(diff: dict[str, Any] | None, display: bool = False) -> HTMLString:
    """The diff result of `checks.diff.diff_drafts`, or a note when there is none."""
    if diff is None:
        return show(panel("Against a known-good draft", note(NO_GOOD_DRAFT)), display)
    subtitle = f"good: {code(diff['good'])}<br>this: {code(diff['other'])}"
    body = (_findings(diff["findings"]) + _verdicts(diff["verdicts"])
            + _tensors(diff["tensors"]) + _config(diff["config"]) + _vocab(diff.get("vocab")))
    return show(panel("Against a known-good draft", body, subtitle), display)


def _findings(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return note("no difference that changes what an engine builds or serves")
    rows = [[cell(badge(f["severity"], SEVERITY_COLORS[f["severity"]])),
             cell(code(f["code"]), nowrap=True), cell(esc(f["message"]))] for f in findings]
    return table(["", "code", "what changed"], rows)


def _verdicts(verdicts: list[dict[str, Any]]) -> str:
    rows = [[cell(code(v["profile"]), nowrap=True), _verdict_cell(v["good"]),
             _verdict_cell(v["other"])] for v in verdicts]
    return _section("Verdicts") + table(["engine", "good", "this"], rows)


def _verdict_cell(verdict: str) -> str:
    return cell(badge(verdict.replace("_", " "), VERDICT_COLORS.get(verdict, AMBER)))


def _tensors(tensors: list[dict[str, Any]]) -> str:
    changed = [r for r in tensors if r["status"] != "same"]
    head = _section(f"Tensors ({len(changed)} of {len(tensors)} differ, by canonical name)")
    if not changed:
        return head + muted("every tensor has the same shape, dtype and about the same norm")
    rows = [[cell(code(r["name"]), nowrap=True), cell(esc(r["status"]), nowrap=True),
             cell(_brief(r["good"])), cell(_brief(r["other"]))] for r in changed]
    return head + table(["tensor", "change", "good", "this"], rows)


def _brief(t: dict[str, Any] | None) -> str:
    if t is None:
        return muted("absent")
    nan = f", {t['nan']} NaN/Inf" if t.get("nan") else ""
    return (f"{esc(fmt_shape(t['shape']))} {esc(t['dtype'])}, norm {fmt_num(t.get('norm'))}"
            f"{esc(nan)}")


def _config(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cells = [[cell(code(r["field"]) + (" " + badge("structural", AMBER) if r["structural"]
                                        else ""), nowrap=True),
              _config_cell(r["good"]), _config_cell(r["other"])] for r in rows]
    return _section("Config values that differ") + table(["field", "good", "this"], cells)


def _config_cell(value: Any) -> str:
    if isinstance(value, dict) and "value" in value:
        return cell(code(value["value"]), title=f"from {value.get('source', '?')}")
    return cell(muted("absent") if value is None else code(value))


def _vocab(vocab: dict[str, Any] | None) -> str:
    if not vocab or vocab["good"] == vocab["other"]:
        return ""
    return _section("d2t format") + f"{code(vocab['good'])} &rarr; {code(vocab['other'])}"


def _section(title: str) -> str:
    return f'<div style="font-weight:600;margin:10px 0 2px 0">{esc(title)}</div>'
