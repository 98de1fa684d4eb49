"""Notebook 00's views and the report's index.html. Pure functions over plain dicts (an
inspection's JSON form, `Triage.top_findings` / `Triage.engine_flags` rows, the report's
summary.json): HTML strings out, inline styles, no scripts, no network, everything from data
escaped.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.viz.hidden import collapsed_row
from eagle3_nb.viz.html import (AMBER, FONT, GREEN, GREY, MUTED, RED, SEVERITY_COLORS, SOLID_GREEN,
                                SOLID_RED, TEXT, HTMLString, badge, cell, code, esc,
                                evidence_note, fmt_num, muted, note, panel, show, style, table, versus_html)
from eagle3_nb.viz.keys import VERDICT_COLORS
from eagle3_nb.findings import SEVERITY_ORDER, verdict_line, verdicts

WORST_COLORS = {"error": SOLID_RED, "warning": ("#ffffff", "#b54708"), "info": ("#ffffff",
                "#175cd3"), "ok": SOLID_GREEN}
STATUS_COLORS = {"ok": GREEN, "failed": SOLID_RED, "skipped": GREY}


def _verdict_badges(verdicts: dict[str, str]) -> str:
    return " ".join(badge(f"{p}: {v.replace('_', ' ')}", VERDICT_COLORS.get(v, GREY))
                    for p, v in verdicts.items())


def _engines_label(engines: list[str], n_total: int | None = None) -> str:
    if not engines:
        return "all (checkpoint)"
    if n_total and len(engines) == n_total and n_total > 1:
        return "every engine"
    return ", ".join(engines)


# ----------------------------------------------------------------------------- notebook 00

def verdict_html(data: dict[str, Any], display: bool = False) -> HTMLString:
    """The overall answer from an inspection: per-engine verdicts and finding counts."""
    counts = {s: sum(f["severity"] == s for f in data.get("findings", [])) for s in SEVERITY_ORDER}
    worst = next((s for s in SEVERITY_ORDER if counts[s]), "ok")
    head = badge(worst.upper(), WORST_COLORS[worst]) + " " + " · ".join(
        badge(f"{counts[s]} {s}", SEVERITY_COLORS[s]) for s in SEVERITY_ORDER)
    body = (f'<div style="{style(margin="4px 0 8px 0")}">{_verdict_badges(verdicts(data))}</div>'
            f'<div style="{style(font_family="monospace", font_size="12px")}">'
            f'{"<br>".join(esc(x) for x in verdict_line(data, sep=chr(10)).splitlines())}</div>'
            + evidence_note(data.get("evidence")))
    sub = f"checkpoint {code(data.get('checkpoint'))}"
    return show(panel("Verdict " + head, body, sub), display)


def top_findings_html(rows: list[dict[str, Any]], n_engines: int | None = None,
                      display: bool = False) -> HTMLString:
    """`Triage.top_findings` rows: severity, code, engines, what it means, what to try next."""
    trs = []
    for r in rows:
        colors = SEVERITY_COLORS.get(r["severity"], GREY)
        trs.append(([cell(badge(r["severity"], colors), nowrap=True),
                     cell(code(r["code"]), title=r.get("meaning", ""), nowrap=True),
                     cell(esc(_engines_label(r.get("engines") or [], n_engines))),
                     cell(esc(r["message"]) + "<br>" + muted(r.get("meaning", ""))),
                     cell(esc(r.get("todo", "")))],
                    colors[1] if r["severity"] == "error" else None))
    body = (table(["severity", "code", "engines", "what it is", "next thing to try"], trs)
            if trs else muted("no findings"))
    return show(panel("Top findings, errors first", body), display)


def engine_flags_html(rows: list[dict[str, str]], display: bool = False) -> HTMLString:
    """`Triage.engine_flags` rows: the serving flags to check by hand."""
    trs = [[cell(esc(r["engine"]), nowrap=True), cell(code(r["flag"])), cell(esc(r["why"])),
            cell(muted(r["source"]))] for r in rows]
    body = table(["engine", "check", "why", "source"], trs) if trs else muted("no engines")
    return show(panel("Engine flags to check by hand", body,
                      "the kit cannot see the serving command line: compare it with this list"),
                display)


def ab_plan_html(rows: list[dict[str, str]], display: bool = False) -> HTMLString:
    """`Triage.ab_plan` rows: for a crash no signature explains, the settings to change
    one at a time, each with what it rules out when the crash goes away."""
    trs = [[cell(str(i), nowrap=True), cell(code(r["setting"])), cell(esc(r["rules_out"])),
            cell(muted(r["releases"]))] for i, r in enumerate(rows, 1)]
    body = (table(["#", "change only this", "if the crash goes away, it was", "flag read in"], trs)
            if trs else muted("no unexplained crash in the log (or no log given)"))
    return show(panel("A/B plan for the crash in the log", body,
                      "no signature explains it: change one setting at a time, most telling "
                      "first"), display)


# ----------------------------------------------------------------------------- index.html

def index_html(summary: dict[str, Any], groups: list[dict[str, Any]]) -> str:
    """The report's front page, a complete self-contained HTML document: `summary` is the
    report's summary.json, `groups` its findings grouped by `triage.group_findings`."""
    title = f"EAGLE-3 triage: {summary.get('checkpoint', '')}"
    sections = [_verdict_section(summary), _notebooks_section(summary),
                _findings_section(summary, groups), _ab_plan_section(summary),
                _figures_section(summary), _provenance_section(summary)]
    body_css = style(font_family=FONT, color=TEXT, background="#ffffff", margin="16px auto",
                     max_width="1200px", padding="0 16px")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title></head><body style=\"{body_css}\">"
            f'<h1 style="{style(font_size="20px", margin="0 0 4px 0")}">{esc(title)}</h1>'
            f'<div style="{style(color=MUTED, font_size="12px")}">{esc(summary.get("finished"))}'
            f" · fail-on {esc(summary.get('fail_on'))} · exit code "
            f"{esc(summary.get('exit_code'))}</div>" + "".join(sections) + "</body></html>\n")


