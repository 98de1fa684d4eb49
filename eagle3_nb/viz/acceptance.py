"""Notebook 04's views: does the draft actually predict the target? Pure functions: an acceptance
simulation (`AcceptanceResult`, or its plain-dict JSON `to_json(with_steps=True)`) in, HTML string
or plotly figure out.

Each verify step commits the accepted drafted tokens plus the target's bonus token. The token strip
shows them in order and, after the bonus, the drafted tokens the target rejected, struck through,
so a person sees what the draft proposed and where it went wrong. Numbers are given in every
convention people quote (SGLang accept length, vLLM mean acceptance length, per-position and
conditional rates), each labelled, because one run reads as different numbers in each. Token text
comes from a tokenizer: it is escaped, and whitespace is made visible.
"""

from __future__ import annotations

from typing import Any, Callable

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import collapses
from eagle3_nb.viz.html import (BLUE, GREEN, GREY, MONO, MUTED, RED, HTMLString, badge, cell, esc,
                                evidence_note, fmt_num, muted, note, panel, show, style, table,
                                versus_html)

PROMPT_TAIL = 24          # prompt tokens shown before the generated ones
KIND_COLORS = {"accepted": GREEN, "bonus": BLUE, "rejected": RED, "first": GREY}
KIND_HELP = {
    "prompt": "prompt",
    "first": "first token, from the target's prefill pass (no draft)",
    "accepted": "drafted, and accepted by the target",
    "bonus": "bonus: the target's own token after the accepted drafts",
    "rejected": "drafted, rejected by the target (not committed)",
}
VISIBLE = {"\n": "⏎", "\r": "␍", "\t": "⇥"}
STEP_UNDERLINES = ("#98a2b3", "#d0d7de")   # alternate per verify step


# ----------------------------------------------------------------------------- data

def as_data(result) -> dict[str, Any]:
    """The plain-dict JSON of a result, steps included; dicts pass through."""
    return result if isinstance(result, dict) else result.to_json(with_steps=True)


def _stats(result) -> dict[str, Any]:
    return result if isinstance(result, dict) else result.stats()


def _many(results) -> list[dict[str, Any]]:
    if isinstance(results, dict) or hasattr(results, "stats"):
        results = [results]
    return [_stats(r) for r in results]


def _runs(data: dict[str, Any]) -> list[dict[str, Any]]:
    if "samples" not in data:
        raise Eagle3NbError("this acceptance result has no per-step data", data.get("wiring"),
                            "pass the AcceptanceResult itself or its to_json(with_steps=True)")
    return data["samples"]


def _labels(datas: list[dict[str, Any]]) -> list[str]:
    """Wiring names, numbered where two results share one (two checkpoints, same wiring)."""
    names = [str(d["wiring"]) for d in datas]
    return [esc(n if names.count(n) == 1 else f"{n} #{i + 1}") for i, n in enumerate(names)]


