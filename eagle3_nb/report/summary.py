"""The report's summary.json: every notebook's findings merged and grouped, the key figures,
the overall verdict and exit code, and the provenance (versions, input hashes, command)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eagle3_nb.engines.advice import next_step, with_advice
from eagle3_nb.findings import CODES, SEVERITY_ORDER, SUMMARY_VERSION, part_kind
from eagle3_nb.findings import group_findings as findings_grouped
from eagle3_nb.io.checkpoint import PARTIAL_HASH_BYTES, open_once, sha256_file
from eagle3_nb.report.options import ReportOptions
from eagle3_nb.report.steps import Step, effective_parameters

PACKAGES = ("eagle3_nb", "torch", "transformers", "safetensors", "numpy", "papermill",
            "nbconvert", "plotly")


HASHED_PARAMETERS = ("target_config", "tokenizer", "prompts", "corpus", "observed")


HASH_BUDGET_BYTES = 4 << 30  # checkpoint bytes hashed before the report starts; the rest partly


def versions() -> dict[str, str | None]:
    """The kit's and its dependencies' versions from package metadata (imports nothing)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def input_hashes(opts: ReportOptions, steps: list[Step]) -> dict[str, Any]:
    """sha256 of the checkpoint's config.json and weights, and of every input file a notebook
    that runs reads (target config, tokenizer, prompts, corpus, observed metrics), defaults
    included. Target weights and hidden-state dumps are not hashed (they may be terabytes)."""
    ckpt = open_once(opts.checkpoint)
    files: dict[str, dict[str, str]] = {}
    for step in steps:
        if step.status == "skipped":
            continue
        for name, value in effective_parameters(step).items():
            if name in HASHED_PARAMETERS and isinstance(value, str) and value \
                    and Path(value).is_file():
                path = Path(value)
                files.setdefault(name, {})[value] = (
                    sha256_file(path) if path.stat().st_size <= PARTIAL_HASH_BYTES
                    else f"sha256 of the first {PARTIAL_HASH_BYTES} bytes: "
                         f"{sha256_file(path, PARTIAL_HASH_BYTES)}")
    hashed, partial = ckpt.hash_files_within(HASH_BUDGET_BYTES)
    return {"checkpoint": {"path": str(ckpt.path), "files": hashed, "partially_hashed": partial},
            "files": files,
            "not_hashed": {k: str(v) for k, v in (("target", opts.target),
                                                   ("hidden_states", opts.hidden_states)) if v}}