def _section(anchor: str, html: str) -> str:
    return f'<section id="{esc(anchor)}">{html}</section>'


def _verdict_section(s: dict[str, Any]) -> str:
    v = s["verdict"]
    figures = s.get("key_figures", {})
    head = badge(v["worst_severity"].upper(), WORST_COLORS.get(v["worst_severity"], GREY))
    if v["failed"]:
        head += " " + badge(f"{len(v['failed'])} notebook(s) FAILED", SOLID_RED)
    body = (f'<div style="{style(font_size="14px", margin="2px 0 6px 0")}">{esc(v["text"])}</div>'
            f'<div style="{style(margin="4px 0")}">'
            f'{_verdict_badges(figures.get("verdicts") or {})}</div>')
    if v.get("line"):
        body += note("inspection: " + esc(v["line"]))
    body += evidence_note(figures.get("evidence"))
    return _section("verdict", panel("Verdict " + head, body))


def _notebooks_section(s: dict[str, Any]) -> str:
    rows = []
    for nb in s["notebooks"]:
        status = nb["status"]
        failing = (f' <a href="{esc(nb["html"])}#papermill-error-cell">show the failing cell</a>'
                   if status == "failed" and nb.get("html") and nb.get("cell") else "")
        what = {"ok": "", "failed": esc(nb.get("error")) + failing,
                "skipped": esc(nb.get("reason")) + "<br>" + muted("to run it: " +
                                                                 (nb.get("enable") or ""))}[status]
        links = " · ".join(f'<a href="{esc(nb[k])}">{k}</a>' for k in ("html", "ipynb", "summary")
                           if nb.get(k))
        rows.append(([cell(f'<a href="{esc(nb["html"])}">{esc(nb["notebook"])}</a>'
                           if nb.get("html") else esc(nb["notebook"]), nowrap=True),
                      cell(badge(status.upper() if status == "failed" else status,
                                 STATUS_COLORS.get(status, GREY)), nowrap=True),
                      cell(fmt_num(nb.get("seconds"), 3), align="right"),
                      cell(links or muted("–")), cell(what)],
                     RED[1] if status == "failed" else None))
    body = table(["notebook", "status", "seconds", "files", "failure / why skipped"], rows)
    return _section("notebooks", panel("Notebooks", body, "each page is self-contained and "
                                       "works offline; a failed one shows the failing cell"))


