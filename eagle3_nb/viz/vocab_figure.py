"""Notebook 02's figure: draft id -> target id under each reading of d2t, beside the stored
table, downsampled so a 32000-entry table stays a few hundred kB of HTML."""

from __future__ import annotations

import numpy as np

from eagle3_nb.findings import IDENTITY
from eagle3_nb.viz.html import RED, esc
from eagle3_nb.viz.vocab_cells import FORMAT_TEXT

MAX_POINTS = 5000        # points per figure trace before downsampling


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
