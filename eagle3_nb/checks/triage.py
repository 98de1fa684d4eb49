"""What notebook 00 shows: the top findings with the next thing to try, and the serving flags to
check by hand."""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.advice import engine_flags, next_step
from eagle3_nb.findings import CODES, SEVERITY_ORDER, group_findings
from eagle3_nb.checks.load import inspection_summary


def top_findings(data: dict[str, Any], limit: int = 8) -> list[dict[str, Any]]:
    """An inspection's findings (its JSON form) grouped across engines, errors first, with what
    the code means and the next thing to try; at most `limit` groups."""
    rows = []
    for g in sorted(group_findings(data.get("findings", [])),
                    key=lambda g: SEVERITY_ORDER[g["severity"]]):
        engines = [e for e in g["engines"] if e is not None]
        rows.append({"code": g["code"], "severity": g["severity"], "message": g["message"],
                     "engines": engines, "meaning": CODES.get(g["code"], ""),
                     "todo": next_step(g["code"], engines, data.get("checkpoint"))})
    return rows[:limit]



def crash_ab_plan(data: dict[str, Any]) -> list[dict[str, str]]:
    """For a crash in the log that no signature explains: the settings to change one at a time
    (checks.log.ab_plan, each a flag of the release the log names); empty otherwise."""
    return list((data.get("log") or {}).get("ab_plan") or [])


def triage_summary(data: dict[str, Any], notebook: str = "00_triage") -> dict[str, Any]:
    """Notebook 00's summary.json: the inspection digest, the top findings with next steps, and
    the engine flags to check."""
    out = {**inspection_summary(data, notebook), "kind": "triage"}
    out["top_findings"] = top_findings(data)
    out["engine_flags"] = engine_flags(data)
    out["ab_plan"] = crash_ab_plan(data)
    return out