def _command(command: str | None) -> str:
    """The command that does the step, under it, as the CLI prints it."""
    return "<br>" + code("$ " + command) if command else ""


def _findings_section(s: dict[str, Any], groups: list[dict[str, Any]]) -> str:
    """`triage.group_findings` rows: identical findings of several engines shown once."""
    html_of = {nb["notebook"]: nb.get("html") for nb in s["notebooks"]}
    n_engines = len((s.get("key_figures") or {}).get("verdicts") or {})
    rows = []
    for g in groups:
        colors = SEVERITY_COLORS.get(g["severity"], GREY)
        found = ", ".join(f'<a href="{esc(html_of[n])}">{esc(n)}</a>' if html_of.get(n)
                          else esc(n) for n in g["notebooks"])
        rows.append(([cell(badge(g["severity"], colors), nowrap=True),
                      cell(code(g["code"]), title=g.get("meaning", ""), nowrap=True),
                      cell(esc(_engines_label(g["engines"], n_engines))),
                      cell(esc(g["message"]) + "<br>" + muted(g.get("meaning", ""))),
                      cell(esc(g.get("todo", "")) + _command(g.get("command"))), cell(found)],
                     colors[1] if g["severity"] == "error" else None))
    body = (table(["severity", "code", "where", "what it is", "what to do", "found by"], rows)
            if rows else muted("no findings"))
    return _section("findings", panel("Findings, errors first", body))


def _ab_plan_section(s: dict[str, Any]) -> str:
    rows = (s.get("key_figures") or {}).get("ab_plan") or []
    return _section("ab-plan", ab_plan_html(rows)) if rows else ""


def _figures_section(s: dict[str, Any]) -> str:
    k = s.get("key_figures") or {}
    parts = []
    if k.get("verdicts"):
        rows = [(p, badge(v.replace("_", " "), VERDICT_COLORS.get(v, GREY)) + " "
                 + muted(_aux_words(k, p))) for p, v in k["verdicts"].items()]
        parts.append(_kv_table("engines", rows))
    if k.get("d2t"):
        d = k["d2t"]
        cov = (d.get("coverage") or {}).get("intended") if d.get("coverage") else None
        parts.append(_kv_table("vocabulary mapping", [
            ("d2t format", esc(d.get("format"))), ("valid", esc(d.get("valid"))),
            ("codes", esc(", ".join(d.get("codes") or []) or "none")),
            ("corpus coverage", fmt_num(cov, 3) if cov is not None else muted("no corpus"))]))
    if k.get("first_step_accuracy"):
        parts.append(_accuracy_table(k["first_step_accuracy"], k.get("first_step_reference")))
    if k.get("acceptance"):
        parts.append(_acceptance_table(k["acceptance"]))
    body = "".join(parts) or muted("no key figures: every notebook failed or was skipped")
    return _section("figures", panel("Key figures", body))


def _aux_words(k: dict[str, Any], profile: str) -> str:
    aux = (k.get("aux_layers") or {}).get(profile) or {}
    if not aux:
        return ""
    if aux.get("captured") is None:
        return "aux layers unresolved (no target config)"
    mismatch = ": MISMATCH" if aux.get("captured") != aux.get("trained") else ""
    return f"captures hidden_states {aux['captured']}, trained on {aux.get('trained')}{mismatch}"


def _title(text: str) -> str:
    return f'<div style="{style(font_weight="600", margin="8px 0 2px 0")}">{esc(text)}</div>'


def _kv_table(title: str, rows: list[tuple[str, str]]) -> str:
    """rows: (label, trusted markup)."""
    return _title(title) + table(None, [[cell(esc(a), nowrap=True, extra=f"color:{MUTED}"),
                                         cell(b)] for a, b in rows])