def merge_findings(steps: list[Step], checkpoint: str | None = None,
                   inputs: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every notebook's findings, one entry per (code, severity, engine, message) with the
    notebooks that found it, its next step and command (as every command's findings carry
    them: engines.advice.with_advice, INPUTS filling the command); errors first, then
    warnings, then info, stable otherwise."""
    merged: dict[tuple, dict[str, Any]] = {}
    for step in steps:
        for f in (step.summary or {}).get("findings") or []:
            key = (f.get("code"), f.get("severity"), f.get("engine"), f.get("message"))
            entry = merged.setdefault(key, {
                **{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")},
                "meaning": CODES.get(f.get("code"), ""),
                "todo": next_step(f.get("code"), [f.get("engine")], checkpoint),
                "notebooks": []})
            if step.name not in entry["notebooks"]:
                entry["notebooks"].append(step.name)
    findings = with_advice({"findings": list(merged.values())}, inputs, checkpoint)["findings"]
    for f in findings:  # a step the finding brings itself (with_advice) wins over its code's
        f["todo"] = f.get("next_step") or f["todo"]
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f["severity"], 3))


def advice_inputs(opts: ReportOptions) -> dict[str, str]:
    """The report's inputs a finding's command may name (findings.next_command)."""
    given = {"TARGET_DIR": opts.target, "TARGET_CONFIG": opts.target_config, "LOG": opts.log,
             "TOKENIZER": opts.tokenizer, "DUMPS_DIR": opts.hidden_states,
             "OBSERVED": opts.observed}
    return {k: str(v) for k, v in given.items() if v is not None and v != ""}


def group_findings(findings: list[dict[str, Any]], checkpoint: str | None = None
                   ) -> list[dict[str, Any]]:
    """Merged findings for reading: identical ones of several engines once, with the engines,
    the notebooks that found them and the next step (and command) for the group. Severity
    order kept."""
    out = []
    for group in findings_grouped(findings):
        members = group["members"]
        g = {**members[0], "engines": [e for e in group["engines"] if e], "notebooks": []}
        g.pop("engine", None)
        with_engine = [f for f in members if f.get("engine")]
        if with_engine:
            g["command"] = with_engine[-1].get("command")  # the last engine's, as the step says
        for f in members:
            g["notebooks"] += [n for n in f["notebooks"] if n not in g["notebooks"]]
        g["todo"] = g.get("next_step") or next_step(g["code"], g["engines"], checkpoint)
        out.append(g)
    return out


def key_figures(steps: list[Step]) -> dict[str, Any]:
    """The numbers a reader looks for first, read from each notebook's summary by the kind it
    declares (FIGURES); the first summary of a kind gives that kind's figures."""
    out: dict[str, Any] = {}
    for step in steps:
        figures = FIGURES.get(part_kind(step.summary))
        if figures is not None:
            for name, value in figures(step.summary).items():
                out.setdefault(name, value)
    return out


def inspection_figures(s: dict[str, Any]) -> dict[str, Any]:
    return {"verdicts": s["verdicts"], "verdict_line": s.get("verdict_line"),
            "layout": s.get("layout"), "format": s.get("format"),
            "unchecked": [u.get("what") for u in s.get("unchecked") or []],
            "evidence": s.get("evidence"),
            "aux_layers": {p: {"captured": e.get("aux_captured"), "trained": e.get("aux_trained"),
                               "source": e.get("aux_source")}
                           for p, e in (s.get("engines") or {}).items()}}


def vocab_figures(s: dict[str, Any]) -> dict[str, Any]:
    return {"d2t": {"format": s.get("format"), "valid": s.get("valid"), "codes": s.get("codes"),
                    "coverage": s.get("coverage")}}


def hidden_state_figures(s: dict[str, Any]) -> dict[str, Any]:
    return {"first_step_accuracy": {
                r["wiring"]["name"]: {"accuracy": r.get("accuracy"), "width": r.get("width"),
                                      "fc_applied": r.get("fc_applied"), "error": r.get("error"),
                                      "unmeasured": r.get("unmeasured")}
                for r in s.get("wirings") or []},
            "first_step_reference": s.get("reference") or "the target's greedy tokens"}


def acceptance_figures(s: dict[str, Any]) -> dict[str, Any]:
    """Notebook 04's numbers: the simulated accept length as trained, the compared wiring, what
    the engine reported, and each what-if wiring's accept length and whether it matches."""
    def as_dict(x):
        return x if isinstance(x, dict) else {}
    head, comp, what = as_dict(s.get("headline")), as_dict(s.get("compare")), \
        as_dict(s.get("what_if"))
    rows = [r for r in what.get("rows") or [] if isinstance(r, dict) and "wiring" in r]
    return {"wiring": head.get("wiring"), "mean_accept_length": head.get("mean_accept_length"),
            "mean_accept_length_se": head.get("mean_accept_length_se"),
            "per_position_acceptance": head.get("per_position_acceptance"),
            "compare": ({k: comp.get(k) for k in ("wiring", "mean_accept_length",
                                                  "mean_accept_length_se")} if comp else None),
            "settings": s.get("settings"), "evidence": s.get("evidence"),
            "observed": what.get("observed_accept_length"), "explanation": what.get("explanation"),
            "what_if": {r["wiring"]: {k: r.get(k) for k in ("mean_accept_length", "standard_error",
                                                            "vs_trained", "consistent", "error")}
                        for r in rows},
            "teacher_forced": s.get("teacher_forced")}


# The front page's figures per summary kind (findings.SUMMARY_KINDS); "data" has none there.
FIGURES = {"triage": lambda s: {**inspection_figures(s), "ab_plan": s.get("ab_plan") or []},
           "inspection": inspection_figures,
           "vocab": vocab_figures, "hidden_states": hidden_state_figures,
           "acceptance": lambda s: {"acceptance": acceptance_figures(s)}}


def overall_verdict(findings: list[dict], steps: list[Step], figures: dict) -> dict[str, Any]:
    """Worst severity, counts (one per finding and engine), the codes per severity, failed and
    skipped notebooks, and one line of text saying all that."""
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITY_ORDER}
    codes = {s: list(dict.fromkeys(f["code"] for f in findings if f["severity"] == s))
             for s in SEVERITY_ORDER}
    failed = [s.name for s in steps if s.status == "failed"]
    skipped = [s.name for s in steps if s.status == "skipped"]
    worst = next((s for s in SEVERITY_ORDER if counts[s]), "ok")
    parts = [f"{s}s {', '.join(codes[s])}" for s in ("error", "warning") if codes[s]]
    text = (f"{worst.upper()}: {'; '.join(parts) or 'no errors or warnings'} "
            f"({len(steps) - len(failed) - len(skipped)} of {len(steps)} notebooks ran)")
    if failed:
        text += f"; FAILED: {', '.join(failed)}"
    if skipped:
        text += f"; skipped: {', '.join(skipped)}"
    unchecked = figures.get("unchecked") or []
    if unchecked:  # never a bare ok about what the inspection did not look at
        text += f"; not checked: {', '.join(unchecked)} (see notebook 01)"
    return {"worst_severity": worst, "counts": counts, "codes": codes, "failed": failed,
            "skipped": skipped, "text": text, "line": figures.get("verdict_line")}


def exit_code(verdict: dict[str, Any], fail_on: str) -> int:
    """1 when --fail-on says the report failed, else 0 (bad input never gets this far: 2)."""
    if fail_on == "never":
        return 0
    if verdict["failed"] or verdict["counts"]["error"]:
        return 1
    return 1 if fail_on == "warning" and verdict["counts"]["warning"] else 0


def build_summary(opts: ReportOptions, steps: list[Step], hashes: dict[str, Any],
                  started: datetime, built_in: Path | None = None) -> dict[str, Any]:
    """built_in: where the notebooks' files are now (the staging dir, until it is swapped in)."""
    findings = merge_findings(steps, str(opts.checkpoint), advice_inputs(opts))
    figures = key_figures(steps)
    verdict = overall_verdict(findings, steps, figures)
    return {"summary_version": SUMMARY_VERSION, "kind": "eagle3-nb report",
            "checkpoint": str(opts.checkpoint), "out": str(opts.out),
            "verdict": verdict, "exit_code": exit_code(verdict, opts.fail_on),
            "fail_on": opts.fail_on, "findings": findings, "key_figures": figures,
            "notebooks": [s.to_json(built_in or opts.out) for s in steps],
            "versions": versions(), "inputs": hashes,
            "command": opts.command, "cwd": os.getcwd(),
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
