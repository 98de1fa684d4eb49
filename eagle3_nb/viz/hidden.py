"""Renderers for notebook 03 (data: the JSON form of `checks.hidden.check_hidden_states`'s
answer)."""

from __future__ import annotations

from typing import Any

from eagle3_nb.findings import collapses
from eagle3_nb.viz.html import (AMBER, GREEN, RED, badge, cell, code, esc, evidence_note,
                                fmt_num, fmt_shape, muted, note, panel, show, table, versus_html)

STATUS_COLORS = {"ok": GREEN, "mismatch": RED, "skipped": AMBER}


def wirings_html(data: dict[str, Any], display: bool = False) -> str:
    """One row per wiring: layers captured, width reaching the draft, fc, first-step accuracy."""
    rows = []
    for r in data["wirings"]:
        w = r["wiring"]
        acc = (("crashes: " + esc(r["error"])) if r["error"] else
               muted(esc(r["unmeasured"])) if r.get("unmeasured") else
               fmt_num(r["accuracy"], 3) + _pm(r.get("accuracy_se")))
        fc = {True: "applied", False: "SKIPPED", None: "–"}[r["fc_applied"]]
        bad = (r["error"] or r["fc_applied"] is False
               or r["width"] not in (None, data["trained_width"]))
        rows.append(([cell(code(w["name"])), cell(esc(w["hidden_source"])),
                      cell(esc(w["layer_ids"]) if w["layer_ids"] else muted("–")),
                      cell(fmt_num(r["width"]), align="right"),
                      cell(esc(fc), colors=AMBER if r["fc_applied"] is False else None),
                      cell(fmt_num(r.get("feature_cosine"), 3), align="right"),
                      cell(acc, align="right", colors=RED if r["error"] else None),
                      cell(versus_html(r.get("vs_trained"), 3), nowrap=True),
                      cell(muted(w["note"]))], RED[1] if bad else None))
    body = table(["wiring", "source", "hidden_states", "width", "fc", "feature cos",
                  "first-step acc ± se", "vs trained", "why"], rows)
    inputs = (f"{data['n_samples']} hidden-state dumps, accuracy against the "
              f"{data['reference']}" if data.get("source") == "dumps"
              else f"{data['n_samples']} held-out prompts")
    sub = (f"draft hidden_size {data['hidden_size']}, trained on width {data['trained_width']}; "
           f"{inputs} on {esc(data['device'])}")
    reference = ("the token the dump recorded there (teacher-forced: not what the target "
                 "would choose)" if data.get("source") == "dumps"
                 else "the target's greedy token at that position")
    how = note(f"first-step accuracy: the draft's first token vs {reference} "
               "(the seed's training-data test). feature cos: cosine of what "
               "reaches the decoder layer (fc's output, or the raw state where "
               "fc is skipped) to what it is as trained, on the same positions. "
               "± one standard error, prompts as the sampling unit; vs trained: "
               "the difference on the same prompts, indistinguishable within 2 "
               "of its standard errors")
    return show(evidence_note(data.get("had"))
                + panel("What reaches the draft, and does it still predict the target?", body,
                        sub) + how, display)


def _pm(se: float | None) -> str:
    return muted(f" ± {fmt_num(se, 3)}") if se is not None else ""


def trace_html(data: dict[str, Any], wiring: str, display: bool = False) -> str:
    row = next((r for r in data["wirings"] if r["wiring"]["name"] == wiring), None)
    if row is None:
        raise KeyError(wiring)
    if row["error"]:
        return show(panel(f"Shape trace: {esc(wiring)}", badge("crashes", RED) + " " +
                          esc(row["error"])), display)
    if row.get("unmeasured"):
        return show(panel(f"Shape trace: {esc(wiring)}", muted(esc(row["unmeasured"]))), display)
    rows = [([cell(code(t["module"])), cell(esc(" ".join(fmt_shape(s) for s in t["inputs"]))),
              cell(fmt_shape(t["output"])), cell(fmt_num(t["expected_in"]), align="right"),
              cell(badge(t["status"], STATUS_COLORS[t["status"]])), cell(muted(t["note"]))],
             None if t["status"] == "ok" else STATUS_COLORS[t["status"]][1])
            for t in row["trace"]]
    body = table(["module", "input", "output", "promised in", "status", "note"], rows)
    return show(panel(f"Shape trace: {esc(wiring)}", body), display)


STAGE_COLORS = {"ok": GREEN[0], "mismatch": RED[0], "skipped": AMBER[0], "unloaded": "#7a271a"}


def _stage_name(module: str) -> str:
    if module.startswith("layers."):
        return "layer " + module.split(".")[1]
    return "target state" if module.startswith("hidden_states") else module.split(".")[0]


