"""The report's front page as one Markdown text to paste into a GitHub issue
(`eagle3-nb report --markdown` writes it as summary.md beside index.html): the verdict, the
findings (severity, code, engines, message, next step, command), the key figures, the notebooks,
the versions and the input hashes. Pure: the report's summary.json and its grouped findings
(`report.summary.group_findings`) in, text out.

    summary_markdown(summary, group_findings(summary["findings"], summary["checkpoint"]))
"""

from __future__ import annotations

import re
from typing import Any

from eagle3_nb.findings import evidence_line

# Every character Markdown (GitHub's included: ~ strikethrough, $ math) could read as markup;
# a backslash before ASCII punctuation always stands for the character itself. `_` inside a
# word (KEYS_DROPPED) opens no emphasis, so it stays as it is, readable as text.
_MARKUP = re.compile(r"([\\`*\[\]<>|#~$&!]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def summary_markdown(summary: dict[str, Any], groups: list[dict[str, Any]]) -> str:
    parts = [_verdict(summary), _findings(groups), _figures(summary.get("key_figures") or {}),
             _notebooks(summary.get("notebooks") or []), _provenance(summary)]
    return "\n\n".join(p for p in parts if p) + "\n"


def text(value: Any) -> str:
    """VALUE as one line of Markdown text that renders as written."""
    return _MARKUP.sub(r"\\\1", " ".join(str("" if value is None else value).split()))


def code(value: Any) -> str:
    """VALUE as a code span; as text where it holds a pipe or a backtick (a pipe escaped
    inside a code span in a table cell is read back with its backslash by some parsers)."""
    body = " ".join(str(value).split())
    return text(body) if "|" in body or "`" in body else f"`{body}`"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub table; cells are Markdown already (text() or code())."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _verdict(s: dict[str, Any]) -> str:
    v = s.get("verdict") or {}
    lines = [f"## EAGLE-3 triage: {code(s.get('checkpoint', ''))}",
             f"**{text(v.get('text'))}**"]
    if v.get("line"):
        lines.append(f"engines: {text(v['line'])}")
    evidence = evidence_line((s.get("key_figures") or {}).get("evidence"))
    if evidence:
        lines.append(text(evidence))
    lines.append(f"exit code {text(s.get('exit_code'))} (fail-on {text(s.get('fail_on'))}), "
                 f"finished {text(s.get('finished'))}")
    return "\n\n".join(lines)


def _findings(groups: list[dict[str, Any]]) -> str:
    if not groups:
        return "### Findings\n\nno findings"
    rows = [[text(g.get("severity")), code(g.get("code")),
             text(", ".join(g.get("engines") or []) or "all"), text(g.get("message")),
             text(g.get("todo") or g.get("next_step")),
             code(g["command"]) if g.get("command") else text("by hand")] for g in groups]
    return "### Findings, errors first\n\n" + table(
        ["severity", "code", "engine", "message", "next step", "command"], rows)


def _figures(k: dict[str, Any]) -> str:
    rows: list[list[str]] = []
    for profile, verdict in (k.get("verdicts") or {}).items():
        aux = (k.get("aux_layers") or {}).get(profile) or {}
        captured = (f"; captures hidden_states {aux.get('captured')}, trained on "
                    f"{aux.get('trained')}" if aux.get("captured") is not None else "")
        rows.append([text(f"engine {profile}"), text(f"{verdict}{captured}")])
    if k.get("d2t"):
        d = k["d2t"]
        rows.append([text("d2t"), text(f"format {d.get('format')}, valid {d.get('valid')}, "
                                       f"codes {', '.join(d.get('codes') or []) or 'none'}")])
    for wiring, r in (k.get("first_step_accuracy") or {}).items():
        value = r.get("error") or r.get("unmeasured") or _num(r.get("accuracy"))
        rows.append([text(f"first-step accuracy ({wiring})"), text(value)])
    rows += _acceptance_rows(k.get("acceptance") or {})
    if not rows:
        return ""
    return "### Key figures\n\n" + table(["figure", "value"], rows)


def _acceptance_rows(a: dict[str, Any]) -> list[list[str]]:
    rows = []
    for head in (a, a.get("compare") or {}):
        if head.get("mean_accept_length") is not None:
            rows.append([text(f"mean accept length ({head.get('wiring')})"),
                         text(_with_se(head["mean_accept_length"],
                                       head.get("mean_accept_length_se")))])
    if a.get("observed") is not None:
        rows.append([text("the engine reported"), text(_num(a["observed"]))])
    for wiring, r in (a.get("what_if") or {}).items():
        rows.append([text(f"what-if accept length ({wiring})"),
                     text(r.get("error") or _with_se(r.get("mean_accept_length"),
                                                     r.get("standard_error")))])
    if a.get("explanation"):
        rows.append([text("what-if verdict"), text(a["explanation"])])
    if a.get("settings"):
        rows.append([text("measured on"), text(a["settings"])])
    return rows


def _notebooks(notebooks: list[dict[str, Any]]) -> str:
    rows = [[text(nb.get("notebook")), text(nb.get("status")), text(_num(nb.get("seconds"), 1)),
             text(nb.get("error") or " ".join(x for x in (nb.get("reason"), nb.get("enable"))
                                              if x))] for nb in notebooks]
    return "### Notebooks\n\n" + table(["notebook", "status", "seconds", "failure / why skipped"],
                                       rows) if rows else ""


def _provenance(s: dict[str, Any]) -> str:
    inputs = s.get("inputs") or {}
    ckpt = inputs.get("checkpoint") or {}
    rows = [[text(f"checkpoint {name}"), code(h)] for name, h in (ckpt.get("files") or {}).items()]
    for param, files in (inputs.get("files") or {}).items():
        rows += [[text(f"{param} {path}"), code(h)] for path, h in files.items()]
    rows += [[text(f"{k} (not hashed)"), code(v)] for k, v in
             (inputs.get("not_hashed") or {}).items()]
    versions = ", ".join(f"{k} {v}" for k, v in (s.get("versions") or {}).items())
    parts = ["### Versions\n\n" + text(versions), "### Input sha256\n\n"
             + table(["input", "sha256"], rows)]
    if s.get("command"):
        parts.append("command: " + code(" ".join(s["command"])))
    redacted = s.get("redacted_paths")
    if redacted:
        names = ", ".join(f"{k}: {v}" for k, v in
                          (redacted.get("placeholders") or {}).items())
        parts.append(text(f"paths are relative to {redacted.get('relative_to')}; {names}"))
    return "\n\n".join(parts)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _with_se(value: Any, se: Any) -> str:
    return _num(value) + (f" ± {_num(se)}" if se is not None else "")
