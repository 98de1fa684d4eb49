"""The training-data answer (checks.data) as text and as HTML tables: pure, dicts in."""

from __future__ import annotations

import html
import textwrap
from typing import Any

from eagle3_nb.viz.text import SEVERITY_TEXT, advice_lines, evidence_lines, printable


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def data_lines(data: dict[str, Any]) -> list[str]:
    s, v = data["stats"], data["vocab"]
    lines = [f"training data: {data['path']}"] + evidence_lines(data.get("had"))
    lines += [f"  read {data['rows_read']} rows"
              + (f" (stopped at --max-rows {data['max_rows']})" if data["bounded_by_max_rows"]
                 else "")
              + f": {s['conversations']} conversations, {s['token_rows']} token rows, "
              f"{s['tokens']} tokens, {s['supervised_tokens']} supervised "
              f"({_pct(s['supervised_share'])}), {s['empty_rows']} rows with none",
              f"  assistant turns {s['assistant_turns']}, supervised {s['turns_covered']}; "
              f"status {s['status'] or 'not recorded'}; max_length {s['max_length']}: "
              f"{s['rows_cut']} rows cut"]
    for e in s["span_edges"][:3]:
        lines.append(f"  span edge x{e['count']}: {e['before']!r} [{e['first']!r} ... "
                     f"{e['last']!r}] {e['after']!r}")
    for m in v["mappings"]:
        lines.append(f"  mapping {m['source']}: top-id overlap {_pct(m['top_overlap'])}, "
                     f"supervised coverage {_pct(m['supervised_coverage'])}")
    if v.get("domain"):
        d = v["domain"]
        lines.append(f"  serving prompts: draft-vocab coverage {_pct(d['serving_coverage'])} vs "
                     f"training {_pct(d['training_coverage'])}")
    lines += [f"  not checked: {x}" for x in data["skipped"]]
    return lines


def data_text(data: dict[str, Any]) -> str:
    lines = data_lines(data)
    for f in data["findings"]:
        lines.extend(textwrap.wrap(f"{SEVERITY_TEXT[f['severity']]:5} {f['code']}: {f['message']}",
                                   110, initial_indent="  ", subsequent_indent="        "))
        lines.extend(advice_lines(f))
    return printable("\n".join(lines))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def edges_html(data: dict[str, Any]) -> str:
    """The tokens just before and after the most common supervised spans, as text."""
    rows = [[repr(e["before"]), repr(e["first"]), repr(e["last"]), repr(e["after"]), e["count"]]
            for e in data["stats"]["span_edges"]]
    return _table(["before the span", "span starts", "span ends", "after", "spans"], rows)


def findings_html(data: dict[str, Any]) -> str:
    rows = [[f["severity"], f["code"], f["message"], f.get("next_step") or ""]
            for f in data["findings"]]
    return _table(["severity", "code", "finding", "next step"], rows)
