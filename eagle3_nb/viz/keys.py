"""Notebook 01's views: will the engine load this draft? Pure functions over an inspection's
JSON form (`inspect_checkpoint(...).to_json()`): data in, HTML string or plotly figure out.

Every HTML renderer takes `display=False` and returns an `HTMLString` (a str Jupyter shows as
HTML); with `display=True` it also pushes the HTML to the notebook output. Inline styles only,
no scripts, no network; every checkpoint-derived string is escaped.
"""

from __future__ import annotations

from typing import Any, Iterable

from eagle3_nb.findings import CODES, SEVERITY_ORDER
from eagle3_nb.findings import engine_codes, group_findings
from eagle3_nb.viz.html import (AMBER, BLUE, GREEN, GREY, MUTED, RED, SEVERITY_COLORS,
                                SOLID_DARK_RED, SOLID_GREEN, SOLID_RED, HTMLString, badge, cell,
                                code, esc, evidence_note, fmt_num, fmt_shape, muted, note, panel,
                                show, style, table)
from eagle3_nb.viz.text import VERDICT_TEXT

VERDICT_COLORS = {"ok": SOLID_GREEN, "silent_failure": SOLID_RED, "load_error": SOLID_DARK_RED}
VERDICT_HELP = {
    "ok": "the engine loads the draft and computes what was trained",
    "silent_failure": "the engine loads the draft without complaint, but its drafts are wrong",
    "load_error": "the engine refuses to start or to load the draft",
}
FATE_STYLE = {  # fate -> (label, colors)
    "loaded": ("loaded", GREEN),
    "renamed": ("renamed", BLUE),
    "skipped": ("skipped", GREY),
    "dropped": ("DROPPED", AMBER),
    "error": ("ERROR", RED),
}
FATE_HELP = {
    "loaded": "loaded into the engine parameter under the same name",
    "renamed": "loaded after the engine renamed it",
    "skipped": "deliberately ignored by the engine (harmless)",
    "dropped": "silently ignored: the trained weight never reaches the engine",
    "error": "the engine raises while loading this tensor",
}
SCHEMA_STYLE = {  # status -> (label, colors)
    "shape_mismatch": ("SHAPE MISMATCH", RED),
    "missing": ("MISSING", RED),
    "unexpected": ("unexpected", AMBER),
    "missing_optional": ("optional, absent", GREY),
    "ok": ("ok", GREEN),
}
SCHEMA_HELP = {
    "shape_mismatch": "the tensor exists but its shape differs from what config.json promises",
    "missing": "config.json promises this tensor but the checkpoint lacks it",
    "unexpected": "the checkpoint has a tensor the config does not describe",
    "missing_optional": "absent, and engines usually take it from the target",
    "ok": "present with the promised shape",
}


# ----------------------------------------------------------------------------- helpers

def _profiles(data: dict[str, Any], engines: str | Iterable[str] | None = None) -> list[str]:
    """Selected profiles, in the inspection's order. None or "all": every engine."""
    known = [e["profile"] for e in data.get("engines", [])]
    if engines is None or engines == "all":
        return known
    wanted = [engines] if isinstance(engines, str) else list(engines)
    if "all" in wanted:
        return known
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"engine(s) {unknown} not in this inspection (it has {known})")
    return [p for p in known if p in wanted]


def _engine_label(engines: list, n_total: int) -> str:
    if engines == [None] or None in engines:
        return "all (checkpoint)"
    if len(engines) == n_total and n_total > 1:
        return "every engine"
    return ", ".join(engines)


def _engine_head(profile: str) -> str:
    name, _, version = profile.partition("==")
    return f"{esc(name)}<br>{esc(version)}"


# ----------------------------------------------------------------------------- header

