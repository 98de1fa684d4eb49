"""Standard errors by prompt (eagle3_nb.uncertainty) against the textbook cases they reduce to."""

import math
import random

from eagle3_nb.uncertainty import paired_difference, ratio, ratio_se, verdict


def test_equal_denominators_give_the_standard_error_of_the_mean():
    rng = random.Random(0)
    ys = [rng.uniform(0, 10) for _ in range(30)]
    ratios = [y / 5 for y in ys]
    mean = sum(ratios) / 30
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / 29)
    assert math.isclose(ratio(ys, [5.0] * 30), mean)
    assert math.isclose(ratio_se(ys, [5.0] * 30), sd / math.sqrt(30))


def test_the_delta_method_agrees_with_a_bootstrap_over_prompts():
    rng = random.Random(2)
    dens = [float(rng.randint(3, 30)) for _ in range(60)]
    nums = [d * rng.uniform(1.5, 3.5) for d in dens]
    boots = []
    for _ in range(3000):
        pick = [rng.randrange(60) for _ in range(60)]
        boots.append(ratio([nums[i] for i in pick], [dens[i] for i in pick]))
    mean = sum(boots) / len(boots)
    boot_se = math.sqrt(sum((b - mean) ** 2 for b in boots) / (len(boots) - 1))
    assert abs(ratio_se(nums, dens) / boot_se - 1) < 0.1


def test_a_difference_on_shared_prompts_cancels_what_the_prompts_share():
    rng = random.Random(1)
    dens = [float(rng.randint(5, 40)) for _ in range(50)]
    base = [d * rng.uniform(1, 3) for d in dens]             # prompts differ a lot
    shifted = [y - 0.1 * d for y, d in zip(base, dens)]      # the same prompts, 0.1 lower
    diff, se = paired_difference((base, dens), (shifted, dens))
    assert math.isclose(diff, 0.1) and se < 1e-9 < ratio_se(base, dens)
    assert verdict(diff, se) == "higher"


def test_verdicts():
    assert verdict(0.05, 0.03) == "indistinguishable"
    assert verdict(-0.2, 0.05) == "lower" and verdict(0.2, 0.05) == "higher"
    assert verdict(None, None) is None and verdict(0.0, None) == "indistinguishable"
    assert verdict(0.0, 0.0) == "same"
    assert ratio_se([1.0], [2.0]) is None          # one prompt: no error to speak of
