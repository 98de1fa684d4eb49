"""Notebook 03's question in one call: do the hidden states reaching the draft have the shape it
was trained on, under each engine's wiring, and does the draft still predict the target?

checkpoint + (target dir | hidden-state dumps) -> per wiring: captured layers, width, fc applied
or skipped, the shape trace, and first-step accuracy on real samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eagle3_nb.checks.drafting import served_by
from eagle3_nb.checks.hidden_findings import hidden_findings
from eagle3_nb.checks.options import HiddenStateOptions
from eagle3_nb.checks.result import JsonResult
from eagle3_nb.checks.target_match import preflight
from eagle3_nb.drift import features_drift, mean_layer_similarity, weighted_mean
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import given, release_given, sort_findings
from eagle3_nb.model import Wiring, as_engine_leaves
from eagle3_nb.session import (REFERENCE, FeatureSource, LiveFeatures, NotInDump, Session,
                               engines_with, read_prompts)
from eagle3_nb.trace import trace_shapes
from eagle3_nb.uncertainty import paired_difference, ratio_se, verdict


@dataclass(frozen=True)
class HiddenStatesCheck(JsonResult):
    """Notebook 03's answer (`data`, live or on dumps); its summary.json part is that answer
    as it is."""
    kind = "hidden_states"
    notebook = "03_hidden_state_shapes"


def check_hidden_states(checkpoint: str | Path, target: str | Path | None = None,
                        prompts: str | Path | None = None,
                        options: HiddenStateOptions | None = None) -> HiddenStatesCheck:
    """On the live target (prompts run through it), or on hidden-state dumps
    (options.hidden_states; the target then only lends its config and embeddings: check_dumps
    below)."""
    options = options or HiddenStateOptions()
    preflight(checkpoint, target)
    if options.hidden_states:
        return check_dumps(checkpoint, options, target)
    if not target or not prompts:
        raise Eagle3NbError("no target (with prompts) and no hidden-state dumps",
                            "target / hidden_states",
                            "give the target model directory, or the engine's dumps")
    engines, wirings = options.engines, options.wirings
    session = Session.current(options.device)
    named = session.wirings(checkpoint, target, engines_with(engines, *wirings),
                            served_by(options.launch))
    cfg, info, presets = named.cfg, named.target_info, named.presets
    chosen = [presets[w] for w in wirings if w in presets] + [presets[p.key] for p in named.profiles]
    tgt = session.target(target)
    draft = session.draft(named, target)
    threads = session.use_threads(tgt.model, draft)
    samples = read_prompts(prompts, tgt, options.n_samples)
    # one target pass per prompt serves every wiring's drift and the layer similarity
    live = LiveFeatures.run(tgt, samples)
    rows = compare_with_trained([evaluate_wiring(draft, live, w, presets["trained"])
                                 for w in chosen])
    data = {"checkpoint": str(named.checkpoint), "target": str(target),
            "device": str(session.device), "dtype": str(session.dtype).replace("torch.", ""),
            "n_samples": len(samples),
            "hidden_size": cfg.H, "trained_width": draft.fc.in_features,
            "num_layers": info.num_hidden_layers, "wirings": rows,
            "trained_layer_ids": list(presets["trained"].layer_ids or ()) or None,
            "layer_similarity": mean_layer_similarity(live.outs), "threads": threads.label(),
            "had": hidden_evidence(target, None, None, engines)}
    data["findings"] = [f.to_json() for f in sort_findings(hidden_findings(data))]
    return HiddenStatesCheck(data)


def hidden_evidence(target, hidden_states, dump_layer_ids, engines,
                    recorded: bool = False) -> dict[str, str]:
    """What could change notebook 03's answer: the target's weights run live, or the engine's
    dumps (then the target only lends its layer count and embeddings, and the layers the dumps
    hold decide what each wiring reads: `recorded` when the dumps say which); the releases
    whose wirings are compared."""
    if not hidden_states:
        return {"checkpoint": "given", "target weights": "given (run live)",
                "engine release": release_given(engines)}
    return {"checkpoint": "given", "hidden-state dumps": "given",
            "target weights": given(target, "--target"),
            "dump layer ids": "recorded in the dumps" if recorded and not dump_layer_ids else
            given(dump_layer_ids, "-p dump_layer_ids 2,4,5,8",
                  "not given, the trained layers assumed"),
            "engine release": release_given(engines)}


@torch.no_grad()
def evaluate_wiring(draft, source: FeatureSource, wiring: Wiring, trained: Wiring
                    ) -> dict[str, Any]:
    """One row of notebook 03's table, the same way for the live target and for dumps: width,
    fc applied, the shape trace, first-step accuracy and the feature cosine to `trained`, each
    computed with the parameters the engine leaves unloaded reset (model.as_engine_leaves)."""
    row: dict[str, Any] = {"wiring": wiring.to_json()}
    row["wiring"]["note"] += source.wiring_note(wiring)
    try:
        if wiring.engine_error:
            raise Eagle3NbError(f"{wiring.name} does not serve this draft: {wiring.engine_error}")
        served = as_engine_leaves(draft, wiring)
        feats = source.features(wiring)
        ids = source.first_ids().to(draft.fc.weight.device)
        trace = trace_shapes(served, ids[1:][None], feats[0][:-1][None].to(ids.device), wiring)
        row.update(width=trace.hidden_width, fc_applied=trace.fc_applied,
                   trace=[r.to_json() for r in trace.rows])
        accs = source.first_step(served, wiring, feats)
        drift = [features_drift(draft, served, f, t, wiring, trained, m)
                 for f, t, m in zip(feats, source.features(trained), source.masks())]
        weights = source.weights()
        n, correct = sum(a.n for a in accs), sum(a.correct for a in accs)
        per_prompt = {"correct": [a.correct for a in accs], "n": [a.n for a in accs]}
        row.update(n=n, correct=correct, accuracy=correct / n if n else 0.0, error=None,
                   per_prompt=per_prompt,
                   accuracy_se=ratio_se(per_prompt["correct"], per_prompt["n"]),
                   feature_cosine=weighted_mean([d[0] for d in drift], weights),
                   aux_cosine=weighted_mean([d[1] for d in drift], weights))
    except NotInDump as exc:
        row.update(no_number(), error=None, unmeasured=f"{exc.what}: needs the live target")
    except Eagle3NbError as exc:  # the engine would crash here: say so instead of a number
        row.update(no_number(), error=exc.one_line())
    return row


def no_number() -> dict[str, Any]:
    """A wiring row's measured fields when there is no measurement."""
    return {"width": None, "fc_applied": None, "trace": [], "n": 0, "correct": 0,
            "accuracy": None, "accuracy_se": None, "per_prompt": None, "feature_cosine": None,
            "aux_cosine": None}


