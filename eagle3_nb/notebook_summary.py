"""What a notebook's summary.json says: small, stable, machine-readable digests of the JSON
outputs (an inspection's `to_json()`), shared by the notebooks, the report runner and the HTML
renderers. Data in, plain dicts and strings out; no files read.
"""

from __future__ import annotations

from typing import Any

SUMMARY_VERSION = 1


def engine_codes(data: dict[str, Any], severity: str = "error") -> dict[str, list[str]]:
    """profile -> finding codes of `severity` that hold for it (its own and the global ones),
    unique, errors-first order as in the inspection."""
    out: dict[str, list[str]] = {}
    for e in data.get("engines", []):
        codes: list[str] = []
        for f in data.get("findings", []):
            if f["severity"] == severity and f["engine"] in (None, e["profile"]) \
                    and f["code"] not in codes:
                codes.append(f["code"])
        out[e["profile"]] = codes
    return out


def verdicts(data: dict[str, Any]) -> dict[str, str]:
    return {e["profile"]: e["verdict"] for e in data.get("engines", [])}


def verdict_line(data: dict[str, Any], sep: str = "; ") -> str:
    """'sglang==0.5.9: silent_failure (KEYS_DROPPED, PARAMS_UNLOADED); vllm==0.33: ok; ...'
    Non-ok verdicts list the error codes behind them; ok verdicts list warnings, if any."""
    errors, warnings = engine_codes(data, "error"), engine_codes(data, "warning")
    parts = []
    for profile, verdict in verdicts(data).items():
        if verdict != "ok" and errors[profile]:
            parts.append(f"{profile}: {verdict} ({', '.join(errors[profile])})")
        elif verdict == "ok" and warnings[profile]:
            parts.append(f"{profile}: ok (warnings: {', '.join(warnings[profile])})")
        else:
            parts.append(f"{profile}: {verdict}")
    return sep.join(parts)


def inspection_summary(data: dict[str, Any], notebook: str = "") -> dict[str, Any]:
    """The summary.json of notebook 01 (and the inspection part of the full report)."""
    findings = data.get("findings", [])
    count = {s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
    stats = data.get("stats")
    out: dict[str, Any] = {
        "summary_version": SUMMARY_VERSION,
        "notebook": notebook,
        "checkpoint": data.get("checkpoint"),
        "format": data.get("format"),
        "layout": data.get("layout"),
        "layout_prefixes": data.get("layout_prefixes", []),
        "n_tensors": len(data.get("tensors", [])),
        "target": data.get("target"),
        "verdicts": verdicts(data),
        "verdict_line": verdict_line(data),
        "error_codes": engine_codes(data, "error"),
        "warning_codes": engine_codes(data, "warning"),
        "global_codes": sorted({f["code"] for f in findings if f["engine"] is None}),
        "n_errors": count["error"],
        "n_warnings": count["warning"],
        "n_info": count["info"],
        "findings": [{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")}
                     for f in findings],
        "engines": {e["profile"]: _engine_digest(e) for e in data.get("engines", [])},
        "schema": {s: sum(r["status"] == s for r in data.get("schema", []))
                   for s in ("ok", "missing", "missing_optional", "unexpected", "shape_mismatch")},
        "stats": None if stats is None else _stats_digest(stats),
    }
    return out


def _engine_digest(e: dict[str, Any]) -> dict[str, Any]:
    fates: dict[str, list[str]] = {}
    for k in e.get("keys", []):
        fates.setdefault(k["fate"], []).append(k["name"])
    aux = e.get("aux_layers", {})
    return {"verdict": e["verdict"], "covers": e.get("covers"),
            "fate_counts": {f: len(v) for f, v in fates.items()},
            "dropped": fates.get("dropped", []), "errored": fates.get("error", []),
            "unloaded_params": e.get("unloaded_params", []),
            "aux_captured": aux.get("ids"), "aux_trained": aux.get("trained"),
            "aux_source": aux.get("source"), "fc_input_width": e.get("fc_input_width")}


def _stats_digest(stats: dict[str, Any]) -> dict[str, Any]:
    rows = stats.get("stats", {})
    return {"scanned": len(rows), "skipped": list(stats.get("skipped", [])),
            "nan_or_inf": [n for n, s in rows.items() if s.get("n_nan") or s.get("n_inf")],
            "scanned_bytes": stats.get("scanned_bytes"), "budget_bytes": stats.get("budget_bytes")}


def vocab_summary(data: dict[str, Any], notebook: str = "02_d2t_mapping") -> dict[str, Any]:
    """The summary.json of notebook 02 from a `check_vocab` dict: format, validity, evidence,
    findings, per-engine wrong / out-of-range counts, corpus coverage."""
    findings = data.get("findings", [])
    return {
        "summary_version": SUMMARY_VERSION,
        "notebook": notebook,
        "checkpoint": data.get("checkpoint"),
        "format": data.get("format"),
        "valid": data.get("valid"),
        "draft_vocab_size": data.get("draft_vocab_size"),
        "target_vocab_size": data.get("target_vocab_size"),
        "n_out_of_range": data.get("n_out_of_range"),
        "n_duplicates": data.get("n_duplicates"),
        "t2d_agrees": data.get("t2d_agrees"),
        "evidence": list(data.get("evidence", [])),
        "problems": list(data.get("problems", [])),
        "codes": [f["code"] for f in findings],
        "n_errors": sum(f["severity"] == "error" for f in findings),
        "n_warnings": sum(f["severity"] == "warning" for f in findings),
        "findings": [{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")}
                     for f in findings],
        "engines": {e["profile"]: {"param": e.get("param"), "n_wrong": e.get("n_wrong"),
                                   "n_out_of_range": e.get("n_out_of_range")}
                    for e in data.get("engines", [])},
        "coverage": data.get("coverage"),
        "tokenizer": data.get("tokenizer"),
    }
