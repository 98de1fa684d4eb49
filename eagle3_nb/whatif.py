"""What-if: the same prompts under several wirings, ranked by how well each reproduces the figure
an engine reported.

"SGLang says accept len 1.02" has many possible causes; each wiring is one hypothesis (trained,
each engine profile as it would load this checkpoint, single layer, layers one off, d2t read
wrongly, a norm flag flipped, no target state at all). Simulating each on real target states and
comparing with the observed figure names the hypotheses the observation is consistent with.

Wirings that differ only in name compute the same thing (an engine that serves the draft as
trained), so each distinct set of switches is simulated once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_nb.acceptance import AcceptanceResult, Drafting, simulate_each
from eagle3_nb.defaults import DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_STEPS
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.model import Wiring
from eagle3_nb.uncertainty import DISTINGUISHABLE_SE, paired_difference, verdict

# Two figures agree when they differ by less than this many standard errors of the simulated
# mean (the observed one's is unknown), plus a floor for engine-side noise.
AGREEMENT_SE = DISTINGUISHABLE_SE
AGREEMENT_FLOOR = 0.05


@dataclass
class WhatIfRow:
    wiring: Wiring
    result: AcceptanceResult | None
    error: str | None = None
    distance: float | None = None      # |simulated - observed| mean accept length
    consistent: bool | None = None     # within the agreement band of the observed figure
    # against the trained wiring on the same prompts: difference, its standard error, verdict
    vs_trained: dict[str, Any] | None = None
    ruled_out: str | None = None       # why the checkpoint's own evidence excludes it

    @property
    def mean_accept_length(self) -> float | None:
        return self.result.stats()["mean_accept_length"] if self.result else None

    def standard_error(self) -> float | None:
        """Of the mean accept length, prompts as the sampling unit."""
        return self.result.stats()["mean_accept_length_se"] if self.result else None

    def to_json(self) -> dict[str, Any]:
        stats = self.result.stats() if self.result else None
        return {"wiring": self.wiring.name, "note": self.wiring.note,
                "switches": self.wiring.to_json(), "error": self.error,
                "mean_accept_length": stats["mean_accept_length"] if stats else None,
                "standard_error": self.standard_error(),
                "per_position_acceptance": stats["per_position_acceptance"] if stats else None,
                "per_position_acceptance_se": (stats["per_position_acceptance_se"]
                                               if stats else None),
                "vs_trained": self.vs_trained, "ruled_out": self.ruled_out,
                "distance": self.distance, "consistent": self.consistent}


def compare_with(row: WhatIfRow, base: WhatIfRow) -> dict[str, Any] | None:
    """row's mean accept length minus base's, paired by prompt, with its standard error and
    "higher" / "lower" / "indistinguishable" (within 2 standard errors), or "same" where every
    prompt gives the same figure (the same switches, or switches that compute the same)."""
    if not (row.result and base.result):
        return None
    diff, se = paired_difference(row.result.per_prompt(), base.result.per_prompt())
    return {"difference": diff, "se": se, "verdict": verdict(diff, se)}


def run_what_if(draft, target, prompts, wirings: dict[str, Wiring],
                num_steps: int = DEFAULT_NUM_STEPS, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                progress: bool | None = None, batch_size: int = 8,
                drafting: Drafting | None = None) -> list[WhatIfRow]:
    """Simulate every wiring (each distinct set of switches once) with the same drafting
    settings; an engine that refuses the checkpoint, or a d2t that sends a drafted id out of
    the vocabulary, is a row with an error. Each row is compared with `trained` by prompt."""
    drafting = drafting or Drafting(num_steps)
    if batch_size < 1:  # bad input, not a row's result
        raise Eagle3NbError(f"batch_size {batch_size} must be >= 1", None, "pass positive counts")
    distinct: dict[str, Wiring] = {}
    for wiring in wirings.values():
        distinct.setdefault(_switches_key(wiring), wiring)
    outcomes = simulate_each(draft, target, prompts, list(distinct.values()),
                             max_new_tokens=max_new_tokens, progress=progress,
                             batch_size=batch_size, drafting=drafting)
    done = {key: WhatIfRow(wiring, None, outcome.what) if isinstance(outcome, Eagle3NbError)
            else WhatIfRow(wiring, outcome)
            for (key, wiring), outcome in zip(distinct.items(), outcomes)}
    rows = []
    for wiring in wirings.values():
        first = done[_switches_key(wiring)]
        result = first.result and AcceptanceResult(wiring.name, drafting.num_steps,
                                                   first.result.samples, drafting)
        error = first.error and first.error.replace(first.wiring.name, wiring.name)
        rows.append(WhatIfRow(wiring, result, error))
    trained = next((r for r in rows if r.wiring.name == "trained"), None)
    for row in rows:
        row.vs_trained = compare_with(row, trained) if trained and row is not trained else None
    return rows


def _switches_key(wiring: Wiring) -> str:
    switches = wiring.to_json()
    for label in ("name", "note", "engine"):  # labels, not switches
        switches.pop(label)
    return repr(sorted(switches.items()))


def observed_accept_length(observed) -> float | None:
    """The mean accept length (accepted + bonus per verify step) from an ObservedMetrics."""
    if observed is None:
        return None
    value = observed.mean_accept_length
    return value if value is not None else observed.mean_acceptance_length


def rank(rows: list[WhatIfRow], observed=None) -> list[WhatIfRow]:
    """Closest to the observed figure first (ties: the per-position profile decides); without an
    observation, highest simulated accept length first, where a wiring indistinguishable from
    `trained` (within 2 standard errors, paired by prompt) ranks with it, after it, never above
    it. Rows that cannot run go last."""
    target = observed_accept_length(observed)
    per_pos = getattr(observed, "per_position_acceptance", None)
    for row in rows:
        mal = row.mean_accept_length
        if target is None or mal is None:
            continue
        row.distance = abs(mal - target)
        row.consistent = row.ruled_out is None and \
            row.distance <= AGREEMENT_SE * (row.standard_error() or 0) + AGREEMENT_FLOOR
    runnable = [r for r in rows if r.result is not None and r.ruled_out is None]
    ruled_out = [r for r in rows if r.result is not None and r.ruled_out is not None]
    failed = [r for r in rows if r.result is None]
    if target is None:
        runnable.sort(key=_rank_without_observation(rows))
    else:
        runnable.sort(key=lambda r: (r.distance, _profile_distance(r, per_pos)))
    return runnable + failed + ruled_out


def _rank_without_observation(rows: list[WhatIfRow]):
    trained = next((r for r in rows if r.wiring.name == "trained" and r.result), None)

    def key(row: WhatIfRow):
        tied = (trained is not None and row.vs_trained is not None
                and row.vs_trained["verdict"] in ("indistinguishable", "same"))
        level = trained.mean_accept_length if tied else row.mean_accept_length
        return (-level, row is not trained, -row.mean_accept_length)
    return key


def rule_out(rows: list[WhatIfRow], d2t_format: str | None, d2t_valid: bool) -> None:
    """Mark the hypotheses the checkpoint's own evidence excludes: with a d2t that holds valid
    offsets, neither "d2t read as absolute ids" nor "no d2t" is a cause in itself (an engine
    release that drops d2t is simulated as its own row)."""
    if d2t_format != "offset" or not d2t_valid:
        return
    why = {"d2t_absolute": "the checkpoint's d2t holds valid offsets (eagle3-nb vocab)",
           "d2t_none": "the checkpoint's d2t holds valid offsets; what each engine release does "
                       "with it is that release's own row"}
    for row in rows:
        if row.wiring.name in why:
            row.ruled_out = why[row.wiring.name]


def indistinguishable_from_trained(rows: list[WhatIfRow]) -> list[str]:
    return [r.wiring.name for r in rows
            if r.vs_trained and r.vs_trained["verdict"] == "indistinguishable"]


def _profile_distance(row: WhatIfRow, observed_per_position: list[float] | None) -> float:
    if not observed_per_position:
        return 0.0
    sim = row.result.stats()["per_position_acceptance"]
    pairs = [(a, b) for a, b in zip(sim, observed_per_position) if a is not None and b is not None]
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else 0.0


def explain(rows: list[WhatIfRow], observed=None) -> str:
    """One paragraph: what the observed figure is consistent with, against the trained figure."""
    by_name = {r.wiring.name: r for r in rows}
    trained = by_name.get("trained")
    trained_txt = (f"as trained the draft reaches {trained.mean_accept_length:.2f}"
                   f"{_pm(trained.standard_error())}"
                   if trained and trained.result else "the trained wiring could not run")
    target = observed_accept_length(observed)
    if target is None:
        best = next((r for r in rows if r.result), None)
        tied = indistinguishable_from_trained(rows)
        same = [r.wiring.name for r in rows if r.vs_trained and r.vs_trained["verdict"] == "same"]
        tied_txt = (f"; within 2 standard errors of it (indistinguishable here): {', '.join(tied)}"
                    if tied else "")
        tied_txt += f"; computing exactly what was trained: {', '.join(same)}" if same else ""
        return (f"no engine figure given; {trained_txt}{tied_txt}. Pass the engine's log line, "
                "metrics or number as observed to rank the hypotheses." if best else trained_txt)
    consistent = [r.wiring.name for r in rows if r.consistent]
    if not consistent:
        closest = next((r for r in rows if r.result), None)
        head = (f"no wiring reproduces the observed {target:.2f} within the sampling error; "
                f"closest: {closest.wiring.name} ({closest.mean_accept_length:.2f})"
                if closest else f"no wiring could run to compare with the observed {target:.2f}")
        return f"{head}; {trained_txt}."
    if at_floor(trained, by_name.get("embeddings_only")):
        verdict = ("even as trained the draft does no better than with no target state at all, "
                   "so the checkpoint itself is broken (NaN or untrained weights, a wrong d2t): "
                   "run eagle3-nb inspect")
    elif "trained" in consistent:
        verdict = "the engine computes what was trained"
    else:
        verdict = "the engine is not computing what was trained"
    return (f"observed {target:.2f} is consistent with: {', '.join(consistent)}; {trained_txt}: "
            f"{verdict}.")


def _pm(se: float | None) -> str:
    return f" ± {se:.2f}" if se is not None else ""


def at_floor(trained: WhatIfRow | None, floor: WhatIfRow | None) -> bool:
    """The trained draft does no better than with no target state: not higher than the floor
    by more than 2 paired standard errors and the engine-noise floor."""
    if not (trained and trained.result and floor and floor.result):
        return False
    diff, se = paired_difference(trained.result.per_prompt(), floor.result.per_prompt())
    return diff is not None and diff <= AGREEMENT_SE * (se or 0) + AGREEMENT_FLOOR


def what_if_json(rows: list[WhatIfRow], observed=None) -> dict[str, Any]:
    run = next((r.result for r in rows if r.result), None)
    return {"observed_accept_length": observed_accept_length(observed),
            "observed_source": getattr(observed, "source", None),
            "drafting": run.drafting.to_json() if run else None,
            "n_samples": len(run.samples) if run else None,
            "indistinguishable_from_trained": indistinguishable_from_trained(rows),
            "explanation": explain(rows, observed),
            "rows": [r.to_json() for r in rows]}