def _counts(d: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """(steps that accepted draft token i, steps that reached it, accepted drafts in all),
    exact from the accept-length histogram."""
    hist = {int(length) - 1: c for length, c in d["accept_length_histogram"].items()}
    k = d["num_steps"]
    passed = [sum(c for a, c in hist.items() if a > i) for i in range(k)]
    reached = [sum(c for a, c in hist.items() if a >= i) for i in range(k)]
    return passed, reached, sum(a * c for a, c in hist.items())


def _accept_length(steps: list[dict[str, Any]]) -> float | None:
    return (sum(s["accepted"] for s in steps) + len(steps)) / len(steps) if steps else None


# ----------------------------------------------------------------------------- token strip

def _decoder(decode) -> Callable[[int], str] | None:
    if decode is not None and hasattr(decode, "decode"):   # a tokenizer rather than a function
        return lambda i: decode.decode([i])
    return decode


def token_text(tid: int, decode=None) -> str:
    """A token as shown: decoded, newlines and tabs as symbols, other control characters
    escaped; `#id` without a decoder."""
    if decode is None:
        return f"#{tid}"
    text = decode(int(tid))
    out = "".join(VISIBLE.get(c, c if c.isprintable() else repr(c)[1:-1]) for c in text)
    return out or "∅"


def _quote(tid: int, decode) -> str:
    return f"#{tid}" if decode is None else f"{token_text(tid, decode)!r} #{tid}"


def _token_css(kind: str) -> str:
    fg, bg = KIND_COLORS.get(kind, (MUTED, "transparent"))
    rejected = kind == "rejected"
    return style(white_space="pre", font_family=MONO, font_size="12.5px", color=fg, background=bg,
                 padding="0 1px", margin="0 1px 0 0", border_radius="3px",
                 text_decoration="line-through" if rejected else None,
                 opacity="0.75" if rejected else None)


def _span(kind: str, tid: int, title: str, decode) -> str:
    return (f'<span data-kind="{kind}" data-id="{int(tid)}" title="{esc(title)}" '
            f'style="{_token_css(kind)}">{esc(token_text(tid, decode))}</span>')


def _title(i: int, step: dict[str, Any], j: int, kind: str, n_prompt: int, decode) -> str:
    """Hover text of the token at draft position j (0-based; j == k: the bonus after k
    accepted drafts)."""
    k, a, pos = len(step["drafted"]), step["accepted"], step["position"] + j
    where = f"draft position {j + 1} of {k}" if j < k else f"after all {k} drafts"
    lines = [f"verify step {i} · {where}",
             f"context position {pos} ({pos - n_prompt} after the prompt)", KIND_HELP[kind]]
    cands = step.get("candidates") or []
    if j < len(cands) and cands[j]:
        lines.append("draft top: " + ", ".join(f"{_quote(int(t), decode)} {p:.2f}"
                                               for t, p in cands[j]))
    if j <= a:
        lines.append(f"target: {_quote(step['target'][j], decode)}")
    else:
        lines.append("target: not verified (follows a rejected token)")
    return "\n".join(lines)


def _step_html(i: int, step: dict[str, Any], n_prompt: int, decode) -> str:
    a = step["accepted"]
    spans = []
    for j, t in enumerate(step["drafted"]):
        kind = "accepted" if j < a else "rejected"
        spans.append(_span(kind, t, _title(i, step, j, kind, n_prompt, decode), decode))
    spans.insert(a, _span("bonus", step["target"][a], _title(i, step, a, "bonus", n_prompt, decode),
                          decode))
    bar = style(border_left=f"2px solid {MUTED}", padding_left="2px", margin_left="3px",
                border_bottom=f"2px solid {STEP_UNDERLINES[i % 2]}")
    return f'<span data-step="{i}" style="{bar}">{"<wbr>".join(spans)}</span>'


def _legend() -> str:
    items = [f'<span style="{_token_css(kind)}">{esc(kind)}</span> {muted(help_)}'
             for kind, help_ in KIND_HELP.items() if kind != "prompt"]
    items.append(muted("│ marks a verify step; hover a token for the draft's top candidates"))
    return f'<div style="{style(margin="0 0 6px 0")}">{" &nbsp; ".join(items)}</div>'


def _strip(data: dict[str, Any], decode, sample: int, max_steps: int | None) -> tuple[str, str]:
    """(one-line header, token markup) of one sample."""
    runs = _runs(data)
    if not 0 <= sample < len(runs):
        raise IndexError(f"sample {sample}: this result has {len(runs)} samples")
    run, decode = runs[sample], _decoder(decode)
    prompt, steps = run["prompt"], run["steps"]
    shown = steps if max_steps is None else steps[:max_steps]
    tail = prompt[-PROMPT_TAIL:]
    start = len(prompt) - len(tail)
    parts = [muted(f"… {start} prompt tokens ")] if start else []
    parts += [_span("prompt", t, f"prompt · context position {start + n}", decode)
              for n, t in enumerate(tail)]
    parts.append(muted(" ▸ ") + _span("first", run["first_token"],
                                      f"{KIND_HELP['first']}\ncontext position {len(prompt)}",
                                      decode))
    parts += [_step_html(i, s, len(prompt), decode) for i, s in enumerate(shown)]
    if len(shown) < len(steps):
        parts.append(muted(f" … {len(steps) - len(shown)} more verify steps"))
    n_gen = 1 + sum(s["accepted"] + 1 for s in steps)
    header = (f"sample {sample} · wiring <b>{esc(data['wiring'])}</b> · accept length "
              f"<b>{fmt_num(_accept_length(steps), 3)}</b> tokens per verify step (bonus "
              f"included) · {len(steps)} verify steps of {data['num_steps']} drafts · "
              f"{n_gen} tokens generated")
    # <wbr>: adjacent spans with no space between them offer no line break otherwise
    body = f'<div style="{style(line_height="2.0")}">{"<wbr>".join(parts)}</div>'
    return header, body


def token_strip(result, decode=None, sample: int = 0, max_steps: int | None = None,
                display: bool = False) -> HTMLString:
    """The generated text of one sample, token by token: accepted drafts (green), the bonus
    (blue), the rejected drafts struck through (red); the prompt's tail muted before it.
    `decode`: id -> str (or a tokenizer); without it tokens show as `#id`."""
    header, body = _strip(as_data(result), decode, sample, max_steps)
    return show(panel("What the draft proposed, and what the target kept", _legend() + body,
                      header), display)


# ----------------------------------------------------------------------------- numbers

def _items(texts: list[str]) -> str:
    """Markup: items joined by dots, each kept on one line."""
    nowrap = style(white_space="nowrap")
    return " · ".join(f'<span style="{nowrap}">{esc(t)}</span>' for t in texts) or "–"


def _rates(values: list[float | None]) -> str:
    return _items([f"{i + 1}: {fmt_num(v, 3)}" for i, v in enumerate(values)])


def _specforge_len(conditional: list[float | None]) -> float:
    """SpecForge's simulated_acc_len = Σ_k Π_(i≤k) acc_i, over the conditional rates."""
    total, prod = 0.0, 1.0
    for c in conditional:
        if c is None:
            break
        prod *= c
        total += prod
    return total


def _histogram_text(d: dict[str, Any]) -> str:
    n = d["n_verify_steps"]
    hist = sorted((int(length), c) for length, c in d["accept_length_histogram"].items())
    return _items([f"{length}: {c}" + (f" ({c / n:.0%})" if n else "") for length, c in hist])


def _pm(stats: dict[str, Any]) -> str:
    se = stats.get("mean_accept_length_se")
    return muted(f" ± {fmt_num(se, 3)}") if se is not None else ""


def headline_html(result_or_stats, display: bool = False) -> HTMLString:
    """The headline numbers in every convention, each with what it counts."""
    d = _stats(result_or_stats)
    n, k = d["n_verify_steps"], d["num_steps"]
    _, _, accepted = _counts(d)
    cond = d["conditional_acceptance"]
    names = d.get("engine_figure_names") or {}
    rows = [
        (_label("accept length", names, "mean_accept_length"),
         fmt_num(d["mean_accept_length"]) + _pm(d),
         f"(accepted + bonus) / verify steps = ({accepted} + {n}) / {n}; range 1 to {k + 1}; "
         "± one standard error, prompts as the sampling unit"),
        (_label("mean acceptance length", names, "mean_acceptance_length"),
         fmt_num(d["mean_acceptance_length"]),
         f"1 + accepted / drafts = 1 + {accepted} / {n}; the same number here (engines differ "
         "only in what they average over)"),
        (_label("per-position acceptance α_i", names, "per_position_acceptance"),
         _rates(d["per_position_acceptance"]),
         "P(draft token i accepted): steps that accepted token i / all verify steps"),
        ("conditional acceptance", _rates(cond),
         "P(token i accepted | tokens before it accepted): where draft quality decays; "
         "– where no step got that far"),
        ("SpecForge acc_i", esc("not the same number"),
         "SpecForge's acc_i is teacher-forced accuracy at TTT depth i over all positions, not "
         "conditional on earlier acceptance (the closest number here is the conditional rate). "
         "Its simulated_acc_len = Σ_k Π_(i≤k) acc_i leaves out the bonus: on the conditional "
         f"rates here it gives {fmt_num(_specforge_len(cond), 3)} = accept length − 1"),
        ("accept-length histogram", _histogram_text(d),
         "verify steps per accept length (1: no draft accepted, only the bonus)"),
    ]
    body = table(["metric", "value", "what it counts"],
                 [[cell(esc(m), nowrap=True), cell(v),
                   cell(muted(w), extra="min-width:320px")]
                  for m, v, w in rows])
    drafting = d.get("drafting") or {"label": f"chain of {k}", "source": "?"}
    sub = (f"wiring <b>{esc(d['wiring'])}</b> · {esc(drafting['label'])} (from "
           f"{esc(drafting['source'])}) · {d['n_samples']} prompts · {n} verify steps · "
           f"{d['n_tokens']} tokens generated")
    if n and accepted == 0:
        sub += " " + badge("nothing accepted: a structural failure, not a lack of training", RED)
    return show(panel("Acceptance, in every convention", body, sub), display)


def teacher_forced_html(scores: list[dict[str, Any]], display: bool = False) -> HTMLString:
    """Per wiring, the draft's teacher-forced accuracy at each step on hidden-state dumps
    (acceptance.score_dumps; checks.acceptance.score_on_dumps), or why a wiring has none."""
    steps = max((len(s.get("per_step_accuracy") or []) for s in scores), default=0)
    base = next((s["per_step_accuracy"][0] for s in scores
                 if s.get("wiring") == "trained" and s.get("per_step_accuracy")), None)
    rows = []
    for s in scores:
        acc = s.get("per_step_accuracy")
        if not acc:
            why = s.get("error") or s.get("unmeasured") or ""
            rows.append([cell(esc(s["wiring"]), nowrap=True), cell(muted(esc(why)))]
                        + [cell("") for _ in range(steps - 1)])
            continue
        low = collapses(acc[0], base)
        rows.append(([cell(esc(s["wiring"]), nowrap=True)]
                     + [cell(fmt_num(a, 3), align="right") for a in acc], RED[1] if low else None))
    body = table(["wiring"] + [f"step {j}" for j in range(steps)], rows)
    n = next((s.get("n_samples") for s in scores if s.get("n_samples")), 0)
    sub = (f"{n} hidden-state dumps · teacher-forced against the recorded tokens: "
           + badge("not an accept length", RED))
    return show(panel("Draft accuracy on the dumps, per step", body, sub) + note(
        "step j: the draft's own state from step j-1 and the recorded token j further on "
        "(SpecForge's acc_j); later steps overstate chained drafting. Red: step 0 at half the "
        "trained wiring's or below."), display)


def _label(figure: str, names: dict[str, str], key: str) -> str:
    return f"{figure} ({names[key]})" if names.get(key) else figure


def _number_rows(d: dict[str, Any]) -> dict[str, float | None]:
    rows = {"accept length": d["mean_accept_length"],
            "mean acceptance length": d["mean_acceptance_length"]}
    rows.update({f"α{i + 1}": v for i, v in enumerate(d["per_position_acceptance"])})
    rows.update({f"conditional {i + 1}": v for i, v in enumerate(d["conditional_acceptance"])})
    return rows


def _diff_cell(x: float | None, y: float | None) -> str:
    if x is None or y is None:
        return cell(muted("–"), align="right")
    diff = y - x
    colors = GREEN if diff > 1e-12 else RED if diff < -1e-12 else None
    return cell(f"{diff:+.3g}", align="right", colors=colors)


def compare_html(a, b, decode=None, sample: int = 0, max_steps: int | None = None,
                 display: bool = False) -> HTMLString:
    """Two results (two wirings, or two checkpoints) side by side: headline numbers with the
    difference B − A, then the token strips of the same sample."""
    da, db = as_data(a), as_data(b)
    la, lb = _labels([da, db])
    ra, rb = _number_rows(da), _number_rows(db)
    names = list(ra) + [m for m in rb if m not in ra]
    rows = [[cell(esc(m), nowrap=True), cell(fmt_num(ra.get(m), 3), align="right"),
             cell(fmt_num(rb.get(m), 3), align="right"), _diff_cell(ra.get(m), rb.get(m))]
            for m in names]
    numbers = table(["", f"A: {la}", f"B: {lb}", "B − A"], rows)
    columns = []
    for label, d in (("A", da), ("B", db)):
        header, body = _strip(d, decode, sample, max_steps)
        columns.append(f'<div style="{style(flex="1 1 0", min_width="0", overflow_x="auto")}">'
                       f'<div style="{style(margin="0 0 4px 0")}"><b>{label}</b> · {header}</div>'
                       f'{body}</div>')
    strips = f'<div style="{style(display="flex", gap="16px", align_items="flex-start")}">' \
             f'{"".join(columns)}</div>'
    return show(panel(f"A: {la} vs B: {lb}", numbers + _legend() + strips,
                      "accept length counts tokens per verify step, bonus included; "
                      "α = per-position acceptance"), display)


# ----------------------------------------------------------------------------- figures

def _out(fig, display: bool):
    if display:
        from IPython.display import display as ipy_display
        ipy_display(fig)
    return fig


def accept_length_histogram(results, display: bool = False):
    """Grouped bars, one group per wiring: fraction of verify steps per accept length."""
    import plotly.graph_objects as go

    datas = _many(results)
    fig = go.Figure()
    for d, name in zip(datas, _labels(datas)):
        hist = sorted((int(length), c) for length, c in d["accept_length_histogram"].items())
        n = sum(c for _, c in hist)
        fig.add_trace(go.Bar(
            name=name, x=[length for length, _ in hist], y=[c / n if n else 0.0 for _, c in hist],
            customdata=[[c, n] for _, c in hist],
            hovertemplate="%{fullData.name}<br>accept length %{x}: %{y:.1%} of verify steps "
                          "(%{customdata[0]} of %{customdata[1]})<extra></extra>"))
    fig.update_layout(template="plotly_white", barmode="group", height=360,
                      legend_title_text="wiring", margin=dict(l=60, r=20, t=40, b=50),
                      title="Accept length per verify step")
    fig.update_xaxes(title_text="accept length (accepted drafts + bonus)", dtick=1)
    fig.update_yaxes(title_text="fraction of verify steps", tickformat=".0%", rangemode="tozero")
    return _out(fig, display)


def per_position_bars(results, display: bool = False):
    """α_i per draft position as grouped bars per wiring, the conditional rate as markers."""
    import plotly.colors
    import plotly.graph_objects as go

    palette = plotly.colors.qualitative.Plotly
    datas = _many(results)
    fig = go.Figure()
    for idx, (d, name) in enumerate(zip(datas, _labels(datas))):
        x = list(range(1, d["num_steps"] + 1))
        passed, reached, _ = _counts(d)
        color, group = palette[idx % len(palette)], str(idx)
        fig.add_trace(go.Bar(
            name=name, x=x, y=d["per_position_acceptance"], marker_color=color,
            offsetgroup=group, customdata=[[p, d["n_verify_steps"]] for p in passed],
            hovertemplate="%{fullData.name}<br>position %{x}: α %{y:.1%}<br>accepted in "
                          "%{customdata[0]} of %{customdata[1]} verify steps<extra></extra>"))
        fig.add_trace(go.Scatter(
            name=f"{name} conditional", x=x, y=d["conditional_acceptance"], mode="lines+markers",
            offsetgroup=group, marker=dict(color=color, symbol="diamond", size=9,
                                           line=dict(color="#ffffff", width=1)),
            line=dict(color=color, dash="dot"), customdata=list(zip(passed, reached)),
            hovertemplate="%{fullData.name}<br>position %{x}: %{y:.1%} of the steps that reached "
                          "it (%{customdata[0]} of %{customdata[1]})<extra></extra>"))
    fig.update_layout(template="plotly_white", barmode="group", scattermode="group", height=380,
                      margin=dict(l=60, r=20, t=40, b=50),
                      title="Per-position acceptance (bars) and conditional acceptance (markers)")
    fig.update_xaxes(title_text="draft position i", dtick=1)
    fig.update_yaxes(title_text="acceptance rate", tickformat=".0%", range=[0, 1.05])
    return _out(fig, display)


def context_cells(result, bucket: int = 16, conditional: bool = False
                  ) -> tuple[list[str], list[list[list[int] | None]]]:
    """(bucket labels, cells[draft position][bucket] = [accepted, n] or None): per draft
    position and bucket of the step's context position after the prompt, the steps that
    accepted that draft token out of all steps (or, `conditional`, out of those that reached it)."""
    d = as_data(result)
    k, cells = d["num_steps"], {}
    for run in _runs(d):
        for s in run["steps"]:
            b = (s["position"] - len(run["prompt"])) // bucket
            for j in range(k):
                if conditional and s["accepted"] < j:
                    continue
                c = cells.setdefault((j, b), [0, 0])
                c[0] += s["accepted"] > j
                c[1] += 1
    nb = max((b for _, b in cells), default=-1) + 1
    labels = [f"{b * bucket}-{b * bucket + bucket - 1}" for b in range(nb)]
    return labels, [[cells.get((j, b)) for b in range(nb)] for j in range(k)]


def context_heatmap(result, bucket: int = 16, conditional: bool = False, display: bool = False):
    """Acceptance rate by draft position (rows) and context position after the prompt
    (columns, buckets of `bucket` tokens); cells without steps stay empty."""
    import plotly.graph_objects as go

    d = as_data(result)
    labels, cells = context_cells(d, bucket, conditional)
    z = [[c[0] / c[1] if c else None for c in row] for row in cells]
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=list(range(1, d["num_steps"] + 1)), zmin=0, zmax=1,
        colorscale="RdYlGn", hoverongaps=False, colorbar=dict(title="accepted", tickformat=".0%"),
        text=[[f"{v:.0%}" if v is not None else "" for v in row] for row in z],
        texttemplate="%{text}", customdata=[[c or [0, 0] for c in row] for row in cells],
        hovertemplate="context %{x} after the prompt<br>draft position %{y}<br>accepted "
                      "%{z:.1%}: %{customdata[0]} of n = %{customdata[1]}<extra></extra>"))
    what = "of the steps that reached the position" if conditional else "of all verify steps"
    fig.update_layout(template="plotly_white", height=120 + 40 * d["num_steps"],
                      margin=dict(l=60, r=20, t=50, b=60),
                      title=f"Acceptance by context position ({what}): {esc(d['wiring'])}")
    fig.update_xaxes(title_text=f"context position of the verify step after the prompt "
                                f"(buckets of {bucket})", type="category")
    fig.update_yaxes(title_text="draft position i", dtick=1, autorange="reversed")
    return _out(fig, display)