def summary_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """One box: what was inspected (checkpoint, format, key layout, config, target)."""
    cfg = data.get("config", {})
    tgt = data.get("target")
    prefixes = data.get("layout_prefixes") or []
    dv = cfg.get("draft_vocab_size", {})
    rows = [
        ("checkpoint", code(data.get("checkpoint"))),
        ("format", esc(f"{data.get('format')}, {len(data.get('tensors', []))} tensors")),
        ("key layout", esc(data.get("layout")) + (
            " " + badge("prefix " + ", ".join(prefixes), AMBER,
                        "wrapper prefix left by training code") if prefixes else "")),
        ("config", esc(f"{cfg.get('dialect')} dialect, "
                       f"{', '.join(cfg.get('architectures') or []) or '?'}"
                       f"; hidden {cfg.get('hidden_size')}, {cfg.get('num_hidden_layers')} layer(s), "
                       f"{cfg.get('num_aux')} aux, vocab draft/target "
                       f"{dv.get('value') if isinstance(dv, dict) else dv}/{cfg.get('vocab_size')}")),
        ("target", esc(f"{tgt['family']} family, {tgt['num_hidden_layers']} layers, hidden "
                       f"{tgt['hidden_size']}, context {tgt['max_position_embeddings']}") if tgt
         else muted("unknown: pass target_config to resolve layer ids and context length")),
    ]
    body = table(None, [[cell(esc(k), nowrap=True, extra=f"color:{MUTED}"), cell(v)]
                            for k, v in rows]) + evidence_note(data.get("evidence"))
    return show(panel("Checkpoint", body), display)


# ----------------------------------------------------------------------------- findings

def findings_html(data: dict[str, Any], engine: str | None = None, show_info: bool = True,
                  display: bool = False) -> HTMLString:
    """Findings, errors first, identical findings of several engines shown once.
    `engine`: only that profile's findings plus the engine-independent ones."""
    findings = data.get("findings", [])
    if engine not in (None, "all"):
        _profiles(data, engine)
        findings = [f for f in findings if f["engine"] in (None, engine)]
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITY_ORDER}
    groups = sorted(group_findings(findings), key=lambda g: SEVERITY_ORDER[g["severity"]])
    n_engines = len(data.get("engines", [])) if engine in (None, "all") else 1
    rows = []
    for g in groups:
        fcode, severity, message, engines = g["code"], g["severity"], g["message"], g["engines"]
        if severity == "info" and not show_info:
            continue
        colors = SEVERITY_COLORS[severity]
        rows.append(([
            cell(badge(severity.upper() if severity == "error" else severity, colors), nowrap=True),
            cell(code(fcode), title=CODES.get(fcode, ""), nowrap=True),
            cell(esc(_engine_label(engines, n_engines))),
            cell(esc(message)),
        ], colors[1] if severity == "error" else None))
    sub = " · ".join(badge(f"{counts[s]} {s}{'' if counts[s] == 1 else 's'}", SEVERITY_COLORS[s])
                     for s in SEVERITY_ORDER)
    if engine not in (None, "all"):
        sub += " " + muted(f"for {engine} (plus checkpoint-wide findings)")
    body = (table(["severity", "code", "engines", "what it means and what to do"], rows)
            if rows else muted("no findings"))
    hidden = counts["info"] if not show_info else 0
    if hidden:
        body += note(f"{hidden} info finding(s) hidden (show_info=False)")
    return show(panel("Findings", body, sub), display)


# ----------------------------------------------------------------------------- verdicts

