"""Standard errors with the prompt as the sampling unit.

Every figure the kit shows is a ratio of sums over prompts (accepted tokens over verify steps,
correct first-step guesses over positions), and the steps of one prompt are not independent
(a draft that fails on code fails on every step of a code prompt). So the error bars treat each
prompt as one draw: the delta method for a ratio of sums (a cluster standard error), which is
deterministic, unlike a bootstrap, and agrees with it once there are a dozen prompts or more.

Two wirings run on the same prompts are compared pairwise: the standard error of their
difference uses the per-prompt differences, so what both share (a hard prompt) cancels.
"""

from __future__ import annotations

import math
from typing import Sequence

# A difference smaller than this many standard errors is indistinguishable from none.
DISTINGUISHABLE_SE = 2.0


def ratio(num: Sequence[float], den: Sequence[float]) -> float | None:
    total = sum(den)
    return sum(num) / total if total else None


def _influence(num: Sequence[float], den: Sequence[float]) -> list[float] | None:
    """Each prompt's contribution to the ratio's error: (y_i - R x_i) / X."""
    r, total = ratio(num, den), sum(den)
    if r is None:
        return None
    return [(y - r * x) / total for y, x in zip(num, den)]


def _spread(values: list[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    return math.sqrt(n / (n - 1) * sum(v * v for v in values))


def ratio_se(num: Sequence[float], den: Sequence[float]) -> float | None:
    """Standard error of sum(num) / sum(den), prompts as clusters; None below two prompts."""
    influence = _influence(num, den)
    return _spread(influence) if influence is not None else None


def paired_difference(a: tuple[Sequence[float], Sequence[float]],
                      b: tuple[Sequence[float], Sequence[float]]) -> tuple[float | None, float | None]:
    """(ratio_a - ratio_b, its standard error) for two ratios measured on the same prompts,
    each given as (per-prompt numerators, per-prompt denominators)."""
    if len(a[0]) != len(b[0]):
        raise ValueError("a paired difference needs the same prompts on both sides")
    ra, rb = ratio(*a), ratio(*b)
    ia, ib = _influence(*a), _influence(*b)
    if ra is None or rb is None or ia is None or ib is None:
        return None, None
    return ra - rb, _spread([x - y for x, y in zip(ia, ib)])


def verdict(diff: float | None, se: float | None, z: float = DISTINGUISHABLE_SE) -> str | None:
    """"higher", "lower", "indistinguishable" (within z standard errors) or "same" (no
    difference on any prompt: the two compute the same tokens)."""
    if diff is None:
        return None
    if diff == 0 and se == 0:
        return "same"
    if se is None or se == 0:
        return "indistinguishable" if diff == 0 else ("higher" if diff > 0 else "lower")
    if abs(diff) <= z * se:
        return "indistinguishable"
    return "higher" if diff > 0 else "lower"
