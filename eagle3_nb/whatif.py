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

import math
from dataclasses import dataclass
from typing import Any

from eagle3_nb.acceptance import AcceptanceResult, simulate
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.model import Wiring

# Two figures agree when they differ by less than this many standard errors of the simulated
# mean (the observed one's is unknown), plus a floor for engine-side noise.
AGREEMENT_SE = 2.0
AGREEMENT_FLOOR = 0.05


@dataclass
class WhatIfRow:
    wiring: Wiring
    result: AcceptanceResult | None
    error: str | None = None
    distance: float | None = None      # |simulated - observed| mean accept length
    consistent: bool | None = None     # within the agreement band of the observed figure

    @property
    def mean_accept_length(self) -> float | None:
        return self.result.stats()["mean_accept_length"] if self.result else None

    def standard_error(self) -> float | None:
        if not self.result or len(self.result.steps) < 2:
            return None
        lengths = [s.accept_length for s in self.result.steps]
        mean = sum(lengths) / len(lengths)
        var = sum((x - mean) ** 2 for x in lengths) / (len(lengths) - 1)
        return math.sqrt(var / len(lengths))

    def to_json(self) -> dict[str, Any]:
        stats = self.result.stats() if self.result else None
        return {"wiring": self.wiring.name, "note": self.wiring.note,
                "switches": self.wiring.to_json(), "error": self.error,
                "mean_accept_length": stats["mean_accept_length"] if stats else None,
                "standard_error": self.standard_error(),
                "per_position_acceptance": stats["per_position_acceptance"] if stats else None,
                "distance": self.distance, "consistent": self.consistent}


def run_what_if(draft, target, prompts, wirings: dict[str, Wiring], num_steps: int = 4,
                max_new_tokens: int = 64, progress: bool | None = None,
                batch_size: int = 8) -> list[WhatIfRow]:
    """Simulate every wiring (each distinct set of switches once); an engine that refuses the
    checkpoint, or a d2t that sends a drafted id out of the vocabulary, is a row with an error."""
    if batch_size < 1 or num_steps < 1:  # bad input, not a row's result
        raise Eagle3NbError(f"batch_size {batch_size} and num_steps {num_steps} must be >= 1",
                            None, "pass positive counts")
    done: dict[str, WhatIfRow] = {}
    rows = []
    for wiring in wirings.values():
        key = _switches_key(wiring)
        if key not in done:
            done[key] = _simulate_row(draft, target, prompts, wiring, num_steps, max_new_tokens,
                                      progress, batch_size)
        first = done[key]
        result = first.result and AcceptanceResult(wiring.name, num_steps, first.result.samples)
        rows.append(WhatIfRow(wiring, result, first.error))
    return rows


def _switches_key(wiring: Wiring) -> str:
    switches = wiring.to_json()
    for label in ("name", "note", "engine"):  # labels, not switches
        switches.pop(label)
    return repr(sorted(switches.items()))


def _simulate_row(draft, target, prompts, wiring, num_steps, max_new_tokens, progress,
                  batch_size) -> WhatIfRow:
    try:
        return WhatIfRow(wiring, simulate(draft, target, prompts, num_steps, max_new_tokens,
                                          wiring, progress=progress, batch_size=batch_size))
    except Eagle3NbError as exc:
        return WhatIfRow(wiring, None, exc.what)


def observed_accept_length(observed) -> float | None:
    """The mean accept length (accepted + bonus per verify step) from an ObservedMetrics."""
    if observed is None:
        return None
    value = observed.mean_accept_length
    return value if value is not None else observed.vllm_mean_acceptance_length


def rank(rows: list[WhatIfRow], observed=None) -> list[WhatIfRow]:
    """Closest to the observed figure first (ties: the per-position profile decides); without an
    observation, highest simulated accept length first. Rows that cannot run go last."""
    target = observed_accept_length(observed)
    per_pos = getattr(observed, "per_position_acceptance", None)
    for row in rows:
        mal = row.mean_accept_length
        if target is None or mal is None:
            continue
        row.distance = abs(mal - target)
        row.consistent = row.distance <= AGREEMENT_SE * (row.standard_error() or 0) + AGREEMENT_FLOOR
    runnable = [r for r in rows if r.result is not None]
    failed = [r for r in rows if r.result is None]
    if target is None:
        runnable.sort(key=lambda r: -r.mean_accept_length)
    else:
        runnable.sort(key=lambda r: (r.distance, _profile_distance(r, per_pos)))
    return runnable + failed


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
                   if trained and trained.result else "the trained wiring could not run")
    target = observed_accept_length(observed)
    if target is None:
        best = next((r for r in rows if r.result), None)
        return (f"no engine figure given; {trained_txt}. Pass the engine's log line, metrics or "
                "number as observed to rank the hypotheses." if best else trained_txt)
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


def at_floor(trained: WhatIfRow | None, floor: WhatIfRow | None) -> bool:
    if not (trained and trained.result and floor and floor.result):
        return False
    band = AGREEMENT_SE * (trained.standard_error() or 0) + AGREEMENT_FLOOR
    return trained.mean_accept_length <= floor.mean_accept_length + band


def what_if_json(rows: list[WhatIfRow], observed=None) -> dict[str, Any]:
    return {"observed_accept_length": observed_accept_length(observed),
            "observed_source": getattr(observed, "source", None),
            "explanation": explain(rows, observed),
            "rows": [r.to_json() for r in rows]}
