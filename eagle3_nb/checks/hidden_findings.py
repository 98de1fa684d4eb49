"""Notebook 03's findings, from the dict `checks.hidden.check_hidden_states` builds: engine wirings
whose first-step accuracy collapses against the trained wiring, and engines that capture other
target layers than training did, with what that measurably costs on this target.

Only engine profiles produce findings. The diagnostic wirings (single_layer, layers_plus_one, ...)
are hypotheses to compare against, not something any engine does to this checkpoint.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.facts import CHECKS
from eagle3_nb.findings import ERROR, WARNING, Finding, collapses

# What an off-by-one layer costs differs by target (docs/domain.md "Aux layer ids: two conventions").
OFF_BY_ONE_RANGE = CHECKS["off_by_one_cost"]


def hidden_findings(data: dict[str, Any]) -> list[Finding]:
    """Messages name no engine (the finding's engine field does), so the report shows one row
    for the engines that fail alike."""
    rows = data.get("wirings", [])
    trained = next((r for r in rows if r["wiring"]["name"] == "trained"), None)
    if trained is None or not trained.get("accuracy"):
        return []  # nothing to lose: a trained wiring at 0 is a weights problem (notebook 04)
    out: list[Finding] = []
    for row in rows:
        if not row["wiring"].get("engine") or row["wiring"]["engine_error"]:
            continue  # not an engine profile (NAME==VERSION); a refusal is 01's LOAD_ERROR
        if row["accuracy"] is None and not row["error"]:
            continue  # not measured (a dump without the layers it captures)
        out += _collapses(row, trained) + _layers_differ(row, trained, data.get("layer_similarity"))
    return out


def _collapses(row: dict[str, Any], trained: dict[str, Any]) -> list[Finding]:
    engine, base = row["wiring"]["name"], trained["accuracy"]
    if row["error"]:
        return [Finding("HIDDEN_COLLAPSES", ERROR,
                        f"served as the engine would, the draft's run crashes: {row['error']}",
                        {"error": row["error"], "trained_accuracy": base}, engine=engine)]
    if not collapses(row["accuracy"], base):
        return []
    return [Finding("HIDDEN_COLLAPSES", ERROR,
                    f"served as the engine would, the draft's first-step accuracy is "
                    f"{row['accuracy']:.2f} against {base:.2f} as trained{_cause(row)}",
                    {"accuracy": row["accuracy"], "trained_accuracy": base,
                     "feature_cosine": row.get("feature_cosine"), "fc_applied": row["fc_applied"],
                     "reset_params": len(row["wiring"]["reset_params"])}, engine=engine)]


def _cause(row: dict[str, Any]) -> str:
    """What the row shows about why: fc skipped, parameters left unloaded, the feature's cosine."""
    parts = []
    if row["fc_applied"] is False:
        parts.append("fc is skipped (the state reaching the draft is H wide)")
    if row["wiring"]["reset_params"]:
        parts.append(f"{len(row['wiring']['reset_params'])} draft parameter(s) left at their "
                     "initial values")
    if row.get("feature_cosine") is not None:
        parts.append(f"the feature reaching the decoder layer has cosine "
                     f"{row['feature_cosine']:.2f} to the trained one")
    return "; " + "; ".join(parts) if parts else ""


def _layers_differ(row: dict[str, Any], trained: dict[str, Any],
                   similarity: list[list[float]] | None) -> list[Finding]:
    served_ids, trained_ids = row["wiring"]["layer_ids"], trained["wiring"]["layer_ids"]
    both_concat = row["wiring"]["hidden_source"] == trained["wiring"]["hidden_source"] == "concat"
    if row["error"] or not both_concat or not served_ids or served_ids == trained_ids:
        return []
    pairs = layer_pair_cosines(trained_ids, served_ids, similarity)
    cosines = "; ".join(f"hidden_states[{t}] vs [{s}]: cosine {c:.2f}" for t, s, c in pairs)
    drop = trained["accuracy"] - row["accuracy"]
    return [Finding("HIDDEN_LAYERS_DIFFER", WARNING,
                    f"the engine captures hidden_states {served_ids} where the draft "
                    f"was trained on {trained_ids}: first-step accuracy {row['accuracy']:.2f} "
                    f"against {trained['accuracy']:.2f} as trained ({_change(drop)}); "
                    f"{cosines or 'layer similarity not measured'}. {OFF_BY_ONE_RANGE}",
                    {"served_layers": served_ids, "trained_layers": trained_ids,
                     "accuracy": row["accuracy"], "trained_accuracy": trained["accuracy"],
                     "accuracy_drop": drop, "feature_cosine": row.get("feature_cosine"),
                     "layer_cosines": [{"trained": t, "served": s, "cosine": c}
                                       for t, s, c in pairs]},
                    engine=row["wiring"]["name"])]


def _change(drop: float) -> str:
    if drop >= 0:
        return f"a drop of {drop:.2f}"
    return (f"{-drop:.2f} higher: the weights may have been trained on the layers the engine "
            "captures rather than on the ones the config declares")


def layer_pair_cosines(trained_ids: list[int], served_ids: list[int],
                       similarity: list[list[float]] | None) -> list[tuple[int, int, float]]:
    """(trained layer, served layer, their cosine) for each aux slot whose layer differs."""
    if not similarity:
        return []
    return [(t, s, similarity[t][s]) for t, s in zip(trained_ids, served_ids)
            if t != s and max(t, s) < len(similarity)]
