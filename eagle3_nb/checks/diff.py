"""A draft against a known-good one: "the last draft worked". Both are inspected the same way
(same engines, same target config, statistics on), then compared by canonical tensor name, so a
renamed layout (midlayer.* vs layers.0.*) is not a difference:

- tensors only in one, and shape or dtype changes;
- config values, with where each came from;
- the d2t format, and how many draft ids map to another target id;
- per-tensor statistics side by side, with the changes that look like another training run or
  none at all (NaN, a norm that moved by more than half);
- each engine's verdict.

The changes that matter are findings (DRAFT_DIFFERS); the rest is the side-by-side table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.findings import ERROR, WARNING, Finding
from eagle3_nb.layouts import KeyMap

# config fields whose change alters what an engine builds or captures
STRUCTURAL = ("dialect", "architectures", "hidden_size", "num_hidden_layers", "vocab_size",
              "draft_vocab_size", "target_hidden_size", "aux_layer_ids", "num_aux_hidden_states",
              "use_aux_hidden_state", "norm_before_residual", "norm_before_fc", "fc_norm",
              "norm_output", "max_position_embeddings", "tie_word_embeddings")
NORM_MOVED = 0.5   # relative change of a tensor's L2 norm that is worth a look
RANK = {"ok": 0, "silent_failure": 1, "load_error": 2}


def diff_drafts(good: str | Path, other: str | Path, engines: list[str] | None = None,
                target_config: str | Path | None = None) -> dict[str, Any]:
    first = inspect_checkpoint(good, engines, target_config)
    second = inspect_checkpoint(other, engines, target_config)
    a, b = first.to_json(), second.to_json()
    tensors = _tensor_rows(a, b, first.checkpoint.key_map, second.checkpoint.key_map)
    config = _config_rows(a["config"], b["config"])
    verdicts = [{"profile": ea["profile"], "good": ea["verdict"], "other": eb["verdict"]}
                for ea, eb in zip(a["engines"], b["engines"])]
    vocab = _vocab_row(a.get("vocab"), b.get("vocab"))
    layout = {"good": _layout(a), "other": _layout(b)}
    findings = _findings(tensors, config, verdicts, vocab)
    if layout["good"] != layout["other"]:
        findings.insert(0, _finding(WARNING, f"key layout {layout['good']} -> {layout['other']}: "
                                    "the same tensors under other names, which an engine that "
                                    "reads one layout drops silently", layout=layout))
    return {"good": a["checkpoint"], "other": b["checkpoint"], "layout": layout,
            "tensors": tensors,
            "config": config, "vocab": vocab, "verdicts": verdicts,
            "findings": [f.to_json() for f in findings], "had": _had(b["evidence"])}


def _had(inspected: dict[str, str]) -> dict[str, str]:
    """Both drafts, and what could change the verdicts compared (a launch or log is not read)."""
    return {"known-good draft": "given", "checkpoint": "given",
            **{k: inspected[k] for k in ("target config", "target weights", "engine release")}}


def _layout(data: dict[str, Any]) -> str:
    prefixes = data.get("layout_prefixes") or []
    return data["layout"] + (f" (prefix {', '.join(prefixes)})" if prefixes else "")


def _by_canonical(data: dict[str, Any], keys: KeyMap) -> dict[str, dict[str, Any]]:
    stats = (data.get("stats") or {}).get("stats", {})
    out = {}
    for t in data["tensors"]:
        name = keys.canonical_or_name(t["name"])
        out[name] = {**t, "stats": stats.get(t["name"])}
    return out


def _tensor_rows(a: dict[str, Any], b: dict[str, Any], keys_a: KeyMap,
                 keys_b: KeyMap) -> list[dict[str, Any]]:
    ta, tb = _by_canonical(a, keys_a), _by_canonical(b, keys_b)
    rows = []
    for name in sorted(set(ta) | set(tb)):
        x, y = ta.get(name), tb.get(name)
        row = {"name": name, "status": "same", "good": _brief(x), "other": _brief(y)}
        if x is None or y is None:
            row["status"] = "only in good" if y is None else "only in other"
        elif x["shape"] != y["shape"] or x["dtype"] != y["dtype"]:
            row["status"] = "shape or dtype"
        elif _nan(y) and not _nan(x):
            row["status"] = "NaN/Inf"
        elif _norm_moved(x, y):
            row["status"] = "norm moved"
        rows.append(row)
    return rows


def _brief(t: dict[str, Any] | None) -> dict[str, Any] | None:
    if t is None:
        return None
    s = t.get("stats") or {}
    return {"key": t["name"], "shape": t["shape"], "dtype": t["dtype"], "mean": s.get("mean"),
            "std": s.get("std"), "norm": s.get("norm"), "nan": s.get("n_nan", 0) + s.get("n_inf", 0)}


def _nan(t: dict[str, Any]) -> bool:
    s = t.get("stats") or {}
    return bool(s.get("n_nan") or s.get("n_inf"))


def _norm_moved(x: dict[str, Any], y: dict[str, Any]) -> bool:
    nx, ny = (x.get("stats") or {}).get("norm"), (y.get("stats") or {}).get("norm")
    if not nx or ny is None:
        return False
    return abs(ny - nx) / nx > NORM_MOVED


def _config_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x != y:
            rows.append({"field": key, "good": x, "other": y, "structural": key in STRUCTURAL})
    return rows


def _vocab_row(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return None
    return {"good": a.get("format"), "other": b.get("format")}


def _findings(tensors, config, verdicts, vocab) -> list[Finding]:
    out = []
    missing = [r["name"] for r in tensors if r["status"] == "only in good"]
    if missing:
        out.append(_finding(ERROR, f"{len(missing)} tensor(s) of the good draft are missing: "
                            + ", ".join(missing[:6]), tensors=missing))
    changed = [r["name"] for r in tensors if r["status"] in ("shape or dtype", "NaN/Inf")]
    if changed:
        out.append(_finding(ERROR, "tensors whose shape, dtype or finiteness changed: "
                            + ", ".join(changed[:6]), tensors=changed))
    moved = [r["name"] for r in tensors if r["status"] == "norm moved"]
    if moved:
        out.append(_finding(WARNING, f"tensors whose L2 norm moved by more than "
                            f"{NORM_MOVED:.0%} (another training run, or untrained): "
                            + ", ".join(moved[:6]), tensors=moved))
    structural = [r for r in config if r["structural"]]
    if structural:
        out.append(_finding(WARNING, "config values that change what an engine builds or "
                            "captures: " + "; ".join(f"{r['field']}: {_value(r['good'])} -> "
                                                     f"{_value(r['other'])}"
                                                     for r in structural[:6]),
                            fields=[r["field"] for r in structural]))
    if vocab and vocab["good"] != vocab["other"]:
        out.append(_finding(ERROR, f"d2t format {vocab['good']} -> {vocab['other']}",
                            vocab=vocab))
    worse = [v for v in verdicts if RANK.get(v["other"], 0) > RANK.get(v["good"], 0)]
    if worse:
        out.append(_finding(ERROR, "engines that served the good draft and not this one: "
                            + ", ".join(f"{v['profile']} {v['good']} -> {v['other']}"
                                        for v in worse), engines=[v["profile"] for v in worse]))
    return out


def _value(v: Any) -> Any:
    return v.get("value") if isinstance(v, dict) and "value" in v else v


def _finding(severity: str, message: str, **evidence) -> Finding:
    return Finding("DRAFT_DIFFERS", severity, message, evidence)
