"""Does the bundled pair show what the kit claims? `trained` against the wrong wirings it should
beat (`layers_plus_one`, `norm_before_residual_flipped`), with standard errors by prompt.

Two measures, each a ratio of sums over prompts:
- mean accept length: sum over prompts of (accepted + steps) / sum of verify steps (greedy chain
  simulation, acceptance.simulate);
- first-step accuracy: sum of correct first draft tokens / sum of positions, teacher-forced on
  the prompt text against the target's greedy choice (features.first_step_accuracy).

Standard errors treat the prompt as the unit (tokens of one prompt are not independent): the
delta method for a ratio of sums (eagle3_nb.uncertainty, as the kit shows them). A wiring's
difference to `trained` is shown in two SE units: `z` against the SE of the difference computed
on the same prompts (paired: the prompts are shared, so most of their variance cancels), and
`z_unpaired` against sqrt(se_trained^2 + se_wiring^2), what a reader comparing two "±" figures
does. The pair separates when both exceed SEPARATION_Z for both measures and both wirings.

    python tools/separation.py [--draft DIR] [--target DIR] [--prompts FILE] [--json OUT]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from eagle3_nb.acceptance import simulate
from eagle3_nb.model import as_engine_leaves
from eagle3_nb.session import LiveFeatures, load_for_run, read_prompts
from eagle3_nb.uncertainty import paired_difference, ratio, ratio_se

WRONG_WIRINGS = ("layers_plus_one", "norm_before_residual_flipped")
SEPARATION_Z = 2.0


@dataclass(frozen=True)
class Clustered:
    """One measure of one wiring: per prompt, the numerator and the denominator of the ratio."""
    nums: tuple[float, ...]
    dens: tuple[float, ...]

    @property
    def value(self) -> float:
        return ratio(self.nums, self.dens)

    @property
    def se(self) -> float:
        return ratio_se(self.nums, self.dens)


def accept_clusters(result) -> Clustered:
    """Per prompt: tokens committed by verify steps (accepted + bonus) and the number of steps."""
    lengths, steps = result.per_prompt()
    return Clustered(tuple(map(float, lengths)), tuple(map(float, steps)))


def first_step_clusters(draft, live: LiveFeatures, wiring) -> Clustered:
    """Per prompt: first draft tokens equal to the target's greedy token, and positions."""
    served = as_engine_leaves(draft, wiring)
    accs = live.first_step(served, wiring, live.features(wiring))
    return Clustered(tuple(float(a.correct) for a in accs), tuple(float(a.n) for a in accs))


@torch.no_grad()
def measure_separation(checkpoint: str | Path, target: str | Path, prompts: str | Path,
                       n_prompts: int | None = None, num_steps: int = 4,
                       max_new_tokens: int = 64, wrong: Sequence[str] = WRONG_WIRINGS,
                       batch_size: int = 8, device: str | None = "cpu") -> dict[str, Any]:
    """The separation record: settings, one row per wiring (trained first), and the verdict."""
    start = time.perf_counter()
    draft, tgt, presets = load_for_run(checkpoint, target, [], device)
    samples = read_prompts(prompts, tgt, n_prompts)
    record = separation(draft, tgt, samples, {n: presets[n] for n in ("trained", *wrong)},
                        num_steps, max_new_tokens, batch_size)
    return {"checkpoint": str(checkpoint), "target": str(target), "prompts": str(prompts),
            **record, "seconds": round(time.perf_counter() - start, 1)}


@torch.no_grad()
def separation(draft, tgt, samples, wirings: dict[str, Any], num_steps: int = 4,
               max_new_tokens: int = 64, batch_size: int = 8) -> dict[str, Any]:
    """measure_separation on a loaded draft and target; `wirings` starts with trained."""
    live = LiveFeatures.run(tgt, samples)
    measures = {name: _measures(draft, tgt, live, wiring, num_steps, max_new_tokens, batch_size)
                for name, wiring in wirings.items()}
    rows = [_row(name, m, measures["trained"]) for name, m in measures.items()]
    return {"n_prompts": len(samples), "prompt_tokens": sum(len(s) for s in samples),
            "num_steps": num_steps, "max_new_tokens": max_new_tokens,
            "se": "by prompt, delta method for a ratio of sums", "threshold_z": SEPARATION_Z,
            "rows": rows, "separates": all(_beaten(r) for r in rows[1:])}


def _measures(draft, tgt, live: LiveFeatures, wiring, num_steps: int, max_new_tokens: int,
              batch_size: int) -> dict[str, Clustered]:
    result = simulate(draft, tgt, live.samples, num_steps, max_new_tokens, wiring,
                      batch_size=batch_size, progress=False)
    return {"accept_length": accept_clusters(result),
            "first_step_accuracy": first_step_clusters(draft, live, wiring)}


def _row(name: str, mine: dict[str, Clustered], trained: dict[str, Clustered]) -> dict[str, Any]:
    row: dict[str, Any] = {"wiring": name}
    for measure, m in mine.items():
        t = trained[measure]
        if m is t:
            row[measure] = {"value": round(m.value, 4), "se": round(m.se, 4)}
            continue
        diff, se_diff = paired_difference((t.nums, t.dens), (m.nums, m.dens))
        se, se_t = m.se, t.se
        row[measure] = {"value": round(m.value, 4), "se": round(se, 4),
                        "trained_minus": round(diff, 4), "se_diff": round(se_diff, 4),
                        "z": _z(diff, se_diff), "z_unpaired": _z(diff, math.hypot(se, se_t))}
    return row


def _z(diff: float, se: float) -> float | None:
    if se > 0:
        return round(diff / se, 2)
    return None if diff == 0 else math.copysign(math.inf, diff)


def _beaten(row: dict[str, Any]) -> bool:
    return all((row[m]["z"] or 0) > SEPARATION_Z and (row[m]["z_unpaired"] or 0) > SEPARATION_Z
               for m in ("accept_length", "first_step_accuracy"))


def format_table(record: dict[str, Any]) -> str:
    """The record as a text table: value ± SE, and the gap to trained in SE units."""
    head = (f"{record['n_prompts']} prompts ({record['prompt_tokens']} tokens), "
            f"{record['num_steps']} draft steps, {record['max_new_tokens']} new tokens each; "
            f"SE {record['se']}")
    lines = [head, f"{'wiring':30} {'accept length':>16} {'z paired (unp.)':>15}   "
                   f"{'first-step acc':>16} {'z paired (unp.)':>15}"]
    for row in record["rows"]:
        cells = []
        for m in ("accept_length", "first_step_accuracy"):
            r = row[m]
            gap = "" if "z" not in r else f"{_fmt(r['z'])} ({_fmt(r['z_unpaired'])})"
            cells.append(f"{r['value']:>8.3f} ± {r['se']:.3f} {gap:>15}")
        lines.append(f"{row['wiring']:30} " + "   ".join(cells))
    verdict = "separates" if record["separates"] else "does NOT separate"
    lines.append(f"trained vs {', '.join(r['wiring'] for r in record['rows'][1:])}: {verdict} "
                 f"(both z > {record['threshold_z']:g} on both measures)")
    return "\n".join(lines)


def _fmt(z: float | None) -> str:
    return "-" if z is None else f"{z:.1f}"