# ----------------------------------------------------------------------------- what-if

def measured_on_html(summary: dict[str, Any], display: bool = False) -> HTMLString:
    """What every figure of notebook 04 was measured on, and the evidence the run had (the flag
    of each missing piece that could change the answer)."""
    return show(note(esc(f"measured on: {summary.get('settings') or '?'}"))
                + evidence_note(summary.get("had")), display)


def settings_text(what_if: dict[str, Any]) -> str:
    """The sample and settings a what-if table was measured on."""
    drafting = what_if.get("drafting") or {}
    n = what_if.get("n_samples")
    return (f"{drafting.get('label', '?')} (from {drafting.get('source', '?')}), "
            f"{n if n is not None else '?'} prompts; ± one standard error by prompt")


def what_if_html(what_if: dict[str, Any], display: bool = False) -> HTMLString:
    """The what-if ranking (`whatif.what_if_json`): one row per wiring, closest to the engine's
    figure first; wirings consistent with it are marked, rows that cannot run say why."""
    observed = what_if.get("observed_accept_length")
    rows = []
    for r in what_if["rows"]:
        mal = r["mean_accept_length"]
        value = (badge("no run", RED, r["error"]) if r["error"] else
                 fmt_num(mal, 3) + muted(f" ± {fmt_num(r['standard_error'], 2)}"))
        mark = (badge("ruled out", GREY, r["ruled_out"]) if r.get("ruled_out") else
                badge("consistent", BLUE) if r["consistent"] else "")
        colors = BLUE[1] if r["consistent"] else (RED[1] if r["error"] else None)
        rows.append(([cell(esc(r["wiring"]), nowrap=True), cell(value, align="right", nowrap=True),
                      cell(versus_html(r.get("vs_trained")), nowrap=True),
                      cell(_rates(r["per_position_acceptance"] or []) if mal else ""),
                      cell(fmt_num(r["distance"], 3), align="right"), cell(mark),
                      cell(muted(r["error"] or r.get("ruled_out") or r["note"]))], colors))
    headers = ["wiring", "accept length ± se", "vs trained", "α per position",
               "|Δ| to observed", "", "what it is"]
    sub = (f"engine reported {fmt_num(observed, 3)} ({esc(what_if.get('observed_source'))})"
           if observed is not None else "no engine figure given: ranked by accept length, a "
           "wiring within 2 standard errors of trained ranked with it, never above")
    sub += f"; {esc(settings_text(what_if))}"
    return show(panel("Which wiring reproduces the engine's number?", table(headers, rows), sub)
                + note(esc(what_if["explanation"])), display)