def data_path_stages(trace: list[dict[str, Any]],
                     reset_params: list[str] = ()) -> list[dict[str, Any]]:
    """The trace condensed to the data path: target state, fc, one stage per decoder layer
    (its worst status), norm, lm_head. Each stage: name, input and output widths, status, notes.
    A stage with parameters the engine leaves unloaded (reset_params) is "unloaded" unless its
    shapes already fail."""
    stages: dict[str, dict[str, Any]] = {}
    for t in trace:
        if t["module"] == "embed_tokens":
            continue  # the token path: the same under every wiring
        name = _stage_name(t["module"])
        width_in = t["inputs"][0][-1] if t["inputs"] else None
        width_out = t["output"][-1] if t["output"] else None
        stage = stages.setdefault(name, {"name": name, "in": width_in, "out": width_out,
                                         "status": "ok", "notes": []})
        stage["out"] = width_out if width_out is not None else stage["out"]
        if t["status"] != "ok":
            stage["status"] = t["status"] if stage["status"] == "ok" else stage["status"]
            stage["notes"].append(f"{t['module']}: {t['note'] or t['status']}")
    for param in reset_params:
        stage = stages.get(_stage_name(param))
        if stage is not None:
            stage["status"] = "unloaded" if stage["status"] == "ok" else stage["status"]
            stage["notes"].append(f"{param}: left at its initial value by the engine")
    return list(stages.values())


def data_path_figure(data: dict[str, Any], wirings: tuple[str, ...] | None = None):
    """The data path of each wiring, one row each (as trained on top): what width enters and
    leaves every stage, fc skipped in amber, a width the config does not promise in red, a stage
    whose weights the engine never loads in dark red. Default: `trained`, then every wiring
    whose path shows one of those."""
    import plotly.graph_objects as go

    paths = _data_paths(data, wirings)
    fig = go.Figure()
    for y, (name, stages) in enumerate(paths):
        fig.add_trace(go.Scatter(
            x=list(range(len(stages))), y=[y] * len(stages), mode="markers+text", name=name,
            showlegend=False, hoverinfo="text",
            marker=dict(symbol="square", size=58,
                        color=[STAGE_COLORS[s["status"]] for s in stages]),
            text=[_stage_label(s) for s in stages], textfont=dict(color="#ffffff", size=10),
            hovertext=["<br>".join([s["name"], *s["notes"]]) for s in stages]))
        for x in range(len(stages) - 1):
            fig.add_annotation(x=x + 0.62, y=y, ax=x + 0.38, ay=y, xref="x", yref="y",
                               axref="x", ayref="y", showarrow=True, arrowhead=2, text="")
    fig.update_layout(title="Data path per wiring: widths in → out<br><sup>red: not what the "
                            "config promises; amber: skipped; dark red: weights never loaded</sup>",
                      height=140 + 110 * len(paths), margin=dict(l=110, r=20, t=50, b=20),
                      plot_bgcolor="#ffffff")
    longest = max((len(stages) for _, stages in paths), default=1)
    fig.update_xaxes(visible=False, range=[-0.6, longest - 0.4])
    fig.update_yaxes(tickvals=list(range(len(paths))), ticktext=[n for n, _ in paths],
                     autorange="reversed", showgrid=False, zeroline=False)
    return fig


def _data_paths(data: dict[str, Any], wirings) -> list[tuple[str, list[dict[str, Any]]]]:
    paths = [(r["wiring"]["name"], data_path_stages(r["trace"], r["wiring"]["reset_params"]))
             for r in data["wirings"] if r["trace"]]
    if wirings is not None:
        return [p for name in wirings for p in paths if p[0] == name]
    return [(name, stages) for name, stages in paths
            if name == "trained" or any(s["status"] != "ok" for s in stages)]


def _stage_label(stage: dict[str, Any]) -> str:
    if not stage["out"]:
        return f"{stage['name']}<br>{stage['status']}"
    label = f"{stage['name']}<br>{stage['in']}→{stage['out']}"
    return label + ("<br>unloaded" if stage["status"] == "unloaded" else "")


def accuracy_figure(data: dict[str, Any]):
    import plotly.graph_objects as go

    names = [r["wiring"]["name"] for r in data["wirings"]]
    # a crash draws as 0 (it predicts nothing); an unmeasured wiring draws no bar at all
    acc = [0.0 if r["error"] else r["accuracy"] for r in data["wirings"]]
    trained = next((r["accuracy"] for r in data["wirings"] if r["wiring"]["name"] == "trained"),
                   None)
    colors = ["#b42318" if collapsed_row(r, trained) else "#175cd3" for r in data["wirings"]]
    errors = [r.get("accuracy_se") or 0.0 for r in data["wirings"]]
    fig = go.Figure(go.Bar(x=names, y=acc, marker_color=colors,
                           error_y=dict(type="data", array=errors, visible=True),
                           hovertext=[r["error"] or r.get("unmeasured") or ""
                                      for r in data["wirings"]]))
    fig.update_layout(title="First-step draft accuracy per wiring (± one standard error by "
                      "prompt)", yaxis_title="accuracy",
                      yaxis_range=[0, 1], height=360, margin=dict(l=50, r=20, t=50, b=80))
    return fig