def compare_with_trained(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's first-step accuracy minus trained's on the same prompts, with the standard
    error of that paired difference and "higher" / "lower" / "indistinguishable"."""
    base = next((r for r in rows if r["wiring"]["name"] == "trained"), None)
    for row in rows:
        row["vs_trained"] = None
        if row is base or not base or not base.get("per_prompt") or not row.get("per_prompt"):
            continue
        diff, se = paired_difference((row["per_prompt"]["correct"], row["per_prompt"]["n"]),
                                     (base["per_prompt"]["correct"], base["per_prompt"]["n"]))
        row["vs_trained"] = {"difference": diff, "se": se, "verdict": verdict(diff, se)}
    return rows


@torch.no_grad()
def check_dumps(checkpoint: str | Path, options: HiddenStateOptions,
                target: str | Path | None = None) -> HiddenStatesCheck:
    """The same answer as check_hidden_states, from dumps (load_dump_run says what target and
    options.dump_layer_ids give)."""
    hidden_states, dump_layer_ids = options.hidden_states, options.dump_layer_ids
    engines, wirings = options.engines, options.wirings
    run = Session.current(options.device).load_dumps(
        checkpoint, hidden_states, engines_with(engines, *wirings), options.n_samples, target,
        dump_layer_ids, served_by(options.launch))
    presets, trained = run.presets, run.presets["trained"]
    chosen = [presets[w] for w in wirings if w in presets] + [presets[p.key] for p in run.profiles]
    rows = compare_with_trained([evaluate_wiring(run.draft, run, w, trained) for w in chosen])
    data = {"checkpoint": str(run.checkpoint), "target": str(target) if target else None,
            "hidden_states": str(hidden_states), "source": "dumps", "reference": REFERENCE,
            "device": str(run.device), "dtype": str(run.dtype).replace("torch.", ""),
            "n_samples": len(run.samples), "hidden_size": run.cfg.H,
            "trained_width": run.draft.fc.in_features,
            "num_layers": run.info.num_hidden_layers if run.info else None, "wirings": rows,
            "dump_layer_ids": run.held,
            "trained_layer_ids": list(trained.layer_ids or ()) or None, "layer_similarity": None,
            "had": hidden_evidence(target, hidden_states, dump_layer_ids, engines,
                                   bool(run.samples[0].layer_ids))}
    data["findings"] = [f.to_json() for f in sort_findings(hidden_findings(data))]
    return HiddenStatesCheck(data)