def verdict_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """One badge per engine with its verdict and the error codes behind it."""
    errors = engine_codes(data, "error")
    warnings = engine_codes(data, "warning")
    cards = []
    for e in data.get("engines", []):
        v = e["verdict"]
        why = errors[e["profile"]] if v != "ok" else warnings[e["profile"]]
        why_text = (", ".join(why) if v != "ok" else
                    ("warnings: " + ", ".join(why) if why else "no warnings"))
        fg, bg = VERDICT_COLORS.get(v, GREY)
        css = style(display="inline-block", min_width="150px", margin="0 8px 8px 0",
                    padding="6px 10px", border_radius="6px", background=bg, color=fg,
                    vertical_align="top")
        title = f"{e.get('covers', '')}: {VERDICT_HELP.get(v, v)}"
        name_css = style(font_size="12px", opacity="0.9")
        verdict_css = style(font_size="15px", font_weight="700")
        why_css = style(font_size="11.5px", opacity="0.9", max_width="260px")
        cards.append(
            f'<div style="{css}" title="{esc(title)}">'
            f'<div style="{name_css}">{esc(e["profile"])}</div>'
            f'<div style="{verdict_css}">{esc(VERDICT_TEXT.get(v, v).upper())}</div>'
            f'<div style="{why_css}">{esc(why_text)}</div></div>')
    body = "".join(cards) or muted("no engine profiles")
    legend = note("; ".join(f"<b>{esc(VERDICT_TEXT[k].upper())}</b>: {esc(v)}"
                            for k, v in VERDICT_HELP.items()))
    return show(panel("Verdict per engine", body + legend), display)


# ----------------------------------------------------------------------------- key table

def key_table_html(data: dict[str, Any], engines: str | Iterable[str] | None = None,
                   only_problems: bool = False, display: bool = False) -> HTMLString:
    """Checkpoint key -> its fate in each engine, side by side. Hover a cell for the engine
    parameter it fills and the reason. Rows where an engine drops a key are amber, rows where
    one raises are red. With a single engine, parameter and reason get their own columns."""
    profiles = _profiles(data, engines)
    by_profile = {e["profile"]: e for e in data.get("engines", []) if e["profile"] in profiles}
    fates = {p: {k["name"]: k for k in by_profile[p]["keys"]} for p in profiles}
    shapes = {t["name"]: t for t in data.get("tensors", [])}
    names = [t["name"] for t in data.get("tensors", [])]
    for p in profiles:  # keys an engine reports that the tensor list lacks (should not happen)
        names += [n for n in fates[p] if n not in shapes and n not in names]
    single = len(profiles) == 1
    headers = ["checkpoint key", "shape", "dtype"] + [_engine_head(p) for p in profiles]
    titles = ["", "", ""] + [by_profile[p].get("covers", "") for p in profiles]
    if single:
        headers += ["engine parameter", "reason"]
        titles += ["", ""]
    rows, shown = [], 0
    for name in names:
        row_fates = [fates[p].get(name) for p in profiles]
        kinds = {k["fate"] for k in row_fates if k}
        if only_problems and kinds <= {"loaded", "renamed", "skipped"}:
            continue
        shown += 1
        bg = RED[1] if "error" in kinds else (AMBER[1] if "dropped" in kinds else None)
        t = shapes.get(name, {})
        cells = [cell(code(name)), cell(esc(fmt_shape(t.get("shape"))), nowrap=True),
                 cell(esc(t.get("dtype", "")), nowrap=True)]
        for k in row_fates:
            cells.append(_fate_cell(k))
        if single:
            k = row_fates[0]
            cells += [cell(code(k["param"]) if k and k["param"] else muted("–")),
                      cell(esc(k["reason"]) if k and k["reason"] else "")]
        rows.append((cells, bg))
    rows.append(([cell(muted("counts"), extra="font-style:italic"), cell(""), cell("")]
                 + [cell(_fate_counts(by_profile[p]), extra="font-size:11.5px") for p in profiles]
                 + ([cell(""), cell("")] if single else []), None))
    body = table(headers, rows, titles)
    if only_problems:
        body += note(f"{len(names) - shown} key(s) every selected engine loads or skips are hidden "
                     "(only_problems=True)")
    body += _unloaded_html(by_profile, profiles)
    legend = " ".join(badge(label, colors, FATE_HELP[f], bold=False)
                      for f, (label, colors) in FATE_STYLE.items())
    sub = legend + " " + muted("hover a cell for the engine parameter and the reason")
    return show(panel("Checkpoint keys, engine by engine", body, sub), display)


