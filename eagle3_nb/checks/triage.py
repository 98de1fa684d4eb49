"""What notebook 00 shows: the top findings with the next thing to try, and the serving flags to
check by hand."""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.advice import engine_flags, next_step
from eagle3_nb.findings import CODES, SEVERITY_ORDER
from eagle3_nb.checks.load import inspection_summary


def top_findings(data: dict[str, Any], limit: int = 8) -> list[dict[str, Any]]:
    """An inspection's findings (its JSON form) grouped across engines, errors first, with what
    the code means and the next thing to try; at most `limit` groups."""
    groups: dict[tuple, dict[str, Any]] = {}
    for f in data.get("findings", []):
        key = (f["code"], f["severity"], f["message"])
        g = groups.setdefault(key, {"code": f["code"], "severity": f["severity"],
                                    "message": f["message"], "engines": [],
                                    "meaning": CODES.get(f["code"], "")})
        g["engines"].append(f["engine"])
    rows = sorted(groups.values(), key=lambda g: SEVERITY_ORDER[g["severity"]])
    for g in rows:
        g["engines"] = [e for e in g["engines"] if e is not None]
        g["todo"] = next_step(g["code"], g["engines"], data.get("checkpoint"))
    return rows[:limit]



def triage_summary(data: dict[str, Any], notebook: str = "00_triage") -> dict[str, Any]:
    """Notebook 00's summary.json: the inspection digest, the top findings with next steps, and
    the engine flags to check."""
    out = inspection_summary(data, notebook)
    out["top_findings"] = top_findings(data)
    out["engine_flags"] = engine_flags(data)
    return out
