"""Renderers for notebook 03 (data: the dict `hidden_check.check_hidden_states` returns)."""

from __future__ import annotations

from typing import Any

from .html import (AMBER, GREEN, RED, badge, cell, code, esc, fmt_num, fmt_shape, muted, note,
                   panel, show, table)

STATUS_COLORS = {"ok": GREEN, "mismatch": RED, "skipped": AMBER}


def wirings_html(data: dict[str, Any], display: bool = False) -> str:
    """One row per wiring: layers captured, width reaching the draft, fc, first-step accuracy."""
    rows = []
    for r in data["wirings"]:
        w = r["wiring"]
        acc = ("crashes: " + esc(r["error"])) if r["error"] else fmt_num(r["accuracy"], 3)
        fc = {True: "applied", False: "SKIPPED", None: "–"}[r["fc_applied"]]
        bad = r["error"] or r["fc_applied"] is False or r["width"] != data["trained_width"]
        rows.append(([cell(code(w["name"])), cell(esc(w["hidden_source"])),
                      cell(esc(w["layer_ids"]) if w["layer_ids"] else muted("–")),
                      cell(fmt_num(r["width"]), align="right"),
                      cell(esc(fc), colors=AMBER if r["fc_applied"] is False else None),
                      cell(acc, align="right", colors=RED if r["error"] else None),
                      cell(muted(w["note"]))], RED[1] if bad else None))
    body = table(["wiring", "source", "hidden_states", "width", "fc", "first-step acc", "why"], rows)
    sub = (f"draft hidden_size {data['hidden_size']}, trained on width {data['trained_width']}; "
           f"{data['n_samples']} held-out prompts on {esc(data['device'])}")
    return show(panel("What reaches the draft, and does it still predict the target?", body,
                      sub) + note("first-step accuracy: the draft's first token vs the target's "
                                  "greedy token at that position (the seed's training-data test)"),
                display)


def trace_html(data: dict[str, Any], wiring: str, display: bool = False) -> str:
    row = next((r for r in data["wirings"] if r["wiring"]["name"] == wiring), None)
    if row is None:
        raise KeyError(wiring)
    if row["error"]:
        return show(panel(f"Shape trace: {esc(wiring)}", badge("crashes", RED) + " " +
                          esc(row["error"])), display)
    rows = [([cell(code(t["module"])), cell(esc(" ".join(fmt_shape(s) for s in t["inputs"]))),
              cell(fmt_shape(t["output"])), cell(fmt_num(t["expected_in"]), align="right"),
              cell(badge(t["status"], STATUS_COLORS[t["status"]])), cell(muted(t["note"]))],
             None if t["status"] == "ok" else STATUS_COLORS[t["status"]][1])
            for t in row["trace"]]
    body = table(["module", "input", "output", "promised in", "status", "note"], rows)
    return show(panel(f"Shape trace: {esc(wiring)}", body), display)


def accuracy_figure(data: dict[str, Any]):
    import plotly.graph_objects as go

    names = [r["wiring"]["name"] for r in data["wirings"]]
    acc = [r["accuracy"] if r["accuracy"] is not None else 0.0 for r in data["wirings"]]
    colors = ["#b42318" if r["error"] or r["fc_applied"] is False else "#175cd3"
              for r in data["wirings"]]
    fig = go.Figure(go.Bar(x=names, y=acc, marker_color=colors,
                           hovertext=[r["error"] or "" for r in data["wirings"]]))
    fig.update_layout(title="First-step draft accuracy per wiring", yaxis_title="accuracy",
                      yaxis_range=[0, 1], height=360, margin=dict(l=50, r=20, t=50, b=80))
    return fig