def _fate_cell(k: dict[str, Any] | None) -> str:
    if k is None:
        return cell(muted("–"), align="center")
    label, colors = FATE_STYLE.get(k["fate"], (k["fate"], GREY))
    tip = (f"-> {k['param']}" if k["param"] else "no engine parameter") + \
          (f"\n{k['reason']}" if k["reason"] else "")
    emphasis = k["fate"] in ("dropped", "error")
    return cell(esc(label), colors=colors if emphasis else None, title=tip, align="center",
                nowrap=True, extra=f"color:{colors[0]};font-weight:{600 if emphasis else 400}")


def _fate_counts(engine: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for k in engine["keys"]:
        counts[k["fate"]] = counts.get(k["fate"], 0) + 1
    return esc(", ".join(f"{n} {f}" for f, n in counts.items()))


def _unloaded_html(by_profile: dict[str, dict], profiles: list[str]) -> str:
    items = [(p, by_profile[p].get("unloaded_params", [])) for p in profiles]
    if not any(u for _, u in items):
        return note("every engine parameter is filled by some checkpoint tensor "
                    "(or taken from the target by design)")
    rows = [[cell(code(p), nowrap=True),
             cell("<br>".join(code(u) for u in unl) if unl else muted("none"),
                  colors=RED if unl else None)]
            for p, unl in items]
    return (f'<div style="{style(margin="10px 0 2px 0", font_weight="600")}">Engine parameters '
            "no tensor fills (they keep their initial values)</div>"
            + table(["engine", "unloaded parameters"], rows))


# ----------------------------------------------------------------------------- schema diff

def schema_diff_html(data: dict[str, Any], hide_ok: bool = False,
                     display: bool = False) -> HTMLString:
    """What config.json promises vs what the checkpoint holds, problems first."""
    schema = data.get("schema", [])
    counts: dict[str, int] = {}
    rows = []
    for r in schema:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if hide_ok and r["status"] == "ok":
            continue
        label, colors = SCHEMA_STYLE.get(r["status"], (r["status"], GREY))
        bad = r["status"] in ("shape_mismatch", "missing")
        diff = r["status"] == "shape_mismatch"
        shape_css = f"color:{RED[0]};font-weight:600" if diff else ""
        rows.append(([
            cell(badge(label, colors, SCHEMA_HELP.get(r["status"], "")), nowrap=True),
            cell(code(r["name"])),
            cell(code(r["checkpoint_key"]) if r["checkpoint_key"] else muted("–")),
            cell(esc(fmt_shape(r["expected_shape"])), nowrap=True),
            cell(esc(fmt_shape(r["actual_shape"])), nowrap=True, extra=shape_css),
            cell(esc(r.get("note", "")), extra=f"color:{MUTED}"),
        ], RED[1] if bad else None))
    sub = " ".join(badge(f"{n} {SCHEMA_STYLE.get(s, (s,))[0]}", SCHEMA_STYLE.get(s, (s, GREY))[1])
                   for s, n in counts.items())
    body = table(["status", "expected (canonical name)", "checkpoint key", "expected shape",
                  "actual shape", "note"], rows) if rows else muted("no schema rows")
    if hide_ok and counts.get("ok"):
        body += note(f"{counts['ok']} matching tensor(s) hidden (hide_ok=True)")
    return show(panel("Schema: config.json's promise vs the checkpoint", body, sub), display)


# ----------------------------------------------------------------------------- statistics


def _norm(s: dict[str, Any]):
    return s.get("norm", s.get("l2"))


def stats_table_html(data: dict[str, Any], only_flagged: bool = False,
                     display: bool = False) -> HTMLString:
    """Per-tensor mean/std/norm/NaN; never-trained-looking tensors flagged; says which tensors
    the byte budget left unscanned."""
    st = data.get("stats")
    if not st:
        return show(panel("Tensor statistics", muted(
            "not scanned (stats=False): rerun with stats=True to look for NaN, all-zero and "
            "never-trained tensors")), display)
    rows_by_name = st.get("stats", {})
    order = [t["name"] for t in data.get("tensors", []) if t["name"] in rows_by_name]
    order += [n for n in rows_by_name if n not in order]
    rows, n_flagged = [], 0
    for name in order:
        s = dict(rows_by_name[name], name=name)
        flags = [tuple(f) for f in s.get("flags") or []]
        n_flagged += bool(flags)
        if only_flagged and not flags:
            continue
        worst = "error" if any(sev == "error" for _, sev in flags) else (
            "warning" if flags else None)
        numel = s.get("numel") or 0
        nan_css = f"color:{RED[0]};font-weight:600" if s.get("n_nan") or s.get("n_inf") else ""
        zeros = f"{100 * s['n_zero'] / numel:.0f}%" if numel and s.get("n_zero") is not None else "–"
        flag_html = " ".join(badge(lbl, SEVERITY_COLORS[sev]) for lbl, sev in flags)
        if s.get("n_true") is not None:
            flag_html += muted(f"{s['n_true']} true of {numel}")
        rows.append(([
            cell(code(name)), cell(esc(s.get("dtype", "")), nowrap=True),
            cell(esc(fmt_shape(s.get("shape"))), nowrap=True),
            cell(fmt_num(s.get("mean")), align="right"), cell(fmt_num(s.get("std")), align="right"),
            cell(fmt_num(_norm(s)), align="right"),
            cell(fmt_num(s.get("min")), align="right"), cell(fmt_num(s.get("max")), align="right"),
            cell(fmt_num(s.get("n_nan", 0)), align="right", extra=nan_css),
            cell(fmt_num(s.get("n_inf", 0)), align="right", extra=nan_css),
            cell(esc(zeros), align="right"), cell(flag_html),
        ], SEVERITY_COLORS[worst][1] if worst == "error" else None))
    skipped = st.get("skipped") or []
    sub = (f"{len(rows_by_name)} tensor(s) scanned ({_bytes(st.get('scanned_bytes'))} of a "
           f"{_bytes(st.get('budget_bytes'))} budget); " + (
               f"{n_flagged} flagged" if n_flagged else "nothing flagged")
           + "; statistics over finite values, NaN/Inf counted apart")
    body = table(["tensor", "dtype", "shape", "mean", "std", "L2 norm", "min", "max", "NaN",
                  "Inf", "zeros", "flag"], rows) if rows else muted("no tensor flagged")
    if skipped:
        body += note(f"<b>Not scanned</b> ({len(skipped)}, over the byte budget; raise it to scan "
                     "them): " + ", ".join(code(n) for n in skipped))
    return show(panel("Tensor statistics", body, esc(sub)), display)


def _bytes(n: Any) -> str:
    if not isinstance(n, int):
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def tensor_norms_figure(data: dict[str, Any], metric: str = "norm", log: bool = True):
    """Plotly bar chart: one bar per scanned floating-point tensor (L2 norm or std), flagged
    tensors coloured (NaN/Inf red, never-trained-looking amber) and labelled. Buttons switch
    norm/std and log/linear in the figure itself (work offline in a static HTML report)."""
    import plotly.graph_objects as go

    if metric not in ("norm", "std"):
        raise ValueError(f"metric must be 'norm' or 'std', not {metric!r}")
    st = (data.get("stats") or {}).get("stats", {})
    order = [t["name"] for t in data.get("tensors", []) if t["name"] in st]
    order += [n for n in st if n not in order]
    names, norms, stds, colors, labels, hover = [], [], [], [], [], []
    for name in order:
        s = dict(st[name], name=name)
        if s.get("kind") != "float":
            continue  # ints/bools (d2t, t2d) are vocabulary maps, not weights: notebook 02
        flags = [tuple(f) for f in s.get("flags") or []]
        sev = "error" if any(v == "error" for _, v in flags) else ("warning" if flags else None)
        names.append(esc(name))  # plotly parses tags in text: show the name, never markup
        norms.append(_value(_norm(s)))
        stds.append(_value(s.get("std")))
        colors.append({"error": RED[0], "warning": "#dc6803"}.get(sev, "#2e90fa"))
        labels.append(esc(flags[0][0].split(":")[0]) if flags else "")
        hover.append(esc(f"{name}<br>shape {fmt_shape(s.get('shape'))} {s.get('dtype', '')}"
                         f"<br>norm {fmt_num(_norm(s))}, std {fmt_num(s.get('std'))}, "
                         f"mean {fmt_num(s.get('mean'))}<br>NaN {s.get('n_nan', 0)}, "
                         f"Inf {s.get('n_inf', 0)}" + (f"<br>{flags[0][0]}" if flags else ""))
                     .replace("&lt;br&gt;", "<br>"))
    y = norms if metric == "norm" else stds
    fig = go.Figure(go.Bar(x=names, y=y, marker_color=colors, text=labels,
                           textposition="outside", cliponaxis=False, hovertext=hover,
                           hovertemplate="%{hovertext}<extra></extra>"))
    ylabel = {"norm": "L2 norm (finite values)", "std": "std (finite values)"}
    button_row = dict(type="buttons", direction="right", y=1.02, yanchor="bottom",
                      xanchor="left", showactive=True, pad=dict(t=0, b=0, l=0, r=0),
                      font=dict(size=11))
    fig.update_layout(
        title=dict(text=f"Per-tensor {'L2 norm' if metric == 'norm' else 'std'}: "
                   f"{len(names)} floating-point tensor(s); red = NaN/Inf or never trained, "
                   "amber = norm weight still at 1.0", font=dict(size=14), y=0.97,
                   yanchor="top"),
        yaxis=dict(type="log" if log else "linear", title=ylabel[metric]),
        xaxis=dict(tickangle=-40 if len(names) > 6 else 0, automargin=True),
        template="plotly_white", height=480, margin=dict(t=95, b=40, l=60, r=20),
        showlegend=False,
        updatemenus=[
            dict(button_row, x=0.0, active=0 if metric == "norm" else 1, buttons=[
                dict(label="L2 norm", method="update",
                     args=[{"y": [norms]}, {"yaxis.title.text": ylabel["norm"]}]),
                dict(label="std", method="update",
                     args=[{"y": [stds]}, {"yaxis.title.text": ylabel["std"]}])]),
            dict(button_row, x=0.2, active=0 if log else 1, buttons=[
                dict(label="log", method="relayout", args=[{"yaxis.type": "log"}]),
                dict(label="linear", method="relayout", args=[{"yaxis.type": "linear"}])]),
        ])
    for x, label, value in zip(names, labels, y):
        if label and not value:  # no bar to carry the label (0 or undefined): pin it low
            fig.add_annotation(x=x, xref="x", y=0, yref="paper", yanchor="bottom", text=label,
                               showarrow=False, font=dict(color=RED[0], size=11))
    if not names:
        fig.add_annotation(text="no statistics: run with stats=True", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def _value(x: Any):
    """None (no bar) for missing values. A log axis cannot show 0: the bar label marks it."""
    if x is None or x != x:
        return None
    return x


# ----------------------------------------------------------------------------- aux layers

def aux_layers_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """Per engine: where the aux layer ids are read from, the offset rule, which
    hidden_states the target captures vs which ones training used, and the width reaching fc."""
    tgt = data.get("target")
    L = tgt["num_hidden_layers"] if tgt else None
    rows = []
    for e in data.get("engines", []):
        a = e.get("aux_layers", {})
        fc = e.get("fc_input_width", {})
        captured, trained = a.get("ids"), a.get("trained")
        mismatch = False
        if not a.get("use_aux_hidden_state", True):
            match = badge("final-norm state only", AMBER, "use_aux_hidden_state is false")
        elif captured is None or trained is None:
            match = badge("unresolved", GREY, "pass target_config to resolve the default ids")
        elif captured == trained:
            match = badge("match", GREEN)
        else:
            mismatch = True
            match = badge("MISMATCH", RED, "the draft sees other layers than it was trained on")
        fc_bad = fc.get("checkpoint") is not None and (
            fc.get("engine") != fc.get("checkpoint") or (a.get("width") not in (None, fc.get("engine"))))
        configured = a.get("configured")
        rows.append(([
            cell(code(e["profile"]), nowrap=True),
            cell(esc(f"{configured if configured is not None else '–'}") + "<br>"
                 + muted(f"from {a.get('source')}"), nowrap=True),
            cell(code(a.get("rule", ""))),
            cell(esc(_ids(captured)), nowrap=True),
            cell(esc(_ids(trained)), title=a.get("trained_source", ""), nowrap=True),
            cell(match),
            cell(esc(f"{a.get('width', '–')} → fc {fc.get('engine')}/{fc.get('checkpoint')}"),
                 colors=RED if fc_bad else None, nowrap=True,
                 title="width of the hidden state reaching the draft -> fc input width "
                       "(engine / checkpoint)"),
            cell(_capture_strip(captured, trained, L)),
            cell(esc("; ".join(a.get("notes") or [])), extra=f"color:{MUTED};font-size:12px"),
        ], RED[1] if mismatch or fc_bad else None))
    headers = ["engine", "configured ids", "rule", "captured hidden_states", "trained on",
               "", "width → fc in (eng/ckpt)", "hidden_states map", "notes"]
    trained_src = {e.get("aux_layers", {}).get("trained_source") for e in data.get("engines", [])}
    sub = ("hidden_states[0] is the embedding output, hidden_states[i] the output of layer i; "
           + (f"target has {L} layers" if L else "target unknown: pass target_config"))
    legend = note(" ".join([
        _box(GREEN[0], solid=True) + " captured and trained",
        _box(RED[0], solid=True) + " captured, not trained",
        _box(RED[0], solid=False) + " trained, not captured",
        _box("#d0d5dd", solid=True) + " neither"]))
    body = table(headers, rows) + legend
    if len(trained_src) == 1 and None not in trained_src:
        body += note("training used: " + esc(next(iter(trained_src))))
    return show(panel("Aux hidden states: what reaches fc", body, esc(sub)), display)


def _ids(ids: Any) -> str:
    return "–" if ids is None else "[" + ", ".join(str(i) for i in ids) + "]"


def _box(color: str, solid: bool, title: str = "", size: int = 11) -> str:
    css = style(display="inline-block", width=f"{size}px", height=f"{size}px",
                margin="0 1px", vertical_align="middle", box_sizing="border-box",
                background=color if solid else "#ffffff",
                border=f"1.5px {'solid' if solid else 'dashed'} {color}")
    t = f' title="{esc(title)}"' if title else ""
    return f'<span style="{css}"{t}></span>'


def _capture_strip(captured: list[int] | None, trained: list[int] | None, L: int | None) -> str:
    cap, tr = set(captured or []), set(trained or [])
    if not cap and not tr:
        return muted("–")
    top = L if L is not None else max(cap | tr)
    size = 11 if top <= 48 else 6
    boxes = []
    for i in range(top + 1):
        if i in cap and i in tr:
            boxes.append(_box(GREEN[0], True, f"hidden_states[{i}]: captured, trained", size))
        elif i in cap:
            boxes.append(_box(RED[0], True, f"hidden_states[{i}]: captured, not trained", size))
        elif i in tr:
            boxes.append(_box(RED[0], False, f"hidden_states[{i}]: trained, not captured", size))
        else:
            boxes.append(_box("#d0d5dd", True, f"hidden_states[{i}]", size))
    return f'<span style="{style(white_space="nowrap")}">{"".join(boxes)}</span>'