def _accuracy_table(acc: dict[str, dict], reference: str | None = None) -> str:
    trained = (acc.get("trained") or {}).get("accuracy")
    rows = []
    for name, r in acc.items():
        value = r.get("accuracy")
        collapsed = collapsed_row(r, trained)
        text = (("crashes: " + esc(r["error"])) if r.get("error") else
                muted(esc(r["unmeasured"])) if r.get("unmeasured") else fmt_num(value, 3))
        if r.get("fc_applied") is False:
            text += " " + badge("fc skipped", AMBER)
        rows.append((name, f'<span style="{style(color=RED[0] if collapsed else None)}">'
                           f"{text}</span>"))
    return _kv_table("first-step accuracy per wiring (notebook 03)", rows) + note(
        f"against {esc(reference or 'the target greedy tokens')}; red: at most half of the trained "
        "wiring's accuracy, fc skipped, or a crash")


def _acceptance_table(a: dict[str, Any]) -> str:
    """`triage.acceptance_figures`: as trained, compared, observed, then the what-if ranking,
    every figure with its standard error and the settings it was measured with."""
    rows = []
    if a.get("settings"):
        rows.append(("measured on", esc(a["settings"])))
    if a.get("mean_accept_length") is not None:
        rows.append((f"mean accept length ({a.get('wiring')})",
                     _with_se(a["mean_accept_length"], a.get("mean_accept_length_se"))))
    comp = a.get("compare") or {}
    if comp.get("mean_accept_length") is not None:
        rows.append((f"mean accept length ({comp.get('wiring')})",
                     _with_se(comp["mean_accept_length"], comp.get("mean_accept_length_se"))))
    if a.get("observed") is not None:
        rows.append(("the engine reported", fmt_num(a["observed"])))
    if a.get("explanation"):
        rows.append(("what-if verdict", esc(a["explanation"])))
    for score in a.get("teacher_forced") or []:
        acc = score.get("per_step_accuracy")
        value = (", ".join(fmt_num(x, 3) for x in acc) if acc else
                 muted(esc(score.get("error") or score.get("unmeasured") or "")))
        rows.append((f"teacher-forced acc per step on dumps ({esc(score.get('wiring'))})", value))
    html = _kv_table("acceptance (notebook 04)", rows)
    what = a.get("what_if") or {}
    if what:
        trs = [[cell(code(name)), cell(esc(r.get("error")) if r.get("error")
                                       else _with_se(r.get("mean_accept_length"),
                                                     r.get("standard_error")), align="right"),
                cell(versus_html(r.get("vs_trained"))),
                cell(badge("matches", AMBER) if r.get("consistent") else "")]
               for name, r in what.items()]
        html += _title("what-if wirings, closest to the engine's figure first"
                       if a.get("observed") is not None else
                       "what-if wirings, simulated accept length (no engine figure given; within "
                       "2 standard errors of trained is indistinguishable, ranked after it)") + table(
            ["wiring", "accept length ± se", "vs trained", "vs the engine's figure"], trs)
    return html


def _with_se(value, se) -> str:
    return fmt_num(value) + (muted(f" ± {fmt_num(se, 3)}") if se is not None else "")


def _provenance_section(s: dict[str, Any]) -> str:
    inputs = s.get("inputs") or {}
    ckpt = inputs.get("checkpoint") or {}
    rows = [(f"checkpoint {name}", code(h)) for name, h in (ckpt.get("files") or {}).items()]
    for param, files in (inputs.get("files") or {}).items():
        rows += [(f"{param} {path}", code(h)) for path, h in files.items()]
    rows += [(f"{k} (not hashed)", code(v)) for k, v in (inputs.get("not_hashed") or {}).items()]
    versions = ", ".join(f"{k} {v}" for k, v in (s.get("versions") or {}).items())
    body = (_kv_table("command", [("command line", code(" ".join(s.get("command") or []))),
                                  ("working directory", code(s.get("cwd")))])
            + _kv_table("input sha256", rows) + _kv_table("versions", [("", esc(versions))]))
    return _section("inputs", panel("Inputs and versions", body))

