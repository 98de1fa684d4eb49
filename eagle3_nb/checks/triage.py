"""What notebook 00 shows: the top findings with the next thing to try, and the serving flags to
check by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_nb.checks.load import inspection_digest
from eagle3_nb.checks.result import JsonResult
from eagle3_nb.engines.advice import engine_flags, next_step
from eagle3_nb.findings import CODES, SEVERITY_ORDER, group_findings


@dataclass(frozen=True)
class Triage(JsonResult):
    """Notebook 00's answer, from an inspection's JSON form (`data`): to_json() is that
    inspection, which the views show; summary() adds the top findings, the engine flags and
    the A/B plan to its digest."""
    kind = "triage"
    notebook = "00_triage"

    def top_findings(self, limit: int = 8) -> list[dict[str, Any]]:
        """The findings grouped across engines, errors first, with what the code means and
        the next thing to try; at most `limit` groups."""
        rows = []
        for g in sorted(group_findings(self.data.get("findings", [])),
                        key=lambda g: SEVERITY_ORDER[g["severity"]]):
            engines = [e for e in g["engines"] if e is not None]
            rows.append({"code": g["code"], "severity": g["severity"], "message": g["message"],
                         "engines": engines, "meaning": CODES.get(g["code"], ""),
                         "todo": next_step(g["code"], engines, self.data.get("checkpoint"))})
        return rows[:limit]

    def engine_flags(self) -> list[dict[str, str]]:
        """The serving flags to check by hand (engines.advice.engine_flags)."""
        return engine_flags(self.data)

    def ab_plan(self) -> list[dict[str, str]]:
        """For a crash in the log that no signature explains: the settings to change one at a
        time (checks.log.ab_plan, each a flag of the release the log names); empty otherwise."""
        return list((self.data.get("log") or {}).get("ab_plan") or [])

    def summary_body(self) -> dict[str, Any]:
        return {**inspection_digest(self.data), "top_findings": self.top_findings(),
                "engine_flags": self.engine_flags(), "ab_plan": self.ab_plan()}