def collapsed_row(row: dict[str, Any], trained: float | None) -> bool:
    """A crash, fc skipped, or at most half the trained wiring's accuracy (findings.collapses,
    the rule of HIDDEN_COLLAPSES)."""
    return bool(row.get("error") or row.get("fc_applied") is False
                or collapses(row.get("accuracy"), trained))


def layer_similarity_figure(data: dict[str, Any]):
    """How alike the target's hidden_states are (cosine, mean over positions; index L is the
    pre-final-norm state). Squares on the diagonal: the layers the draft was trained on; a
    marker at (trained, captured): what an engine feeds that aux slot instead, on the cell that
    says how alike the two are."""
    import plotly.graph_objects as go

    sim = data["layer_similarity"]
    if sim is None:
        return _not_measured("How alike are the target's layers? Not measured: a dump holds only "
                             "the captured layers (run with the live target)")
    idx = list(range(len(sim)))
    fig = go.Figure(go.Heatmap(
        z=sim, x=idx, y=idx, zmin=min(0.0, min(map(min, sim))), zmax=1, colorscale="Viridis",
        colorbar=dict(title="cosine"), texttemplate="%{z:.2f}" if len(sim) <= 16 else None,
        hovertemplate="hidden_states[%{y}] vs [%{x}]: cosine %{z:.3f}<extra></extra>"))
    trained = data.get("trained_layer_ids") or []
    fig.add_trace(go.Scatter(x=trained, y=trained, mode="markers", name="trained on",
                             marker=dict(symbol="square-open", size=22, color="#111111",
                                         line=dict(width=3))))
    for ids, engines in _engine_layer_sets(data).items():
        pairs = list(zip(trained, ids))
        fig.add_trace(go.Scatter(x=[s for _, s in pairs], y=[t for t, _ in pairs],
                                 mode="markers", name=", ".join(engines),
                                 marker=dict(symbol="x", size=12, line=dict(width=1))))
    fig.update_layout(title="How alike are the target's layers? (cosine of hidden_states)",
                      height=200 + 28 * len(sim), margin=dict(l=60, r=20, t=50, b=60),
                      legend=dict(orientation="h", y=-0.15))
    fig.update_xaxes(title_text="hidden_states index (captured)", dtick=1)
    fig.update_yaxes(title_text="hidden_states index (trained)", dtick=1, autorange="reversed")
    return fig


def off_by_one_html(data: dict[str, Any], wiring: str = "layers_plus_one",
                    display: bool = False) -> str:
    """Why a one-layer-off wiring may cost nothing measurable here, in this target's numbers:
    the cosine between each trained layer and the one the wiring captures instead, and the
    first-step accuracy difference with its paired standard error."""
    row = next((r for r in data["wirings"] if r["wiring"]["name"] == wiring), None)
    trained, sim = data.get("trained_layer_ids") or [], data.get("layer_similarity")
    if row is None or not trained:
        return show(note(f"no {esc(wiring)} row or no trained layer ids: nothing to compare"),
                    display)
    captured = row["wiring"]["layer_ids"] or []
    pairs = [(t, c) for t, c in zip(trained, captured) if sim and max(t, c) < len(sim)]
    cosines = ", ".join(f"[{t}] vs [{c}]: {sim[t][c]:.3f}" for t, c in pairs) or "not measured"
    vs = row.get("vs_trained") or {}
    diff = ("no number" if vs.get("difference") is None else
            f"{vs['difference']:+.3f}" + (f" ± {vs['se']:.3f}" if vs.get("se") is not None
                                          else "") + f" ({vs['verdict']})")
    return show(note(f"{code(wiring)} captures {esc(captured)} instead of {esc(trained)}. "
                     f"Cosine of each pair in this target: {esc(cosines)}. First-step accuracy "
                     f"against trained: {esc(diff)}."), display)


def _not_measured(title: str):
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(title=title, height=90, margin=dict(l=20, r=20, t=50, b=10),
                      plot_bgcolor="#ffffff",
                      xaxis_visible=False, yaxis_visible=False)
    return fig


def _engine_layer_sets(data: dict[str, Any]) -> dict[tuple[int, ...], list[str]]:
    """Captured layer ids -> the engine wirings that capture them (concatenations only)."""
    sets: dict[tuple[int, ...], list[str]] = {}
    for r in data["wirings"]:
        w = r["wiring"]
        if w.get("engine") and w["hidden_source"] == "concat" and w["layer_ids"]:
            sets.setdefault(tuple(w["layer_ids"]), []).append(w["name"])
    return sets
